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
(conversations/flow_judge.py) and the scenario's expectations (conversations/expectations_judge.py) run
last, one verdict per conversation and judge.

A recorded conversation (the `transcripts:PATH` suite, conversations/imported.py) is not played:
`store_imported` writes its exchanges as they were recorded, and the same judging stages follow. Having no
scenario, its replies are judged under the crisis label of the judge's own triage of the user turns
(`conversation_truth`), so triage runs first there too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mheval.config import RunConfig
from mheval.conversations import expectations_judge, flow, flow_judge
from mheval.conversations.imported import ImportedSuite, Prepared, is_imported
from mheval.conversations.scenario import Scenario, split_turn_case_id, turn_case_id
from mheval.conversations.simulator import ScriptedUser, SimulatedUser
from mheval.conversations.truth import Truth, conversation_truth
from mheval.digest import digest
from mheval.engine.identity import Inputs, judging_inputs, target_params
from mheval.engine.units import GenerateUnit, JudgeUnit, TriageUnit, Unit, Workbench, perform
from mheval.labels import CONVERSATION_FLOW, CRISIS_TRIAGE, EXPECTATIONS
from mheval.models.base import ChatModel, session_of
from mheval.protocols import ProtocolSpec
from mheval.records import Case, Conversation, Exchange, Judgment, Reason, Response, Turn
from mheval.runfolder.store import JudgmentKey, Store

if TYPE_CHECKING:
    from mheval.engine.runner import ProgressSink

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


def store_imported(suite: ImportedSuite, store: Store, progress: ProgressSink | None = None) -> Imported:
    """Store each recorded conversation (conversations/imported.py) as a played one is stored: its exchanges
    and its end (mode `imported`), keyed by its content. One stored from the same content is kept as it is,
    so its judgments are reused; a changed one replaces the old (moved to superseded), and the judgments of
    turns it no longer has are retired. Per-turn judgments of the turns it still has are redone only where
    their own inputs (the context, the reply) changed."""
    before = store.conversation_inputs()
    done = Imported()
    if progress is not None:
        progress.start("import", len(suite.accepted))  # one step per conversation, stored or found stored
    judged: list[JudgmentKey] | None = None
    stale: list[JudgmentKey] = []
    for item in suite.conversations():  # read again, one at a time
        if progress is not None:
            progress.advance("import")
        if before.get(item.key) == item.inputs:
            done.reused += 1
            continue
        if item.key in before:
            done.replaced += 1
            store.restart_conversation(*item.key, from_turn=1)
            judged = judged if judged is not None else list(store.judgment_inputs())
            stale += _turns_beyond(judged, item)
        for exchange in item.exchanges:
            store.put_exchange(exchange, item.inputs)
        store.put_conversation(item.conversation, item.inputs)
        done.stored += 1
    if stale:
        store.supersede(judgments=stale)
    return done


def _turns_beyond(judged: list[JudgmentKey], item: Prepared) -> list[JudgmentKey]:
    """The stored per-turn judgments of `item`'s conversation for turns past its (new) last one."""
    sid, model, sample = item.key
    out = []
    for key in judged:
        parts = split_turn_case_id(key[0])
        if parts is not None and parts[0] == sid and key[1:3] == (model, sample) and parts[1] > len(item.exchanges):
            out.append(key)
    return out


# -- judging ------------------------------------------------------------------------------------


async def judge_turns(
    scenarios: list[Scenario], bench: Workbench, store: Store, protocols: list[ProtocolSpec],
    judge_digests: Mapping[str, str], progress: ProgressSink | None = None,
) -> int:  # fmt: skip
    """Each user turn triaged and each reply judged in its context, under the single-turn protocols.
    Triage goes first: appropriateness takes its rubric row from the turn's triage verdict."""
    made = 0
    for stage in ([p for p in protocols if p.target == "case"], [p for p in protocols if p.target != "case"]):
        todo = _turn_units(scenarios, bench, store, stage, judge_digests)
        if progress is not None and todo:
            progress.start("judge" if stage[0].target != "case" else "triage", len(todo))
        await _perform_all(todo, bench, store, progress)
        made += len(todo)
    return made


def _turn_units(
    scenarios: list[Scenario], bench: Workbench, store: Store, protocols: list[ProtocolSpec],
    judge_digests: Mapping[str, str],
) -> list[tuple[Unit, tuple[Any, ...], Inputs]]:  # fmt: skip
    """The per-turn judging units not yet done with these inputs."""
    by_id = {s.id: s for s in scenarios}
    done = store.judgment_inputs(finished=True)
    triaged = _triage_by_conversation(store, scenarios)
    todo: list[tuple[Unit, tuple[Any, ...], Inputs]] = []
    for conv, exchanges in _scored_conversations(store, by_id).items():
        sid, model, sample = conv
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


