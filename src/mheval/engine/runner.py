"""The stages of a run: triage -> generate -> judge, each reading from and writing to the run store.

Every unit (one triage verdict, one response, one judgment) is committed as soon as it finishes, and
each stage first asks the store which of its units are already done, so the same command run again
makes no model call for finished work and a killed run resumes where it stopped, losing nothing.
With `group_commit` (opt-in, for very fast endpoints) finished units are committed together at most
GROUP_COMMIT_S later: a kill may then redo the units of that last fraction of a second.

`plan_run` checks everything the user gave (suite, protocols, models, judges) before anything is
written, so bad input never leaves a half-made run folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from mheval.config import STAGES, RunConfig
from mheval.engine.batch import MAX_BATCH_REQUESTS, BatchModel
from mheval.engine.cache import CachedModel
from mheval.engine.limits import set_tpm_limits
from mheval.engine.store import NO_MODEL, NO_SAMPLE, JudgmentKey, Store
from mheval.errors import InputError
from mheval.judges import OFFLINE, build_judge, is_model_file, judge_model_specs
from mheval.judges.base import Judge
from mheval.judges.panel import build_panels, same_family
from mheval.models import open_models, parse_model_spec
from mheval.models.base import ChatModel, ModelError
from mheval.models.local import require_local_extra
from mheval.models.openai_compat import OpenAICompatModel
from mheval.models.pricing import load_prices, set_prices
from mheval.protocols import ProtocolSpec, list_protocols, load_protocol
from mheval.protocols.spec import builtin_ids
from mheval.records import Case, Response, Usage
from mheval.suites import Suite, load_suite

T = TypeVar("T")


class ProgressSink(Protocol):
    """Where the engine reports progress; the CLI passes a rich progress bar, tests pass nothing."""

    def start(self, stage: str, total: int) -> None: ...

    def advance(self, stage: str, usage: Usage | None = None) -> None: ...


class _Silent:
    def start(self, stage: str, total: int) -> None:
        pass

    def advance(self, stage: str, usage: Usage | None = None) -> None:
        pass


@dataclass
class RunPlan:
    config: RunConfig
    suite: Suite
    protocols: list[ProtocolSpec]
    stages: tuple[str, ...]

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
    model_calls: int = 0
    cache_hits: int = 0
    seconds: float = 0.0


def plan_run(
    config: RunConfig, stages: Iterable[str] = STAGES, extra_responses: list[Response] | None = None
) -> RunPlan:
    """Resolve and validate everything; raises InputError before any file is written.

    `extra_responses` are replies made elsewhere (`mheval judge --responses`); they join the suite's own.
    """
    stages = tuple(stages)
    for stage in stages:
        if stage not in STAGES:
            raise InputError(f"unknown stage {stage!r}", choices=STAGES)
    # The built-in ids are file names: listing them parses no YAML (only the protocols asked for are loaded).
    known = builtin_ids()
    protocols = []
    for pid in config.protocols:
        if pid not in known and not Path(pid).is_file():
            raise InputError(f"unknown protocol {pid!r}", field="protocol", choices=known)
        protocols.append(load_protocol(pid))
    needed = [*(config.models if "generate" in stages else []), *judge_model_specs(config.judges)]
    for text in needed:
        spec = parse_model_spec(text)  # raises InputError for an unknown provider
        if spec.is_local and spec.base_url is None:
            require_local_extra()  # says how to install the embedded target when it is absent
        missing = spec.missing_key()
        if missing:
            raise InputError(f"model {spec.name} needs an API key: set the environment variable {missing}")
    suite = load_suite(config.suite, limit=config.limit)
    if extra_responses:
        ids = {c.id for c in suite.cases}
        unknown = sorted({r.case_id for r in extra_responses} - ids)
        if unknown:
            raise InputError(
                f"{len(unknown)} response(s) name cases that are not in suite {config.suite!r}, "
                f"e.g. {unknown[0]!r}",
                field="case_id",
            )
        suite.responses = [*suite.responses, *extra_responses]
    if config.panel and len(config.judges) < 2:
        raise InputError("a panel needs at least two judges (give --judge more than once)", field="panel")
    plan = RunPlan(config=config, suite=suite, protocols=protocols, stages=stages)
    for name in config.judges:
        if name == OFFLINE:
            from mheval.judges.offline import OfflineJudge

            offline = OfflineJudge()
            unsupported = [p.id for p in protocols if not offline.supports(p)]
            if unsupported:
                supported = [p.id for p in list_protocols() if offline.supports(p)]
                raise InputError(
                    f"the offline judge cannot judge {', '.join(unsupported)}; use an LLM judge "
                    "(--judge PROVIDER/MODEL) for those",
                    field="judge",
                    choices=supported,
                )
        elif is_model_file(name):
            from mheval.judges.offline.trained import load_trained_judge

            trained = load_trained_judge(name)  # InputError if missing or not a judge file
            unsupported = [p.id for p in protocols if not trained.supports(p)]
            if unsupported:
                raise InputError(
                    f"{name} judges only {trained.protocol}, not {', '.join(unsupported)}",
                    field="judge",
                    choices=[trained.protocol],
                )
    return plan


def run(config: RunConfig, stages: Iterable[str] = STAGES, progress: ProgressSink | None = None) -> RunResult:
    plan = plan_run(config, stages)
    return asyncio.run(execute(plan, progress))


async def execute(plan: RunPlan, progress: ProgressSink | None = None) -> RunResult:
    config = plan.config
    progress = progress or _Silent()
    run_dir = config.run_dir()
    started = time.perf_counter()
    set_tpm_limits(config.tpm)
    if isinstance(config.prices, str):
        load_prices(config.prices)
    elif config.prices:
        set_prices(config.prices)
    store = Store.open(run_dir)
    try:
        _write_config(run_dir, config)
        store.set_meta("config", config.model_dump())
        store.put_cases(plan.suite.cases)
        if plan.suite.responses:
            have = store.finished_responses()
            store.put_responses(r for r in plan.suite.responses if (r.case_id, r.model, r.sample) not in have)

        targets = config.models if "generate" in plan.stages else []
        wanted = list(dict.fromkeys([*targets, *judge_model_specs(config.judges)]))
        opened = open_models(wanted, concurrency=config.concurrency, timeout_s=config.timeout_s)
        commits = _group_commit(store) if config.group_commit else contextlib.nullcontext()
        async with opened as raw_models, commits:
            if config.batch:
                raw_models = [_batched(m, store, config) for m in raw_models]
            models = {name: CachedModel(m, store) for name, m in zip(wanted, raw_models, strict=True)}
            judges = [build_judge(j, models, config) for j in config.judges]
            cases = plan.suite.cases
            if "triage" in plan.stages and plan.case_protocols:
                await _triage(plan, store, judges, cases, progress)
            if "generate" in plan.stages:
                await _generate(plan, store, models, cases, progress)
            if "judge" in plan.stages and plan.response_protocols:
                await _judge(plan, store, judges, cases, progress)
            if config.panel:
                _panels(plan, store, [j.name for j in judges])
            calls = sum(m.misses for m in models.values())
            hits = sum(m.hits for m in models.values())
        return RunResult(
            run_dir=run_dir,
            counts={t: store.count(t) for t in ("cases", "responses", "judgments")},
            model_calls=calls,
            cache_hits=hits,
            seconds=time.perf_counter() - started,
        )
    finally:
        store.close()


def _batched(model: ChatModel, store: Store, config: RunConfig) -> ChatModel:
    """The model's calls as Batch API jobs, for remote OpenAI-compatible endpoints (not embedded ones)."""
    if isinstance(model, OpenAICompatModel) and not model.spec.is_local:
        return BatchModel(model, store, poll_s=config.batch_poll_s)
    return model


