"""The units of work of a run and how one is done, apart from where it is done.

A unit is a small picklable value (a triage verdict, a response, or a judgment to make); `perform`
does one with a `Workbench` (the open models, judges and protocols) and returns the record to store.
The stages build units and hand them to an executor (engine/executors.py): the local one performs them
in this process's event loop, the Ray one on a cluster's workers, each with a workbench of its own.
Only the driver writes the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mheval.config import RunConfig
from mheval.judges.base import Judge
from mheval.models.base import BODY_CAP, ChatModel, ModelError, session_of
from mheval.protocols import ProtocolSpec
from mheval.records import Case, Judgment, Response

if TYPE_CHECKING:
    from mheval.engine.redacting import RunRedaction

T = TypeVar("T")


@dataclass(frozen=True)
class TriageUnit:
    protocol: str
    case: Case
    judge: str
    repeat: int


@dataclass(frozen=True)
class GenerateUnit:
    model: str
    case: Case
    sample: int


@dataclass(frozen=True)
class JudgeUnit:
    protocol: str
    case: Case
    response: Response
    judge: str
    repeat: int
    crisis_label: str | None


Unit = TriageUnit | GenerateUnit | JudgeUnit
Result = Judgment | Response


@dataclass
class Workbench:
    """What doing a unit needs. `judges` and `models` are keyed by name (judge.name, the model spec).
    `redaction` masks personal data in what judges and simulators read, when the run asks for it."""

    config: RunConfig
    models: Mapping[str, ChatModel]
    judges: Mapping[str, Judge]
    protocols: Mapping[str, ProtocolSpec]
    redaction: RunRedaction | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.config.redact != "off" and self.redaction is None:
            from mheval.engine.redacting import RunRedaction

            self.redaction = RunRedaction(self.config.redact)


async def perform(unit: Unit, bench: Workbench) -> Result:
    """Do one unit: a model or judge failure becomes a record that says so, never an exception."""
    if isinstance(unit, GenerateUnit):
        return await _generate(unit, bench)
    judge = bench.judges[unit.judge]
    protocol = bench.protocols[unit.protocol]
    # The one place every judge's input passes: with --redact, the turns and the reply are masked here.
    response = unit.response if isinstance(unit, JudgeUnit) else None
    case, response = bench.redaction.judge_view(unit.case, response) if bench.redaction else (unit.case, response)
    if isinstance(unit, TriageUnit):
        return await judge.judge(protocol, case, None, repeat=unit.repeat)
    return await judge.judge(protocol, case, response, repeat=unit.repeat, crisis_label=unit.crisis_label)


async def _generate(unit: GenerateUnit, bench: Workbench) -> Response:
    config = bench.config
    model = bench.models[unit.model]
    messages = [{"role": t.role, "content": t.content} for t in unit.case.turns]
    if config.system_prompt:
        messages.insert(0, {"role": "system", "content": config.system_prompt})
    ids: dict[str, Any] = {"case_id": unit.case.id, "model": model.name, "sample": unit.sample}
    # An application target gets a session per conversation; a single case is a conversation of its own
    # (engine/conversation_stages.py opens one per multi-turn conversation and passes it in as the model).
    session = session_of(model, f"{unit.case.id}/{unit.sample}")
    try:
        c = await (session or model).complete(
            messages,
            temperature=config.temperature,
            max_tokens=config.max_tokens_for(unit.model),
            seed=config.seed + unit.sample,
        )
    except ModelError as exc:
        return Response(**ids, error=str(exc))
    finally:
        if session is not None:
            await session.aclose()
    text, cap = c.text, config.max_reply_chars
    truncated = len(text) > cap or c.finish_reason == BODY_CAP
    return Response(**ids, text=text[:cap], usage=c.usage, latency_s=c.latency_s, truncated=truncated)


# Units in progress per allowed model call. The endpoint limiter keeps the calls on the wire at the
# configured concurrency; the extra units render, parse and store meanwhile, so a wave of answers that
# arrive together does not leave the server idle while the event loop works through them.
POOL_HEADROOM = 2


async def pool(units: list[T], worker: Callable[[T], Awaitable[None]], concurrency: int) -> None:
    """Run `worker` over `units` with at most `concurrency * POOL_HEADROOM` in progress (model calls in
    flight stay under the endpoint limiter's `concurrency`), without one task per unit."""
    iterator: Iterator[T] = iter(units)

    async def drain() -> None:
        for unit in iterator:
            await worker(unit)

    workers = max(1, min(concurrency * POOL_HEADROOM, len(units)))
    await asyncio.gather(*(drain() for _ in range(workers)))
