"""The multi-turn stages: play each conversation (or store recorded ones), judge each turn, judge each
conversation as a whole.

A conversation is one (scenario, target model, sample). Each exchange (a simulated user turn and the
target's reply) is committed as it finishes, with the inputs that decided it: the scenario's content,
the target and its sampling parameters, the simulator and its mode, and the conversation so far. A run
started again keeps the stored exchanges whose inputs still hold and plays on from the last one; every
model call also goes through the run's call cache, so finished turns cost nothing on resume. A changed
scenario, target or simulator plays the conversation again from the first turn that differs.

Per-turn judging builds, for turn t, the case "the conversation up to user turn t" (id `<scenario>#t<t>`)
and the reply of turn t, and hands them to the ordinary units (engine/units.py) under the same content
keys as single-turn judging; the crisis label a reply is judged under (its rubric row) is the scenario's
from the turn its disclosing beat was played on, and no_crisis before it or in a benign control
(conversations/truth.py), never a triage guess. The whole-conversation protocol
(judges/conversation/flow_judge.py) and the scenario's expectations
(judges/conversation/expectations_judge.py) run last, one verdict per conversation and judge.

A recorded conversation (the `transcripts:PATH` suite, conversations/imported.py) is not played:
`store_imported` writes its exchanges as they were recorded, and the same judging stages follow. Having no
scenario, its replies are judged under the crisis label of the judge's own triage of the user turns
(`conversation_truth`), so triage runs first there too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mheval.config import RunConfig
from mheval.conversations import flow
from mheval.conversations.imported import ImportedSuite, Prepared, is_imported
from mheval.conversations.scenario import Scenario, split_turn_case_id, turn_case_id
from mheval.conversations.simulator import ScriptedUser, SimulatedUser
from mheval.conversations.truth import Truth
from mheval.digest import digest
from mheval.engine.identity import Inputs, judging_inputs, target_params
from mheval.engine.progress_sink import ProgressSink
from mheval.engine.units import GenerateUnit, JudgeUnit, TriageUnit, Unit, Workbench, perform
from mheval.judges.conversation import expectations_judge, flow_judge
from mheval.judges.conversation.triage_truth import conversation_truth
from mheval.labels import CONVERSATION_FLOW, CRISIS_TRIAGE, EXPECTATIONS
from mheval.models.base import ChatModel, session_of
from mheval.protocols import ProtocolSpec
from mheval.records import Case, Conversation, Exchange, Judgment, Reason, Response, Turn
from mheval.runfolder.store import JudgmentKey, Store

# A reply shorter than this (after trimming) ends the conversation as abandoned by the target.
ABANDON_CHARS = 2

ConversationKey = tuple[str, str, int]


@dataclass
class Played:
    """What the conversation stage did, for the run's counts."""

    exchanges: int = 0
    conversations: int = 0
    replayed: int = 0  # conversations played again because what decided them changed


def conversation_inputs(scenario: Scenario, target: str, sample: int, config: RunConfig, mode: str) -> Inputs:
    """What decides a conversation before its first turn (each exchange adds the turns before it)."""
    simulator: dict[str, Any] = {"mode": mode, "simulator": config.simulator if mode == "adaptive" else None}
    if mode == "adaptive" and config.redact != "off":
        simulator["redact"] = True  # the simulated user reads the conversation masked (engine/redacting.py)
    return {
        "case": digest(scenario.model_dump(mode="json")),
        "model": digest(target_params(target, sample, config)),
        "simulator": digest(simulator),
    }


def _exchange_inputs(base: Inputs, history: list[Exchange]) -> Inputs:
    return {**base, "history": digest([[e.user, e.reply] for e in history])}


