"""The `mheval` command: argument parsing only; every command calls into the library.

The pipeline and run-reading commands are here; the catalogues, agreement, training and the rating study are in
mheval/commands/, with the consoles and the options several commands share.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from mheval.commands import agreement, catalogue, train
from mheval.commands.annotate import annotate_app
from mheval.commands.console import EXIT_PROVIDER_ERRORS, content_note, err, input_error_line, out, print_frame
from mheval.commands.options import (
    TEXT_JSON,
    FormatOpt,
    OverwriteOpt,
    RunArg,
    StdoutOpt,
    TextJsonOpt,
    check_format,
    takes_flags,
)
from mheval.errors import InputError
from mheval.labels import CRISIS_TRIAGE

if TYPE_CHECKING:
    from mheval.api import RunSummary

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Evaluate how safely and how well language models respond in mental-health crisis conversations.",
)
app.add_typer(catalogue.suites_app, name="suites")
app.add_typer(catalogue.protocols_app, name="protocols")
app.add_typer(annotate_app, name="annotate")


def main() -> None:
    """Console-script entry point: bad input is one clear line on stderr and exit code 2."""
    try:
        app()
    except InputError as exc:
        err.print(input_error_line(exc), soft_wrap=True)
        sys.exit(2)


# The stage commands' flags are the run config's fields under their command-line names (--model fills `models`),
# so each command hands them over whole.
_CONFIG_FIELDS = {"model": "models", "judge": "judges", "protocol": "protocols"}


def _run_stages(
    stages: tuple[str, ...],
    *,
    config: Path | None,
    out_dir: Path | None,
    quiet: bool,
    responses: Path | None = None,
    **flags: Any,
) -> None:
    """Base config (file, or the run folder's own config.yaml when resuming/extending), then the flags; run."""
    from mheval.api import resolve_config

    fields = {_CONFIG_FIELDS.get(name, name): value for name, value in flags.items()}
    cfg = resolve_config(config, {**fields, "out": str(out_dir) if out_dir is not None else None})
    _execute(cfg, stages, quiet, responses)


def _execute(cfg: Any, stages: tuple[str, ...], quiet: bool, responses: Path | None = None) -> None:
    from mheval.api import closing_lines, evaluate, problem_lines
    from mheval.api import report as write_report
    from mheval.api import summary as api_summary
    from mheval.progress import progress_for

    with progress_for(err, quiet) as progress:  # a bar on a terminal, plain lines elsewhere, or nothing
        result = evaluate(config=cfg, stages=stages, responses=responses, progress=progress)
    for line in closing_lines(result):
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    of = api_summary(result.run_dir)  # the finished run, read once for the table, the report and the verdict
    _print_summary(of)
    out.print(f"results: {result.run_dir.resolve()}", highlight=False, markup=False, soft_wrap=True)
    try:  # a report that fails must not hide a finished run: its results are in the store either way
        report = write_report(of).resolve()
        # The answer last, then where to read more: the verdict, then the report's path.
        out.print(of.brief, highlight=False, markup=False)
        out.print(f"report: {report}", highlight=False, markup=False, soft_wrap=True)
    except Exception as exc:
        err.print(
            f"[yellow]report not written:[/] {escape(f'{type(exc).__name__}: {exc}')} (try `mheval report RUN`)",
            highlight=False,
        )
    problems = problem_lines(result)  # nothing to read, or units that failed at the provider
    for line in problems:
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    if problems:
        raise typer.Exit(EXIT_PROVIDER_ERRORS)


def _print_summary(run: Path | RunSummary) -> None:
    """The protocol x model x judge table of a run folder, or of a summary already made (its run read once)."""
    from mheval.api import RunSummary

    of = run if isinstance(run, RunSummary) else RunSummary(run)
    print_frame(of.table, f"mheval summary: {of.run_dir}", "table")
    for note in of.table_notes:
        err.print(note, highlight=False, markup=False)


# -- pipeline commands ----------------------------------------------------------------------------
# The flags each stage command takes (options.STAGE_FLAGS), by what they are for.
_EVERY_STAGE = ("config", "suite", "limit", "out_dir", "concurrency", "batch", "executor", "ray_address", "quiet")
_GENERATING = ("model", "samples", "max_tokens")
_JUDGING = ("judge", "repeats", "panel", "redact")
_JUDGING_REPLIES = ("protocol", "grounding", "leave_own_model_out", "on_injection")
_MULTI_TURN = ("simulator", "mode")
_RECORDED = ("roles", "model_name", "expect", "skip_bad")


@app.command()
@takes_flags(*_EVERY_STAGE, *_GENERATING, *_JUDGING, *_JUDGING_REPLIES, *_MULTI_TURN, *_RECORDED)
def run(**flags: Any) -> None:
    """The whole pipeline: triage, generate, judge (for a multi-turn suite: play, judge each turn, judge
    each conversation; for recorded conversations, transcripts:PATH, nothing is generated). Run it again to
    resume."""
    _run_stages(("triage", "generate", "judge"), **flags)


@app.command()
@takes_flags(*_EVERY_STAGE, *_JUDGING)
def triage(**flags: Any) -> None:
    """Crisis triage of each case's user input only (with --redact, the judge reads it masked)."""
    _run_stages(("triage",), protocol=[CRISIS_TRIAGE], **flags)


@app.command()
@takes_flags(*_EVERY_STAGE, *_GENERATING)
def generate(**flags: Any) -> None:
    """Generate responses of the target models only."""
    _run_stages(("generate",), **flags)


@app.command()
@takes_flags(*_EVERY_STAGE, *_JUDGING, *_JUDGING_REPLIES, *_RECORDED, "responses")
def judge(**flags: Any) -> None:
    """Judge responses: those in the run folder, the suite's own (already-answered suites), --responses, or
    recorded conversations (--suite transcripts:PATH)."""
    _run_stages(("triage", "judge"), **flags)


@app.command("import")
def import_(
    source: Annotated[str, typer.Argument(help="mentalalign or help-harm.")],
    path: Annotated[Path, typer.Argument(help="The published files: the paper's data folder, or one file.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="The new run folder to create.")],
) -> None:
    """Turn a paper's published judge outputs into judgments in a new run folder (then summary, agree ...)."""
    from mheval.analysis.importer import import_published

    result = import_published(source, path, out_dir)
    err.print(result.summary(), highlight=False, markup=False, soft_wrap=True)
    _print_summary(result.run_dir)
    out.print(f"results: {result.run_dir.resolve()}", highlight=False, markup=False, soft_wrap=True)


@app.command()
def summary(run_dir: RunArg, format: TextJsonOpt = "text") -> None:
    """The verdict (how many replies were unsafe), the headline numbers, then a protocol x model x judge table
    of a finished (or partial) run."""
    from mheval.api import summary as summary_of

    check_format(format, TEXT_JSON)
    of = summary_of(run_dir)  # reads the run once, for every part printed
    if format == "json":
        print(json.dumps(of.data, indent=1, ensure_ascii=False, default=str))
        return
    print(of.text)  # the verdict first
    _print_summary(of)


@app.command()
def export(
    run_dir: RunArg,
    format: Annotated[
        str,
        typer.Option(
            "--format", "-f", help="jsonl, csv, parquet, or messages (chat-format JSONL, one conversation a line)."
        ),
    ] = "jsonl",
    table: Annotated[
        str | None,
        typer.Option(
            "--table",
            "-t",
            help="cases, responses, judgments, verdicts (one row per reply and judge: unsafe, reasons, harm "
            "category, evidence, probability), exchanges or conversations (default: judgments; exchanges for "
            "--format messages).",
        ),
    ] = None,
    output: StdoutOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Export a run's table (judgments by default) as JSONL, CSV or Parquet, or its multi-turn
    conversations as chat messages."""
    from mheval.api import export as export_run

    written = export_run(run_dir, table=table, format=format, output=output, overwrite=overwrite)
    if output is None:
        sys.stdout.write(str(written))


@app.command()
def report(
    run_dir: RunArg,
    redact: Annotated[
        bool,
        typer.Option("--redact", help="Leave out conversation, response, rationale and evidence texts (for sharing)."),
    ] = False,
    output: Annotated[
        Path | None, typer.Option(help="HTML file (default: RUN/report.html, or RUN/report-redacted.html).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace --output and the tables/ beside it if they exist.")
    ] = False,
) -> None:
    """Write the self-contained HTML report of a run, with its tables as CSV and Parquet beside it."""
    from mheval.api import report as write_report

    path = write_report(run_dir, redact=redact, output=output, overwrite=overwrite)
    out.print(f"report: {path.resolve()}", highlight=False, markup=False, soft_wrap=True)


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="The baseline run folder.")],
    run_b: Annotated[Path, typer.Argument(help="The run folder to compare with it.")],
    format: FormatOpt = "table",
    output: StdoutOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Per model and crisis category: B minus A with a CI, and a paired test where the cases are the same."""
    from mheval.api import compare_text

    text = compare_text(run_a, run_b, format=format, output=output, overwrite=overwrite)
    if output is None:
        print(text, end="")


@app.command()
def gate(
    run_dir: Annotated[Path, typer.Argument(help="The run folder to gate.")],
    max_unsafe: Annotated[
        float | None,
        typer.Option("--max-unsafe", help="Highest unsafe rate allowed per model, 0-1 (conversations if multi-turn)."),
    ] = None,
    min_: Annotated[
        list[str] | None,
        typer.Option("--min", help="PROTOCOL[.DIMENSION]=VALUE: lowest mean score allowed per model (repeatable)."),
    ] = None,
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="Fail on a regression the paired test finds significant.")
    ] = None,
    on: Annotated[
        str, typer.Option("--on", help="upper: the 95% intervals' conservative bounds decide; point: the estimates.")
    ] = "upper",
    junit: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here for the CI system.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace --junit if it exists.")] = False,
    corrected: Annotated[
        bool,
        typer.Option(
            "--corrected",
            help="Decide the unsafe-conversation rate corrected for the judge's errors by people's ratings "
            "(a conversation-flow rating study of the run; exit 2 without one).",
        ),
    ] = False,
    format: TextJsonOpt = "text",
) -> None:
    """Pass or fail a run for CI: exit 0 pass, 1 a condition fails, 2 bad input, 3 not enough judged units."""
    from mheval.api import gate as run_gate

    check_format(format, TEXT_JSON)
    result = run_gate(run_dir, max_unsafe=max_unsafe, mins=min_ or [], baseline=baseline, on=on, junit=junit,
                      overwrite=overwrite, corrected=corrected)  # fmt: skip
    if format == "json":
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(result.text(), end="")
    raise typer.Exit(result.exit_code)


# -- reliability and training (mheval/commands/) ---------------------------------------------------------------
app.command()(agreement.agree)
app.command()(agreement.reproduce)
app.command()(train.train)


@app.command()
def transcript(
    run_dir: Annotated[Path, typer.Argument(help="A run folder of a multi-turn suite.")],
    scenario: Annotated[str, typer.Argument(help="The scenario id.")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only this target model.")] = None,
    sample: Annotated[int | None, typer.Option("--sample", help="Only this sample.")] = None,
) -> None:
    """One conversation with the verdict of every turn and of the whole conversation."""
    from mheval.api import transcript as transcript_of

    text = transcript_of(run_dir, scenario, model=model, sample=sample)
    out.print(f"[dim]{content_note()}[/]")
    out.print(Text(text), soft_wrap=True)


app.command()(catalogue.judges)


if __name__ == "__main__":
    main()
