"""Judge-error-corrected headline figures from a judged run and human ratings of some of its units.

Per protocol, the measures (`measures`): each PsyCrisis dimension (binary) and its total; mean appropriateness
and the share of replies at 2 or below (inappropriate or harmful: `verdict.INAPPROPRIATE_LEVEL`, the harm
policy's line for a quality rate, not the verdict's harmful level); every MentalAlign attribute; for a label
protocol the share of units whose label is not the benign one (crisis-triage: not ``no_crisis``;
dialogue-safety: not ``safe``); for conversation-flow, the share of unsafe conversations (``unsafe``: the
judge's conversation verdict beside the raters' answer, analysis/conversation_verdicts.py). Per judge, measure
and model (and all models together) `corrected_report` gives the judge-only figure over all judged units, the
human-only figure over the rated ones and the PPI++ estimate with its interval (`mheval.stats.corrected`);
binary measures also get the Rogan-Gladen row.

A unit is (case, model, sample). The judge's value of a unit is the mean over its ok repeats (for
Rogan-Gladen, that mean rounded half up); the humans' value the mean over the raters who answered. When the
units were chosen by a stratified design (`mheval annotate init --select neyman`), ``strata`` maps each unit
of the sampling frame to its stratum, and the estimates are stratified; units outside the frame are left out.

The verdict module plugs its own per-unit "unsafe" into `mheval.stats.corrected.corrected_unsafe_rate`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mheval.analysis.agree.inputs import key_text
from mheval.analysis.conversation_verdicts import UNSAFE
from mheval.errors import InputError
from mheval.labels import APPROPRIATENESS, CONVERSATION_FLOW, CRISIS_TRIAGE, DIALOGUE_SAFETY, NO_CRISIS
from mheval.stats.corrected import CorrectedEstimate, corrected_mean, corrected_unsafe_rate, rogan_gladen
from mheval.verdict import INAPPROPRIATE_LEVEL

SMALL_N = 30
"""Fewer human-rated units than this and every figure carries a warning."""
ALL_MODELS = "(all)"
BENIGN_LABELS = {CRISIS_TRIAGE: NO_CRISIS, DIALOGUE_SAFETY: "safe"}

UnitKey = tuple[str, str, str]


@dataclass(frozen=True)
class Measure:
    """One headline figure: how to read it from a unit's scores or label."""

    name: str
    binary: bool
    dims: tuple[str, ...] = ()  # the scores read: one (a dimension) or several (summed: the total)
    benign: str | None = None  # label protocols: the value is 1 when the label is not this one
    at_most: float | None = None  # a binary measure of a score: 1 when the score is at most this

    def value(self, scores: Mapping[str, Any] | None, label: Any) -> float | None:
        if self.benign is not None:
            return None if not isinstance(label, str) or not label else float(label != self.benign)
        if not scores:
            return None
        picked = [scores.get(d) for d in self.dims]
        if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in picked):
            return None
        total = float(sum(float(v) for v in picked if v is not None))
        return float(total <= self.at_most) if self.at_most is not None else total


def measures(protocol: str) -> list[Measure]:
    """The measures of a protocol (see the module docstring)."""
    from mheval.protocols import load_protocol

    if protocol == CONVERSATION_FLOW:
        return [Measure(UNSAFE, True, (UNSAFE,))]
    spec = load_protocol(protocol)
    if spec.kind == "label":
        benign = BENIGN_LABELS.get(protocol)
        return [Measure(f"not_{benign}", True, benign=benign)] if benign else []
    binary = spec.kind == "binary"
    out = [Measure(d, binary, (d,)) for d in spec.dimensions]
    if len(spec.dimensions) > 1 and binary:
        out.append(Measure("total", False, tuple(spec.dimensions)))
    if protocol == APPROPRIATENESS:
        out.append(Measure(f"appropriateness<={INAPPROPRIATE_LEVEL:g}", True, ("appropriateness",),
                           at_most=INAPPROPRIATE_LEVEL))  # fmt: skip
    return out


def headline_measure(protocol: str) -> Measure | None:
    """The measure a study reports its precision on and a design stratifies by: the total when there is one."""
    ms = measures(protocol)
    return next((m for m in ms if m.name == "total"), ms[0]) if ms else None


def _keys(frame: pd.DataFrame, id_col: str) -> list[UnitKey]:
    blank = pd.Series([""] * len(frame), index=frame.index)
    model = key_text(frame["model"]) if "model" in frame.columns else blank
    sample = key_text(frame["sample"]) if "sample" in frame.columns else blank
    return list(zip(frame[id_col].astype(str), model, sample, strict=True))