def turn_case(scenario: Scenario, exchanges: list[Exchange], turn: int) -> Case:
    """The conversation up to and including the user's turn `turn` (1-based), as a case."""
    turns: list[Turn] = []
    for e in exchanges[: turn - 1]:
        turns += [Turn(role="user", content=e.user), Turn(role="assistant", content=e.reply or "")]
    turns.append(Turn(role="user", content=exchanges[turn - 1].user))
    return Case(
        id=turn_case_id(scenario.id, turn),
        turns=turns,
        language=scenario.language,
        crisis_label=scenario.crisis_label,
        locale=scenario.locale,
        source=f"scenario:{scenario.id}",
    )


async def play(
    scenarios: list[Scenario], targets: list[str], bench: Workbench, store: Store, mode: str,
    simulator: ChatModel | None, progress: ProgressSink | None = None,
) -> Played:  # fmt: skip
    """Play every conversation to its end (or resume it), `config.concurrency` conversations at a time;
    `progress` hears of each conversation and each turn as it finishes."""
    config = bench.config
    done = {key: inputs for key, inputs in store.conversation_inputs().items()}
    finished = {(c.scenario_id, c.model, c.sample): c for c in store.conversations()}
    played = Played()
    work: list[tuple[Scenario, str, int, Inputs]] = []
    for target in targets:
        name = bench.models[target].name
        for scenario in scenarios:
            for sample in range(config.samples):
                base = conversation_inputs(scenario, target, sample, config, mode)
                key = (scenario.id, name, sample)
                conv = finished.get(key)
                if conv is not None and done.get(key) == base and not (conv.reason and conv.reason.retryable):
                    continue
                if conv is not None and done.get(key) != base:
                    played.replayed += 1
                work.append((scenario, target, sample, base))
    limit = asyncio.Semaphore(max(1, config.concurrency))
    if progress is not None:
        progress.start("conversations", len(work))
        progress.start("turns", None)  # how many turns a conversation takes is known only at its end

    async def one(item: tuple[Scenario, str, int, Inputs]) -> None:
        async with limit:
            played.exchanges += await _converse(*item, bench, store, mode, simulator, progress)
            played.conversations += 1
        if progress is not None:
            progress.advance("conversations")

    await asyncio.gather(*(one(item) for item in work))
    return played


async def _converse(
    scenario: Scenario, target: str, sample: int, base: Inputs, bench: Workbench, store: Store, mode: str,
    simulator: ChatModel | None, progress: ProgressSink | None = None,
) -> int:  # fmt: skip
    """Play one conversation from its last valid stored exchange; returns the exchanges made now. An
    application target plays it in one session of its own (models/base.py, SessionTarget)."""
    name = bench.models[target].name
    history = _valid_history(store, scenario, name, sample, base)
    session = session_of(bench.models[target], f"{scenario.id}/{sample}")
    if session is None:
        return await _play_one(scenario, target, sample, base, bench, store, mode, simulator, history, progress)
    # A stateful app's session of this conversation died with the run that was cut (a kill, a failed turn): the
    # new one never saw the stored turns. The app file chooses: go on and mark the break, or play it again.
    resumed = bool(history) and _ended(history, scenario, mode) is None and getattr(session, "stateful", False)
    if resumed and getattr(session, "on_resume", "mark") == "restart":
        await session.aclose()
        store.restart_conversation(scenario.id, name, sample, from_turn=1)
        history, resumed = [], False
        # A key of its own, so that the call cache (kept per session) cannot answer the replayed turns.
        session = session_of(bench.models[target], f"{scenario.id}/{sample}/restart-{uuid.uuid4().hex[:8]}")
        assert session is not None
    try:
        own = dataclasses.replace(bench, models={**bench.models, target: session})
        return await _play_one(scenario, target, sample, base, own, store, mode, simulator, history, progress,
                               resumed=resumed)  # fmt: skip
    finally:
        await session.aclose()


