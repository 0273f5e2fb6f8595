"""`train_judge`: a judge from a labelled JSONL/CSV file, with cross-validated figures.

    result = train_judge("labels.jsonl", text_fields=["text"], label_field="label")
    print(result.figures)            # accuracy, macro/weighted F1, kappa, per-label recall (out of fold)
    result.judge.save("my-judge.npz")  # then: mheval run --judge my-judge.npz ...

Text fields named response/answer/reply/output/completion hold the reply under judgment (the judge then
judges responses); one other text field holds the case (a string, a list of sentences, a list of
{role, content} turns, or `[seeker]...[supporter]...` segments). Features are the multilingual sentence
embeddings of those texts (see judges/offline/features.py); the head is linear.
"""

from __future__ import annotations

import hashlib
import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline.embed import encoder_version
from mheval.judges.offline.features import Item, encoders, featurize, ngram_columns, width
from mheval.judges.offline.trained import TrainedJudge
from mheval.labels import CRISIS_LABELS, CRISIS_TRIAGE, DIALOGUE_SAFETY
from mheval.suites.papers import SAFETY_LABELS
from mheval.training import fit
from mheval.training.data import (
    RESPONSE_NAMES,
    case_from_field,
    get_field,
    is_missing,
    read_rows,
    response_from_field,
)

DEFAULT_C: tuple[float, ...] = (0.1, 1.0)
DEFAULT_ALPHA: tuple[float, ...] = (10.0, 100.0)
DEFAULT_NGRAM_WEIGHTS: tuple[float, ...] = (3.0,)


@dataclass
class TrainResult:
    """A trained judge and its cross-validated figures (out-of-fold, nested choice of strength)."""

    judge: TrainedJudge
    figures: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    oof: np.ndarray | None = None  # out-of-fold predictions: label indices or raw scores

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.judge.name, "protocol": self.judge.protocol, "figures": self.figures, **self.params}


def fit_judge(
    x: np.ndarray,
    targets: Sequence[Any] | np.ndarray,
    *,
    kind: Literal["classifier", "scorer"],
    meta: dict[str, Any],
    labels: Sequence[str] | None = None,
    grid: Sequence[float] | None = None,
    folds: int = 5,
    seed: int = 0,
    groups: Sequence[Any] | None = None,
    class_weight: str | None = "balanced",
    name: str | None = None,
    ngram_weights: Sequence[float] | None = None,
) -> TrainResult:
    """Cross-validate, choose the strength on all rows, fit on all rows; figures go into the metadata.

    `meta["features"]` names the blocks of x's columns; with `ngram:` blocks, their weight against the
    other blocks is chosen from `ngram_weights` together with the strength (nested like it)."""
    if kind == "classifier":
        labels = list(labels or sorted(set(map(str, targets))))
        y = np.array([labels.index(str(t)) for t in targets], dtype=float)
    else:
        labels = []
        y = np.asarray(targets, dtype=float)
    grid = list(grid or (DEFAULT_C if kind == "classifier" else DEFAULT_ALPHA))
    n_labels = len(labels)
    if len(y) < folds * 2:
        raise InputError(f"too few rows to cross-validate: {len(y)} rows for {folds} folds", field="folds")
    if groups is not None and len(set(groups)) < folds:
        raise InputError(f"{len(set(groups))} groups cannot make {folds} grouped folds", field="group_field")
    ngram = ngram_columns(meta["features"]) if meta.get("features") else None
    if ngram is not None and len(ngram) != x.shape[1]:
        raise InputError(f"the feature blocks make {len(ngram)} columns, x has {x.shape[1]}", field="features")
    has_ngrams = ngram is not None and bool(ngram.any())
    weights = list(ngram_weights or DEFAULT_NGRAM_WEIGHTS) if has_ngrams else [1.0]
    cv = fit.cross_validate(
        x, y, kind=kind, n_labels=n_labels, folds=folds, seed=seed, grid=grid, groups=groups,
        class_weight=class_weight, ngram=ngram, ngram_weights=weights,
    )  # fmt: skip
    strength, weight = fit.choose_strength(
        x, y, kind=kind, n_labels=n_labels, folds=folds, seed=seed, grid=grid, groups=groups,
        class_weight=class_weight, ngram=ngram, ngram_weights=weights,
    )  # fmt: skip
    head = fit.fit_head(
        x, y, kind=kind, n_labels=n_labels, strength=strength, class_weight=class_weight, ngram=ngram,
        ngram_weight=weight,
    )  # fmt: skip
    params: dict[str, Any] = {
        "strength": strength,
        "strength_grid": grid,
        "strength_per_fold": cv.strengths,
        "folds": folds,
        "seed": seed,
        "class_weight": class_weight if kind == "classifier" else None,
        "grouped": groups is not None,
    }
    if has_ngrams:
        params |= {"ngram_weight": weight, "ngram_weight_grid": weights, "ngram_weight_per_fold": cv.ngram_weights}
    meta = {**meta, "kind": kind, "labels": labels or None, "training": {**meta.get("training", {}), **params}}
    judge = TrainedJudge(head, meta, name=name or meta.get("name", ""))
    if kind == "classifier":
        gold = [labels[int(i)] for i in y]
        pred = [labels[int(i)] for i in cv.predictions]
        figures = fit.classifier_figures(gold, pred, labels)
        per_fold = [
            fit.classifier_figures([gold[i] for i in idx], [pred[i] for i in idx], labels)
            for idx in (np.flatnonzero(cv.fold == k) for k in range(int(cv.fold.max()) + 1))  # type: ignore[union-attr]
        ]
        keys: tuple[str, ...] = ("weighted_f1", "kappa", "accuracy", "macro_f1")
    else:
        figures = fit.scorer_figures(y, judge._round(cv.predictions))
        figures["mae_unrounded"] = round(float(np.mean(np.abs(cv.predictions - y))), 4)
        rounded = judge._round(cv.predictions)
        per_fold = [
            fit.scorer_figures(y[idx], rounded[idx])
            for idx in (np.flatnonzero(cv.fold == k) for k in range(int(cv.fold.max()) + 1))  # type: ignore[union-attr]
        ]
        keys = ("mae", "spearman", "within_1")
    # How much each figure moves from one held-out fold to the next: a mean alone hides that.
    figures["across_folds"] = {key: fit.fold_spread([f[key] for f in per_fold]) for key in keys}
    judge.meta["figures"] = {"cross_validated": figures}
    return TrainResult(judge, figures, params, cv.predictions)


