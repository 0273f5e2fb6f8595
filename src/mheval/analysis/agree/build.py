"""`agreement_report`: reads the inputs, builds the blocks of the chosen unit, and gathers the notes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from mheval.analysis.agree.inputs import (
    human_matrix,
    item_keys,
    item_sources,
    judge_rows,
    label_text,
    norm,
    read_judgments,
    unscored_note,
)
from mheval.analysis.agree.items import Boot, human_block, judge_block, leave_out
from mheval.analysis.agree.models import model_human_block, model_judge_block
from mheval.analysis.agree.report import SMALL_N, UNITS, AgreementReport, Block
from mheval.errors import InputError


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
    ``own_model(judge, source)`` is true; the default is `mheval.models.families.same_family`.
    Pass e.g. ``lambda j, s: (j, s) in {("gpt-4o", "gpt4o")}`` to leave out only the exact own model.
    """
    human, scale = _checked_human(human, scale, unit)
    extra = [c for c in ("model", "sample") if c in human.columns]
    notes: list[str] = []

    # Dimensions to report.
    human_dims = list(dict.fromkeys(human["dimension"].dropna().astype(str))) if "dimension" in human.columns else []
    judgments = read_judgments(judge, scale=scale, protocol=protocol, extra_keys=extra) if judge is not None else None
    dims = _dimensions(dimension, human_dims, judgments.dims if judgments is not None else None, scale)

    if human_dims:
        human_dim_keys = human["dimension"].astype(str).str.strip().str.lower()
    headline = "icc_a1" if scale else "kappa"
    sources: pd.Series | None = None  # item key -> response source
    excluded: dict[str, tuple[str, ...]] = {}  # judge -> own-family sources left out
    if unit == "model" or (leave_own_model_out and judgments is not None):
        sources = item_sources(human, item_keys(human, "id", extra), judgments)
        if judgments is not None and leave_own_model_out:
            is_own = own_model or _same_family()
            order = list(pd.unique(sources.to_numpy()))
            for name in dict.fromkeys(judgments.frame["judge"]):
                excluded[name] = tuple(s for s in order if is_own(name, s))
    boot = Boot(n_boot=n_boot, seed=seed, confidence=confidence)
    blocks: list[Block] = []
    for dim in dims:
        sub = human
        if dim is not None and "dimension" in human.columns and human_dims:
            sub = human[(human_dim_keys == norm(dim)).to_numpy()]
            if sub.empty:
                raise InputError(f"no human labels for dimension {dim!r}", field="dimension", choices=human_dims)
        mat = human_matrix(sub, item_keys(sub, "id", extra))
        if scale:
            mat = mat.astype(float)
        humans = [str(c) for c in mat.columns]
        if unit == "model":
            assert sources is not None
            hblock, rater_means = model_human_block(mat, sources, dim, boot)
            blocks.append(hblock)
            if len(humans) < 2:
                notes.append("only one human rater: no human-vs-human agreement to compare judges with")
            for jr in judge_rows(judgments, scale=True, dimension=dim) if judgments is not None else []:
                blocks.append(model_judge_block(jr, mat, rater_means, sources, excluded.get(jr.name, ()), dim, boot))
                notes.extend(unscored_note(jr))
            continue
        hblock = human_block(mat, scale=scale, dim=dim, labels=labels, boot=boot)
        blocks.append(hblock)
        if len(humans) < 2:
            notes.append("only one human rater: no human-vs-human agreement to compare judges with")
        if judgments is None:
            continue
        for jr in judge_rows(judgments, scale=scale, dimension=dim):
            if leave_own_model_out:
                assert sources is not None
                jr = leave_out(jr, sources, excluded.get(jr.name, ()))
            blocks.append(judge_block(jr, mat, hblock, scale=scale, dim=dim, labels=labels, boot=boot))
            notes.extend(unscored_note(jr))
    notes.extend(_small_n_notes(blocks, unit))
    if leave_own_model_out:
        for name, left in excluded.items():
            notes.append(f"{name}: own-family source(s) left out: {', '.join(left) if left else 'none found'}")
    return AgreementReport(
        bool(scale), headline, tuple(blocks), tuple(dict.fromkeys(notes)), unit, bool(leave_own_model_out)
    )


def _checked_human(human: pd.DataFrame, scale: bool | None, unit: str) -> tuple[pd.DataFrame, bool]:
    """The human labels checked, with their values as numbers (a scale) or as label text, and whether they are
    a scale (``scale`` None: numeric values are)."""
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
        human = human.assign(value=[label_text(v) for v in human["value"]])
    return human, scale


def _dimensions(
    dimension: str | None, human_dims: list[str], judge_dims: list[str] | None, scale: bool
) -> list[str | None]:
    """The dimensions to report: the one asked for, else the humans' own, else (scores given judgments) the
    judges' only one; None stands for a table without dimensions. ``judge_dims`` is None without judgments."""
    if dimension is not None:
        return [dimension]
    if human_dims:
        return list(human_dims)
    if judge_dims is not None and scale:
        if len(judge_dims) > 1:
            raise InputError("the judgments score several dimensions: pick one", field="dimension", choices=judge_dims)
        return [judge_dims[0] if judge_dims else None]
    return [None]


def _small_n_notes(blocks: Sequence[Block], unit: str) -> list[str]:
    """A warning for each block that rests on fewer than SMALL_N items (or sources)."""
    what = "sources" if unit == "model" else "paired units"
    return [
        f"small n: {b.name}{f' ({b.dimension})' if b.dimension else ''} rests on {b.n_items} {what} "
        f"(fewer than {SMALL_N}): read its agreement figures as rough"
        for b in blocks
        if b.n_items < SMALL_N
    ]


def _same_family() -> Callable[[str, str], bool]:
    """The family rule, imported late: `mheval.models` pulls in the model clients."""
    from mheval.models.families import same_family

    return same_family