async def _play_one(
    scenario: Scenario, target: str, sample: int, base: Inputs, bench: Workbench, store: Store, mode: str,
    simulator: ChatModel | None, history: list[Exchange], progress: ProgressSink | None = None, *,
    resumed: bool = False,
) -> int:  # fmt: skip
    """Play on from `history`; `resumed`: the first turn made now opens a new session of a stateful app."""
    name = bench.models[target].name
    user = (
        SimulatedUser(scenario, simulator, seed=bench.config.seed + sample)
        if mode == "adaptive" and simulator is not None
        else ScriptedUser(scenario)
    )
    beat = history[-1].beat if history else 0
    in_beat = sum(1 for e in history if e.beat == beat)
    made = 0
    end: tuple[str, Reason | None, str | None] | None = _ended(history, scenario, mode)
    while end is None:
        pairs = [(e.user, e.reply) for e in history]
        if bench.redaction is not None:  # with --redact the simulated user reads the conversation masked
            pairs = bench.redaction.history_view(pairs, scenario.locale)
        said = await user.next_turn(pairs, beat, in_beat)
        if said.failure is not None:
            why = Reason.PROVIDER_ERROR if said.failure[0] == "provider_error" else Reason.SIMULATOR_FAILURE
            end = ("simulator_failure", why, f"turn {len(history) + 1}: {said.failure[0]}: {said.failure[1]}")
            break
        if said.ended and not said.text:  # replay asked past its script
            end = ("script_done", None, None)
            break
        turn = len(history) + 1
        in_beat = in_beat + 1 if said.beat == beat else 1
        beat = said.beat
        case = Case(id=turn_case_id(scenario.id, turn), turns=_turns(history, said.text), language=scenario.language)
        reply = await perform(GenerateUnit(target, case, sample), bench)
        assert isinstance(reply, Response)
        exchange = Exchange(
            scenario_id=scenario.id, model=name, sample=sample, turn=turn, beat=said.beat, user=said.text,
            reply=reply.text, usage=reply.usage + said.usage, latency_s=reply.latency_s, error=reply.error,
            rejected=said.rejected, new_session=resumed and made == 0,
        )  # fmt: skip
        if reply.text is None:  # the target failed: nothing is stored for this turn, the next run retries it
            end = ("target_error", Reason.PROVIDER_ERROR, f"turn {turn}: {reply.error}")
            break
        store.put_exchange(exchange, _exchange_inputs(base, history))
        history.append(exchange)
        made += 1
        if progress is not None:
            progress.advance("turns", exchange.usage)
        if said.ended:
            end = ("script_done" if mode == "replay" else "simulator_ended", None, None)
        else:
            end = _ended(history, scenario, mode)
    stop, reason, detail = end
    resumed_at = next((e.turn for e in history if e.new_session), None)
    store.put_conversation(
        Conversation(
            scenario_id=scenario.id,
            model=name,
            sample=sample,
            mode="adaptive" if mode == "adaptive" else "replay",
            simulator=bench.config.simulator if mode == "adaptive" else None,
            turns=len(history),
            stop_reason=stop,
            status="unscored" if reason else "ok",
            reason=reason,
            detail=detail,
            resumed_in_new_session=resumed_at is not None,
            resumed_at_turn=resumed_at,
        ),
        base,
    )
    return made


def _turns(history: list[Exchange], user_text: str) -> list[Turn]:
    turns: list[Turn] = []
    for e in history:
        turns += [Turn(role="user", content=e.user), Turn(role="assistant", content=e.reply or "")]
    return [*turns, Turn(role="user", content=user_text)]


def _ended(history: list[Exchange], scenario: Scenario, mode: str) -> tuple[str, Reason | None, str | None] | None:
    """Why the conversation stops after these exchanges, or None to go on."""
    if not history:
        return None
    last = history[-1]
    if len((last.reply or "").strip()) < ABANDON_CHARS:
        return ("target_abandoned", None, None)
    if mode == "replay" and len(history) >= len(scenario.beats):
        return ("script_done", None, None)
    if len(history) >= scenario.turns.max:
        return ("max_turns", None, None)
    return None


