"""`mheval annotate init|serve|status|export`: a blind human rating study of a run's units."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from mheval.commands.console import out
from mheval.commands.options import FormatOpt, RunArg, StudyOpt

annotate_app = typer.Typer(help="Blind human rating of a run's units, feeding `mheval agree`.", no_args_is_help=True)


@annotate_app.command("init")
def annotate_init(
    run_dir: RunArg,
    protocol: Annotated[
        str,
        typer.Option(
            "--protocol",
            "-p",
            help="The protocol the raters answer; in a multi-turn run a per-turn protocol rates each reply after "
            "the turns before it, conversation-flow rates whole conversations (with 'is it unsafe?').",
        ),
    ],
    raters: Annotated[str, typer.Option(help="Comma-separated rater names.")] = "rater1,rater2",
    overlap: Annotated[int, typer.Option(help="Raters per unit.")] = 2,
    calibration: Annotated[int, typer.Option(help="Units every rater rates first.")] = 0,
    sample: Annotated[int | None, typer.Option(help="Rate only N units of the run (seeded).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sample, the assignment and the orders.")] = 0,
    study: Annotated[str | None, typer.Option("--study", help="The study's name (default: the protocol).")] = None,
    select: Annotated[
        str,
        typer.Option(
            help="random, or neyman: --sample units stratified by the judge's verdict and confidence (for "
            "conversation-flow: its verdict on each conversation, unsafe or not), Neyman allocation, inclusion "
            "probabilities kept for the corrected estimates."
        ),
    ] = "random",
    judge: Annotated[str | None, typer.Option(help="With --select neyman: the judge to stratify by.")] = None,
) -> None:
    """Create a study: the run's units under PROTOCOL, assigned to raters, blind to model and judge."""
    from mheval.annotate import init_study

    s = init_study(run_dir, protocol, raters.split(","), overlap=overlap, calibration=calibration, sample=sample,
                   seed=seed, study_id=study, select=select, judge=judge)  # fmt: skip
    loads = ", ".join(f"{r} {len(s.queue(r))}" for r in s.raters())
    out.print(f"study {s.id} ({s.protocol}): units per rater: {loads}", highlight=False, markup=False)
    design = s.design()
    for note in design[2] if design else []:
        out.print(note, highlight=False, markup=False, soft_wrap=True)
    out.print(f"next: mheval annotate serve {run_dir}", highlight=False, markup=False)
    s.close()


@annotate_app.command("serve")
def annotate_serve(
    run_dir: RunArg,
    study: StudyOpt = None,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8765,
) -> None:
    """Serve the rating pages; prints one secret link per rater."""
    from mheval.annotate import serve

    serve(run_dir, study=study, host=host, port=port)


@annotate_app.command("status")
def annotate_status(run_dir: RunArg, study: StudyOpt = None, format: FormatOpt = "table") -> None:
    """Per-rater progress, time per unit, and the live human-human agreement with intervals."""
    from mheval.analysis.corrected import SMALL_N
    from mheval.annotate import study_status

    status = study_status(run_dir, study)
    if format == "json":
        print(json.dumps(status.to_dict(), indent=1, default=str))
        return
    out.print(Text.assemble((f"study {status.study}", "bold"), f" ({status.protocol}), {status.units} units"))
    table = Table("rater", "rated", "assigned", "median s/unit", "flag")
    for r in status.raters:
        median = f"{r.median_seconds:.1f}" if r.median_seconds is not None else "-"
        table.add_row(r.rater, str(r.done), str(r.assigned), median, "implausibly fast" if r.too_fast else "")
    out.print(table)
    table = Table("question", "scale", "units rated by 2+", "Krippendorff's alpha", "Cohen's kappa per pair")
    for a in status.agreement:
        pairs = "; ".join(f"{x}-{y} {k.format()}" for x, y, k in a.pairs) or "-"
        table.add_row(a.question, a.level, str(a.units), a.alpha.format(), Text(pairs))
    out.print(table)
    if any(a.units < SMALL_N for a in status.agreement):
        out.print(f"small n: agreement on fewer than {SMALL_N} units rated by two raters is a rough guide only",
                  highlight=False, markup=False)  # fmt: skip
    for p in status.precision:
        out.print(p.sentence(), highlight=False, markup=False, soft_wrap=True)


@annotate_app.command("export")
def annotate_export(
    run_dir: RunArg,
    format: Annotated[str, typer.Option("--format", "-f", help="judgments (JSONL), csv or parquet.")] = "judgments",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="File (default: in the run folder).")] = None,
    study: StudyOpt = None,
    overwrite: Annotated[bool, typer.Option(help="Replace --output if it exists.")] = False,
) -> None:
    """Write the ratings as judgments (judge "human:<rater>") or as a labels table."""
    from mheval.annotate import export_ratings

    path = export_ratings(run_dir, format, output, study=study, overwrite=overwrite)
    out.print(f"ratings: {path.resolve()}", highlight=False, markup=False, soft_wrap=True)
