"""The Python API: what the `mheval` command does, callable from a script, a notebook or another harness.

    import mheval
    results = mheval.evaluate(
        cases=[{"id": "a", "text": "I can't see a way forward anymore."}],
        models=["vllm/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1"],
        judges=["offline"],
        protocols=["crisis-triage", "psycrisis"],
    )
    results.summary          # one row per protocol x model: the headline figures
    results.judgments        # every judgment, one row each (a pandas DataFrame)

Everything is checked before anything is written (as on the command line), the same call again resumes
and makes no model call for finished work, and `evaluate` also works inside a running event loop (a
Jupyter cell); `evaluate_async` is the same for async code.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from mheval.config import STAGES, RunConfig, build_config, load_config
from mheval.engine.runner import ProgressSink, RunResult, execute, plan_run, run_coroutine
from mheval.errors import InputError
from mheval.labels import APPROPRIATENESS, CRISIS_TRIAGE, DIALOGUE_SAFETY, MENTALALIGN, PSYCRISIS
from mheval.records import Case, Response
from mheval.runfolder.store import Store
from mheval.suites import Suite

if TYPE_CHECKING:
    import pandas as pd

    from mheval.analysis.agree import AgreementReport
    from mheval.analysis.corrected import CorrectedReport
    from mheval.gating import GateResult
    from mheval.reporting.rundata import RunData
    from mheval.reporting.tables import ReportTables

CaseLike = Case | Mapping[str, Any]
SuiteLike = str | Suite | Sequence[CaseLike]
# A target: a spec string, or a Python function or class (models/python_target.py).
TargetLike = str | Callable[..., Any]
P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class EvalResults(RunResult):
    """A run folder's results: what this call did (the RunResult counts; zero for a run reopened with
    `open_run`), the resolved config, and the tables, read from the folder when first asked for."""

    config: RunConfig = field(default_factory=RunConfig)

    def _read(self, table: str) -> pd.DataFrame:
        from mheval.runfolder.export import table_frame

        with Store.open_existing(self.run_dir) as store:
            return table_frame(store, table)

    @cached_property
    def cases(self) -> pd.DataFrame:
        """One row per case."""
        return self._read("cases")

    @cached_property
    def responses(self) -> pd.DataFrame:
        """One row per response (model x case x sample), failed calls included with their error."""
        return self._read("responses")

    @cached_property
    def judgments(self) -> pd.DataFrame:
        """One row per judgment; `status` is `ok` or `unscored` with its `reason`."""
        return self._read("judgments")

    @cached_property
    def summary(self) -> pd.DataFrame:
        """The headline figures (what `mheval summary` prints), one row per protocol and model."""
        from mheval.reporting.tables import summary_frame

        with Store.open_existing(self.run_dir) as store:
            return summary_frame(store)

    @cached_property
    def cost_usd(self) -> float:
        """What the run's model calls cost in all, by the price table (0 for local models)."""
        with Store.open_existing(self.run_dir) as store:
            spent = sum(r.usage.cost_usd for r in store.responses())
            return spent + sum(j.usage.cost_usd for j in store.iter_judgments())

    def report(self, output: str | Path | None = None, *, redact: bool = False, overwrite: bool = False) -> Path:
        """Write the HTML report (see `mheval.report`)."""
        return report(self.run_dir, output=output, redact=redact, overwrite=overwrite)