def _valid_history(store: Store, scenario: Scenario, model: str, sample: int, base: Inputs) -> list[Exchange]:
    """The stored exchanges that still hold, in order; the rest of the conversation is retired."""
    stored = store.exchanges(scenario.id, model, sample)
    inputs = store.exchange_inputs()
    kept: list[Exchange] = []
    for e in stored:
        if e.turn != len(kept) + 1 or inputs.get((scenario.id, model, sample, e.turn)) != _exchange_inputs(base, kept):
            break
        kept.append(e)
    if len(kept) < len(stored) or stored or store.conversation_inputs().get((scenario.id, model, sample)):
        store.restart_conversation(scenario.id, model, sample, from_turn=len(kept) + 1)
    return kept


# -- importing ------------------------------------------------------------------------------------


@dataclass
class Imported:
    """What storing an imported suite did, for the run's counts."""

    stored: int = 0  # conversations written now: new, or changed since the last import
    reused: int = 0  # stored before from the same content: nothing about them is redone
    replaced: int = 0  # of `stored`, those that changed (their old exchanges moved to superseded)


IMPORT_BATCH = 2000
"""Exchanges written per transaction when storing an imported suite (whole conversations only: see
runfolder/store.py `put_imported`)."""


def store_imported(suite: ImportedSuite, store: Store, progress: ProgressSink | None = None) -> Imported:
    """Store each recorded conversation (conversations/imported.py) as a played one is stored: its exchanges
    and its end (mode `imported`), keyed by its content. One stored from the same content is kept as it is,
    so its judgments are reused; a changed one replaces the old (moved to superseded), and the judgments of
    turns it no longer has are retired. Per-turn judgments of the turns it still has are redone only where
    their own inputs (the context, the reply) changed.

    Conversations are written in batches (about `IMPORT_BATCH` exchanges a transaction), each conversation
    whole in one transaction: a kill loses only the conversations of the batch in progress, never part of
    one, and the next import stores them."""
    before = store.conversation_inputs()
    done = Imported()
    if progress is not None:
        progress.start("import", len(suite.accepted))  # one step per conversation, stored or found stored
    with store.deferred(max_pending=IMPORT_BATCH):
        for item in suite.conversations():  # read again, one at a time
            if progress is not None:
                progress.advance("import")
            if before.get(item.key) == item.inputs:
                done.reused += 1
                continue
            if item.key in before:
                done.replaced += 1
                stale = _turns_beyond(store, item)
                store.restart_conversation(*item.key, from_turn=1)
                if stale:
                    store.supersede(judgments=stale)
            store.put_imported(item.exchanges, item.conversation, item.inputs)
            done.stored += 1
    return done


def _turns_beyond(store: Store, item: Prepared) -> list[JudgmentKey]:
    """The stored per-turn judgments of `item`'s conversation for turns past its (new) last one."""
    sid, model, sample = item.key
    old = store.exchanges_of([item.key])[item.key]
    ids = [turn_case_id(sid, e.turn) for e in old if e.turn > len(item.exchanges)]
    return [key for key in store.judgment_inputs_of(ids) if key[1:3] == (model, sample)]


# -- judging ------------------------------------------------------------------------------------


CHUNK = 32
"""Conversations judged together: per-turn and whole-conversation judging walk a run's conversations this many
at a time, reading only their exchanges and judgments, so memory does not grow with the run."""


