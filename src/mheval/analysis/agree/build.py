"""Human-vs-human and judge-vs-human agreement, side by side, with verdicts.

`agreement_report` takes the long human table of `load_human_labels` (``id``, ``rater``, ``value``,
optional ``dimension``, optional ``model``/``sample`` for response-level ratings) and, optionally,
mheval's judgments export (``case_id, model, sample, protocol, judge, repeat, label, scores, status,
reason``). Only ``status == "ok"`` judgments count; the others are counted and reported, never scored.

Per dimension the report has one block for the humans among themselves and one block per judge
against the humans, over the same items (the human-labelled ones), so every bootstrap in the report
sees the same resamples. The headline statistic is the mean Cohen's kappa over rater pairs for
labels and the mean two-rater ICC(A,1) for numeric scales; a judge's verdicts compare its
judge-vs-each-human values with the human-vs-human pairs (see `mheval.stats.reliability`).

Unit of analysis (``unit=``):

* ``"item"`` (default): every rated item (case, or response when the labels carry model/sample) is
  one unit, as above.
* ``"model"``: MentalAlign's unit. Items are grouped by their response source (the ``model`` column);
  per judge x dimension, each source's mean human score and mean judge score are taken over the
  items where both exist (the human score of an item being the mean over its raters, the judge's
  the mean over its ok repeats), and ICC(C,1) and ICC(A,1) are computed over that sources x 2
  matrix, with a percentile bootstrap over the sources, width verdicts for both, and the judge-minus-
  human bias over the sources. Numeric scales only. The source of a human-labelled item is the
  ``model`` column of the human labels when they have one (long form: ``id, rater, value, model``);
  otherwise the item ``id`` is matched to the judgments' ``case_id`` and that row's ``model`` is taken
  (a case judged under several models then needs the ``model`` column in the human labels).
  The humans' block holds each rater's mean per source (over the items that rater scored) and the
  rater-vs-rater ICCs over the sources; a judge's "vs human range" uses those over its own sources.

``leave_own_model_out=True`` drops, per judge, the responses of the judge's own model family
(`mheval.judges.panel.same_family`: gpt-4o also leaves out gpt4omini, a distilled model counts in both
its families), in either unit: MentalAlign's guard against judges favouring their own outputs.
MentalAlign itself left out only the exact own model; pass ``own_model`` for that rule.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dataclasses_replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mheval.errors import InputError
from mheval.stats.agreement import (
    Pairwise,
    combine_pairs,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_kappa,
)
from mheval.stats.correlation import bias as bias_estimate
from mheval.stats.correlation import diff_sumstat
from mheval.stats.icc import icc, icc_bootstrap_ci, pairwise_icc
from mheval.stats.intervals import Estimate, is_missing
from mheval.stats.reliability import Assessment, assess, human_range, width_verdict, width_verdicts

JUDGE_COLUMNS = ("case_id", "judge", "status")
UNITS = ("item", "model")
MODEL_STATS = ("icc_c1", "icc_a1")  # the model-level statistics that get a width verdict each
_JUDGE_COL = "\x00judge"  # internal column name that cannot collide with a human rater's name

# Row order and labels of the side-by-side table.
_ROWS: tuple[tuple[str, str, bool], ...] = (
    ("kappa", "Cohen's kappa, mean over pairs", False),
    ("fleiss_kappa", "Fleiss' kappa (judge block: humans + judge)", False),
    ("alpha", "Krippendorff's alpha (judge block: humans + judge)", False),
    ("weighted_kappa", "quadratic-weighted kappa, mean over pairs", True),
    ("icc_a1", "ICC(A,1), mean over pairs", True),
    ("mae", "MAE, mean over pairs", True),
    ("bias", "bias (first minus second), mean over pairs", True),
    ("within_1", "within-1 rate, mean over pairs", True),
)


@dataclass(frozen=True)
class Block:
    """One column of the report: the humans among themselves, or one judge against the humans."""

    name: str
    kind: str  # "human" or "judge"
    dimension: str | None
    n_items: int
    raters: tuple[str, ...]
    pairwise: dict[str, Pairwise]
    stats: dict[str, Estimate]
    assessment: Assessment | None = None
    self_consistency: Estimate | None = None
    counts: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    unit: str = "item"
    sources: tuple[str, ...] = ()  # response sources used (model unit, or item unit leaving own model out)
    excluded_sources: tuple[str, ...] = ()  # left out as the judge's own model family
    source_means: dict[str, dict[str, Any]] = field(default_factory=dict)  # model unit: per-source means

    def estimate(self, key: str) -> Estimate | None:
        """The block's value for a table row: a pairwise mean, or a whole-panel statistic."""
        if key in self.pairwise:
            return self.pairwise[key].mean
        return self.stats.get(key)

    @property
    def verdicts(self) -> dict[str, str | None]:
        """Model unit: the CI-width verdict of ICC(C,1) and of ICC(A,1), as MentalAlign reports both."""
        if self.unit != "model":
            return {}
        found = {k: e for k in MODEL_STATS if (e := self.estimate(k)) is not None}
        return dict(width_verdicts(found))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "dimension": self.dimension,
            "n_items": self.n_items,
            "raters": list(self.raters),
            "pairwise": {k: v.to_dict() for k, v in self.pairwise.items()},
            "stats": {k: v.to_dict() for k, v in self.stats.items()},
            "assessment": self.assessment.to_dict() if self.assessment else None,
            "self_consistency": self.self_consistency.to_dict() if self.self_consistency else None,
            "counts": self.counts,
            "notes": list(self.notes),
            "unit": self.unit,
            "sources": list(self.sources),
            "excluded_sources": list(self.excluded_sources),
            "source_means": self.source_means,
            "verdicts": self.verdicts,
        }


