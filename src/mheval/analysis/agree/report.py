"""The agreement report as data: `Block` (one column), `AgreementReport`, and their JSON, CSV and rich renderings."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mheval.stats.agreement import Pairwise
from mheval.stats.intervals import Estimate
from mheval.stats.reliability import Assessment, width_verdict, width_verdicts

UNITS = ("item", "model")
MODEL_STATS = ("icc_c1", "icc_a1")  # the model-level statistics that get a width verdict each

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


SMALL_N = 30
"""Agreement on fewer paired units than this is flagged as small n on every figure (table and notes)."""


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
        table.add_row("items", *cells(_count))
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
        table.add_row("sources", *cells(_count))
        table.add_row("items used", *cells(lambda b: str(b.counts.get("items_used", ""))))
        for key, label in (("icc_c1", "ICC(C,1)"), ("icc_a1", "ICC(A,1)")):
            table.add_row(f"{label} over source means", *cells(lambda b, k=key: _fmt(b.estimate(k))))
            table.add_row(f"{label} reliability (CI width)", *cells(lambda b, k=key: _verdict(b.estimate(k))))
        table.add_row("bias (judge - human), over sources", *cells(lambda b: _fmt(b.stats.get("bias_vs_human_mean"))))
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


def _count(b: Block) -> str:
    """A block's number of items or sources, flagged when it is small."""
    return str(b.n_items) + (f" (small n: < {SMALL_N})" if b.n_items < SMALL_N else "")