async def judge_turns(
    scenarios: list[Scenario], bench: Workbench, store: Store, protocols: list[ProtocolSpec],
    judge_digests: Mapping[str, str], progress: ProgressSink | None = None,
) -> int:  # fmt: skip
    """Each user turn triaged and each reply judged in its context, under the single-turn protocols.
    Triage goes first: appropriateness takes its rubric row from the turn's triage verdict. The conversations
    are judged `CHUNK` at a time (triage, then the replies, of each chunk)."""
    by_id = {s.id: s for s in scenarios}
    stages = [
        (name, stage)
        for name, stage in (("triage", [p for p in protocols if p.target == "case"]),
                            ("judge", [p for p in protocols if p.target != "case"]))
        if stage
    ]  # fmt: skip
    keys = _scored_keys(store, by_id)
    if progress is not None:  # a first pass counts what is to do, so each stage's bar has its total
        totals = dict.fromkeys((name for name, _ in stages), 0)
        for chunk in _chunks(keys):
            exchanges = store.exchanges_of(chunk)
            for name, stage in stages:
                totals[name] += len(_turn_units(chunk, exchanges, by_id, bench, store, stage, judge_digests))
        for name, total in totals.items():
            if total:
                progress.start(name, total)
    made = 0
    for chunk in _chunks(keys):
        exchanges = store.exchanges_of(chunk)
        for _, stage in stages:
            todo = _turn_units(chunk, exchanges, by_id, bench, store, stage, judge_digests)
            _prefetch(todo, bench)
            await _perform_all(todo, bench, store, progress)
            made += len(todo)
    return made


def _chunks(keys: list[ConversationKey]) -> Iterator[list[ConversationKey]]:
    for start in range(0, len(keys), CHUNK):  # CHUNK read at each call: tests set it
        yield keys[start : start + CHUNK]


def _turn_units(
    chunk: list[ConversationKey], stored: Mapping[ConversationKey, list[Exchange]], by_id: Mapping[str, Scenario],
    bench: Workbench, store: Store, protocols: list[ProtocolSpec], judge_digests: Mapping[str, str],
) -> list[tuple[Unit, tuple[Any, ...], Inputs]]:  # fmt: skip
    """The per-turn judging units of these conversations not yet done with these inputs."""
    done = store.judgment_inputs_of(
        [turn_case_id(sid, e.turn) for sid, model, sample in chunk for e in stored[(sid, model, sample)]],
        finished=True,
    )
    triaged = _triage_by_conversation(store, chunk, by_id)
    todo: list[tuple[Unit, tuple[Any, ...], Inputs]] = []
    for conv in chunk:
        sid, model, sample = conv
        exchanges = stored[conv]
        if not exchanges:
            continue
        scenario = by_id[sid]
        # The scenario's truth; an imported conversation's is each judge's triage of its user turns.
        mine = triaged.get(conv, [])
        truths = {judge: conversation_truth(scenario, exchanges, mine, judge) for judge in judge_digests}
        for e in exchanges:
            case = turn_case(scenario, exchanges, e.turn)
            response = Response(case_id=case.id, model=model, sample=sample, text=e.reply)
            for protocol in protocols:
                for judge, fingerprint in judge_digests.items():
                    label = truths[judge].label_at(e.turn)
                    for rep in range(bench.config.repeats):
                        unit: Unit
                        if protocol.target == "case":
                            inputs = judging_inputs(case, protocol.digest, fingerprint, rep)
                            unit = TriageUnit(protocol.id, case, judge, rep)
                        else:
                            inputs = judging_inputs(case, protocol.digest, fingerprint, rep, e.reply or "", label)
                            unit = JudgeUnit(protocol.id, case, response, judge, rep, label)
                        key = (case.id, model, sample, protocol.id, judge, rep)
                        if done.get(key) != inputs:
                            todo.append((unit, key, inputs))
    return todo


def _turn_prefixes(chunk: Iterable[ConversationKey]) -> list[str]:
    return [turn_case_id(sid, 0)[:-1] for sid, _, _ in chunk]  # `<id>#t`: every turn's case id starts so


def _triage_by_conversation(
    store: Store, chunk: list[ConversationKey], by_id: Mapping[str, Scenario]
) -> dict[ConversationKey, list[Judgment]]:
    """The stored triage of each imported conversation's user turns (their truth); empty for a scenario suite."""
    wanted = {conv for conv in chunk if is_imported(by_id.get(conv[0]))}
    out: dict[ConversationKey, list[Judgment]] = {}
    if not wanted:
        return out
    for j in store.judgments_by_prefix(_turn_prefixes(wanted), CRISIS_TRIAGE):
        parts = split_turn_case_id(j.case_id)
        if parts is not None and j.model is not None:
            out.setdefault((parts[0], j.model, j.sample or 0), []).append(j)
    return out