@dataclass(frozen=True)
class AgreementReport:
    """Everything `agreement_report` found, renderable as JSON, CSV or a rich table."""

    scale: bool
    headline: str
    blocks: tuple[Block, ...]
    notes: tuple[str, ...] = ()
    unit: str = "item"
    leave_own_model_out: bool = False

    @property
    def dimensions(self) -> list[str | None]:
        return list(dict.fromkeys(b.dimension for b in self.blocks))

    def block(self, name: str, dimension: str | None = None) -> Block:
        for b in self.blocks:
            if b.name == name and (dimension is None or b.dimension == dimension):
                return b
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "unit": self.unit,
            "leave_own_model_out": self.leave_own_model_out,
            "headline": self.headline,
            "dimensions": self.dimensions,
            "blocks": [b.to_dict() for b in self.blocks],
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_csv(self, path: str | Path | None = None) -> str:
        """One row per estimate (pairs included) and one per verdict; written to ``path`` if given.

        Every row names the unit. The model unit adds a ``sources`` row per block (kept and excluded
        sources in ``note``), one ``source_mean`` row per source and rater/judge (``a`` = source,
        ``b`` = whose mean, ``n`` = items), and a ``verdict`` row per ICC (``a`` = statistic).
        """
        buffer = io.StringIO()
        cols = [
            "block",
            "kind",
            "dimension",
            "statistic",
            "a",
            "b",
            "value",
            "ci_low",
            "ci_high",
            "n",
            "method",
            "note",
            "unit",
        ]
        writer = csv.DictWriter(buffer, fieldnames=cols, lineterminator="\n", restval="")
        writer.writeheader()

        def plain(blk: Block, **fields: Any) -> None:
            writer.writerow(
                {"block": blk.name, "kind": blk.kind, "dimension": blk.dimension or "", "unit": blk.unit, **fields}
            )

        def row(b: Block, stat: str, est: Estimate, a: str = "", bb: str = "") -> None:
            writer.writerow(
                {
                    "unit": b.unit,
                    "block": b.name,
                    "kind": b.kind,
                    "dimension": b.dimension or "",
                    "statistic": stat,
                    "a": a,
                    "b": bb,
                    "value": _num(est.value),
                    "ci_low": _num(est.ci_low),
                    "ci_high": _num(est.ci_high),
                    "n": est.n,
                    "method": est.method,
                    "note": est.note or "",
                }
            )

        for b in self.blocks:
            if b.sources or b.excluded_sources:
                text = f"kept: {', '.join(b.sources)}; excluded: {', '.join(b.excluded_sources) or '-'}"
                plain(b, statistic="sources", n=len(b.sources), method="response sources", note=text)
            for source, means in b.source_means.items():
                for whose, value in means.items():
                    if whose != "items":
                        plain(b, statistic="source_mean", a=source, b=whose, value=_num(value), n=means.get("items"))
            for key, pw in b.pairwise.items():
                row(b, f"{key}_mean", pw.mean)
                for pe in pw.pairs:
                    row(b, key, pe.estimate, pe.a, pe.b)
            for key, est in b.stats.items():
                row(b, key, est)
            if b.self_consistency is not None:
                row(b, "self_consistency", b.self_consistency)
            for key, verdict in b.verdicts.items():
                plain(b, statistic="verdict", a=key, method="95% CI width", note=verdict or "")
            if b.assessment is not None:
                a = b.assessment
                hr = a.human
                text = f"verdict={a.verdict}; leniency={a.leniency}"
                if hr is not None:
                    text += f"; position={hr.position}; ci_overlap={hr.ci_overlap}"
                plain(b, statistic="assessment", n=a.agreement.n, method=f"CI width of {a.statistic}", note=text)
        text = buffer.getvalue()
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @property
    def title(self) -> str:
        unit = "response source means (model)" if self.unit == "model" else "item"
        own = "; own model family left out" if self.leave_own_model_out else ""
        return f"Agreement ({'numeric scale' if self.scale else 'labels'}; unit: {unit}{own})"

    def to_rich_table(self) -> Any:
        """A rich Table: one row per statistic, one column per block (humans first)."""
        return self._table(self._model_rows if self.unit == "model" else self._item_rows)

    def _table(self, add_rows: Callable[[Any, Callable[[Any], list[str]]], None]) -> Any:
        """The table skeleton both units share: a column per block, a section per dimension;
        `add_rows(table, cells)` adds one dimension's rows, `cells(fn)` giving fn(block) per column."""
        from rich.table import Table

        names = list(dict.fromkeys(b.name for b in self.blocks))
        table = Table(title=self.title)
        table.add_column("statistic", style="bold")
        for n in names:
            table.add_column(n)
        for dim in self.dimensions:
            by_name = {b.name: b for b in self.blocks if b.dimension == dim}
            if dim is not None:
                table.add_section()
                table.add_row(f"[italic]{dim}[/italic]", *[""] * len(names))

            def cells(fn: Any, by_name: dict[str, Block] = by_name) -> list[str]:
                return [fn(by_name[n]) if n in by_name else "" for n in names]

            add_rows(table, cells)
        return table

    def _item_rows(self, table: Any, cells: Callable[[Any], list[str]]) -> None:
        table.add_row("items", *cells(lambda b: str(b.n_items)))
        for key, label, scale_only in _ROWS:
            if scale_only and not self.scale:
                continue
            table.add_row(label, *cells(lambda b, k=key: _fmt(b.estimate(k))))
        table.add_row("pairwise range", *cells(lambda b: _range(b.pairwise.get(self.headline))))
        table.add_row("reliability (CI width)", *cells(lambda b: _attr(b, "verdict")))
        table.add_row("vs human range", *cells(_position))
        if self.scale:
            table.add_row("leniency (judge - human mean)", *cells(lambda b: _attr(b, "leniency")))
        table.add_row("self-consistency (repeats)", *cells(lambda b: _fmt(b.self_consistency)))
        table.add_row("unscored, excluded", *cells(lambda b: str(b.counts.get("unscored", ""))))
        if self.leave_own_model_out:
            table.add_row("own-family sources, excluded", *cells(_excluded))

    def _model_rows(self, table: Any, cells: Callable[[Any], list[str]]) -> None:
        """The model unit: ICCs over per-source means, both width verdicts, sources kept/excluded."""
        table.add_row("sources", *cells(lambda b: str(b.n_items)))
        table.add_row("items used", *cells(lambda b: str(b.counts.get("items_used", ""))))
        for key, label in (("icc_c1", "ICC(C,1)"), ("icc_a1", "ICC(A,1)")):
            table.add_row(f"{label} over source means", *cells(lambda b, k=key: _fmt(b.estimate(k))))
            table.add_row(f"{label} reliability (CI width)", *cells(lambda b, k=key: _verdict(b.estimate(k))))
        table.add_row(
            "bias (judge - human), over sources", *cells(lambda b: _fmt(b.stats.get("bias_vs_human_mean")))
        )
        table.add_row("leniency", *cells(lambda b: _attr(b, "leniency")))
        table.add_row("ICC(A,1) vs human range", *cells(_position))
        table.add_row("self-consistency (repeats)", *cells(lambda b: _fmt(b.self_consistency)))
        table.add_row("unscored, excluded", *cells(lambda b: str(b.counts.get("unscored", ""))))
        table.add_row("own-family sources, excluded", *cells(_excluded))