def _triage_by_conversation(store: Store, scenarios: list[Scenario]) -> dict[ConversationKey, list[Judgment]]:
    """The stored triage of each imported conversation's user turns (their truth); empty for a scenario suite."""
    if not any(is_imported(s) for s in scenarios):
        return {}
    out: dict[ConversationKey, list[Judgment]] = {}
    for j in store.iter_judgments(CRISIS_TRIAGE):
        parts = split_turn_case_id(j.case_id)
        if parts is not None and j.model is not None:
            out.setdefault((parts[0], j.model, j.sample or 0), []).append(j)
    return out


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


def _scored_conversations(store: Store, scenarios: Mapping[str, Scenario]) -> dict[ConversationKey, list[Exchange]]:
    """Exchanges of each finished conversation that may be scored (not a simulator failure)."""
    keep = {
        (c.scenario_id, c.model, c.sample)
        for c in store.conversations()
        if c.scenario_id in scenarios and not (c.status == "unscored" and c.reason == Reason.SIMULATOR_FAILURE)
    }
    out: dict[ConversationKey, list[Exchange]] = {}
    for e in store.exchanges():
        key = (e.scenario_id, e.model, e.sample)
        if key in keep:
            out.setdefault(key, []).append(e)
    return out


async def judge_conversations(
    scenarios: list[Scenario], bench: Workbench, store: Store, judge_digests: Mapping[str, str],
    progress: ProgressSink | None = None,
) -> int:  # fmt: skip
    """The whole-conversation flow protocol and the scenario's expectations over each scored conversation,
    by each judge (one verdict of each per conversation and judge, keyed like any other unit)."""
    spec = flow.load_flow()
    expect_digest = expectations_judge.protocol_digest()
    by_id = {s.id: s for s in scenarios}
    done = store.judgment_inputs(finished=True)
    per_turn: dict[ConversationKey, list[Judgment]] = {}
    for j in store.iter_judgments():
        parts = flow.turn_of(j)
        if parts is not None:
            per_turn.setdefault((parts[0], j.model or "", j.sample or 0), []).append(j)
    # (scenario, exchanges, per-turn verdicts for the flow or the truth for the expectations, judge, ...)
    todo: list[tuple[Scenario, list[Exchange], list[Judgment] | Truth | None, str, str, int, Inputs]] = []
    for key, exchanges in _scored_conversations(store, by_id).items():
        sid, model, sample = key
        turns = per_turn.get(key, [])
        for judge, fingerprint in judge_digests.items():
            inputs = {
                "case": digest([by_id[sid].model_dump(mode="json"), [[e.user, e.reply] for e in exchanges]]),
                "protocol": spec.digest,
                "judge": digest([fingerprint, 0]),
                "reply": digest(sorted(j.model_dump_json(exclude={"latency_s", "usage"}) for j in turns)),
            }
            if done.get((sid, model, sample, CONVERSATION_FLOW, judge, 0)) != inputs:
                todo.append((by_id[sid], exchanges, turns, judge, model, sample, inputs))
            # The expectations read the transcript only (not the per-turn verdicts), and where risk was
            # disclosed: the scenario's truth, or for an imported conversation the judge's triage.
            wanted = {k: v for k, v in inputs.items() if k != "reply"} | {"protocol": expect_digest}
            truth = None
            if is_imported(by_id[sid]):
                truth = conversation_truth(by_id[sid], exchanges, turns, judge)
                wanted["truth"] = digest(dataclasses.asdict(truth))
            listed = by_id[sid].expectations.must or by_id[sid].expectations.must_not
            if listed and done.get((sid, model, sample, EXPECTATIONS, judge, 0)) != wanted:
                todo.append((by_id[sid], exchanges, truth, judge, model, sample, wanted))
    limit = asyncio.Semaphore(max(1, bench.config.concurrency))

    async def one(scenario: Scenario, exchanges: list[Exchange], turns: list[Judgment] | Truth | None, judge: str,
                  model: str, sample: int, inputs: Inputs) -> None:  # fmt: skip
        if bench.redaction is not None:  # with --redact the conversation judges read the exchanges masked
            exchanges = bench.redaction.exchanges_view(exchanges, scenario.locale)
        async with limit:
            if not isinstance(turns, list):
                verdict = await expectations_judge.judge_expectations(
                    scenario, exchanges, judge=judge, judge_model=bench.models.get(judge), model=model,
                    sample=sample, config=bench.config, truth=turns,
                )  # fmt: skip
            else:
                verdict = await flow_judge.judge_flow(
                    spec, scenario, exchanges, turns, judge=judge, judge_model=bench.models.get(judge),
                    model=model, sample=sample, config=bench.config,
                )  # fmt: skip
        store.put_judgment(verdict, inputs)
        if progress is not None:
            progress.advance("flow", verdict.usage, failed=verdict.status != "ok")

    if progress is not None and todo:
        progress.start("flow", len(todo))  # each conversation judged whole (flow, expectations)
    await asyncio.gather(*(one(*item) for item in todo))
    return len(todo)