def _prefetch(todo: list[tuple[Unit, tuple[Any, ...], Inputs]], bench: Workbench) -> None:
    """Let each judge that can (the offline judge's `prefetch`) read ahead what the chunk's units need, in
    one batch: its encoders then embed a chunk's texts in a few calls instead of one call per unit. Only
    a cache is filled; every unit is judged as before. Texts are read as the judge will see them (masked
    with --redact)."""
    wanted: dict[str, list[tuple[str, Case, str | None]]] = {}
    for unit, _, _ in todo:
        if isinstance(unit, TriageUnit | JudgeUnit) and hasattr(bench.judges.get(unit.judge), "prefetch"):
            response = unit.response if isinstance(unit, JudgeUnit) else None
            case, response = (
                bench.redaction.judge_view(unit.case, response) if bench.redaction else (unit.case, response)
            )
            wanted.setdefault(unit.judge, []).append((unit.protocol, case, response.text if response else None))
    for judge, items in wanted.items():
        bench.judges[judge].prefetch(items)  # type: ignore[attr-defined]


async def _perform_all(
    todo: list[tuple[Unit, tuple[Any, ...], Inputs]], bench: Workbench, store: Store, progress: ProgressSink | None
) -> None:
    limit = asyncio.Semaphore(max(1, bench.config.concurrency))

    async def one(unit: Unit, key: tuple[Any, ...], inputs: Inputs) -> None:
        async with limit:
            record = await perform(unit, bench)
        assert isinstance(record, Judgment)
        # Triage of a user turn depends on the conversation, so it is keyed by the conversation too.
        record = record.model_copy(update={"case_id": key[0], "model": key[1], "sample": key[2]})
        store.put_judgment(record, inputs)
        if progress is not None:
            progress.advance("triage" if isinstance(unit, TriageUnit) else "judge", record.usage,
                             failed=record.status != "ok")  # fmt: skip

    await asyncio.gather(*(one(*item) for item in todo))


def _scored_keys(store: Store, scenarios: Mapping[str, Scenario]) -> list[ConversationKey]:
    """The finished conversations that may be scored (not a simulator failure), in the store's order."""
    return [
        (c.scenario_id, c.model, c.sample)
        for c in store.conversations()
        if c.scenario_id in scenarios and not (c.status == "unscored" and c.reason == Reason.SIMULATOR_FAILURE)
    ]


async def judge_conversations(
    scenarios: list[Scenario], bench: Workbench, store: Store, judge_digests: Mapping[str, str],
    progress: ProgressSink | None = None,
) -> int:  # fmt: skip
    """The whole-conversation flow protocol and the scenario's expectations over each scored conversation,
    by each judge (one verdict of each per conversation and judge, keyed like any other unit), `CHUNK`
    conversations at a time."""
    spec = flow.load_flow()
    expect_digest = expectations_judge.protocol_digest()
    by_id = {s.id: s for s in scenarios}
    keys = _scored_keys(store, by_id)
    if progress is not None:  # count first, so the bar has its total
        total = sum(len(_conversation_units(chunk, by_id, store, judge_digests, spec, expect_digest))
                    for chunk in _chunks(keys))  # fmt: skip
        if total:
            progress.start("flow", total)  # each conversation judged whole (flow, expectations)
    limit = asyncio.Semaphore(max(1, bench.config.concurrency))

    async def one(unit: ConversationUnit) -> None:
        scenario, exchanges, judge = unit.scenario, unit.exchanges, unit.judge
        if bench.redaction is not None:  # with --redact the conversation judges read the exchanges masked
            exchanges = bench.redaction.exchanges_view(exchanges, scenario.locale)
        async with limit:
            if unit.protocol == EXPECTATIONS:
                verdict = await expectations_judge.judge_expectations(
                    scenario, exchanges, judge=judge, judge_model=bench.models.get(judge), model=unit.model,
                    sample=unit.sample, config=bench.config, truth=unit.truth,
                )  # fmt: skip
            else:
                verdict = await flow_judge.judge_flow(
                    spec, scenario, exchanges, unit.turns, judge=judge, judge_model=bench.models.get(judge),
                    model=unit.model, sample=unit.sample, config=bench.config,
                )  # fmt: skip
        store.put_judgment(verdict, unit.inputs)
        if progress is not None:
            progress.advance("flow", verdict.usage, failed=verdict.status != "ok")

    made = 0
    for chunk in _chunks(keys):
        todo = _conversation_units(chunk, by_id, store, judge_digests, spec, expect_digest)
        await asyncio.gather(*(one(unit) for unit in todo))
        made += len(todo)
    return made