def _num(x: float | None) -> str:
    return "" if x is None else repr(float(x))


def _fmt(est: Estimate | None) -> str:
    return "" if est is None else est.format()


def _range(pw: Pairwise | None) -> str:
    if pw is None or pw.low is None or pw.high is None:
        return ""
    return f"{pw.low:.3f} .. {pw.high:.3f}"


def _attr(b: Block, name: str) -> str:
    if b.assessment is None:
        return ""
    value = getattr(b.assessment, name)
    return "" if value is None else str(value)


def _verdict(est: Estimate | None) -> str:
    return "" if est is None else str(width_verdict(est) or "")


def _excluded(b: Block) -> str:
    if b.kind != "judge":
        return ""
    return ", ".join(b.excluded_sources) or "none"


def _position(b: Block) -> str:
    hr = b.assessment.human if b.assessment else None
    if hr is None or hr.position is None:
        return ""
    return hr.position + (" (CI reaches it)" if hr.ci_overlap and hr.position == "below" else "")


# --------------------------------------------------------------------------- input shaping


def _item_keys(frame: pd.DataFrame, id_col: str, extra: Sequence[str]) -> pd.Series:
    parts = [frame[id_col].astype(str)] + [frame[c].astype(str) for c in extra]
    if not extra:
        return parts[0]
    return parts[0].str.cat(parts[1:], sep="|", na_rep="")  # vectorised: tables can have 100k rows


def _norm(name: Any) -> str:
    return str(name).strip().lower()