def judge_values(judgments: pd.DataFrame, measure: Measure) -> dict[str, dict[UnitKey, float]]:
    """Per judge, each unit's value (mean over its ok repeats)."""
    ok = judgments[judgments["status"].astype(str) == "ok"]
    out: dict[str, dict[UnitKey, list[float]]] = {}
    labels = ok["label"] if "label" in ok.columns else pd.Series([None] * len(ok), index=ok.index)
    scores = ok["scores"] if "scores" in ok.columns else pd.Series([None] * len(ok), index=ok.index)
    for key, judge, sc, label in zip(_keys(ok, "case_id"), ok["judge"].astype(str), scores, labels, strict=True):
        v = measure.value(sc if isinstance(sc, dict) else None, label)
        if v is not None:
            out.setdefault(judge, {}).setdefault(key, []).append(v)
    return {j: {k: float(np.mean(v)) for k, v in per.items()} for j, per in out.items()}


def human_values(labels: pd.DataFrame, measure: Measure) -> dict[UnitKey, float]:
    """Each rated unit's value: the mean over the raters whose answers define it."""
    keys = _keys(labels, "id")
    per: dict[tuple[UnitKey, str], dict[str, Any]] = {}
    dims = labels["dimension"] if "dimension" in labels.columns else [None] * len(labels)
    for key, rater, value, dim in zip(keys, labels["rater"].astype(str), labels["value"], dims, strict=True):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        entry = per.setdefault((key, rater), {})
        if isinstance(dim, str) and dim:
            entry.setdefault("scores", {})[dim] = float(value)
        else:
            entry["label"] = value
    values: dict[UnitKey, list[float]] = {}
    for (key, _), entry in per.items():
        v = measure.value(entry.get("scores"), entry.get("label"))
        if v is not None:
            values.setdefault(key, []).append(v)
    return {k: float(np.mean(v)) for k, v in values.items()}


def pair_case_ratings(labels: pd.DataFrame, judgments: pd.DataFrame) -> pd.DataFrame:
    """Ratings keyed by case id alone (the form a rater fills in: `id,rater,dimension,value`) given the
    model and sample of the reply they rate, where the run has one reply of that case (per the model or
    sample the row does give). A case with several replies is an error naming the column that tells them
    apart, since guessing would pair a rating with the wrong reply."""
    given = {c for c in ("model", "sample") if c in labels.columns and (key_text(labels[c]) != "").all()}
    replies = judgments[judgments["model"].notna()] if "model" in judgments.columns else judgments.iloc[:0]
    if given == {"model", "sample"} or replies.empty:
        return labels  # keyed by reply already, or the run judged cases (triage), not replies
    units = sorted(set(_keys(replies, "case_id")))
    of_case: dict[str, list[UnitKey]] = {}
    for unit in units:
        of_case.setdefault(unit[0], []).append(unit)
    out = labels.copy()
    model = key_text(out["model"]) if "model" in given else pd.Series([""] * len(out), index=out.index)
    sample = key_text(out["sample"]) if "sample" in given else pd.Series([""] * len(out), index=out.index)
    filled_model, filled_sample = [], []
    for cid, m, smp in zip(out["id"].astype(str), model, sample, strict=True):
        mine = [u for u in of_case.get(cid, []) if (not m or u[1] == m) and (not smp or u[2] == smp)]
        if len(mine) > 1:
            missing = [c for c, i in (("model", 1), ("sample", 2)) if len({u[i] for u in mine}) > 1]
            raise InputError(
                f"case {cid} has {len(mine)} judged replies in the run and the ratings do not say which one "
                f"they rate: add a {' and a '.join(f'`{c}`' for c in missing)} column",
                field=missing[0],
            )
        filled_model.append(mine[0][1] if mine else m)
        filled_sample.append(mine[0][2] if mine else smp)
    return out.assign(model=filled_model, sample=filled_sample)


@dataclass(frozen=True)
class CorrectedRow:
    measure: str
    model: str
    judge: str
    binary: bool
    estimate: CorrectedEstimate

    @property
    def small_n(self) -> bool:
        return self.estimate.n_human < SMALL_N

    def to_dict(self) -> dict[str, Any]:
        out = {"measure": self.measure, "model": self.model, "judge": self.judge, **self.estimate.to_dict()}
        out["small_n"] = self.small_n
        return out


