"""The stages of a run: triage -> generate -> judge, each reading from and writing to the run store.

Every unit (one triage verdict, one response, one judgment) is committed as soon as it finishes, and
each stage first asks the store which of its units are already done, so the same command run again
makes no model call for finished work and a killed run resumes where it stopped, losing nothing.
With `group_commit` (opt-in, for very fast endpoints) finished units are committed together at most
GROUP_COMMIT_S later: a kill may then redo the units of that last fraction of a second.

The stages build units (engine/units.py) and hand them to an executor: this process's event loop by
default, or Ray workers (`executor: ray`, engine/ray_executor.py); either way only this process writes
the store. In batch mode (`batch: true`) remote calls go out as Batch API jobs (engine/batch.py).

`plan_run` checks everything the user gave (suite, protocols, models, judges) before anything is
written, so bad input never leaves a half-made run folder.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mheval.config import DEFAULT_PROTOCOLS, STAGES, RunConfig
from mheval.conversations.imported import ImportedSuite, is_transcript_suite, load_transcript_suite, options_from
from mheval.conversations.scenario import Scenario
from mheval.digest import digest
from mheval.engine.batch import MAX_BATCH_REQUESTS, BatchModel
from mheval.engine.cache import CachedModel
from mheval.engine.context import run_context
from mheval.engine.executors import Executor, LocalExecutor
from mheval.engine.identity import (
    Inputs,
    case_for_generation,
    case_for_judging,
    changed_components,
    generation_inputs,
    given_response_inputs,
    judge_digest,
    judging_inputs,
)
from mheval.engine.outcome import run_problems
from mheval.engine.progress_sink import ProgressSink
from mheval.engine.units import GenerateUnit, JudgeUnit, Result, TriageUnit, Unit, Workbench
from mheval.errors import InputError
from mheval.judges import OFFLINE_JUDGES, build_judges, is_finetuned_folder, is_model_file, judge_model_specs
from mheval.judges.panel import build_panels
from mheval.labels import APPROPRIATENESS, CRISIS_TRIAGE, DIALOGUE_SAFETY, PSYCRISIS, case_label
from mheval.models import check_app_spec, is_app_spec, open_models, parse_model_spec
from mheval.models.base import ChatModel
from mheval.models.families import same_family
from mheval.models.local import require_local_extra
from mheval.models.openai_compat import OpenAICompatModel
from mheval.models.spec import SERVE_EMBEDDED
from mheval.models.targets import ray_problem
from mheval.protocols import ProtocolSpec, list_protocols, load_protocol
from mheval.protocols.spec import builtin_ids
from mheval.records import Case, Response, Usage
from mheval.runfolder.claim import check_folder, check_identity, claim, suite_identity
from mheval.runfolder.store import NO_MODEL, NO_SAMPLE, JudgmentKey, Store, judgment_key
from mheval.suites import Suite, load_suite
from mheval.suites.dialogues import is_dialogue_suite, load_dialogue_suite

T = TypeVar("T")


class _Silent:
    def start(self, stage: str, total: int | None) -> None:
        pass

    def advance(self, stage: str, usage: Usage | None = None, *, failed: bool = False) -> None:
        pass


@dataclass
class RunPlan:
    config: RunConfig
    suite: Suite
    protocols: list[ProtocolSpec]
    stages: tuple[str, ...]
    # A multi-turn suite's scenarios (then `suite` holds no cases; engine/conversation_stages.py plays them).
    scenarios: list[Scenario] = field(default_factory=list)
    # A `transcripts:PATH` suite's recorded conversations, read and checked (their records are `scenarios`).
    imported: ImportedSuite | None = None

    @property
    def case_protocols(self) -> list[ProtocolSpec]:
        return [p for p in self.protocols if p.target == "case"]

    @property
    def response_protocols(self) -> list[ProtocolSpec]:
        return [p for p in self.protocols if p.target == "response"]


@dataclass
class RunResult:
    run_dir: Path
    counts: dict[str, int] = field(default_factory=dict)
    model_calls: int = 0  # the calls this run made to models (targets and LLM judges), cache hits not counted
    cache_hits: int = 0
    usage: Usage = field(default_factory=Usage)  # prompt and completion tokens of those calls, as reported
    seconds: float = 0.0
    # Units done again because what decided them changed, by component (engine/identity.py).
    redone: dict[str, int] = field(default_factory=dict)
    # Responses and judgments that failed at the provider and are retried by running again.
    provider_errors: int = 0
    # Why the finished run has nothing to read (engine/outcome.py): the command exits 3 for these too.
    problems: list[str] = field(default_factory=list)
    # What else the user should know: the bad conversations an import skipped (`skip_bad`), with why.
    notes: list[str] = field(default_factory=list)


def plan_run(
    config: RunConfig,
    stages: Iterable[str] = STAGES,
    extra_responses: list[Response] | None = None,
    suite: Suite | None = None,
) -> RunPlan:
    """Resolve and validate everything; raises InputError before any file is written.

    `extra_responses` are replies made elsewhere (`mheval judge --responses`); they join the suite's own.
    `suite` is one already in memory (the Python API's list of cases); by default `config.suite` is loaded.
    """
    stages = tuple(stages)
    for stage in stages:
        if stage not in STAGES:
            raise InputError(f"unknown stage {stage!r}", choices=STAGES)
    if config.redact != "off":
        from mheval.redaction import require

        require()  # the libraries that mask personal data, named before anything is written
    scenarios: list[Scenario] = []
    imported: ImportedSuite | None = None
    if suite is None and is_transcript_suite(config.suite):
        # Recorded conversations: read and checked whole now; their assistant turns are the replies.
        config = _transcript_config(config, extra_responses)
        imported = load_transcript_suite(config.suite, options_from(config), limit=config.limit)
        scenarios = list(imported.scenarios)
        suite = Suite(config.suite, f"recorded conversations in {imported.path}", [])
        stages = tuple(s for s in stages if s != "generate")
    elif suite is None and is_dialogue_suite(config.suite):
        scenarios = load_dialogue_suite(config.suite, limit=config.limit)
        suite = Suite(config.suite, "multi-turn scenarios", [])
        config = _dialogue_config(config, scenarios, extra_responses)
    # The built-in ids are file names: listing them parses no YAML (only the protocols asked for are loaded).
    known = builtin_ids()
    protocols = []
    for pid in config.protocols:
        if pid not in known and not Path(pid).is_file():
            raise InputError(f"unknown protocol {pid!r}", field="protocol", choices=known)
        protocols.append(load_protocol(pid))
    needed = [*(config.models if "generate" in stages else []), *judge_model_specs(config.judges)]
    if scenarios and config.dialogue_mode == "adaptive" and config.simulator:
        needed.append(config.simulator)
    for text in needed:
        if is_app_spec(text):
            check_app_spec(text)  # a python: or http: target: imports, file and its ${ENV_VAR}s (InputError)
            continue
        spec = parse_model_spec(text)  # raises InputError for an unknown provider
        if spec.is_embedded:
            require_local_extra(spec.model)  # says how to install the embedded target when it is absent
        missing = spec.missing_key()
        if missing:
            raise InputError(f"model {spec.name} needs an API key: set the environment variable {missing}")
    if suite is None:
        suite = load_suite(config.suite, limit=config.limit)
    elif config.limit is not None:
        keep = {c.id for c in suite.cases[: config.limit]}
        suite = Suite(suite.name, suite.description, [c for c in suite.cases if c.id in keep],
                      [r for r in suite.responses if r.case_id in keep])  # fmt: skip
    if extra_responses:
        ids = {c.id for c in suite.cases}
        unknown = sorted({r.case_id for r in extra_responses} - ids)
        if unknown:
            raise InputError(
                f"{len(unknown)} response(s) name cases that are not in suite {config.suite!r}, e.g. {unknown[0]!r}",
                field="case_id",
            )
        suite.responses = [*suite.responses, *extra_responses]
    if config.executor == "ray":
        _check_ray(config, needed)
    if config.panel and len(config.judges) < 2:
        raise InputError("a panel needs at least two judges (give --judge more than once)", field="panel")
    plan = RunPlan(
        config=config, suite=suite, protocols=protocols, stages=stages, scenarios=scenarios, imported=imported
    )
    for name in config.judges:
        if name in OFFLINE_JUDGES:
            from mheval.judges.offline import OfflineJudge

            offline = OfflineJudge(fast=name != "offline")
            unsupported = [p.id for p in protocols if not offline.supports(p)]
            if unsupported:
                supported = [p.id for p in list_protocols() if offline.supports(p)]
                raise InputError(
                    f"the offline judge cannot judge {', '.join(unsupported)}; use an LLM judge "
                    "(--judge PROVIDER/MODEL) for those",
                    field="judge",
                    choices=supported,
                )
        elif is_model_file(name) or is_finetuned_folder(name):
            _check_trained(name, protocols)
    return plan


DIALOGUE_PROTOCOLS = (CRISIS_TRIAGE, PSYCRISIS, APPROPRIATENESS, DIALOGUE_SAFETY)
"""A multi-turn run's per-turn protocols when none are given: the measures read all four."""


def _dialogue_config(config: RunConfig, scenarios: list[Scenario], extra: list[Response] | None) -> RunConfig:
    """The run config of a multi-turn suite, checked: what it cannot do is said before anything is written."""
    if extra:
        raise InputError("replies made elsewhere (--responses) cannot join a multi-turn suite", field="responses")
    if config.executor == "ray" or config.batch:
        raise InputError("multi-turn suites run on the local executor, without --batch", field="executor")
    mode = config.dialogue_mode
    if mode == "adaptive" and not config.simulator:
        raise InputError("adaptive mode needs a simulated user: give --simulator SPEC", field="simulator")
    if mode == "replay":
        scripted = [s.id for s in scenarios if not s.replayable]
        if scripted:
            raise InputError(
                f"scenario {scripted[0]!r} has beats without an utterance, so it cannot be replayed: "
                "use --mode adaptive with a --simulator",
                field="mode",
            )
    if list(config.protocols) == list(DEFAULT_PROTOCOLS):
        config = config.model_copy(update={"protocols": list(DIALOGUE_PROTOCOLS)})
    return config


def _transcript_config(config: RunConfig, extra: list[Response] | None) -> RunConfig:
    """The run config of a `transcripts:PATH` suite: what it cannot do is said before anything is read. Its
    truth is the judge's triage of the user turns, so crisis-triage always runs."""
    if extra:
        raise InputError("replies made elsewhere (--responses) cannot join recorded conversations", field="responses")
    if config.executor == "ray" or config.batch:
        raise InputError("recorded conversations are judged on the local executor, without --batch", field="executor")
    protocols = list(DIALOGUE_PROTOCOLS) if list(config.protocols) == list(DEFAULT_PROTOCOLS) else config.protocols
    if CRISIS_TRIAGE not in protocols:
        protocols = [CRISIS_TRIAGE, *protocols]
    return config.model_copy(update={"protocols": protocols})


def _check_trained(name: str, protocols: list[ProtocolSpec]) -> None:
    """A judge file or fine-tuned folder exists, is one, and judges every protocol asked for."""
    if is_model_file(name):
        from mheval.judges.offline.trained import load_trained_judge

        judged = load_trained_judge(name).protocol  # InputError if missing or not a judge file
    else:
        from mheval.judges.offline.finetuned import read_meta

        judged = str(read_meta(name)["protocol"])  # the same, without loading the model
    unsupported = [p.id for p in protocols if p.id != judged]
    if unsupported:
        raise InputError(f"{name} judges only {judged}, not {', '.join(unsupported)}", field="judge", choices=[judged])


def _check_ray(config: RunConfig, model_specs: list[str]) -> None:
    """What the Ray executor cannot do, said before anything is written."""
    from mheval.engine.ray_executor import require_ray

    require_ray()
    if config.batch:
        raise InputError("--batch and --executor ray do not go together: a batch job needs no workers", field="batch")
    for text in model_specs:
        if is_app_spec(text):
            problem = ray_problem(text)
            if problem:
                raise InputError(problem, field="executor")
            continue
        spec = parse_model_spec(text)
        if spec.is_embedded:
            raise InputError(
                f"the Ray executor's workers cannot share an embedded model ({spec.name}): {SERVE_EMBEDDED}",
                field="executor",
            )


def run(config: RunConfig, stages: Iterable[str] = STAGES, progress: ProgressSink | None = None) -> RunResult:
    plan = plan_run(config, stages)
    return run_coroutine(execute(plan, progress))


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to the end from synchronous code, also where an event loop is already running (a
    Jupyter cell): there it runs on a loop of its own in a worker thread, and this call waits for it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mheval") as pool:
        return pool.submit(asyncio.run, coro).result()


async def execute(plan: RunPlan, progress: ProgressSink | None = None) -> RunResult:
    config = plan.config
    progress = progress or _Silent()
    run_dir = config.run_dir()
    started = time.perf_counter()
    check_folder(run_dir)
    with claim(run_dir), Store.open(run_dir) as store:
        identity = suite_identity(config.suite, [c.id for c in plan.suite.cases] + [s.id for s in plan.scenarios])
        check_identity(store.get_meta("identity"), identity, run_dir)  # before anything is written
        _write_config(run_dir, config)
        store.set_meta("config", config.model_dump())
        store.set_meta("identity", _grown(store.get_meta("identity"), identity))
        store.put_cases(plan.suite.cases)
        if plan.scenarios:
            store.put_scenarios(plan.scenarios)
        notes: list[str] = []
        if plan.imported is not None:
            from mheval.engine.conversation_stages import store_imported

            store_imported(plan.imported, store, progress)
            store.set_meta("import", plan.imported.meta())
            notes = [f"skipped (bad): {s.line()}" for s in plan.imported.skipped]
        redone = Redone()
        if plan.suite.responses:
            _put_given_responses(store, plan.suite, redone)
        redone.add(_retire_stale(store, plan.suite.cases))

        targets = config.models if "generate" in plan.stages else []
        simulator = (
            [config.simulator] if plan.scenarios and config.simulator and config.dialogue_mode == "adaptive" else []
        )
        wanted = list(dict.fromkeys([*targets, *judge_model_specs(config.judges), *simulator]))
        opened = open_models(
            wanted, concurrency=config.concurrency, timeout_s=config.timeout_s, context=run_context(config)
        )
        commits = _group_commit(store) if config.group_commit else contextlib.nullcontext()
        async with opened as raw_models, commits, contextlib.AsyncExitStack() as stack:
            if config.batch:
                raw_models = [_batched(m, store, config) for m in raw_models]
            models = {name: CachedModel(m, store) for name, m in zip(wanted, raw_models, strict=True)}
            judges = build_judges(models, config)
            bench = Workbench(config, models, judges, {p.id: p for p in plan.protocols})
            executor: Executor = LocalExecutor(bench, _width(config))
            if config.executor == "ray":
                from mheval.engine.ray_executor import RayExecutor

                executor = await stack.enter_async_context(RayExecutor(config, store, wanted))
            names, cases = list(judges), plan.suite.cases

            def spent() -> tuple[int, Usage]:
                usage = sum((m.usage for m in models.values()), Usage())
                return sum(m.misses for m in models.values()) + getattr(executor, "model_calls", 0), usage

            if hasattr(progress, "watch"):
                progress.watch(spent)
            digests = {name: judge_digest(name, config) for name in names}
            if plan.scenarios:
                await _dialogues(plan, store, bench, digests, targets, simulator, progress)
            elif "triage" in plan.stages and plan.case_protocols:
                await _triage(plan, store, executor, digests, cases, progress, redone)
            if "generate" in plan.stages and not plan.scenarios:
                await _generate(plan, store, executor, models, cases, progress, redone)
            if "judge" in plan.stages and plan.response_protocols and not plan.scenarios:
                await _judge(plan, store, executor, digests, cases, progress, redone)
            if (
                "generate" in plan.stages and not plan.scenarios
            ):  # replies made again take the judgments no stage redid with them
                _retire_stale(store, cases)
            if config.panel:
                _panels(plan, store, names)
            if bench.redaction is not None:  # what was masked, counted in the run (and kept, with `store`)
                from mheval.engine import redacting

                redacting.record(store, run_dir, bench.redaction, {s.id: s.locale for s in plan.scenarios})
            calls, usage = spent()
            hits = sum(m.hits for m in models.values()) + getattr(executor, "cache_hits", 0)
        return RunResult(
            run_dir=run_dir,
            counts={
                t: store.count(t)
                for t in (
                    "cases",
                    "responses",
                    "judgments",
                    *(("exchanges", "conversations") if plan.scenarios else ()),
                )
            }
            | ({"skipped": len(plan.imported.skipped)} if plan.imported is not None else {}),
            model_calls=calls,
            cache_hits=hits,
            usage=usage,
            seconds=time.perf_counter() - started,
            redone=dict(redone.counts),
            provider_errors=store.provider_errors(),
            problems=run_problems(store, plan.stages, config.judges, {s.id for s in plan.scenarios}),
            notes=notes,
        )


def _grown(stored: dict[str, Any] | None, current: dict[str, Any]) -> dict[str, Any]:
    """The folder's identity after this run: its cases are those it had and those added now."""
    if not stored:
        return current
    return {**current, "cases": sorted(set(stored["cases"]) | set(current["cases"]))}


class Redone:
    """Units done again because their inputs changed, counted by the component that changed."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, changes: Iterable[list[str]]) -> None:
        """Count each unit once, under the most basic of the inputs that changed."""
        for components in changes:
            self.counts[components[0]] += 1

    def needed(self, stored: Mapping[Any, Inputs | None], key: Any, inputs: Inputs) -> bool:
        """Whether a unit must be done: not stored as finished, or stored from other inputs."""
        if key not in stored:
            return True
        if stored[key] == inputs:
            return False
        self.add([changed_components(stored[key], inputs)])
        return True


def _retire_stale(store: Store, cases: list[Case]) -> list[list[str]]:
    """Take out of the current results every stored unit that no longer matches the case it belongs to
    (the case was edited) or the reply it judged (the reply was made again), whichever stage runs now:
    a result is never shown for inputs it was not made from."""
    if not cases:  # nothing to match (a multi-turn run): do not read every stored unit's inputs
        return []
    by_id = {c.id: c for c in cases}
    gen = {cid: case_for_generation(c) for cid, c in by_id.items()}
    judged = {cid: case_for_judging(c) for cid, c in by_id.items()}
    stale_responses = {
        key
        for key, inputs in store.response_inputs().items()
        if inputs and key[0] in gen and inputs.get("case") != gen[key[0]]
    }
    replies = {key: text or "" for key, text in store.reply_texts().items()}
    stale_judgments: list[JudgmentKey] = []
    changes = [["case"]] * len(stale_responses)
    for key, inputs in store.judgment_inputs().items():
        if not inputs or key[0] not in judged:
            continue
        why = []
        if inputs.get("case") != judged[key[0]]:
            why.append("case")
        reply_key = (key[0], key[1], key[2])
        if "reply" in inputs and (
            reply_key in stale_responses or reply_key not in replies or inputs["reply"] != digest(replies[reply_key])
        ):
            why.append("reply")
        if why:
            stale_judgments.append(key)
            changes.append(why)
    if stale_responses or stale_judgments:
        store.supersede(stale_responses, stale_judgments)
    return changes


def _put_given_responses(store: Store, suite: Suite, redone: Redone) -> None:
    """Replies that came with the suite (or `--responses`): stored once, and again when their text changed."""
    by_id = {c.id: c for c in suite.cases}
    have = store.response_inputs(finished=True)
    fresh, inputs = [], []
    for r in suite.responses:
        given = given_response_inputs(by_id[r.case_id], r)
        if redone.needed(have, (r.case_id, r.model, r.sample), given):
            fresh.append(r)
            inputs.append(given)
    store.put_responses(fresh, inputs)


def _batched(model: ChatModel, store: Store, config: RunConfig) -> ChatModel:
    """The model's calls as Batch API jobs, for remote OpenAI-compatible endpoints (not embedded ones)."""
    if isinstance(model, OpenAICompatModel) and not model.spec.is_local:
        return BatchModel(model, store, poll_s=config.batch_poll_s)
    return model


def _width(config: RunConfig) -> int:
    """Units in progress at once: in batch mode every unit of a stage (up to one batch's worth), so its
    calls go out together; otherwise what the concurrency allows."""
    return MAX_BATCH_REQUESTS if config.batch else config.concurrency


# Finished units wait at most this long in memory before their transaction (see runfolder/store.py).
GROUP_COMMIT_S = 0.2


@contextlib.asynccontextmanager
async def _group_commit(store: Store, every_s: float = GROUP_COMMIT_S) -> AsyncIterator[None]:
    """Buffer the stages' writes and commit them together, at least every `every_s` and at the end:
    hundreds of units per second become a few transactions per second."""

    async def tick() -> None:
        while True:
            await asyncio.sleep(every_s)
            store.flush()

    with store.deferred():
        ticker = asyncio.ensure_future(tick())
        try:
            yield
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker


async def _dialogues(
    plan: RunPlan, store: Store, bench: Workbench, digests: dict[str, str], targets: list[str],
    simulator: list[str], progress: ProgressSink,
) -> None:  # fmt: skip
    """The multi-turn stages: play the conversations, judge each turn, judge each conversation whole."""
    from mheval.engine import conversation_stages as stages

    mode = plan.config.dialogue_mode
    if "generate" in plan.stages and targets:
        await stages.play(
            plan.scenarios, targets, bench, store, mode, bench.models[simulator[0]] if simulator else None, progress
        )
    if "judge" in plan.stages or "triage" in plan.stages:
        await stages.judge_turns(plan.scenarios, bench, store, plan.protocols, digests, progress)
        await stages.judge_conversations(plan.scenarios, bench, store, digests, progress)


# -- stages ------------------------------------------------------------------------------------


async def _triage(
    plan: RunPlan, store: Store, executor: Executor, judges: dict[str, str], cases: list[Case],
    progress: ProgressSink, redone: Redone,
) -> None:  # fmt: skip
    done = store.judgment_inputs(finished=True)
    units: dict[Any, tuple[Unit, Inputs]] = {}
    for protocol in plan.case_protocols:
        for case in cases:
            for judge, judge_fp in judges.items():
                for r in range(plan.config.repeats):
                    inputs = judging_inputs(case, protocol.digest, judge_fp, r)
                    key = (case.id, NO_MODEL, NO_SAMPLE, protocol.id, judge, r)
                    if redone.needed(done, key, inputs):
                        units[key] = (TriageUnit(protocol.id, case, judge, r), inputs)
    await _stage("triage", units, executor, store, progress)


async def _generate(
    plan: RunPlan, store: Store, executor: Executor, models: Mapping[str, ChatModel], cases: list[Case],
    progress: ProgressSink, redone: Redone,
) -> None:  # fmt: skip
    config = plan.config
    done = store.response_inputs(finished=True)
    units: dict[Any, tuple[Unit, Inputs]] = {}
    for name in config.models:
        model = models[name].name
        for case in cases:
            for s in range(config.samples):
                inputs = generation_inputs(case, name, s, config)
                if redone.needed(done, (case.id, model, s), inputs):
                    units[(case.id, model, s)] = (GenerateUnit(name, case, s), inputs)
    await _stage("generate", units, executor, store, progress)


async def _judge(
    plan: RunPlan, store: Store, executor: Executor, judges: dict[str, str], cases: list[Case],
    progress: ProgressSink, redone: Redone,
) -> None:  # fmt: skip
    by_id = {c.id: c for c in cases}
    labels = _crisis_labels(store, list(judges), by_id)
    # The replies' texts decide which units are due; Response records are read only for those (a resumed
    # run with everything judged parses none).
    replies = {key: text for key, text in store.reply_texts().items() if key[0] in by_id}
    done = store.judgment_inputs(finished=True)
    due: dict[Any, tuple[str, Case, tuple[str, str, int], str, int, str | None, Inputs]] = {}
    for protocol in plan.response_protocols:
        for reply_key, text in replies.items():
            case_id, model, sample = reply_key
            case, label = by_id[case_id], labels.get(case_id)
            for judge, judge_fp in judges.items():
                if plan.config.leave_own_model_out and same_family(judge, model):
                    continue
                for rep in range(plan.config.repeats):
                    inputs = judging_inputs(case, protocol.digest, judge_fp, rep, text or "", label)
                    key = (case_id, model, sample, protocol.id, judge, rep)
                    if redone.needed(done, key, inputs):
                        due[key] = (protocol.id, case, reply_key, judge, rep, label, inputs)
    records = {(r.case_id, r.model, r.sample): r for r in store.responses()} if due else {}
    units: dict[Any, tuple[Unit, Inputs]] = {
        key: (JudgeUnit(protocol_id, case, records[reply_key], judge, rep, label), inputs)
        for key, (protocol_id, case, reply_key, judge, rep, label, inputs) in due.items()
    }
    await _stage("judge", units, executor, store, progress)


async def _stage(
    stage: str, units: dict[Any, tuple[Unit, Inputs]], executor: Executor, store: Store, progress: ProgressSink
) -> None:
    """Hand the units to the executor; store each record as it comes back, with the inputs it was made from."""
    progress.start(stage, len(units))

    def finished(record: Result) -> None:
        if isinstance(record, Response):
            store.put_response(record, units[(record.case_id, record.model, record.sample)][1])
        else:
            store.put_judgment(record, units[judgment_key(record)][1])
        failed = record.text is None if isinstance(record, Response) else record.status != "ok"
        progress.advance(stage, record.usage, failed=failed)

    await executor.run([unit for unit, _ in units.values()], finished)


def _panels(plan: RunPlan, store: Store, judge_names: list[str]) -> None:
    """Panel verdicts over the run's judges, recomputed from the stored judgments (cheap and idempotent)."""
    ids = {p.id for p in plan.protocols}
    judgments = [j for j in store.iter_judgments() if j.protocol in ids]
    store.put_judgments(build_panels(judgments, plan.config.panel, judges=judge_names))


def _crisis_labels(store: Store, judges: list[str], cases: dict[str, Case]) -> dict[str, str]:
    """The label that picks a case's appropriateness rubric row: the first judge's triage verdict
    (repeat 0) when triage ran, else the case's gold label; a case with neither is left out."""
    first = judges[0] if judges else None
    triage = {
        j.case_id: j.label
        for j in store.iter_judgments(CRISIS_TRIAGE)
        if j.status == "ok" and j.label and j.judge == first and j.repeat == 0
    }
    chosen = {cid: case_label(c.crisis_label, triage.get(cid), prefer="triage") for cid, c in cases.items()}
    return {cid: label for cid, label in chosen.items() if label}


def _write_config(run_dir: Path, config: RunConfig) -> None:
    """Write the resolved config atomically, so a kill never leaves half a file."""
    path = run_dir / "config.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(config.to_yaml(), encoding="utf-8")
    os.replace(tmp, path)