def _human_matrix(human: pd.DataFrame, keys: pd.Series) -> pd.DataFrame:
    df = pd.DataFrame({"item": keys.values, "rater": human["rater"].astype(str).values, "value": human["value"].values})
    dup = df.duplicated(["item", "rater"], keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        raise InputError(f"item {first['item']!r} has several ratings from rater {first['rater']!r}", field="value")
    order = list(dict.fromkeys(df["item"]))
    raters = list(dict.fromkeys(df["rater"]))
    mat = df.pivot(index="item", columns="rater", values="value")
    return mat.reindex(index=order, columns=raters)


def _scores(value: Any, row: int) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if value is None or (isinstance(value, float) and np.isnan(value)) or value == "":
        return {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            raise InputError(f"judgment row {row}: scores is not JSON", field="scores") from None
        if isinstance(parsed, dict):
            return parsed
    raise InputError(f"judgment row {row}: scores must be a dict of dimension -> score", field="scores")


@dataclass
class _JudgeRows:
    """One judge's usable values, per item key and repeat, with what was left out."""

    name: str
    values: pd.DataFrame  # columns: item, repeat, value
    counts: dict[str, Any]


@dataclass
class _Judgments:
    """The judgments table read once: item keys, ok flags and parsed scores, ready for any dimension."""

    frame: pd.DataFrame  # columns: judge, item, model, repeat, ok, reason, label, scores (normalised keys)
    dims: list[str]  # score names as first spelled


def _read_judgments(judge: pd.DataFrame, *, scale: bool, protocol: str | None, extra_keys: Sequence[str]) -> _Judgments:
    missing = [c for c in JUDGE_COLUMNS if c not in judge.columns]
    if missing:
        raise InputError(f"judgments lack column(s) {', '.join(missing)}", field=missing[0])
    value_col = "scores" if scale else "label"
    if value_col not in judge.columns:
        raise InputError(f"judgments lack the {value_col!r} column", field=value_col)
    frame = judge.reset_index(drop=True)  # positions, so error messages can name the row
    if "protocol" in frame.columns:
        protocols = sorted({str(p) for p in frame["protocol"].dropna()})
        if protocol is not None:
            frame = frame[frame["protocol"].astype(str) == protocol]
            if frame.empty:
                raise InputError(f"no judgments under protocol {protocol!r}", field="protocol", choices=protocols)
        elif len(protocols) > 1:
            raise InputError("judgments from several protocols: pick one", field="protocol", choices=protocols)
    if not extra_keys and {"model", "sample"} <= set(frame.columns):
        per_case = frame.dropna(subset=["model"]).groupby("case_id")[["model", "sample"]].nunique()
        if (per_case > 1).any(axis=None):
            raise InputError(
                "judgments cover several responses per case but the human labels have no model/sample "
                "columns to match them: add them, or filter the judgments to one model",
                field="model",
            )
    ok = (frame["status"].astype(str) == "ok").to_numpy()
    found: dict[str, str] = {}
    scores: list[dict[str, Any]] = []
    if scale:
        for i, (row_ok, raw) in enumerate(zip(ok, frame["scores"], strict=True)):
            parsed = _scores(raw, int(frame.index[i]) + 1) if row_ok else {}
            for k in parsed:
                found.setdefault(_norm(k), str(k))
            scores.append({_norm(k): v for k, v in parsed.items()})
    table = pd.DataFrame(
        {
            "judge": frame["judge"].astype(str).to_numpy(),
            "item": _item_keys(frame.assign(id=frame["case_id"]), "id", extra_keys).to_numpy(),
            "model": frame["model"].to_numpy(dtype=object) if "model" in frame.columns else None,
            "repeat": frame["repeat"].to_numpy() if "repeat" in frame.columns else np.zeros(len(frame), int),
            "ok": ok,
            "reason": frame["reason"].to_numpy(dtype=object) if "reason" in frame.columns else None,
            "label": frame["label"].to_numpy(dtype=object) if "label" in frame.columns else None,
            "scores": scores if scale else None,
        }
    )
    return _Judgments(table, list(found.values()))


def _label_text(value: Any) -> Any:
    """Labels compare as text; a whole-number float (3.0 read from a CSV) reads as "3"."""
    if is_missing([value])[0]:
        return value
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _usable(value: Any, scale: bool) -> Any:
    """The value as the statistics want it, or None when an ok judgment carries nothing usable."""
    if scale and isinstance(value, float | int) and not isinstance(value, bool):  # fast path for plain numbers
        return None if value != value else float(value)
    if value is None or (isinstance(value, str) and not value.strip()) or is_missing([value])[0]:
        return None
    if not scale:
        return _label_text(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _judge_rows(judgments: _Judgments, *, scale: bool, dimension: str | None) -> list[_JudgeRows]:
    frame = judgments.frame
    if scale:
        key = _norm(dimension) if dimension is not None else None
        raw = [sc.get(key) if key is not None else None for sc in frame["scores"]]
    else:
        raw = list(frame["label"])
    values = [_usable(v, scale) for v in raw]
    out = []
    for name in dict.fromkeys(frame["judge"]):
        mine = (frame["judge"] == name).to_numpy()
        ok = frame["ok"].to_numpy()
        reasons = Counter(
            "unspecified" if is_missing([r])[0] else str(r).split(":")[0] for r in frame.loc[mine & ~ok, "reason"]
        )
        rows = [
            (item, rep, v)
            for item, rep, v, m, o in zip(frame["item"], frame["repeat"], values, mine, ok, strict=True)
            if m and o and v is not None
        ]
        counts: dict[str, Any] = {
            "rows": int(mine.sum()),
            "ok": int((mine & ok).sum()),
            "unscored": int((mine & ~ok).sum()),
            "unscored_reasons": dict(reasons),
            "ok_without_value": int((mine & ok).sum()) - len(rows),
        }
        out.append(_JudgeRows(name, pd.DataFrame(rows, columns=["item", "repeat", "value"]), counts))
    return out


def _aggregate(values: pd.DataFrame, scale: bool) -> tuple[pd.Series, int]:
    """Per-item judge value over repeats: majority label (ties: earliest repeat's) or mean score."""
    present = values[~is_missing(values["value"].to_numpy(dtype=object))]
    if scale:
        return present.assign(value=present["value"].astype(float)).groupby("item", sort=False)["value"].mean(), 0
    ordered = present.sort_values("repeat", kind="stable").reset_index(drop=True)
    ordered = ordered.assign(value=ordered["value"].astype(str), pos=np.arange(len(ordered)))
    tally = ordered.groupby(["item", "value"], sort=False).agg(n=("pos", "size"), first=("pos", "min")).reset_index()
    tally = tally.sort_values(["item", "n", "first"], ascending=[True, False, True], kind="stable")
    best = tally.groupby("item", sort=False).head(2)
    ranked = best.groupby("item", sort=False)["n"].agg(list)
    ties = int(sum(len(c) > 1 and c[0] == c[1] for c in ranked))
    winners = tally.drop_duplicates("item", keep="first").set_index("item")["value"]
    return winners.astype(object), ties


# --------------------------------------------------------------------------- response sources


def _item_sources(human: pd.DataFrame, keys: pd.Series, judgments: _Judgments | None) -> pd.Series:
    """Item key -> response source, from the judgments' ``model`` and the human labels' ``model``."""
    parts = []
    if judgments is not None and judgments.frame["model"].notna().any():
        jf = judgments.frame.dropna(subset=["model"])
        pairs = pd.DataFrame({"item": jf["item"].to_numpy(), "model": jf["model"].astype(str).to_numpy()})
        pairs = pairs.drop_duplicates()
        several = pairs["item"].duplicated(keep=False).to_numpy()
        if several.any():
            item = pairs["item"][several].iloc[0]
            models = pairs["model"][(pairs["item"] == item).to_numpy()]
            raise InputError(
                f"case {item!r} was judged for several models ({', '.join(models)}) and the human labels "
                "have no model column to say which response they rated",
                field="model",
            )
        parts.append(pd.Series(pairs["model"].to_numpy(), index=pairs["item"].to_numpy()))
    if "model" in human.columns:
        has = human["model"].notna().to_numpy()
        parts.append(pd.Series(human["model"][has].astype(str).to_numpy(), index=keys[has].to_numpy()))
    if not parts:
        raise InputError(
            "the response source is unknown: add a 'model' column to the judgments (or to the human labels)",
            field="model",
        )
    out = pd.concat(parts)
    return out[~out.index.duplicated(keep="first")]


# --------------------------------------------------------------------------- the report


def _scale_labels(values: np.ndarray, labels: Sequence[Any] | None) -> list[Any] | None:
    """For integer scales without explicit labels, the full range min..max so gaps still count."""
    if labels is not None:
        return list(labels)
    vals = values[~is_missing(values)].astype(float)
    if vals.size and np.all(vals == np.round(vals)):
        return list(range(int(vals.min()), int(vals.max()) + 1))
    return None


def _round_half_up(x: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(x), np.nan, np.floor(x + 0.5))


def _block_stats(
    mat: pd.DataFrame,
    *,
    scale: bool,
    labels: Sequence[Any] | None,
    against: str | None,
    n_boot: int,
    seed: int,
    confidence: float,
) -> tuple[dict[str, Pairwise], dict[str, Estimate]]:
    boot = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    if scale:
        numeric = mat.astype(float)
        cat = numeric.apply(lambda c: _round_half_up(c.to_numpy()))
        cats = _scale_labels(cat.to_numpy(dtype=object), labels)
    else:
        numeric = None
        cat = mat
        cats = list(labels) if labels is not None else None
    pairwise = {"kappa": pairwise_kappa(cat, against=against, labels=cats, **boot)}
    stats = {
        "fleiss_kappa": fleiss_kappa(cat, labels=cats, **boot),
        "alpha": krippendorff_alpha(cat, "ordinal" if scale else "nominal", labels=cats, **boot),
    }
    if scale and numeric is not None:
        pairwise["weighted_kappa"] = pairwise_kappa(cat, against=against, weights="quadratic", labels=cats, **boot)
        pairwise["icc_a1"] = pairwise_icc(numeric, "A,1", against=against, **boot)
        cols = [str(c) for c in numeric.columns]
        pairs = (
            [(against, c) for c in cols if c != against]
            if against
            else [(a, b) for i, a in enumerate(cols) for b in cols[i + 1 :]]
        )
        for key, kind in (("mae", "mae"), ("bias", "bias"), ("within_1", "within")):
            named = [(a, b, diff_sumstat(numeric[a].to_numpy(), numeric[b].to_numpy(), kind)) for a, b in pairs]
            pairwise[key] = combine_pairs(key, named, **boot)
    return pairwise, stats


def _rename(pw: Pairwise, old: str, new: str) -> Pairwise:
    from dataclasses import replace

    pairs = tuple(replace(p, a=new if p.a == old else p.a, b=new if p.b == old else p.b) for p in pw.pairs)
    return replace(pw, pairs=pairs)


def agreement_report(
    human: pd.DataFrame,
    judge: pd.DataFrame | None = None,
    *,
    scale: bool | None = None,
    dimension: str | None = None,
    protocol: str | None = None,
    labels: Sequence[Any] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    unit: str = "item",
    leave_own_model_out: bool = False,
    own_model: Callable[[str, str], bool] | None = None,
) -> AgreementReport:
    """Human-vs-human and judge-vs-human agreement side by side, with verdicts per judge x dimension.

    ``scale`` None means: numeric human values are a scale, anything else labels. ``dimension`` picks
    the score to read from ``scores`` (default: the human table's dimensions, else the judges' only
    one). ``labels`` fixes the categories (and the scale points for weighted kappa; integer scales
    default to min..max). Repeats are merged per item (majority label, ties to the earliest repeat;
    mean score) and their agreement reported as self-consistency (Fleiss' kappa over repeats for
    labels, ICC(A,1) for scales). Kappa and alpha on a scale use the per-item mean rounded half up.

    ``unit`` is "item" or "model" (per-source means, MentalAlign's unit; numeric scales only; see the
    module docstring). ``leave_own_model_out`` drops, per judge, the response sources for which
    ``own_model(judge, source)`` is true; the default is `mheval.judges.panel.same_family`.
    Pass e.g. ``lambda j, s: (j, s) in {("gpt-4o", "gpt4o")}`` to leave out only the exact own model.
    """
    if unit not in UNITS:
        raise InputError(f"unknown unit of analysis {unit!r}", field="unit", choices=UNITS)
    for col in ("id", "rater", "value"):
        if col not in human.columns:
            raise InputError(f"human labels lack the {col!r} column", field=col)
    if human.empty:
        raise InputError("no human labels", field="value")
    numeric = pd.api.types.is_numeric_dtype(human["value"])
    if scale is None:
        scale = bool(numeric)
    elif scale and not numeric:
        try:
            human = human.assign(value=pd.to_numeric(human["value"]))
        except (TypeError, ValueError):
            raise InputError("scale=True but the human values are not all numbers", field="value") from None
    if not scale and unit == "model":
        raise InputError(
            "unit 'model' compares each response source's mean human score with its mean judge score, so it "
            "needs numeric scores; these human values are labels (use unit 'item')",
            field="unit",
        )
    if not scale:
        human = human.assign(value=[_label_text(v) for v in human["value"]])
    extra = [c for c in ("model", "sample") if c in human.columns]
    notes: list[str] = []

    # Dimensions to report.
    human_dims = list(dict.fromkeys(human["dimension"].dropna().astype(str))) if "dimension" in human.columns else []
    judgments = _read_judgments(judge, scale=scale, protocol=protocol, extra_keys=extra) if judge is not None else None
    judge_dims = judgments.dims if judgments is not None else []
    if dimension is not None:
        dims: list[str | None] = [dimension]
    elif human_dims:
        dims = list(human_dims)
    elif judge is not None and scale:
        if len(judge_dims) > 1:
            raise InputError("the judgments score several dimensions: pick one", field="dimension", choices=judge_dims)
        dims = [judge_dims[0] if judge_dims else None]
    else:
        dims = [None]

    if human_dims:
        human_dim_keys = human["dimension"].astype(str).str.strip().str.lower()
    headline = "icc_a1" if scale else "kappa"
    sources: pd.Series | None = None  # item key -> response source
    excluded: dict[str, tuple[str, ...]] = {}  # judge -> own-family sources left out
    if unit == "model" or (leave_own_model_out and judgments is not None):
        sources = _item_sources(human, _item_keys(human, "id", extra), judgments)
        if judgments is not None and leave_own_model_out:
            is_own = own_model or _same_family()
            order = list(pd.unique(sources.to_numpy()))
            for name in dict.fromkeys(judgments.frame["judge"]):
                excluded[name] = tuple(s for s in order if is_own(name, s))
    boot = {"n_boot": n_boot, "seed": seed, "confidence": confidence}
    blocks: list[Block] = []
    for dim in dims:
        sub = human
        if dim is not None and "dimension" in human.columns and human_dims:
            sub = human[(human_dim_keys == _norm(dim)).to_numpy()]
            if sub.empty:
                raise InputError(f"no human labels for dimension {dim!r}", field="dimension", choices=human_dims)
        mat = _human_matrix(sub, _item_keys(sub, "id", extra))
        if scale:
            mat = mat.astype(float)
        humans = [str(c) for c in mat.columns]
        if unit == "model":
            assert sources is not None
            hblock, rater_means = _model_human_block(mat, sources, dim, boot)
            blocks.append(hblock)
            if len(humans) < 2:
                notes.append("only one human rater: no human-vs-human agreement to compare judges with")
            for jr in _judge_rows(judgments, scale=True, dimension=dim) if judgments is not None else []:
                blocks.append(_model_judge_block(jr, mat, rater_means, sources, excluded.get(jr.name, ()), dim, boot))
                notes.extend(_unscored_note(jr))
            continue
        pw, st = _block_stats(
            mat, scale=scale, labels=labels, against=None, n_boot=n_boot, seed=seed, confidence=confidence
        )
        hblock = Block(
            "humans",
            "human",
            dim,
            len(mat),
            tuple(humans),
            pw,
            st,
            counts={"ratings": int((~is_missing(mat.to_numpy(dtype=object))).sum())},
        )
        blocks.append(hblock)
        if len(humans) < 2:
            notes.append("only one human rater: no human-vs-human agreement to compare judges with")
        if judgments is None:
            continue
        for jr in _judge_rows(judgments, scale=scale, dimension=dim):
            if leave_own_model_out:
                assert sources is not None
                jr = _leave_out(jr, sources, excluded.get(jr.name, ()))
            blocks.append(
                _judge_block(
                    jr,
                    mat,
                    hblock,
                    scale=scale,
                    dim=dim,
                    labels=labels,
                    n_boot=n_boot,
                    seed=seed,
                    confidence=confidence,
                )
            )
            notes.extend(_unscored_note(jr))
    if leave_own_model_out:
        for name, left in excluded.items():
            notes.append(f"{name}: own-family source(s) left out: {', '.join(left) if left else 'none found'}")
    return AgreementReport(
        bool(scale), headline, tuple(blocks), tuple(dict.fromkeys(notes)), unit, bool(leave_own_model_out)
    )


def _same_family() -> Callable[[str, str], bool]:
    """The judges' family rule, imported late: `mheval.judges` pulls in the model clients."""
    from mheval.judges.panel import same_family

    return same_family


def _unscored_note(jr: _JudgeRows) -> list[str]:
    if not jr.counts["unscored"]:
        return []
    reasons = ", ".join(f"{k}: {v}" for k, v in jr.counts["unscored_reasons"].items())
    return [f"{jr.name}: {jr.counts['unscored']} unscored judgment(s) excluded" + (f" ({reasons})" if reasons else "")]


def _leave_out(jr: _JudgeRows, sources: pd.Series, excluded: tuple[str, ...]) -> _JudgeRows:
    """Item unit: drop the judge's values on responses of its own family, and say what was kept."""
    src = jr.values["item"].map(sources)
    own = src.isin(excluded).to_numpy()
    counts = {
        **jr.counts,
        "judged_sources": list(dict.fromkeys(src.dropna())),
        "excluded_sources": list(excluded),
        "values_excluded_own_model": int(own.sum()),
        "items_excluded_own_model": int(jr.values["item"][own].nunique()),
    }
    return _JudgeRows(jr.name, jr.values[~own].reset_index(drop=True), counts)


def _judge_block(
    jr: _JudgeRows,
    mat: pd.DataFrame,
    hblock: Block,
    *,
    scale: bool,
    dim: str | None,
    labels: Sequence[Any] | None,
    n_boot: int,
    seed: int,
    confidence: float,
) -> Block:
    per_item, ties = _aggregate(jr.values, scale)
    counts = dict(jr.counts)
    judged_items = set(per_item.index)
    counts["items_judged"] = len(judged_items)
    counts["items_matched"] = len(judged_items & set(mat.index))
    counts["items_without_human_labels"] = len(judged_items - set(mat.index))
    counts["repeats"] = int(jr.values["repeat"].nunique()) if len(jr.values) else 0
    if not scale:
        counts["majority_ties"] = ties
    notes = []
    if counts["items_without_human_labels"]:
        notes.append(f"{counts['items_without_human_labels']} judged item(s) have no human labels: ignored")
    if scale and dim is not None and not len(jr.values):
        notes.append(f"no ok judgment has a score for {dim!r}")

    aligned = per_item.reindex(mat.index)
    both = mat.copy()
    both.insert(0, _JUDGE_COL, aligned.astype(float) if scale else aligned.astype(object))
    pw, st = _block_stats(
        both, scale=scale, labels=labels, against=_JUDGE_COL, n_boot=n_boot, seed=seed, confidence=confidence
    )
    pw = {k: _rename(v, _JUDGE_COL, jr.name) for k, v in pw.items()}
    headline = "icc_a1" if scale else "kappa"

    bias = None
    if scale:
        human_mean = mat.astype(float).mean(axis=1, skipna=True)
        bias = bias_estimate(aligned.astype(float).to_numpy(), human_mean.to_numpy(), confidence=confidence)
        st["bias_vs_human_mean"] = bias
    human_pairs = [p.estimate for p in hblock.pairwise[headline].pairs]
    assessment = assess(jr.name, dim, headline, pw[headline].mean, bias=bias, human=human_pairs)

    consistency = None
    if counts["repeats"] >= 2:
        rep = jr.values.pivot_table(index="item", columns="repeat", values="value", aggfunc="first")
        if scale:
            consistency = icc(rep.astype(float), "A,1", confidence=confidence)
        else:
            consistency = fleiss_kappa(
                rep.astype(object), labels=labels, n_boot=n_boot, seed=seed, confidence=confidence
            )
    left = tuple(counts.pop("excluded_sources", ()))
    judged = counts.pop("judged_sources", [])
    return Block(
        jr.name,
        "judge",
        dim,
        len(mat),
        (jr.name, *hblock.raters),
        pw,
        st,
        assessment,
        consistency,
        counts,
        tuple(notes),
        sources=tuple(s for s in judged if s not in left),
        excluded_sources=left,
    )


# --------------------------------------------------------------------------- the model unit


def _model_human_block(
    mat: pd.DataFrame, sources: pd.Series, dim: str | None, boot: dict[str, Any]
) -> tuple[Block, pd.DataFrame]:
    """The humans at model level: each rater's mean per source, and rater-vs-rater ICCs over sources."""
    item_src = sources.reindex(mat.index)
    has = item_src.notna().to_numpy()
    numeric = mat.astype(float)[has]
    groups = item_src[has].to_numpy()
    means = numeric.groupby(groups, sort=False).mean()  # per rater, over the items that rater scored
    rated = numeric.notna().any(axis=1).groupby(groups, sort=False).sum()
    order = [s for s in pd.unique(sources.to_numpy()) if s in means.index]
    means = means.reindex(order)
    pairwise = {
        "icc_c1": pairwise_icc(means, "C,1", **boot),
        "icc_a1": pairwise_icc(means, "A,1", **boot),
    }
    source_means = {s: {**{str(r): _opt(means.at[s, r]) for r in means.columns}, "items": int(rated[s])} for s in order}
    counts = {"items_used": int(rated.sum()), "items_without_source": int((~has).sum())}
    notes = () if has.all() else (f"{int((~has).sum())} human-labelled item(s) have no known response source: ignored",)
    block = Block(
        "humans",
        "human",
        dim,
        len(order),
        tuple(str(c) for c in mat.columns),
        pairwise,
        {},
        counts=counts,
        notes=notes,
        unit="model",
        sources=tuple(order),
        source_means=source_means,
    )
    return block, means


def _opt(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _model_judge_block(
    jr: _JudgeRows,
    mat: pd.DataFrame,
    rater_means: pd.DataFrame,
    sources: pd.Series,
    excluded: tuple[str, ...],
    dim: str | None,
    boot: dict[str, Any],
) -> Block:
    """One judge at model level: ICC(C,1), ICC(A,1) and bias over the sources' mean human vs mean judge."""
    per_item, _ = _aggregate(jr.values, True)
    frame = pd.DataFrame(
        {
            "source": sources.reindex(mat.index).to_numpy(dtype=object),
            "h": mat.astype(float).mean(axis=1, skipna=True).to_numpy(),  # mean over the item's raters
            "j": per_item.reindex(mat.index).astype(float).to_numpy(),  # mean over the judge's ok repeats
        },
        index=mat.index,
    )
    both = frame[frame["source"].notna() & np.isfinite(frame["h"]) & np.isfinite(frame["j"])]
    own = both["source"].isin(excluded).to_numpy()
    used = both[~own]
    grouped = used.groupby("source", sort=False)
    h_means, j_means, n_items = grouped["h"].mean(), grouped["j"].mean(), grouped.size()
    candidates = [s for s in pd.unique(sources.to_numpy()) if s not in excluded]
    kept = [s for s in candidates if s in n_items.index]
    matrix = np.column_stack([h_means.reindex(kept).to_numpy(), j_means.reindex(kept).to_numpy()])
    stats = {
        "icc_c1": icc_bootstrap_ci(matrix, "C,1", **boot),
        "icc_a1": icc_bootstrap_ci(matrix, "A,1", **boot),
        "bias_vs_human_mean": bias_estimate(matrix[:, 1], matrix[:, 0], confidence=boot["confidence"]),
    }
    human_pairs = []
    if rater_means.shape[1] >= 2:  # human range over the same sources, point values only
        subset = rater_means.reindex(kept)
        human_pairs = [p.estimate for p in pairwise_icc(subset, "A,1", n_boot=0, seed=None).pairs]
    assessment = assess(jr.name, dim, "icc_a1", stats["icc_a1"], bias=stats["bias_vs_human_mean"])
    if human_pairs:
        assessment = dataclasses_replace(assessment, human=human_range(stats["icc_a1"], human_pairs))

    counts = dict(jr.counts)
    counts["items_judged"] = int(per_item.size)
    counts["items_matched"] = int(frame["j"].notna().sum())
    counts["items_without_human_labels"] = int(per_item.size) - counts["items_matched"]
    counts["items_used"] = len(used)
    counts["items_excluded_own_model"] = int(own.sum())
    counts["sources_without_pairs"] = [s for s in candidates if s not in n_items.index]
    counts["repeats"] = int(jr.values["repeat"].nunique()) if len(jr.values) else 0
    notes = []
    if counts["sources_without_pairs"]:
        notes.append(f"no item scored by both humans and judge for: {', '.join(counts['sources_without_pairs'])}")
    consistency = None
    if counts["repeats"] >= 2:
        mine = jr.values[jr.values["item"].map(sources).isin(kept).to_numpy()]
        rep = mine.pivot_table(index="item", columns="repeat", values="value", aggfunc="first")
        consistency = icc(rep.astype(float), "A,1", confidence=boot["confidence"])
    source_means = {s: {"human": float(h_means[s]), "judge": float(j_means[s]), "items": int(n_items[s])} for s in kept}
    return Block(
        jr.name,
        "judge",
        dim,
        len(kept),
        (jr.name, *rater_means.columns.astype(str)),
        {},
        stats,
        assessment,
        consistency,
        counts,
        tuple(notes),
        unit="model",
        sources=tuple(kept),
        excluded_sources=tuple(excluded),
        source_means=source_means,
    )


__all__ = ["UNITS", "AgreementReport", "Block", "agreement_report"]
