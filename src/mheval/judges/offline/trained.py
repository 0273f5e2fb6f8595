"""Trained offline judges: embedding, hashed n-gram and lexicon features and a linear head, in one .npz.

A model file holds four float32 arrays (`mean`, `scale`: the per-column scaling, standardisation or
idf for n-gram buckets; `coef`, `intercept`: the head) and `meta`, one JSON string: format and
version, protocol id, kind (classifier/scorer), labels or score range, feature blocks (features.py),
text fields it was trained on, encoder name, training data hash, row count, the command that built it
and its cross-validated figures. No text from the training data is stored.

`load_trained_judge(path)` returns a `TrainedJudge`, which implements the Judge protocol
(judges/base.py), so a model file can judge in any run.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline.features import Item, afeaturize, featurize, width
from mheval.labels import HIGH_RISK
from mheval.records import Case, Judgment, Response

if TYPE_CHECKING:
    from mheval.protocols.spec import ProtocolSpec

FORMAT = "mheval-trained-judge"
FORMAT_VERSION = 1
Kind = Literal["classifier", "scorer"]


@dataclass
class LinearHead:
    """Standardise, then a multinomial logistic (classifier) or a ridge line (scorer)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # (classes, d) for a classifier; (1, d) for a scorer or a binary classifier
    intercept: np.ndarray

    def logits(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        return z @ self.coef.T.astype(np.float64) + self.intercept.astype(np.float64)

    def proba(self, x: np.ndarray) -> np.ndarray:
        logits = self.logits(x)
        if logits.shape[1] == 1:  # scikit-learn's binary case: one column for the second class
            logits = np.hstack([np.zeros_like(logits), logits])
        return softmax(logits)

    def score(self, x: np.ndarray) -> np.ndarray:
        return self.logits(x)[:, 0]


@dataclass
class MlpHead:
    """Standardise, one layer of rectified hidden units, then a softmax over the labels: a classifier that can
    weigh a feature by another (the same words read differently beside different ones), which a linear head
    cannot. Trained in torch (training/mlp.py); judging is these few lines of numpy."""

    mean: np.ndarray
    scale: np.ndarray
    hidden_weight: np.ndarray  # (hidden, d)
    hidden_bias: np.ndarray  # (hidden,)
    coef: np.ndarray  # (classes, hidden)
    intercept: np.ndarray  # (classes,)

    def logits(self, x: np.ndarray) -> np.ndarray:
        z = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        hidden = np.maximum(z @ self.hidden_weight.T + self.hidden_bias, 0.0)
        return hidden @ self.coef.T + self.intercept

    def proba(self, x: np.ndarray) -> np.ndarray:
        return softmax(self.logits(x))


Head = LinearHead | MlpHead


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (the labels)."""
    logits = logits - logits.max(axis=-1, keepdims=True)
    expo = np.exp(logits)
    return expo / expo.sum(axis=-1, keepdims=True)


class FileJudge(ABC):
    """What the judges read from a file or folder share (TrainedJudge, FinetunedJudge): each judges one
    protocol and implements the Judge protocol (judges/base.py) the same way; it never raises for what it is
    given (an impossible unit comes back unscored with its reason) and reads the unit as an `Item`."""

    name: str

    @property
    @abstractmethod
    def protocol(self) -> str: ...

    @property
    @abstractmethod
    def needs_response(self) -> bool: ...

    @abstractmethod
    async def judge_item(self, item: Item, ids: dict[str, Any]) -> Judgment:
        """The judgment of one unit this judge can judge, with the identifying fields `ids`."""

    def supports(self, protocol: Any) -> bool:
        return getattr(protocol, "id", None) == self.protocol

    async def judge(
        self,
        protocol: ProtocolSpec | Any,
        case: Case,
        response: Response | None,
        *,
        repeat: int = 0,
        crisis_label: str | None = None,
    ) -> Judgment:
        ids, refused = unit_ids(self, protocol, case, response, repeat)
        if refused is not None:
            return refused
        item = Item(case, response.text if response is not None else None, crisis_label or case.crisis_label)
        return await self.judge_item(item, ids)


def label_judgment(name: str, labels: Sequence[str], proba: np.ndarray, best: int, ids: dict[str, Any]) -> Judgment:
    """A classifier's judgment: the chosen label, its probability as confidence, the next two in the rationale
    and every label's probability in `raw`."""
    ranked = sorted(zip(labels, proba.tolist(), strict=True), key=lambda kv: -kv[1])
    runner_up = ", ".join(f"{label} {p:.2f}" for label, p in ranked[1:3])
    return Judgment(
        **ids,
        label=labels[best],
        scores={"confidence": round(float(proba[best]), 4)},
        rationale=f"{name}: {labels[best]} (p={proba[best]:.2f}; next: {runner_up})",
        raw=json.dumps({"probabilities": {k: round(v, 4) for k, v in ranked}}, sort_keys=True),
    )


@dataclass
class TrainedJudge(FileJudge):
    """A judge that is a model file. `meta` is everything but the weights (see the module doc)."""

    head: LinearHead
    meta: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or str(self.meta.get("name") or "trained")
        self._validate()

    # -- what it is ---------------------------------------------------------------------------

    @property
    def protocol(self) -> str:
        return str(self.meta["protocol"])

    @property
    def kind(self) -> Kind:
        return self.meta["kind"]

    @property
    def labels(self) -> list[str]:
        return list(self.meta.get("labels") or [])

    @property
    def blocks(self) -> list[str]:
        return list(self.meta["features"])

    @property
    def needs_response(self) -> bool:
        return bool(self.meta.get("target") == "response")

    @property
    def score_range(self) -> tuple[float, float]:
        lo, hi = self.meta["score_range"]
        return float(lo), float(hi)

    def _validate(self) -> None:
        for key in ("protocol", "kind", "features", "target"):
            if key not in self.meta:
                raise InputError("model metadata lacks a required key", field=key)
        if self.kind not in ("classifier", "scorer"):
            raise InputError(f"unknown kind {self.kind!r}", field="kind", choices=["classifier", "scorer"])
        d = sum(width(b) for b in self.blocks)
        if self.head.mean.shape != (d,) or self.head.scale.shape != (d,) or self.head.coef.shape[1] != d:
            raise InputError(f"weights do not fit the feature blocks ({d} features)", field="coef")
        if self.kind == "classifier":
            rows = self.head.coef.shape[0]
            if len(self.labels) < 2 or rows not in (len(self.labels), 1) or (rows == 1 and len(self.labels) != 2):
                raise InputError("classifier weights do not fit its labels", field="labels")
        elif "score_range" not in self.meta:
            raise InputError("a scorer needs a score range", field="score_range")

    # -- predictions ------------------------------------------------------------------------------

    def predict_proba(self, items: Sequence[Item]) -> np.ndarray:
        return self.head.proba(featurize(self.blocks, items))

    def predict(self, items: Sequence[Item]) -> list[str] | np.ndarray:
        """Labels (classifier) or scores clipped to the range and rounded to its steps (scorer)."""
        x = featurize(self.blocks, items)
        return self._decide(x)

    def _decide(self, x: np.ndarray) -> list[str] | np.ndarray:
        if self.kind == "classifier":
            return [self.labels[i] for i in self.choose(self.head.proba(x))]
        return self._round(self.head.score(x))

    @property
    def severe_threshold(self) -> float | None:
        """A safety-first triage model's threshold on p(suicidal_ideation) + p(self-harm) (meta), or None."""
        value = self.meta.get("severe_threshold")
        return None if value is None else float(value)

    def choose(self, proba: np.ndarray) -> np.ndarray:
        """Label indices: argmax; with a severe threshold, rows where the two severe labels together reach
        it get the likelier of those two (chosen at build time so that their recall holds up)."""
        return decide_severe(proba, self.labels, self.severe_threshold)

    def _round(self, raw: np.ndarray) -> np.ndarray:
        lo, hi = self.score_range
        clipped = np.clip(raw, lo, hi)
        return np.round(clipped) if self.meta.get("integer_scores", True) else clipped

    # -- the Judge protocol ---------------------------------------------------------------------

    async def judge_item(self, item: Item, ids: dict[str, Any]) -> Judgment:
        x = await afeaturize(self.blocks, [item])
        return self.judgment_from(x, ids)

    def judgment_from(self, x: np.ndarray, ids: dict[str, Any]) -> Judgment:
        """The judgment for one featurised unit (x has one row)."""
        if self.kind == "classifier":
            proba = self.head.proba(x)[0]
            return label_judgment(self.name, self.labels, proba, int(self.choose(proba[None, :])[0]), ids)
        raw = float(self.head.score(x)[0])
        value = float(self._round(np.array([raw]))[0])
        dimension = str(self.meta.get("dimension") or self.protocol)
        return Judgment(
            **ids,
            scores={dimension: value},
            total=value,
            rationale=f"{self.name}: predicted {raw:.2f} on {self.score_range[0]:g}-{self.score_range[1]:g}",
            raw=json.dumps({"predicted": round(raw, 4)}),
        )

    # -- files -------------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write one .npz file (float32 weights + JSON metadata); byte-identical for identical models."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **self.meta, "name": self.name}
        return write_head(path, self.head, meta)


def write_arrays(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """One .npz of `arrays` and the JSON `meta`, byte-identical for identical contents, written through a
    temporary file: the one writer of mheval's model files."""
    tmp = path.with_name(path.name + ".tmp")
    # A fixed timestamp per entry keeps the file reproducible (np.savez would stamp the current time).
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, array in [*arrays.items(), ("meta", np.array(json.dumps(meta, sort_keys=True)))]:
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w") as handle:
                np.lib.format.write_array(handle, np.asarray(array, order="C"), allow_pickle=False)
    tmp.replace(path)
    return path


def read_arrays(path: Path, what: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(the arrays, the meta) of a file `write_arrays` wrote; an unreadable file is an InputError naming
    `what`."""
    if not path.is_file():
        raise InputError(f"{what} not found", path=path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files if k != "meta"}
            meta = json.loads(str(data["meta"]))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(f"not an mheval {what} ({exc})", path=path) from None
    return arrays, meta


def _head_arrays(head: Head, prefix: str = "") -> dict[str, np.ndarray]:
    """A head's arrays as float32, named as its fields (after `prefix`)."""
    return {prefix + f.name: np.asarray(getattr(head, f.name), dtype=np.float32) for f in dataclasses.fields(head)}


def write_head(path: Path, head: Head, meta: dict[str, Any]) -> Path:
    """A head's float32 arrays (named as its fields) and `meta` in one model file."""
    return write_arrays(path, _head_arrays(head), meta)


def write_heads(path: Path, heads: Sequence[Head], meta: dict[str, Any]) -> Path:
    """Several heads in one model file, each head's arrays named `<i>.<field>` (i = 0, 1, ...)."""
    return write_arrays(
        path, {k: v for i, head in enumerate(heads) for k, v in _head_arrays(head, f"{i}.").items()}, meta
    )


def restore_heads(arrays: dict[str, np.ndarray], path: Path, what: str) -> tuple[Head, ...]:
    """The heads `write_heads` wrote, in order; a file of one head written by `write_head` gives that head."""
    if not any("." in name for name in arrays):
        return (restore_head(arrays, path, what),)
    groups: dict[int, dict[str, np.ndarray]] = {}
    for name, array in arrays.items():
        index, _, field_name = name.partition(".")
        groups.setdefault(int(index), {})[field_name] = array
    return tuple(restore_head(groups[i], path, what) for i in sorted(groups))


def restore_head(arrays: dict[str, np.ndarray], path: Path, what: str) -> Head:
    """The head whose arrays a file holds: an MlpHead where the hidden layer is there, else a LinearHead."""
    if "hidden_weight" in arrays:
        return _restore(MlpHead, arrays, path, what)
    return _restore(LinearHead, arrays, path, what)


_H = TypeVar("_H", LinearHead, MlpHead)


def _restore(kind: type[_H], arrays: dict[str, np.ndarray], path: Path, what: str) -> _H:
    names = [f.name for f in dataclasses.fields(kind)]
    missing = [k for k in names if k not in arrays]
    if missing:
        raise InputError(f"not an mheval {what} (no {', '.join(missing)})", path=path)
    return kind(**{k: np.asarray(arrays[k], dtype=np.float64) for k in names})


def read_head(path: Path, what: str) -> tuple[LinearHead, dict[str, Any]]:
    """(the linear head, its meta) of a file `write_head` wrote."""
    arrays, meta = read_arrays(path, what)
    return _restore(LinearHead, arrays, path, what), meta


def decide_severe(proba: np.ndarray, labels: Sequence[str], threshold: float | None) -> np.ndarray:
    """Argmax of each row of `proba`, except that a row whose suicidal-ideation and self-harm
    probabilities sum to `threshold` or more gets the likelier of those two labels."""
    chosen = proba.argmax(axis=1)
    severe = np.array([labels.index(label) for label in HIGH_RISK if label in labels], dtype=int)
    if threshold is None or not len(severe):
        return chosen
    flagged = proba[:, severe].sum(axis=1) >= threshold
    chosen[flagged] = severe[proba[flagged][:, severe].argmax(axis=1)]
    return chosen


def unit_ids(
    judge: Any, protocol: Any, case: Case, response: Response | None, repeat: int
) -> tuple[dict[str, Any], Judgment | None]:
    """The identifying fields of a judgment by a judge file or folder (`judge` has name, protocol and
    needs_response), and the unscored judgment to return instead when it cannot judge this unit."""
    protocol_id = str(getattr(protocol, "id", ""))
    ids: dict[str, Any] = {"case_id": case.id, "protocol": protocol_id, "judge": judge.name, "repeat": repeat}
    if judge.needs_response and response is not None:
        ids |= {"model": response.model, "sample": response.sample}
    if protocol_id != judge.protocol:
        reason = f"this model judges {judge.protocol!r}, not {protocol_id!r}"
        return ids, Judgment.unscored("unsupported", reason, **ids)
    if judge.needs_response and (response is None or response.text is None):
        return ids, Judgment.unscored("no_response", "the model produced no reply to judge", **ids)
    return ids, None


def load_trained_judge(path: str | Path, *, name: str | None = None) -> TrainedJudge:
    """A judge from a model file written by `TrainedJudge.save`; a bad file is an InputError."""
    path = Path(path)
    head, meta = read_head(path, "model file")
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise InputError(f"unsupported model format {meta.get('format')!r} v{meta.get('format_version')!r}", path=path)
    try:
        return TrainedJudge(head, meta, name=name or meta.get("name") or f"trained:{path.stem}")
    except InputError as exc:
        raise InputError(exc.message, path=path, field=exc.field, choices=exc.choices) from None
