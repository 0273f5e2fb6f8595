"""The `mheval` command: argument parsing only; every command calls into the library."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from mheval.errors import InputError
from mheval.labels import CRISIS_TRIAGE

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Evaluate how safely and how well language models respond in mental-health crisis conversations.",
)
suites_app = typer.Typer(help="Built-in suites and suite formats.", no_args_is_help=True)
protocols_app = typer.Typer(help="The evaluation protocols (rubrics as data).", no_args_is_help=True)
annotate_app = typer.Typer(help="Blind human rating of a run's units, feeding `mheval agree`.", no_args_is_help=True)
app.add_typer(suites_app, name="suites")
app.add_typer(protocols_app, name="protocols")
app.add_typer(annotate_app, name="annotate")

PIPED_WIDTH = 120
"""Where output goes to a file or a CI log and COLUMNS is not set: the width tables are laid out in."""


class _Console(Console):
    """A console whose prose is never cut at its width (soft wrap: a line is printed whole; summary and
    verdict texts wrap themselves between clauses), and whose tables fit COLUMNS when it is set (read at
    each print, not once at import), else the terminal, else PIPED_WIDTH."""

    def __init__(self, stderr: bool = False) -> None:
        super().__init__(stderr=stderr, soft_wrap=True)

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        columns = os.environ.get("COLUMNS", "").strip()
        if columns.isdigit() and int(columns) > 0:
            return ConsoleDimensions(int(columns), size.height)
        return size if self.is_terminal else ConsoleDimensions(PIPED_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


def _console(stderr: bool = False) -> Console:
    return _Console(stderr=stderr)


out = _console()
err = _console(stderr=True)

# Exit codes: 2 bad input (errors.InputError), 3 a finished run with units that failed at the provider, or
# with nothing to read (every conversation failed in the simulator, or no unit could be judged).
EXIT_PROVIDER_ERRORS = 3


def content_note() -> str:
    """The content warning printed before conversations, with the international directory of
    mheval.resources.warning_lines (crisis_lines.yaml)."""
    from mheval.resources import warning_lines

    directory = next(line.number for line in warning_lines() if not line.codes)
    return (
        "Content warning: these conversations discuss suicide, self-harm and other crises. If you need "
        f"support now, see https://{directory} (international) or call your local emergency number."
    )


# -- shared options -------------------------------------------------------------------------------
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML run config; flags override it.")]
SuiteOpt = Annotated[str | None, typer.Option("--suite", help="Built-in suite name or FORMAT:PATH.")]
ModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        "-m",
        help="Target model spec (repeatable): PROVIDER/MODEL or PROVIDER/MODEL@BASE_URL. A base URL on "
        "loopback or a private network (localhost, 127.0.0.0/8, ::1, 10/8, 172.16/12, 192.168/16) needs no API key.",
    ),
]
SamplesOpt = Annotated[int | None, typer.Option("--samples", help="Responses per case and model.")]
JudgeOpt = Annotated[list[str] | None, typer.Option("--judge", "-j", help="`offline` or a model spec (repeatable).")]
ProtocolOpt = Annotated[list[str] | None, typer.Option("--protocol", "-p", help="Protocol id (repeatable).")]
RepeatsOpt = Annotated[int | None, typer.Option("--repeats", help="Judgments per unit (self-consistency).")]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="Use only the first N cases.")]
OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Run folder (default: runs/<suite>-<hash>).")]
ConcOpt = Annotated[int | None, typer.Option("--concurrency", help="Units in flight at once.")]
MaxTokOpt = Annotated[int | None, typer.Option("--max-tokens", help="Longest reply of a target model, in tokens.")]
SimulatorOpt = Annotated[
    str | None,
    typer.Option("--simulator", help="Multi-turn suites: the model spec that plays the user (adaptive mode)."),
]
ModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode", help="Multi-turn suites: replay (each beat's fixed words) or adaptive (the simulator writes them)."
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="No progress: neither the bar on a terminal nor the plain lines printed every few seconds "
        "elsewhere (MHEVAL_QUIET=1 does the same).",
    ),
]
ExecutorOpt = Annotated[
    str | None,
    typer.Option("--executor", help="local (this process) or ray (a Ray cluster; pip install 'mheval[ray]')."),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option("--ray-address", help="With --executor ray: the cluster's address (default: a local Ray instance)."),
]
BatchOpt = Annotated[
    bool | None,
    typer.Option(
        "--batch/--no-batch", help="Send remote calls as OpenAI Batch API jobs (half price, slower; resumable)."
    ),
]
GroundingOpt = Annotated[
    str | None,
    typer.Option(
        "--grounding",
        help="strict, flag or off: what an LLM judge's positive claim costs when its quote is not in "
        "the response (strict withdraws it, flag keeps it and flags it).",
    ),
]
PanelOpt = Annotated[
    list[str] | None, typer.Option("--panel", help="Also aggregate the judges: majority, mean or median (repeatable).")
]
LeaveOwnOpt = Annotated[
    bool | None,
    typer.Option(
        "--leave-own-model-out/--keep-own-model", help="Skip units where the judge is of the judged model's family."
    ),
]
OnInjectionOpt = Annotated[
    str | None,
    typer.Option(
        "--on-injection",
        help="flag (keep judgments of replies with text addressed to the judge, and show their "
        "share and the mean without them) or exclude (leave them out of every aggregate).",
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")]
REPORT_FORMATS = ("table", "json", "csv")
TextJsonOpt = Annotated[str, typer.Option("--format", "-f", help="text or json.")]
TEXT_JSON = ("text", "json")
RunArg = Annotated[Path, typer.Argument(help="A run folder.")]
StdoutOpt = Annotated[Path | None, typer.Option("--output", help="File to write (default: stdout).")]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="Replace --output if it exists.")]


def _check_format(format: str, choices: tuple[str, ...]) -> None:
    if format not in choices:
        raise InputError(f"unknown format {format!r}", field="format", choices=choices)


def input_error_line(exc: InputError) -> Text:
    """The one line bad input is told with. The message quotes the user's data (ids, labels, paths) and our
    own bracketed text (`pip install 'mheval[local]'`, `[seeker]`): as a Text it prints as written, never
    read as rich markup or :emoji: codes."""
    return Text.assemble(("error:", "bold red"), " ", str(exc))


def main() -> None:
    """Console-script entry point: bad input is one clear line on stderr and exit code 2."""
    try:
        app()
    except InputError as exc:
        err.print(input_error_line(exc), soft_wrap=True)
        sys.exit(2)


def _config(config: Path | None, out_dir: Path | None, **flags: Any) -> Any:
    """Base config (file, or the run folder's own config.yaml when resuming/extending), then flags."""
    from mheval.api import resolve_config

    return resolve_config(config, {**flags, "out": str(out_dir) if out_dir is not None else None})


def _execute(cfg: Any, stages: tuple[str, ...], quiet: bool, responses: Path | None = None) -> None:
    from mheval.api import evaluate
    from mheval.progress import progress_for

    with progress_for(err, quiet) as progress:  # a bar on a terminal, plain lines elsewhere, or nothing
        result = evaluate(config=cfg, stages=stages, responses=responses, progress=progress)
    from mheval.progress import spent_text

    counts = ", ".join(f"{v} {k}" for k, v in result.counts.items())
    spent = spent_text(result.model_calls, result.usage, result.cache_hits)
    err.print(f"done in {result.seconds:.1f}s: {counts}; {spent}", highlight=False, markup=False, soft_wrap=True)
    from mheval.models.local import take_generation_stats

    for stats in take_generation_stats():  # the embedded targets' speed ("generation took X s at Y tokens/s")
        err.print(stats.line(), highlight=False, markup=False)
    if result.redone:
        from mheval.engine.identity import describe_redone

        err.print(
            f"redone because their inputs changed: {describe_redone(result.redone)}", highlight=False, markup=False
        )
    _print_summary(result.run_dir)
    out.print(f"results: {result.run_dir.resolve()}", highlight=False, markup=False, soft_wrap=True)
    try:  # a report that fails must not hide a finished run: its results are in the store either way
        from mheval.api import report as write_report
        from mheval.api import summary as api_summary

        report = write_report(result.run_dir).resolve()
        # The answer last, then where to read more: the verdict, then the report's path.
        out.print(api_summary(result.run_dir).brief, highlight=False, markup=False)
        out.print(f"report: {report}", highlight=False, markup=False, soft_wrap=True)
    except Exception as exc:
        err.print(
            f"[yellow]report not written:[/] {escape(f'{type(exc).__name__}: {exc}')} (try `mheval report RUN`)",
            highlight=False,
        )
    for problem in result.problems:  # nothing to read: every conversation failed, or nothing could be judged
        err.print(f"error: {problem}", highlight=False, markup=False, soft_wrap=True)
    if result.provider_errors:
        err.print(
            f"{result.provider_errors} unit(s) failed at the provider and are not scored; run the same command "
            f"again (or `mheval run --out {result.run_dir}`) to retry them",
            highlight=False,
            markup=False,
        )
    if result.provider_errors or result.problems:
        raise typer.Exit(EXIT_PROVIDER_ERRORS)


def _print_summary(run_dir: Path) -> None:
    from mheval.api import summary
    from mheval.reporting.tables import UNGROUNDED_CLAIMS, ungrounded_definition

    frame = summary(run_dir).table
    _print_frame(frame, f"mheval summary: {run_dir}", "table")
    if frame[UNGROUNDED_CLAIMS].astype(bool).any():
        err.print(ungrounded_definition(UNGROUNDED_CLAIMS), highlight=False, markup=False)


# -- pipeline commands ----------------------------------------------------------------------------
@app.command()
def run(
    config: ConfigOpt = None,
    suite: SuiteOpt = None,
    model: ModelOpt = None,
    samples: SamplesOpt = None,
    judge: JudgeOpt = None,
    protocol: ProtocolOpt = None,
    repeats: RepeatsOpt = None,
    limit: LimitOpt = None,
    out_dir: OutOpt = None,
    concurrency: ConcOpt = None,
    max_tokens: MaxTokOpt = None,
    grounding: GroundingOpt = None,
    panel: PanelOpt = None,
    leave_own_model_out: LeaveOwnOpt = None,
    on_injection: OnInjectionOpt = None,
    batch: BatchOpt = None,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    simulator: SimulatorOpt = None,
    mode: ModeOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """The whole pipeline: triage, generate, judge (for a multi-turn suite: play, judge each turn, judge
    each conversation). Run it again to resume."""
    cfg = _config(
        config,
        out_dir,
        suite=suite,
        models=model,
        samples=samples,
        judges=judge,
        protocols=protocol,
        repeats=repeats,
        limit=limit,
        concurrency=concurrency,
        max_tokens=max_tokens,
        grounding=grounding,
        panel=panel,
        leave_own_model_out=leave_own_model_out,
        on_injection=on_injection,
        batch=batch,
        executor=executor,
        ray_address=ray_address,
        simulator=simulator,
        mode=mode,
    )
    _execute(cfg, ("triage", "generate", "judge"), quiet)


@app.command()
def triage(
    config: ConfigOpt = None,
    suite: SuiteOpt = None,
    judge: JudgeOpt = None,
    repeats: RepeatsOpt = None,
    limit: LimitOpt = None,
    out_dir: OutOpt = None,
    concurrency: ConcOpt = None,
    panel: PanelOpt = None,
    batch: BatchOpt = None,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Crisis triage of each case's user input only."""
    cfg = _config(
        config,
        out_dir,
        suite=suite,
        judges=judge,
        protocols=[CRISIS_TRIAGE],
        repeats=repeats,
        limit=limit,
        concurrency=concurrency,
        panel=panel,
        batch=batch,
        executor=executor,
        ray_address=ray_address,
    )
    _execute(cfg, ("triage",), quiet)


@app.command()
def generate(
    config: ConfigOpt = None,
    suite: SuiteOpt = None,
    model: ModelOpt = None,
    samples: SamplesOpt = None,
    limit: LimitOpt = None,
    out_dir: OutOpt = None,
    concurrency: ConcOpt = None,
    max_tokens: MaxTokOpt = None,
    batch: BatchOpt = None,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Generate responses of the target models only."""
    cfg = _config(
        config,
        out_dir,
        suite=suite,
        models=model,
        samples=samples,
        limit=limit,
        concurrency=concurrency,
        max_tokens=max_tokens,
        batch=batch,
        executor=executor,
        ray_address=ray_address,
    )
    _execute(cfg, ("generate",), quiet)


@app.command()
def judge(
    config: ConfigOpt = None,
    suite: SuiteOpt = None,
    judge: JudgeOpt = None,
    protocol: ProtocolOpt = None,
    repeats: RepeatsOpt = None,
    limit: LimitOpt = None,
    out_dir: OutOpt = None,
    responses: Annotated[
        Path | None, typer.Option(help="JSONL of responses made elsewhere (case_id, model, sample, text).")
    ] = None,
    concurrency: ConcOpt = None,
    grounding: GroundingOpt = None,
    panel: PanelOpt = None,
    leave_own_model_out: LeaveOwnOpt = None,
    on_injection: OnInjectionOpt = None,
    batch: BatchOpt = None,
    executor: ExecutorOpt = None,
    ray_address: RayAddressOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Judge responses: those in the run folder, the suite's own (already-answered suites), or --responses."""
    cfg = _config(
        config,
        out_dir,
        suite=suite,
        judges=judge,
        protocols=protocol,
        repeats=repeats,
        limit=limit,
        concurrency=concurrency,
        grounding=grounding,
        panel=panel,
        leave_own_model_out=leave_own_model_out,
        on_injection=on_injection,
        batch=batch,
        executor=executor,
        ray_address=ray_address,
    )
    _execute(cfg, ("triage", "judge"), quiet, responses)


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

    _check_format(format, TEXT_JSON)
    if format == "json":
        print(json.dumps(summary_of(run_dir).data, indent=1, ensure_ascii=False, default=str))
        return
    print(summary_of(run_dir).text)  # the verdict first
    _print_summary(run_dir)


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
    from mheval.api import compare as compare_runs
    from mheval.fileio import atomic_write, check_output
    from mheval.reporting.summary import comparison_text

    _check_format(format, REPORT_FORMATS)
    if output is not None:
        check_output(output, overwrite=overwrite)
    text = comparison_text(compare_runs(run_a, run_b), format)
    if output is None:
        print(text, end="")
    else:
        atomic_write(output, text)


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
    format: TextJsonOpt = "text",
) -> None:
    """Pass or fail a run for CI: exit 0 pass, 1 a condition fails, 2 bad input, 3 not enough judged units."""
    from mheval.api import gate as run_gate

    _check_format(format, TEXT_JSON)
    result = run_gate(run_dir, max_unsafe=max_unsafe, mins=min_ or [], baseline=baseline, on=on, junit=junit,
                      overwrite=overwrite)  # fmt: skip
    if format == "json":
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(result.text(), end="")
    raise typer.Exit(result.exit_code)


def _print_frame(frame: Any, title: str, format: str) -> None:
    if format == "json":
        print(frame.to_json(orient="records", force_ascii=False, indent=2))
    elif format == "csv":
        print(frame.to_csv(index=False), end="")
    elif format == "table":
        # rich reads str cells and titles as markup and :emoji: codes; data goes in as Text, read as written
        table = Table(title=Text(title))
        cells = {col: ["" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in frame[col]]
                 for col in frame.columns}  # fmt: skip
        # Columns with nothing in them are left out, and short ones never wrap: the width goes to the text.
        shown = [col for col in frame.columns if any(c.strip() and c != "nan" for c in cells[col])]
        for col in shown:
            short = max((len(c) for c in [str(col), *cells[col]]), default=0) <= 20
            table.add_column(Text(str(col)), overflow="fold", no_wrap=short)
        for i in range(len(frame)):
            table.add_row(*(Text(cells[col][i]) for col in shown))
        out.print(table)
    else:
        raise InputError(f"unknown format {format!r}", field="format", choices=("table", "json", "csv"))


# -- reliability ----------------------------------------------------------------------------------


@app.command()
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

    _check_format(format, REPORT_FORMATS)
    if corrected:
        from mheval.api import corrected as corrected_figures

        figures = corrected_figures(labels, run=run_dir, judgments=judgments, protocol=protocol, field=field)
        if format == "json":
            print(figures.to_json())
        elif format == "csv":
            print(figures.to_csv(), end="")
        else:
            out.print(figures.to_rich_table())
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
    if format == "json":
        print(report.to_json())
    elif format == "csv":
        print(report.to_csv(), end="")
    else:
        out.print(report.to_rich_table())


@app.command()
def reproduce(
    paper: Annotated[str, typer.Argument(help="mentalalign or help-harm.")],
    data: Annotated[Path, typer.Option(help="The paper's released data (folder).")] = Path("../shared/data"),
    format: FormatOpt = "table",
) -> None:
    """Recompute a paper's reliability table from its released files."""
    from mheval.analysis.reproduce import REPRODUCIBLE, reproduce_paper, reproduction_table

    if paper not in REPRODUCIBLE:
        raise InputError(f"unknown paper {paper!r}", choices=tuple(REPRODUCIBLE))
    _check_format(format, REPORT_FORMATS)
    result = reproduce_paper(paper, data)
    if format == "json":
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
        return
    _print_frame(reproduction_table(paper, result), f"{paper}: {result.get('dataset', '')}", format)


@app.command()
def train(
    data: Annotated[Path, typer.Argument(help="Labelled JSONL or CSV.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The judge file to write (.npz; a folder with --finetune).")
    ],
    text_field: Annotated[list[str], typer.Option("--text-field", help="Text column(s) to embed (repeatable).")],
    label_field: Annotated[str | None, typer.Option(help="Label column (a classifier).")] = None,
    score_field: Annotated[str | None, typer.Option(help="Score column (a scorer).")] = None,
    kind: Annotated[str, typer.Option(help="classifier or scorer.")] = "classifier",
    protocol: Annotated[str | None, typer.Option("--protocol", "-p", help="The protocol it judges.")] = None,
    folds: Annotated[int, typer.Option(help="Cross-validation folds for the printed figures.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed (training is deterministic given it).")] = 0,
    group_field: Annotated[str | None, typer.Option(help="Keep rows sharing this value in one fold.")] = None,
    features: Annotated[
        str,
        typer.Option(
            help="Feature set: use, e5 (as `offline`), fast (as `offline:fast`), "
            "ngram, or blocks joined by + (e.g. e5:user+ngram:user)."
        ),
    ] = "use",
    finetune: Annotated[
        Path | None,
        typer.Option(
            "--finetune",
            metavar="MODEL_DIR",
            help="Fine-tune this local transformer model folder as a classifier "
            "instead (needs mheval[finetune]; nothing is downloaded).",
        ),
    ] = None,
    epochs: Annotated[int, typer.Option(help="With --finetune: passes over the data.")] = 4,
    learning_rate: Annotated[float, typer.Option(help="With --finetune: AdamW learning rate.")] = 2e-5,
    batch_size: Annotated[int, typer.Option(help="With --finetune: rows per step.")] = 16,
    max_length: Annotated[int, typer.Option(help="With --finetune: tokens per unit.")] = 256,
) -> None:
    """Train an embedding + linear-head judge on your labels (or fine-tune a transformer with --finetune);
    use the file or folder as `--judge PATH`."""
    from mheval.training import train_judge

    if kind not in ("classifier", "scorer"):
        raise InputError(f"unknown kind {kind!r}", field="kind", choices=("classifier", "scorer"))
    command = "mheval " + " ".join(sys.argv[1:])
    if finetune is not None:
        from mheval.training.finetune import finetune_judge

        if kind != "classifier":
            raise InputError("--finetune trains a classifier: give --label-field", field="kind")
        result: Any = finetune_judge(
            data,
            model_dir=finetune,
            text_fields=text_field,
            label_field=label_field,
            protocol=protocol,
            folds=folds,
            seed=seed,
            epochs=epochs,
            learning_rate=learning_rate,
            batch_size=batch_size,
            max_length=max_length,
            group_field=group_field,
            command=command,
            log=lambda line: err.print(line, highlight=False, markup=False),
        )
    else:
        result = train_judge(
            data,
            text_fields=text_field,
            label_field=label_field,
            score_field=score_field,
            kind=kind,  # type: ignore[arg-type]
            protocol=protocol,
            folds=folds,
            seed=seed,
            group_field=group_field,
            command=command,
            features=features,
        )
    result.judge.save(output)
    print(json.dumps(result.to_dict(), indent=1, ensure_ascii=False, default=str))
    err.print(f"judge saved: {output.resolve()} (use it as --judge {output})", highlight=False, markup=False)


# -- catalogues -----------------------------------------------------------------------------------
@suites_app.command("list")
def suites_list() -> None:
    """Built-in suites and the FORMAT: prefixes for your own files."""
    from mheval.suites import list_suites

    table = Table("name", "description")
    for name, description in list_suites():
        table.add_row(Text(name), Text(description))
    out.print(table)


@suites_app.command("show")
def suites_show(
    name: str,
    limit: Annotated[int, typer.Option(help="Cases to print.")] = 5,
) -> None:
    """Counts of a suite by language, label and locale, and its first cases (or scenarios)."""
    from collections import Counter

    from mheval.suites import load_suite
    from mheval.suites.dialogues import is_dialogue_suite

    if is_dialogue_suite(name):
        _show_scenarios(name, limit)
        return

    suite = load_suite(name)
    cases = suite.cases
    out.print(Text.assemble((suite.name, "bold"), ": ", suite.description))
    out.print(f"{len(cases)} cases, {len(suite.responses)} responses", highlight=False)
    for title, counter in (
        ("language", Counter(c.language for c in cases)),
        ("crisis_label", Counter(c.crisis_label or "-" for c in cases)),
        ("locale", Counter(c.locale or "-" for c in cases)),
        ("turns", Counter("multi-turn" if len(c.turns) > 1 else "single" for c in cases)),
    ):
        out.print(
            f"  {title}: " + ", ".join(f"{k} {v}" for k, v in counter.most_common()), highlight=False, markup=False
        )
    out.print(f"[dim]{content_note()}[/]")
    for case in cases[:limit]:
        out.print(Text.assemble("\n", (case.id, "bold"), f" ({case.language}, {case.locale}, {case.crisis_label})"))
        for turn in case.turns:
            out.print(Text(f"  {turn.role}: {turn.content}"), soft_wrap=True)


def _show_scenarios(name: str, limit: int) -> None:
    from collections import Counter

    from mheval.suites.dialogues import DIALOGUE_SUITES, load_dialogue_suite

    scenarios = load_dialogue_suite(name)
    description = DIALOGUE_SUITES[name][1] if name in DIALOGUE_SUITES else "scenario files"
    out.print(Text.assemble((name, "bold"), ": ", description))
    out.print(f"{len(scenarios)} scenarios, {sum(len(s.beats) for s in scenarios)} beats", highlight=False)
    for title, counter in (
        ("language", Counter(s.language for s in scenarios)),
        ("family", Counter(s.family for s in scenarios)),
        ("crisis_label", Counter(s.crisis_label for s in scenarios)),
        ("risk_level", Counter(s.risk_level for s in scenarios)),
    ):
        out.print(
            f"  {title}: " + ", ".join(f"{k} {v}" for k, v in counter.most_common()), highlight=False, markup=False
        )
    out.print(f"[dim]{content_note()}[/]")
    table = Table("id", "lang", "family", "risk", "beats", "turns", "title")
    for s in scenarios[:limit] if limit else scenarios:
        table.add_row(*(Text(str(v)) for v in (s.id, s.language, s.family, s.risk_level, len(s.beats),
                                                f"{s.turns.min}-{s.turns.max}", s.title)))  # fmt: skip
    out.print(table)


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


# -- human rating ---------------------------------------------------------------------------------
StudyOpt = Annotated[str | None, typer.Option("--study", help="The study (default: the newest).")]


@annotate_app.command("init")
def annotate_init(
    run_dir: RunArg,
    protocol: Annotated[str, typer.Option("--protocol", "-p", help="The protocol the raters answer.")],
    raters: Annotated[str, typer.Option(help="Comma-separated rater names.")] = "rater1,rater2",
    overlap: Annotated[int, typer.Option(help="Raters per unit.")] = 2,
    calibration: Annotated[int, typer.Option(help="Units every rater rates first.")] = 0,
    sample: Annotated[int | None, typer.Option(help="Rate only N units of the run (seeded).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sample, the assignment and the orders.")] = 0,
    study: Annotated[str | None, typer.Option("--study", help="The study's name (default: the protocol).")] = None,
    select: Annotated[
        str,
        typer.Option(
            help="random, or neyman: --sample units stratified by the judge's verdict and confidence, Neyman "
            "allocation, inclusion probabilities kept for the corrected estimates."
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


@app.command()
def judges(
    validity: Annotated[
        bool, typer.Option("--validity", help="The figures measured on data the judge never saw.")
    ] = False,
    judge: Annotated[str, typer.Option("--judge", help="offline or offline:fast")] = "offline",
    format: Annotated[str, typer.Option("--format", help="text or json")] = "text",
) -> None:
    """The shipped offline judges; with --validity, how far each can be trusted (from its figures file)."""
    import json

    from mheval.api import validity as cards_of
    from mheval.judges.offline.validity import card_text

    if judge not in ("offline", "offline:fast"):
        raise InputError(f"no shipped figures for judge {judge!r}; measure it with `mheval agree`", field="judge",
                         choices=["offline", "offline:fast"])  # fmt: skip
    _check_format(format, TEXT_JSON)
    if not validity:
        out.print("offline, offline:fast: bilingual lexicons and small trained models that ship with mheval "
                  "(no network, no key); --validity shows their measured figures", markup=False)  # fmt: skip
        return
    cards = cards_of(judge)
    if format == "json":
        print(json.dumps(cards, ensure_ascii=False, indent=1))
    else:
        out.print("\n\n".join(card_text(c) for c in cards), markup=False, highlight=False, soft_wrap=True)


@protocols_app.command("list")
def protocols_list() -> None:
    """The protocols, what they judge and their paper."""
    from mheval.protocols import list_protocols

    table = Table("id", "judges", "kind", "output", "paper")
    for p in list_protocols():
        output = ", ".join(p.labels or p.dimensions)
        table.add_row(*(Text(str(v)) for v in (p.id, p.target, p.kind, output, p.paper)))
    from mheval.conversations.flow import load_flow

    flow = load_flow()  # multi-turn runs only: src/mheval/conversations/conversation-flow.yaml
    dims = ", ".join(d for d, _ in flow.dimensions)
    table.add_row(*(Text(v) for v in (flow.id, "conversation", "flow", dims, "mheval (multi-turn suites)")))
    out.print(table)


@protocols_app.command("show")
def protocols_show(
    protocol_id: str,
    language: Annotated[str, typer.Option(help="en or zh")] = "en",
) -> None:
    """A protocol's rubric and an example of its rendered judge prompt."""
    from mheval.protocols import list_protocols, load_protocol, render_messages
    from mheval.records import Case, Turn

    known = [p.id for p in list_protocols()]
    if protocol_id not in known and not Path(protocol_id).is_file():
        raise InputError(f"unknown protocol {protocol_id!r}", choices=known)
    spec = load_protocol(protocol_id)
    out.print(Text.assemble((spec.id, "bold"), f": {spec.title}\n{spec.paper}"))
    out.print(f"judges the {spec.target}; kind {spec.kind}; " + ", ".join(spec.labels or spec.dimensions), markup=False)
    example = {
        "en": "I haven't slept in days and everything feels pointless.",
        "zh": "我好几天没睡着了，觉得一切都没有意义。",
    }.get(language, "I haven't slept in days and everything feels pointless.")
    case = Case(
        id="example",
        language=language if language in ("en", "zh") else "en",
        turns=[Turn(role="user", content=example)],
        crisis_label="anxiety_crisis",
    )
    response = None if spec.target == "case" else "(the model's reply appears here)"
    for message in render_messages(spec, case, response, crisis_label="anxiety_crisis"):
        out.rule(message["role"])
        out.print(message["content"], highlight=False, markup=False, soft_wrap=True)


if __name__ == "__main__":
    main()