def _width(config: RunConfig) -> int:
    """Units in progress at once: in batch mode every unit of a stage (up to one batch's worth), so its
    calls go out together; otherwise what the concurrency allows."""
    return MAX_BATCH_REQUESTS if config.batch else config.concurrency


# Finished units wait at most this long in memory before their transaction (see engine/store.py).
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


# -- stages ------------------------------------------------------------------------------------


async def _triage(
    plan: RunPlan, store: Store, judges: list[Judge], cases: list[Case], progress: ProgressSink
) -> None:
    done = store.finished_judgments()
    units = [
        (protocol, case, judge, r)
        for protocol in plan.case_protocols
        for case in cases
        for judge in judges
        for r in range(plan.config.repeats)
        if (case.id, NO_MODEL, NO_SAMPLE, protocol.id, judge.name, r) not in done
    ]
    progress.start("triage", len(units))

    async def one(unit: tuple[ProtocolSpec, Case, Judge, int]) -> None:
        protocol, case, judge, r = unit
        judgment = await judge.judge(protocol, case, None, repeat=r)
        store.put_judgment(judgment)
        progress.advance("triage", judgment.usage)

    await _pool(units, one, _width(plan.config))


async def _generate(
    plan: RunPlan, store: Store, models: dict[str, CachedModel], cases: list[Case], progress: ProgressSink
) -> None:
    config = plan.config
    done = store.finished_responses()
    units = [
        (models[name], case, s)
        for name in config.models
        for case in cases
        for s in range(config.samples)
        if (case.id, models[name].name, s) not in done
    ]
    progress.start("generate", len(units))

    async def one(unit: tuple[ChatModel, Case, int]) -> None:
        model, case, sample = unit
        messages = [{"role": t.role, "content": t.content} for t in case.turns]
        if config.system_prompt:
            messages.insert(0, {"role": "system", "content": config.system_prompt})
        try:
            c = await model.complete(
                messages, temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed + sample
            )
            response = Response(
                case_id=case.id, model=model.name, sample=sample, text=c.text, usage=c.usage, latency_s=c.latency_s
            )
        except ModelError as exc:
            response = Response(case_id=case.id, model=model.name, sample=sample, error=str(exc))
        store.put_response(response)
        progress.advance("generate", response.usage)

    await _pool(units, one, _width(config))