def _roles(text_fields: Sequence[str]) -> tuple[str | None, str | None]:
    case_fields = [f for f in text_fields if f.split(".")[-1].lower() not in RESPONSE_NAMES]
    response_fields = [f for f in text_fields if f.split(".")[-1].lower() in RESPONSE_NAMES]
    if not text_fields:
        raise InputError("name at least one text field", field="text_fields")
    if len(case_fields) > 1 or len(response_fields) > 1:
        raise InputError(
            "at most one case field and one response field "
            f"(response fields are named {', '.join(sorted(RESPONSE_NAMES))})",
            field="text_fields",
        )
    return (case_fields[0] if case_fields else None), (response_fields[0] if response_fields else None)


def default_blocks(has_case: bool, has_response: bool) -> list[str]:
    if has_case and has_response:
        return ["emb:response", "emb:context", "cos:response,context", "cos:response,last_user"]
    if has_response:
        return ["emb:response"]
    return ["emb:user"]


FEATURE_SETS: dict[str, str] = {
    "use": "Universal Sentence Encoder embeddings (the default; the cosines too when there is a case and a reply)",
    "e5": "multilingual-e5-small embeddings + hashed n-grams (what the default offline judge reads; slower)",
    "fast": "Universal Sentence Encoder embeddings + hashed n-grams (what offline:fast reads)",
    "ngram": "hashed n-grams only (no encoder: fastest)",
}
"""Named feature sets for `features=`/`mheval train --features`; a list of blocks works too."""


def feature_set(name: str, has_case: bool, has_response: bool) -> list[str]:
    """The blocks of a named feature set for these text fields; a `+`- or comma-separated list of blocks
    is taken as it is."""
    if name not in FEATURE_SETS:
        blocks = [b.strip() for b in name.replace(",", "+").split("+") if b.strip()]
        for block in blocks:
            try:
                width(block)
            except InputError as exc:
                choices = [*FEATURE_SETS, *(exc.choices or [])]
                raise InputError(f"unknown feature set or block {block!r}", field="features", choices=choices) from None
        return blocks
    texts = (["response"] if has_response else []) + (["context" if has_response else "user"] if has_case else [])
    if name == "use":
        return default_blocks(has_case, has_response)
    if name == "e5":
        return [f"e5:{t}" for t in texts] + [f"ngram:{texts[0]}"]
    if name == "fast":
        return [*default_blocks(has_case, has_response), f"ngram:{texts[0]}"]
    return [f"ngram:{texts[0]}"]


def _infer_protocol(kind: str, labels: Sequence[str], has_response: bool) -> str:
    if kind == "classifier" and not has_response and set(labels) <= set(CRISIS_LABELS):
        return CRISIS_TRIAGE
    if kind == "classifier" and has_response and set(labels) <= set(SAFETY_LABELS):
        return DIALOGUE_SAFETY
    raise InputError("cannot tell which protocol these labels belong to: pass protocol=", field="protocol")