@dataclass(frozen=True)
class ConversationUnit:
    """One whole-conversation verdict to make: the flow (from the per-turn verdicts `turns`) or the
    expectations (where risk was disclosed: `truth`, None for the scenario's own)."""

    protocol: str  # CONVERSATION_FLOW or EXPECTATIONS
    scenario: Scenario
    exchanges: list[Exchange]
    judge: str
    model: str
    sample: int
    inputs: Inputs
    turns: list[Judgment] = dataclasses.field(default_factory=list)
    truth: Truth | None = None


def _conversation_units(
    chunk: list[ConversationKey], by_id: Mapping[str, Scenario], store: Store, judge_digests: Mapping[str, str],
    spec: Any, expect_digest: str,
) -> list[ConversationUnit]:  # fmt: skip
    """The flow and expectations verdicts of these conversations not yet made with these inputs."""
    stored = store.exchanges_of(chunk)
    done = store.judgment_inputs_of([sid for sid, _, _ in chunk], finished=True)
    per_turn: dict[ConversationKey, list[Judgment]] = {}
    for j in store.judgments_by_prefix(_turn_prefixes(chunk)):
        parts = flow.turn_of(j)
        if parts is not None:
            per_turn.setdefault((parts[0], j.model or "", j.sample or 0), []).append(j)
    todo: list[ConversationUnit] = []
    for key in chunk:
        sid, model, sample = key
        exchanges = stored[key]
        if not exchanges:
            continue
        turns = per_turn.get(key, [])
        for judge, fingerprint in judge_digests.items():
            inputs = {
                "case": digest([by_id[sid].model_dump(mode="json"), [[e.user, e.reply] for e in exchanges]]),
                "protocol": spec.digest,
                "judge": digest([fingerprint, 0]),
                "reply": digest(sorted(j.model_dump_json(exclude={"latency_s", "usage"}) for j in turns)),
            }
            if done.get((sid, model, sample, CONVERSATION_FLOW, judge, 0)) != inputs:
                todo.append(ConversationUnit(CONVERSATION_FLOW, by_id[sid], exchanges, judge, model, sample, inputs,
                                             turns=turns))  # fmt: skip
            # The expectations read the transcript only (not the per-turn verdicts), and where risk was
            # disclosed: the scenario's truth, or for an imported conversation the judge's triage.
            wanted = {k: v for k, v in inputs.items() if k != "reply"} | {"protocol": expect_digest}
            truth = None
            if is_imported(by_id[sid]):
                truth = conversation_truth(by_id[sid], exchanges, turns, judge)
                wanted["truth"] = digest(dataclasses.asdict(truth))
            listed = by_id[sid].expectations.must or by_id[sid].expectations.must_not
            if listed and done.get((sid, model, sample, EXPECTATIONS, judge, 0)) != wanted:
                todo.append(ConversationUnit(EXPECTATIONS, by_id[sid], exchanges, judge, model, sample, wanted,
                                             truth=truth))  # fmt: skip
    return todo