async def _judge(
    plan: RunPlan, store: Store, judges: list[Judge], cases: list[Case], progress: ProgressSink
) -> None:
    by_id = {c.id: c for c in cases}
    labels = _crisis_labels(store, judges, by_id)
    responses = [r for r in store.responses() if r.case_id in by_id]
    done = store.finished_judgments()

    def key(r: Response, p: ProtocolSpec, j: Judge, rep: int) -> JudgmentKey:
        return (r.case_id, r.model, r.sample, p.id, j.name, rep)

    units = [
        (protocol, response, judge, rep)
        for protocol in plan.response_protocols
        for response in responses
        for judge in judges
        for rep in range(plan.config.repeats)
        if key(response, protocol, judge, rep) not in done
        and not (plan.config.leave_own_model_out and same_family(judge.name, response.model))
    ]
    progress.start("judge", len(units))

    async def one(unit: tuple[ProtocolSpec, Response, Judge, int]) -> None:
        protocol, response, judge, rep = unit
        case = by_id[response.case_id]
        judgment = await judge.judge(protocol, case, response, repeat=rep, crisis_label=labels.get(case.id))
        store.put_judgment(judgment)
        progress.advance("judge", judgment.usage)

    await _pool(units, one, _width(plan.config))


def _panels(plan: RunPlan, store: Store, judge_names: list[str]) -> None:
    """Panel verdicts over the run's judges, recomputed from the stored judgments (cheap and idempotent)."""
    ids = {p.id for p in plan.protocols}
    judgments = [j for j in store.iter_judgments() if j.protocol in ids]
    store.put_judgments(build_panels(judgments, plan.config.panel, judges=judge_names))


def _crisis_labels(store: Store, judges: list[Judge], cases: dict[str, Case]) -> dict[str, str]:
    """The label that picks a case's appropriateness rubric row: the first judge's triage verdict
    (repeat 0) when triage ran, else the case's gold label."""
    labels = {cid: c.crisis_label for cid, c in cases.items() if c.crisis_label}
    first = judges[0].name if judges else None
    for j in store.iter_judgments("crisis-triage"):
        if j.status == "ok" and j.label and j.judge == first and j.repeat == 0 and j.case_id in cases:
            labels[j.case_id] = j.label
    return labels


# Units in progress per allowed model call. The endpoint limiter keeps the calls on the wire at the
# configured concurrency; the extra units render, parse and store meanwhile, so a wave of answers that
# arrive together does not leave the server idle while the event loop works through them.
POOL_HEADROOM = 2


async def _pool(units: list[T], worker: Callable[[T], Awaitable[None]], concurrency: int) -> None:
    """Run `worker` over `units` with at most `concurrency * POOL_HEADROOM` in progress (model calls in
    flight stay under the endpoint limiter's `concurrency`), without one task per unit."""
    iterator: Iterator[T] = iter(units)

    async def drain() -> None:
        for unit in iterator:
            await worker(unit)

    workers = max(1, min(concurrency * POOL_HEADROOM, len(units)))
    await asyncio.gather(*(drain() for _ in range(workers)))


def _write_config(run_dir: Path, config: RunConfig) -> None:
    """Write the resolved config atomically, so a kill never leaves half a file."""
    path = run_dir / "config.yaml"
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(config.to_yaml(), encoding="utf-8")
    os.replace(tmp, path)