def read_examples(
    path: Path,
    case_field: str | None,
    response_field: str | None,
    target_field: str,
    group_field: str | None,
    *,
    numeric: bool = False,
) -> tuple[list[Item], list[Any], list[str]]:
    """The items, targets (numbers when `numeric`, else stripped strings) and groups of a labelled file;
    a missing or bad value is an InputError naming the file, line and field."""
    items: list[Item] = []
    targets: list[Any] = []
    groups: list[str] = []
    for line, row in read_rows(path):
        target = get_field(row, target_field)
        if is_missing(target):
            raise InputError("missing value", path=path, line=line, field=target_field)
        if numeric:
            try:
                target = float(target)
            except (TypeError, ValueError):
                raise InputError(
                    f"expected a number, got {target!r}", path=path, line=line, field=target_field
                ) from None
            if not math.isfinite(target):
                raise InputError("not a finite number", path=path, line=line, field=target_field)
        else:
            target = str(target).strip()
        case_value = get_field(row, case_field) if case_field else "."
        if case_field and is_missing(case_value):
            raise InputError("missing value", path=path, line=line, field=case_field)
        case = case_from_field(case_value, case_id=f"row-{line}", path=path, line=line, field=case_field or "text")
        response = None
        if response_field:
            value = get_field(row, response_field)
            if is_missing(value):
                raise InputError("missing value", path=path, line=line, field=response_field)
            response = response_from_field(value, path=path, line=line, field=response_field)
        if group_field:
            group = get_field(row, group_field)
            if is_missing(group):
                raise InputError("missing value", path=path, line=line, field=group_field)
            groups.append(str(group))
        items.append(Item(case, response, None))
        targets.append(target)
    return items, targets, groups


def train_judge(
    path: str | Path,
    *,
    text_fields: Sequence[str],
    label_field: str | None = None,
    score_field: str | None = None,
    kind: Literal["classifier", "scorer"] = "classifier",
    protocol: str | None = None,
    folds: int = 5,
    seed: int = 0,
    features: str | Sequence[str] | None = None,
    grid: Sequence[float] | None = None,
    group_field: str | None = None,
    class_weight: str | None = "balanced",
    score_range: tuple[float, float] | None = None,
    name: str | None = None,
    command: str | None = None,
    ngram_weights: Sequence[float] | None = None,
) -> TrainResult:
    """Train a classifier (label_field) or scorer (score_field) on a JSONL/CSV file.

    Figures are out-of-fold over `folds` stratified folds (grouped by `group_field` when given: whole
    groups are held out, in the outer and the inner folds), with the regularisation strength chosen
    inside each fold from `grid` (and, with `ngram:` feature blocks, their weight from `ngram_weights`);
    `figures["across_folds"]` gives their spread from fold to fold. `features` is a named set
    (FEATURE_SETS: use, e5, fast, ngram) or a list of blocks. Deterministic given `seed`.
    """
    path = Path(path)
    if kind not in ("classifier", "scorer"):
        raise InputError(f"unknown kind {kind!r}", field="kind", choices=["classifier", "scorer"])
    target_field = label_field if kind == "classifier" else score_field
    if not target_field:
        raise InputError(f"a {kind} needs {'label_field' if kind == 'classifier' else 'score_field'}")
    if folds < 2:
        raise InputError(f"folds must be at least 2, got {folds}", field="folds")
    case_field, response_field = _roles(text_fields)
    items, targets, groups = read_examples(
        path, case_field, response_field, target_field, group_field, numeric=kind == "scorer"
    )

    labels = sorted(set(targets)) if kind == "classifier" else None
    if kind == "classifier":
        known = CRISIS_LABELS if set(targets) <= set(CRISIS_LABELS) else SAFETY_LABELS
        if set(targets) <= set(known):
            labels = [label for label in known if label in set(targets)]
        if len(labels or []) < 2:
            raise InputError("a classifier needs at least two distinct labels", path=path, field=label_field)
    has_response = response_field is not None
    protocol = protocol or _infer_protocol(kind, labels or [], has_response)
    if isinstance(features, str):
        blocks = feature_set(features, case_field is not None, has_response)
    else:
        blocks = list(features or default_blocks(case_field is not None, has_response))
    for block in blocks:
        width(block)
    if kind == "scorer" and score_range is None:
        score_range = (float(min(targets)), float(max(targets)))
    meta = {
        "protocol": protocol,
        "target": "response" if has_response else "case",
        "features": blocks,
        "encoder": "; ".join(encoder_version(k) for k in encoders(blocks)) or "none",
        "text_fields": {"case": case_field, "response": response_field},
        "target_field": target_field,
        "score_range": list(score_range) if score_range else None,
        "integer_scores": kind == "scorer" and all(float(t).is_integer() for t in targets),
        "dimension": protocol if kind == "scorer" else None,
        "training": {
            "data": path.name,
            "data_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "rows": len(items),
            "command": command or _python_call(path, text_fields, target_field, kind, protocol, folds, seed),
        },
    }
    x = featurize(blocks, items)
    return fit_judge(
        x,
        targets,
        kind=kind,
        meta=meta,
        labels=labels,
        grid=grid,
        folds=folds,
        seed=seed,
        groups=groups if group_field else None,
        class_weight=class_weight,
        name=name or f"trained:{path.stem}",
        ngram_weights=ngram_weights,
    )


def _python_call(
    path: Path, text_fields: Sequence[str], target: str, kind: str, protocol: str, folds: int, seed: int
) -> str:
    key = "label_field" if kind == "classifier" else "score_field"
    return (
        f"train_judge({shlex.quote(str(path))!r}, text_fields={list(text_fields)!r}, {key}={target!r}, "
        f"kind={kind!r}, protocol={protocol!r}, folds={folds}, seed={seed})"
    )