def _parameters_of(source: Callable[P, Any]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Give a function written as `(*args, **kwargs)` the parameters of `source`, which it hands them to: to
    `inspect.signature` (help(), editors, documentation) and to type checkers alike."""

    def give(function: Callable[..., R]) -> Callable[P, R]:
        function.__signature__ = inspect.signature(source).replace(  # type: ignore[attr-defined]
            return_annotation=inspect.signature(function).return_annotation
        )
        return function

    return give


async def evaluate_async(
    suite: SuiteLike | None = None,
    *,
    cases: Sequence[CaseLike] | None = None,
    models: Sequence[TargetLike] | TargetLike | None = None,
    judges: Sequence[str] | str | None = None,
    protocols: Sequence[str] | str | None = None,
    out: str | Path | None = None,
    stages: Sequence[str] = STAGES,
    responses: Sequence[Response | Mapping[str, Any]] | str | Path | None = None,
    config: RunConfig | str | Path | None = None,
    progress: ProgressSink | None = None,
    **options: Any,
) -> EvalResults:
    """`evaluate` for async code: `await mheval.evaluate_async(...)`."""
    if suite is not None and cases is not None:
        raise InputError("give either a suite or cases, not both", field="cases")
    given = suite if suite is not None else cases
    in_memory = _suite_in_memory(given)
    overrides = {
        **options,
        "models": _targets(models),
        "judges": _listed(judges),
        "protocols": _listed(protocols),
        "out": str(out) if out is not None else None,
        "suite": in_memory.name if in_memory is not None else given,
    }
    run_config = resolve_config(config, overrides)
    extra = _responses(responses)
    plan = plan_run(run_config, tuple(stages), extra, suite=in_memory)
    result = await execute(plan, progress)
    return EvalResults(**vars(result), config=run_config)


@_parameters_of(evaluate_async)
def evaluate(*args: Any, **kwargs: Any) -> EvalResults:
    """Evaluate models on a suite: triage the cases, generate replies, judge them; returns the results.

    `suite` is a built-in name (`"crisis-core"`), `"FORMAT:PATH"`, a `Suite`, or a list of `Case` or
    dicts (`id`, `text` or `turns`, optional `language`, `crisis_label`, `locale`, `response`); `cases=`
    is the same as a list. `models`, `judges` and `protocols` are specs as on the command line; a model may
    also be a Python function or class (an application target: it gets the conversation so far as a list of
    {"role", "content"} and returns the reply; docs/app-targets.md), stored as `python:MODULE:NAME`. `out` is
    the run folder (default `runs/<suite>-<hash>`); when it already holds a run, its own config is the
    base and what is given here changes it. `config` is a `RunConfig` or a YAML file; any other keyword
    is a `RunConfig` field (samples, repeats, limit, concurrency, max_tokens, grounding, on_injection, ...).
    `stages` picks some of triage, generate and judge. `responses` are replies made elsewhere, to judge.

    Raises `mheval.InputError` for bad input, before anything is written. Works inside a running event
    loop too (it then runs on a loop of its own in a worker thread).
    """
    return run_coroutine(evaluate_async(*args, **kwargs))


def closing_lines(result: EvalResults) -> list[str]:
    """What `mheval run` (and triage, generate, judge) says when its stages end, before the run's table: the time,
    the counts and what the calls spent; what `--redact` masked in the texts the judges read; each embedded
    server's generation speed (taken once: a second call for another run no longer holds them); the
    conversations an import skipped, with why; and which units were redone because their inputs changed."""
    from mheval.models.local import take_generation_stats
    from mheval.progress import spent_text

    counts = ", ".join(f"{v} {k}" for k, v in result.counts.items())
    lines = [
        f"done in {result.seconds:.1f}s: {counts}; {spent_text(result.model_calls, result.usage, result.cache_hits)}"
    ]
    if result.config.redact != "off":
        from mheval.engine.redacting import describe, read

        masked = describe(read(result.run_dir))
        if masked:
            lines.append(masked)
    lines += [stats.line() for stats in take_generation_stats()]
    lines += result.notes
    if result.redone:
        from mheval.engine.identity import describe_redone

        lines.append(f"redone because their inputs changed: {describe_redone(result.redone)}")
    return lines


def problem_lines(result: EvalResults) -> list[str]:
    """What `mheval run` says last when a run cannot be read whole (it then exits with 3): why nothing could be
    read (every conversation failed, nothing could be judged), and how many units failed at the provider and how
    to retry them. Empty for a run without problems."""
    lines = [f"error: {problem}" for problem in result.problems]
    if result.provider_errors:
        lines.append(
            f"{result.provider_errors} unit(s) failed at the provider and are not scored; run the same command "
            f"again (or `mheval run --out {result.run_dir}`) to retry them"
        )
    return lines


def resolve_config(config: RunConfig | str | Path | None, overrides: Mapping[str, Any]) -> RunConfig:
    """The run's config: `config` (a RunConfig or YAML file), else the run folder's own config.yaml when
    `out` names an existing run, else the defaults; then every override that is not None."""
    given = {k: v for k, v in overrides.items() if v is not None and v != []}
    if isinstance(config, RunConfig):
        return build_config({**config.model_dump(), **given})
    if config is not None:
        return load_config(config, given)
    out = given.get("out")
    if out is not None and (Path(out) / "config.yaml").is_file():
        return load_config(Path(out) / "config.yaml", given)
    return build_config(given)


def open_run(path: str | Path) -> EvalResults:
    """Reopen a run folder: its config, counts and tables, as `evaluate` returned them."""
    run_dir = Path(path)
    with Store.open_existing(run_dir) as store:
        stored = store.get_meta("config")
        counts = {t: store.count(t) for t in ("cases", "responses", "judgments")}
        provider_errors = store.provider_errors()
    config = build_config(stored, source=run_dir / "run.db") if stored else RunConfig(out=str(run_dir))
    return EvalResults(run_dir=run_dir, config=config, counts=counts, provider_errors=provider_errors)


def agree(
    labels: str | Path | pd.DataFrame,
    *,
    run: str | Path | None = None,
    judgments: str | Path | pd.DataFrame | None = None,
    protocol: str | None = None,
    dimension: str | None = None,
    field: str | None = None,
    unit: str = "item",
    leave_own_model_out: bool = False,
) -> AgreementReport:
    """Human-vs-human agreement and each judge's agreement with the humans, with verdicts.

    `labels` is a human-labels file (CSV/JSONL, long or wide) or a DataFrame of it; the judgments come
    from a run folder (`run=`) or a judgments export (`judgments=`, a file or DataFrame). The report's
    `to_json()`, `to_csv()` and `to_rich_table()` give it as the command line prints it.
    """
    from mheval.analysis import agreement_report

    human, judge_frame, _, _ = _agree_inputs(labels, run, judgments, protocol, field)
    return agreement_report(human, judge_frame, dimension=dimension, protocol=protocol, unit=unit,
                            leave_own_model_out=leave_own_model_out)  # fmt: skip


def corrected(
    labels: str | Path | pd.DataFrame,
    *,
    run: str | Path | None = None,
    judgments: str | Path | pd.DataFrame | None = None,
    protocol: str | None = None,
    field: str | None = None,
) -> CorrectedReport:
    """Judge-error-corrected figures (PPI++, and Rogan-Gladen for binary measures) per measure, model and judge.

    The inputs are those of `agree`; a run folder with a stratified study (`annotate init --select neyman`)
    gives stratified estimates. See `mheval.analysis.corrected`.
    """
    from mheval.analysis.corrected import corrected_report

    human, judge_frame, study_protocol, strata = _agree_inputs(labels, run, judgments, protocol, field)
    if judge_frame is None:
        raise InputError("corrected estimates need the judges' judgments: give --run or --judgments", field="run")
    names = sorted({str(p) for p in judge_frame["protocol"].dropna()}) if "protocol" in judge_frame.columns else []
    chosen = protocol or study_protocol or (names[0] if len(names) == 1 else None)
    if chosen is None:
        raise InputError("judgments from several protocols: pick one", field="protocol", choices=names)
    return corrected_report(human, judge_frame, protocol=chosen, strata=strata)


def _agree_inputs(
    labels: str | Path | pd.DataFrame,
    run: str | Path | None,
    judgments: str | Path | pd.DataFrame | None,
    protocol: str | None,
    field: str | None,
) -> tuple[pd.DataFrame, pd.DataFrame | None, str | None, dict[tuple[str, str, str], str] | None]:
    """The human labels, the judges' judgments (human rows left out), the study's protocol and its strata."""
    import pandas as pd

    from mheval.analysis.agree.humans import read_labels, without_humans
    from mheval.analysis.judgments import load_judgments

    study_protocol, strata = None, None
    if not isinstance(labels, pd.DataFrame) and (Path(labels) / "studies.db").is_file():
        # A run folder with an `mheval annotate` study: its raters are the humans, its judges the judges.
        human, study_protocol, strata = _study_labels(Path(labels), protocol)
        run = run if run is not None or judgments is not None else labels
    else:
        human = labels if isinstance(labels, pd.DataFrame) else read_labels(labels, field=field)
    if isinstance(judgments, pd.DataFrame):
        if run is not None:
            raise InputError("give either run= or judgments=, not both", field="judgments")
        judge_frame: pd.DataFrame | None = judgments
    else:
        judge_frame = load_judgments(run_dir=run, path=judgments, protocol=protocol or study_protocol)
    return human, without_humans(judge_frame), study_protocol, strata


def _study_labels(
    run_dir: Path, protocol: str | None
) -> tuple[pd.DataFrame, str, dict[tuple[str, str, str], str] | None]:
    """The newest study of `protocol`: its ratings as labels, its protocol, and its strata when stratified."""
    from mheval.annotate import Study, human_labels, list_studies

    studies = list_studies(run_dir)
    for study_id in reversed(studies):
        study = Study.open(run_dir, study_id)
        try:
            if protocol is None or study.protocol == protocol:
                frame = human_labels(study)
                if frame.empty:
                    raise InputError(f"study {study_id} has no finished ratings yet", path=run_dir)
                design = study.design()
                strata = None
                if design is not None:
                    strata = {(c, m, str(n) if n >= 0 else ""): st for (c, m, n), (st, _) in design[1].items()}
                return frame, study.protocol, strata
        finally:
            study.close()
    raise InputError(f"no study of protocol {protocol!r} in this run", path=run_dir, field="protocol",
                     choices=studies)  # fmt: skip


def gate(
    run: str | Path | EvalResults,
    *,
    max_unsafe: float | None = None,
    mins: Mapping[str, float] | Sequence[str] | None = None,
    baseline: str | Path | EvalResults | None = None,
    on: str = "upper",
    junit: str | Path | None = None,
    overwrite: bool = False,
    corrected: bool = False,
) -> GateResult:
    """Pass or fail a run for CI, as `mheval gate` does: every model's unsafe rate (verdict.py; the unsafe
    conversation rate of a multi-turn run) at or under `max_unsafe`, each `mins` measure
    (`{"psycrisis": 3, "psycrisis.risk_assessment": 0.6}`, or the command line's `["psycrisis=3"]`) at or over
    its minimum, and, given a `baseline` run, no regression that compare's paired test finds significant.
    `on="upper"` decides on the 95% intervals' conservative bounds, `on="point"` on the point estimates.
    `corrected=True` decides the unsafe-conversation rate (and its regression against `baseline`) on the rate
    corrected for the judge's errors by people's ratings of conversations (the run's conversation-flow study,
    PPI++ with its 95% interval) instead of the judge's own count; without such ratings it raises InputError.
    `junit` is a JUnit XML file to write (checked before the run is read; replaced only with `overwrite`).
    The result's `exit_code` is 0 pass, 1 fail, 3 not enough judged units; bad input raises InputError (2).
    See docs/gate.md."""
    from mheval.fileio import check_output
    from mheval.gating import gate as run_gate
    from mheval.gating import parse_min

    if junit is not None:
        check_output(junit, overwrite=overwrite, option="--junit")
    if mins is not None and not isinstance(mins, Mapping):
        mins = dict(parse_min(m) for m in mins)
    base_dir = baseline.run_dir if isinstance(baseline, EvalResults) else baseline
    result = run_gate(_run_dir(run), max_unsafe=max_unsafe, mins=mins, baseline=base_dir, on=on, corrected=corrected)
    if junit is not None:
        result.write_junit(junit, overwrite=overwrite)
    return result


def report(
    run: str | Path | EvalResults | RunSummary, output: str | Path | None = None, *, redact: bool = False,
    overwrite: bool = False,
) -> Path:  # fmt: skip
    """Write a run's self-contained HTML report (and its tables beside it); returns the report's path.

    By default it is `report.html` in the run folder (renewed each time); an `output` elsewhere is never
    written over an existing file unless `overwrite` is set. A RunSummary's run, already read, is not read
    again.
    """
    from mheval.reporting.html import write_report

    target = run.run if isinstance(run, RunSummary) else _run_dir(run)
    return write_report(target, redact=redact, output=Path(output) if output is not None else None,
                        overwrite=overwrite)  # fmt: skip


@dataclass
class RunSummary:
    """What `mheval summary` shows of a run folder, each part made when first asked for: `text` (the verdict
    first, then the headline numbers, as plain text), `table` (one row per protocol, model and judge) with
    `table_notes` (the definitions printed under it), `data` (all of it as plain JSON values, `--format json`)
    and `brief` (the verdict in one line). The run is read once (`run`, a `mheval.reporting.rundata.RunData`),
    whichever parts are asked for."""

    run_dir: Path

    @cached_property
    def run(self) -> RunData:
        """The run as read from its folder, once (raises InputError when it is not a run folder)."""
        from mheval.reporting.rundata import load_run

        return load_run(self.run_dir)

    @cached_property
    def _tables(self) -> ReportTables:
        from mheval.reporting.tables import report_tables

        return report_tables(self.run)

    @cached_property
    def text(self) -> str:
        """The verdict, then the run's headline numbers, as plain text."""
        from mheval.reporting.summary import summary_text

        return summary_text(self.run, tables=self._tables)

    @cached_property
    def table(self) -> pd.DataFrame:
        """The headline figures, one row per protocol, model and judge (`EvalResults.summary`)."""
        from mheval.reporting.tables import summary_frame

        return summary_frame(self.run)

    @cached_property
    def table_notes(self) -> list[str]:
        """What a reader of `table` needs defined, one line each: the ungrounded-claims column, when it holds a
        value (what `mheval summary` prints under the table)."""
        from mheval.reporting.ungrounded import UNGROUNDED_CLAIMS, ungrounded_definition

        shown = self.table[UNGROUNDED_CLAIMS].astype(bool).any()
        return [ungrounded_definition(UNGROUNDED_CLAIMS)] if shown else []

    @cached_property
    def data(self) -> dict[str, Any]:
        """The verdict, the run's facts, the table and the multi-turn figures, as plain JSON values."""
        from mheval.reporting.summary import summary_data

        return summary_data(self.run, tables=self._tables)

    @cached_property
    def brief(self) -> str:
        """The verdict in one line (what `mheval run` prints last)."""
        from mheval.reporting.summary import run_verdict
        from mheval.reporting.verdict_view import verdict_brief

        return verdict_brief(run_verdict(self.run))


def summary(run: str | Path | EvalResults) -> RunSummary:
    """A run's summary, as `mheval summary` prints it: the verdict (how many replies were unsafe), the headline
    numbers, and the protocol x model x judge table, of a finished or partial run. Each part is read when
    first asked for; reading one raises InputError when `run` is not a run folder."""
    return RunSummary(_run_dir(run))


def compare(
    run_a: str | Path | EvalResults, run_b: str | Path | EvalResults, *, n_boot: int | None = None, seed: int = 0
) -> pd.DataFrame:
    """Run B against run A, as `mheval compare` shows it: per model and crisis category (per scenario family
    for conversations), B minus A of the unsafe rate, mean appropriateness, harmful rate and PsyCrisis total,
    with a 95% interval, and a paired test where the two runs share cases. Where people rated replies (or whole
    conversations) of both runs, also B minus A of the corrected unsafe rates (`unsafe_rate_corrected`,
    `unsafe_conversations_corrected`: PPI++ estimates, a normal interval and z test). One row per model, metric
    and category; swapping the runs negates the differences and their intervals. See `mheval.reporting.compare`."""
    from mheval.reporting.compare import DEFAULT_N_BOOT, compare_runs

    return compare_runs(_run_dir(run_a), _run_dir(run_b), n_boot=DEFAULT_N_BOOT if n_boot is None else n_boot,
                        seed=seed)  # fmt: skip


COMPARE_FORMATS = ("table", "json", "csv")
"""The forms `compare_text` gives: an aligned text table, JSON records, or CSV."""


def compare_text(
    run_a: str | Path | EvalResults,
    run_b: str | Path | EvalResults,
    *,
    format: str = "table",
    output: str | Path | None = None,
    overwrite: bool = False,
    n_boot: int | None = None,
    seed: int = 0,
) -> str:
    """`compare`'s rows as `mheval compare` prints them: an aligned table, JSON records or CSV (a text cell that
    a spreadsheet would read as a formula is neutralised). With `output` the text is also written there
    (atomically; never over an existing file unless `overwrite`). The format and the output are checked, with
    InputError, before either run is read."""
    from mheval.fileio import atomic_write, check_output
    from mheval.reporting.summary import comparison_text

    if format not in COMPARE_FORMATS:
        raise InputError(f"unknown format {format!r}", field="format", choices=COMPARE_FORMATS)
    if output is not None:
        check_output(output, overwrite=overwrite)
    text = comparison_text(compare(run_a, run_b, n_boot=n_boot, seed=seed), format)
    if output is not None:
        atomic_write(Path(output), text)
    return text


def export(
    run: str | Path | EvalResults,
    *,
    table: str | None = None,
    format: str = "jsonl",
    output: str | Path | None = None,
    overwrite: bool = False,
) -> Path | str:
    """Export one table of a run, as `mheval export` does: `cases`, `responses`, `judgments` (the default),
    `verdicts`, `exchanges` or `conversations`, as `jsonl`, `csv` or `parquet`, or the conversations as chat
    messages (`messages`, whose default table is `exchanges`). With `output` the file is written (never over
    a run's own file, nor over an existing one unless `overwrite`) and its path returned; without it the
    text is returned (parquet needs an `output`). Bad input raises InputError before anything is read."""
    from mheval.runfolder.export import default_table, export_table

    with Store.open_existing(_run_dir(run)) as store:
        text = export_table(store, table or default_table(format), format, output, overwrite=overwrite)
    if text is not None:
        return text
    assert output is not None  # export_table returns the text when there is no output
    return Path(output)


def transcript(
    run: str | Path | EvalResults, scenario: str, *, model: str | None = None, sample: int | None = None
) -> str:
    """One conversation of a multi-turn run as plain text, as `mheval transcript` prints it: every turn with
    its verdicts and the whole conversation's outcome, for each target model and sample (or only `model`,
    `sample`). Raises InputError when the run has no conversations or none of `scenario`."""
    from mheval.reporting.multiturn import transcript_text

    return transcript_text(_run_dir(run), scenario, model=model, sample=sample)


def judge_transcripts(
    path: str | Path,
    *,
    judges: Sequence[str] | str | None = None,
    protocols: Sequence[str] | str | None = None,
    out: str | Path | None = None,
    roles: Mapping[str, Sequence[str]] | str | None = None,
    model_name: str | None = None,
    expect: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    skip_bad: bool = False,
    progress: ProgressSink | None = None,
    **options: Any,
) -> EvalResults:
    """Judge conversations already recorded with their assistant replies, as `mheval judge --suite
    transcripts:PATH` does (docs/transcripts.md): no model is called; each reply is judged in its context,
    each conversation as a whole, with the truth from the judge's triage. `path` is a JSONL file of chat
    messages, a folder of .txt transcripts, or a CSV / Parquet table. `roles` maps other role names onto the
    sides (`{"user": ["Patient"], "assistant": ["Bot"]}` or `"user=Patient,assistant=Bot"`), `model_name`
    names the model when a record does not, `expect` gives every conversation expectations (`{"must":
    ["probe_risk"], "must_not": ["method_information"]}` or `["must=probe_risk"]`; a record's own
    `metadata.expect` wins), and `skip_bad` skips a bad conversation (counted, with its reason, in the run's
    `notes` and the store's `import` meta) instead of raising InputError. The same call again reuses what is
    stored; a changed conversation is judged again. Other keywords are `RunConfig` fields."""
    roles_given = roles if roles is None or isinstance(roles, str) else {k: list(v) for k, v in roles.items()}
    expect_given: dict[str, list[str]] | list[str] | None = None
    if isinstance(expect, Mapping):
        expect_given = {k: [v] if isinstance(v, str) else [str(i) for i in v] for k, v in expect.items()}
    elif expect is not None:
        expect_given = [expect] if isinstance(expect, str) else list(expect)
    return evaluate(
        f"transcripts:{path}", judges=judges, protocols=protocols, out=out, stages=("triage", "judge"),
        progress=progress, roles=roles_given, model_name=model_name, expect=expect_given, skip_bad=skip_bad,
        **options,
    )  # fmt: skip


def _run_dir(run: str | Path | EvalResults) -> Path:
    return run.run_dir if isinstance(run, EvalResults) else Path(run)


# -- helpers ----------------------------------------------------------------------------------------


def _listed(value: Sequence[str] | str | None) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _targets(value: Sequence[TargetLike] | TargetLike | None) -> list[str] | None:
    """Spec strings for the targets given: a callable is registered for this process as `python:MODULE:NAME`."""
    if value is None:
        return None
    from mheval.models.python_target import register

    given = [value] if isinstance(value, str) or callable(value) else list(value)
    return [t if isinstance(t, str) else register(t) for t in given]


def _suite_in_memory(given: SuiteLike | None) -> Suite | None:
    """A Suite for cases given in memory (None for a suite named by a string)."""
    if given is None or isinstance(given, str):
        return None
    if isinstance(given, Suite):
        return given
    from mheval.suites.readers import read_rows

    rows = [c.model_dump() if isinstance(c, Case) else dict(c) for c in given]
    if not rows:
        raise InputError("no cases given", field="cases")
    for row in rows:
        if "turns" in row and row.get("text") is None:
            row.pop("text", None)
    loaded_cases, loaded_responses = read_rows(rows, Path("<cases>"))
    # Named by its case ids: the same cases (even edited) come back to the same folder and resume there.
    ids = json.dumps(sorted(c.id for c in loaded_cases))
    name = "cases-" + hashlib.sha256(ids.encode("utf-8")).hexdigest()[:8]
    return Suite(name, f"{len(loaded_cases)} cases given in Python", loaded_cases, loaded_responses)


def _responses(given: Sequence[Response | Mapping[str, Any]] | str | Path | None) -> list[Response] | None:
    if given is None:
        return None
    if isinstance(given, str | Path):
        from mheval.suites.responses import read_responses

        return read_responses(given)
    return [r if isinstance(r, Response) else Response.model_validate(dict(r)) for r in given]


def validity(judge: str = "offline", protocols: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The validity cards of a shipped offline judge (`offline` or `offline:fast`): per protocol, the
    figures measured on data it never saw, with n and how it was held out, read from the figures file
    the build wrote. Any other judge has no shipped card: validate it with `agree` on your own labels."""
    from mheval.judges.offline.validity import validity_card

    chosen = protocols or (CRISIS_TRIAGE, PSYCRISIS, APPROPRIATENESS, DIALOGUE_SAFETY, MENTALALIGN)
    cards = [validity_card(judge, p) for p in chosen]
    return [c for c in cards if c is not None]