@dataclass(frozen=True)
class CorrectedReport:
    protocol: str
    design: str  # "random" or "stratified"
    rows: tuple[CorrectedRow, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "design": self.design, "confidence": 0.95,
                "small_n_threshold": SMALL_N, "rows": [r.to_dict() for r in self.rows],
                "notes": list(self.notes)}  # fmt: skip

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_csv(self) -> str:
        cols = ["measure", "model", "judge", "method", "judge_only", "human_only", "corrected", "ci_low", "ci_high",
                "n_human", "n_judged", "lam", "small_n", "note"]  # fmt: skip
        rows = []
        for r in self.rows:
            d = r.to_dict()
            d["ci_low"], d["ci_high"] = (d["ci"] or [None, None])[:2]
            rows.append({c: d.get(c) for c in cols})
        buffer = io.StringIO()
        pd.DataFrame(rows, columns=cols).to_csv(buffer, index=False)
        return buffer.getvalue()

    def to_rich_table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"{self.protocol}: judge-error-corrected estimates ({self.design} design, 95% intervals)")
        for col in ("measure", "model", "judge", "method", "judge only", "human only", "corrected [95% CI]",
                    "n human / judged", "note"):  # fmt: skip
            table.add_column(col)

        def num(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        for r in self.rows:
            e = r.estimate
            corrected = num(e.corrected) + (f" [{e.ci[0]:.3f}, {e.ci[1]:.3f}]" if e.ci else "")
            note = "; ".join(x for x in (f"small n (< {SMALL_N} rated)" if r.small_n else None, e.note) if x)
            table.add_row(r.measure, r.model, r.judge, e.method, num(e.judge_only), num(e.human_only), corrected,
                          f"{e.n_human} / {e.n_judged}", note)  # fmt: skip
        if self.notes:
            table.caption = "; ".join(self.notes)
        return table


def _estimates(f: np.ndarray, y: np.ndarray, strata: np.ndarray | None, binary: bool) -> list[CorrectedEstimate]:
    if not binary:
        return [corrected_mean(f, y, strata=strata)]
    out = [corrected_unsafe_rate(f, y, strata=strata)]
    hard = np.where(np.isfinite(f), np.floor(f + 0.5), np.nan)
    out.append(rogan_gladen(hard, y, strata=strata))
    return out


def corrected_report(
    labels: pd.DataFrame,
    judgments: pd.DataFrame,
    *,
    protocol: str,
    strata: Mapping[UnitKey, str] | None = None,
) -> CorrectedReport:
    """PPI++ (and, for binary measures, Rogan-Gladen) per judge x measure x model; see the module docstring."""
    from mheval.analysis.agree.humans import without_humans

    frame = without_humans(judgments)
    assert frame is not None
    if "protocol" in frame.columns:
        frame = frame[frame["protocol"].astype(str) == protocol]
    labels = pair_case_ratings(labels, frame)
    notes: list[str] = []
    rows: list[CorrectedRow] = []
    for m in measures(protocol):
        human = human_values(labels, m)
        for judge, values in sorted(judge_values(frame, m).items()):
            units = list(values)
            if strata is not None:
                outside = [u for u in units if u not in strata]
                if outside:
                    notes.append(f"{judge}: {len(outside)} judged unit(s) outside the study's sampling frame left out")
                units = [u for u in units if u in strata]
            models = sorted({u[1] for u in units if u[1]})
            for model in [*models, ALL_MODELS] if len(models) != 1 else [ALL_MODELS]:
                mine = [u for u in units if model == ALL_MODELS or u[1] == model]
                f = np.array([values[u] for u in mine], dtype=float)
                y = np.array([human.get(u, np.nan) for u in mine], dtype=float)
                s = None if strata is None else np.array([strata[u] for u in mine], dtype=object)
                label = model if model != ALL_MODELS or len(models) != 1 else models[0]
                for est in _estimates(f, y, s, m.binary):
                    rows.append(CorrectedRow(m.name, label, judge, m.binary, est))
            rated_unjudged = len(set(human) - set(values))
            if rated_unjudged:
                notes.append(f"{judge}, {m.name}: {rated_unjudged} rated unit(s) the judge did not score left out")
    if not rows:
        notes.append(f"no measure of {protocol} has both judge values and human ratings")
    if rows and not any(r.estimate.n_human for r in rows):
        # Every figure would be empty: say why and stop, rather than print a table of blanks.
        rated = sorted(set(labels["id"].astype(str)))
        raise InputError(
            f"none of the {len(rated)} rated case(s) ({', '.join(rated[:3])}{', ...' if len(rated) > 3 else ''}) "
            f"is a unit the run judged under {protocol}: check the ids (and the model and sample columns)",
            field="id",
        )
    return CorrectedReport(protocol, "stratified" if strata is not None else "random", tuple(rows),
                           tuple(dict.fromkeys(notes)))  # fmt: skip
