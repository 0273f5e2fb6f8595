"""The options and arguments several commands share, defined once (typer reads them from the annotations)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from mheval.errors import InputError

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
# Recorded conversations (`--suite transcripts:PATH`, docs/transcripts.md).
RolesOpt = Annotated[
    str | None,
    typer.Option(
        "--roles",
        help="Recorded conversations: the role names of each side, e.g. user=Patient,assistant=Bot (a side "
        "given replaces its defaults: user, human / assistant, agent, bot).",
    ),
]
ModelNameOpt = Annotated[
    str | None,
    typer.Option(
        "--model-name", help="Recorded conversations: the model name when a record has none (default: the file's name)."
    ),
]
ExpectOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--expect",
        help="Recorded conversations: expectations for every conversation, must=ID,... or must_not=ID,... "
        "(repeatable; a record's own metadata.expect wins).",
    ),
]
SkipBadOpt = Annotated[
    bool | None,
    typer.Option(
        "--skip-bad/--no-skip-bad",
        help="Recorded conversations: skip a bad conversation and count it, with its reason, instead of stopping "
        "with exit code 2 (nothing is judged in part either way).",
    ),
]
# Personal data (src/mheval/redaction.py, docs/redaction.md).
RedactOpt = Annotated[
    str | None,
    typer.Option(
        "--redact",
        help="Mask names, e-mail addresses, phone numbers (crisis lines kept), street addresses and URLs before "
        "any judge or simulator reads a text: judge, or store (also keep the masked texts in the run folder); "
        "off by default. Needs pip install 'mheval[redact]'.",
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
StudyOpt = Annotated[str | None, typer.Option("--study", help="The study (default: the newest).")]
ResponsesOpt = Annotated[
    Path | None, typer.Option(help="JSONL of responses made elsewhere (case_id, model, sample, text).")
]

# The flags of the stage commands (run, triage, generate, judge), with their defaults, in the order --help lists
# them. Each is a run-config field under its command-line name, so a command hands them on whole.
STAGE_FLAGS: dict[str, tuple[Any, Any]] = {
    "config": (ConfigOpt, None),
    "suite": (SuiteOpt, None),
    "model": (ModelOpt, None),
    "samples": (SamplesOpt, None),
    "judge": (JudgeOpt, None),
    "protocol": (ProtocolOpt, None),
    "repeats": (RepeatsOpt, None),
    "limit": (LimitOpt, None),
    "out_dir": (OutOpt, None),
    "responses": (ResponsesOpt, None),
    "concurrency": (ConcOpt, None),
    "max_tokens": (MaxTokOpt, None),
    "grounding": (GroundingOpt, None),
    "panel": (PanelOpt, None),
    "leave_own_model_out": (LeaveOwnOpt, None),
    "on_injection": (OnInjectionOpt, None),
    "batch": (BatchOpt, None),
    "executor": (ExecutorOpt, None),
    "ray_address": (RayAddressOpt, None),
    "simulator": (SimulatorOpt, None),
    "mode": (ModeOpt, None),
    "roles": (RolesOpt, None),
    "model_name": (ModelNameOpt, None),
    "expect": (ExpectOpt, None),
    "skip_bad": (SkipBadOpt, None),
    "redact": (RedactOpt, None),
    "quiet": (QuietOpt, False),
}

Command = TypeVar("Command", bound=Callable[..., None])


def takes_flags(*names: str) -> Callable[[Command], Command]:
    """Give a command written as `def command(**flags)` the named STAGE_FLAGS as its parameters, in the table's
    order: typer reads a function's parameters from its signature, and `__signature__` is where it looks first."""
    unknown = sorted(set(names) - STAGE_FLAGS.keys())
    if unknown:
        raise ValueError(f"not stage flags: {unknown}")  # a mistake in this package's own commands

    def give(command: Command) -> Command:
        parameters = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            for name, (annotation, default) in STAGE_FLAGS.items()
            if name in names
        ]
        command.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        return command

    return give


def check_format(format: str, choices: tuple[str, ...]) -> None:
    """The one check of a --format value, naming the choices."""
    if format not in choices:
        raise InputError(f"unknown format {format!r}", field="format", choices=choices)
