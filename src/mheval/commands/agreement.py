"""`mheval agree` and `mheval reproduce`: how far a judge can be trusted against human raters, and the papers'
reliability tables recomputed from their released files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from mheval.commands.console import out, print_frame
from mheval.commands.options import REPORT_FORMATS, FormatOpt, check_format
from mheval.errors import InputError


def agree(
    labels: Annotated[
        Path,
        typer.Argument(
            help="Human labels: CSV/JSONL, long (id, rater, value[, dimension]) or wide (one column per rater); "
            "or a run folder with an `mheval annotate` study (its raters against its judges)."
        ),
    ],
    run_dir: Annotated[Path | None, typer.Option("--run", help="A run folder whose judgments to compare.")] = None,
    judgments: Annotated[Path | None, typer.Option(help="A judgments export (JSONL/CSV) instead of a run.")] = None,
    protocol: Annotated[str | None, typer.Option("--protocol", "-p", help="Only this protocol's judgments.")] = None,
    dimension: Annotated[str | None, typer.Option(help="The score to compare, for scale protocols.")] = None,
    field: Annotated[str | None, typer.Option(help="The field of the labels file that holds the raters.")] = None,
    unit: Annotated[
        str,
        typer.Option(
            help="item, or model: each response source's mean human vs mean judge "
            "score (MentalAlign's unit; numeric scores only)."
        ),
    ] = "item",
    leave_own_model_out: Annotated[
        bool, typer.Option("--leave-own-model-out", help="Leave out, per judge, the responses of its own model family.")
    ] = False,
    corrected: Annotated[
        bool,
        typer.Option(
            "--corrected",
            help="Instead: judge-only, human-only and judge-error-corrected figures (PPI++; Rogan-Gladen for "
            "binary measures) per measure, model and judge.",
        ),
    ] = False,
    format: FormatOpt = "table",
) -> None:
    """Human-vs-human agreement and, given judgments, each judge's agreement with the humans, with verdicts."""
    from mheval.api import agree as agree_with_humans

    check_format(format, REPORT_FORMATS)
    if corrected:
        from mheval.api import corrected as corrected_figures

        figures = corrected_figures(labels, run=run_dir, judgments=judgments, protocol=protocol, field=field)
        _print_report(figures, format)
        return
    report = agree_with_humans(
        labels,
        run=run_dir,
        judgments=judgments,
        protocol=protocol,
        dimension=dimension,
        field=field,
        unit=unit,
        leave_own_model_out=leave_own_model_out,
    )
    _print_report(report, format)


def _print_report(report: Any, format: str) -> None:
    """An agreement or corrected-figures report as JSON, CSV or a table (both have the three forms)."""
    if format == "json":
        print(report.to_json())
    elif format == "csv":
        print(report.to_csv(), end="")
    else:
        out.print(report.to_rich_table())


def reproduce(
    paper: Annotated[str, typer.Argument(help="mentalalign or help-harm.")],
    data: Annotated[Path, typer.Option(help="The paper's released data (folder).")] = Path("../shared/data"),
    format: FormatOpt = "table",
) -> None:
    """Recompute a paper's reliability table from its released files."""
    from mheval.analysis.reproduce import REPRODUCIBLE, reproduce_paper, reproduction_table

    if paper not in REPRODUCIBLE:
        raise InputError(f"unknown paper {paper!r}", choices=tuple(REPRODUCIBLE))
    check_format(format, REPORT_FORMATS)
    result = reproduce_paper(paper, data)
    if format == "json":
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
        return
    print_frame(reproduction_table(paper, result), f"{paper}: {result.get('dataset', '')}", format)
