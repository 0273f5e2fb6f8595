"""mheval in Inspect (the optional extra `mheval[inspect]`): a task over any mheval suite, and a scorer for
each mheval protocol, so that `inspect eval` runs mheval's cases against any Inspect model and reports
mheval's metrics.

    inspect eval mheval/crisis_task --model openai/gpt-4o-mini -T protocol=psycrisis -T language=zh

    from inspect_ai import eval
    from mheval.inspect import crisis_task, scorer
    eval(crisis_task("crisis-core", protocol="psycrisis", judge="offline"), model="openai/gpt-4o-mini")

Each case becomes a Sample whose input is the case's conversation; the model under test replies with
`generate()`, and the scorer hands that reply to an mheval judge. A score's value is a dict with one
entry per rubric dimension (and aggregate such as `total`, `css`, `ars`), or one entry per label for the
label protocols (their mean is then each label's share); each entry gets a mean and its standard error.
A judgment mheval could not score (unparseable judge output, no reply, a judge that cannot judge the
unit) becomes `Score.unscored(...)`: Inspect keeps it with its reason and leaves it out of every metric,
so a failure is never counted as a low score.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Metric, Score, Scorer, Target, mean, stderr
from inspect_ai.scorer import scorer as inspect_scorer
from inspect_ai.solver import Solver, TaskState, generate, system_message

from mheval.config import RunConfig
from mheval.errors import InputError
from mheval.judges import build_judge, judge_model_specs
from mheval.judges.base import Judge
from mheval.labels import CRISIS_LABELS, CRISIS_TRIAGE, PSYCRISIS
from mheval.protocols import ProtocolSpec, load_protocol
from mheval.protocols.spec import BUILTIN_ORDER
from mheval.records import LANGUAGES, Case, Judgment, Response, Turn, Usage
from mheval.redaction import KINDS
from mheval.suites import Suite, load_suite
from mheval.textscan import detect_language

if TYPE_CHECKING:
    from mheval.engine.redacting import RunRedaction

__all__ = ["GOLD_AGREEMENT", "REDACTION", "case_to_sample", "crisis_task", "metric_key", "score_keys", "scorer"]

GOLD_AGREEMENT = "agrees_with_gold"
"""Crisis triage's extra score key: 1 when the judge's label is the case's gold label, 0 when not (left out
where a case has no gold label)."""

REDACTION = "redaction"
"""The score metadata key that says, with `redact` on, what was masked in the sample before the judge read it: the
mode, the count of each kind, the texts read and how many had something masked (and, with `store`, the masked
`turns` and `reply`)."""

# mheval's unscored reasons, as Inspect's standard reasons for an abnormal score: the first group are
# failures of the measuring judge, `no_response` is the model under test's, the rest are the scorer's.
_INSPECT_REASONS: dict[str, str] = {
    "parse_failure": "grader_failed",
    "schema_violation": "grader_failed",
    "out_of_range": "grader_failed",
    "ungrounded": "grader_failed",
    "refused": "grader_failed",
    "provider_error": "grader_failed",
    "no_response": "no_response",
    "unsupported": "scoring_failed",
}


@task
def crisis_task(
    suite: str = "crisis-core",
    protocol: str | Sequence[str] = PSYCRISIS,
    language: str | None = None,
    judge: str = "offline",
    limit: int | None = None,
    system_prompt: str | None = None,
    redact: str = "off",
) -> Task:
    """An Inspect task over an mheval suite, scored by mheval's judge under one or more protocols.

    `suite` is a built-in name (`crisis-core`) or `FORMAT:PATH` as on mheval's command line; `protocol` a
    protocol id or file, or several (a list, or ids separated by commas); `language` keeps only the cases
    in `en` or `zh`; `judge` is `offline`, a model spec (`openai/gpt-4o-mini`, `vllm/NAME@URL`) or a trained
    judge (`.npz` file or fine-tuned folder); `limit` keeps the first N cases (after the language filter);
    `system_prompt` goes before every conversation; `redact` (`judge` or `store`) masks personal data in what the
    judge reads (docs/redaction.md). Everything is checked here, before any model call.
    """
    if language is not None and language not in LANGUAGES:
        raise InputError(f"unknown language {language!r}", field="language", choices=LANGUAGES)
    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}", field="limit")
    loaded = load_suite(suite)
    cases = [c for c in loaded.cases if language is None or c.language == language][:limit]
    if not cases:
        raise InputError(f"suite {suite!r} has no cases in language {language!r}", field="language")
    scorers = [scorer(p, judge=judge, redact=redact) for p in _protocol_ids(protocol)]
    solver: list[Solver] = [system_message(system_prompt)] if system_prompt else []
    solver.append(generate())
    return Task(
        dataset=MemoryDataset([case_to_sample(c) for c in cases], name=loaded.name, location=suite),
        solver=solver,
        scorer=scorers,
        metadata={"mheval_suite": loaded.name, "language": language, "judge": judge},
    )


def _protocol_ids(protocol: str | Sequence[str]) -> list[str]:
    """`-T protocol=a,b` arrives as one string; from Python a list is the natural form."""
    items = protocol.split(",") if isinstance(protocol, str) else list(protocol)
    ids = [p.strip() for p in items if p.strip()]
    if not ids:
        raise InputError("give at least one protocol", field="protocol")
    return list(dict.fromkeys(ids))


def case_to_sample(case: Case) -> Sample:
    """An mheval case as an Inspect sample: its conversation as chat messages, its gold crisis label (if
    any) as the target, and what the scorer needs to rebuild the case in the metadata."""
    return Sample(
        id=case.id,
        input=[_message(t) for t in case.turns],
        target=case.crisis_label or "",
        metadata={
            "language": case.language,
            "locale": case.locale,
            "crisis_label": case.crisis_label,
            "source": case.source,
            "case_metadata": case.metadata,
        },
    )


def _message(turn: Turn) -> ChatMessage:
    if turn.role == "user":
        return ChatMessageUser(content=turn.content)
    if turn.role == "assistant":
        return ChatMessageAssistant(content=turn.content)
    return ChatMessageSystem(content=turn.content)


def scorer(protocol: str = PSYCRISIS, judge: str = "offline", **options: Any) -> Scorer:
    """An Inspect scorer that judges each sample under an mheval protocol.

    `judge` is `offline` (or `offline:fast`), a model spec for an LLM judge (opened with mheval's own
    client, so `openai/...`, `vllm/NAME@URL`, `ollama/...` work as on mheval's command line), or a trained
    judge file / fine-tuned folder. `options` are mheval run settings for the judge (`grounding`,
    `few_shot`, `parse_retries`, `judge_temperature`, `judge_max_tokens`, `timeout_s`, `seed`, `redact`).
    With `redact="judge"` the judge reads the sample's turns and the reply with personal data masked, and the
    score's metadata says what was masked (`REDACTION`); `"store"` also keeps the masked texts there.
    Crisis triage judges the sample's conversation; every other protocol judges the model's reply.
    The judge and protocol are checked now (as `mheval run` would), not at the first sample.
    """
    spec = load_protocol(protocol)
    keys, factory = _FACTORIES.get(spec.id, ((), None))
    if factory is None or keys != tuple(score_keys(spec)):
        factory = _register(spec)  # a protocol file of one's own, or one whose keys differ from the built-in
    return factory(protocol=protocol, judge=judge, **options)


def _register(spec: ProtocolSpec) -> Callable[..., Scorer]:
    """Register a scorer factory for a protocol with Inspect, as `mheval/<protocol id>`.

    One factory per protocol, because Inspect fixes a scorer's metrics when it is registered and each
    protocol has its own keys. The factory takes only plain arguments, which Inspect records in the log,
    so `inspect score` can make the same scorer again from a log.
    """

    @inspect_scorer(metrics=_metrics(spec), name=spec.id)
    def mheval_scorer(protocol: str = spec.id, judge: str = "offline", **options: Any) -> Scorer:
        protocol_spec = load_protocol(protocol)
        config = _judge_config(protocol, judge, options)
        offline = _offline_judge(judge, config)
        masking = _masking(config)

        async def score(state: TaskState, target: Target) -> Score:
            case = _case_from_state(state)
            response = None if protocol_spec.target == "case" else _response_from_state(state)
            label = _crisis_label(state, target)
            masked: dict[str, Any] | None = None
            if masking is not None:  # the judge reads the sample with its personal data masked
                masked = _masked_meta(masking, case, response)
                case, response = masking.judge_view(case, response)
            if offline is not None:
                judgment = await offline.judge(protocol_spec, case, response, crisis_label=label)
            else:
                judgment = await _judge_with_model(judge, config, protocol_spec, case, response, label)
            gold = label if protocol_spec.id == CRISIS_TRIAGE else None
            out = judgment_to_score(protocol_spec, judgment, gold=gold, language=case.language)
            if masked is not None:
                out.metadata = {**(out.metadata or {}), REDACTION: masked}
            return out

        return score

    _FACTORIES[spec.id] = (tuple(score_keys(spec)), mheval_scorer)
    return mheval_scorer


def _judge_config(protocol: str, judge: str, options: Mapping[str, Any]) -> RunConfig:
    """The run settings the judge is built from, checked the way `mheval run` checks a plan."""
    from mheval.engine.runner import plan_run
    from mheval.models import parse_model_spec
    from mheval.models.spec import SERVE_EMBEDDED

    try:
        config = RunConfig(judges=[judge], protocols=[protocol], **options)
    except ValueError as exc:  # pydantic's ValidationError: an unknown or out-of-range option
        raise InputError(f"bad scorer option: {exc}", field="options") from exc
    if judge_model_specs([judge]):
        model_spec = parse_model_spec(judge)
        if model_spec.is_embedded:
            # Inspect gives a scorer no place to stop a server it started, so an embedded judge is refused.
            raise InputError(
                f"an Inspect scorer cannot start the embedded model {model_spec.name}: {SERVE_EMBEDDED}", field="judge"
            )
    # No cases yet: this checks the protocol, the judge's key and whether the judge can judge the protocol.
    plan_run(config, stages=("judge",), suite=Suite("inspect", "cases come from the Inspect dataset", []))
    return config


def _masking(config: RunConfig) -> "RunRedaction | None":
    """The masking of personal data the scorer's judge reads through (`redact="judge"` or `"store"`), built
    once per scorer; None when it is off."""
    if config.redact == "off":
        return None
    from mheval.engine.redacting import RunRedaction

    return RunRedaction(config.redact)


def _masked_meta(masking: "RunRedaction", case: Case, response: Response | None) -> dict[str, Any]:
    """What was masked in one sample, counted as a run counts it (engine/redacting.record: the case's turns
    on their own, the reply with the turns before it), and with `store` the masked texts themselves."""
    turns = [t.content for t in case.turns]
    results = masking.redactor.redact_all(turns, case.locale)
    reply = response.text if response is not None else None
    if reply is not None:
        results = [*results, masking.redactor.redact_all([*turns, reply], case.locale)[-1]]
    counts = {kind: sum(r.counts.get(kind, 0) for r in results) for kind in KINDS}
    meta: dict[str, Any] = {"mode": masking.mode, "counts": counts, "texts": len(results),
                            "texts_masked": sum(1 for r in results if r.masked)}  # fmt: skip
    if masking.mode == "store":
        meta["turns"] = [{"role": t.role, "content": r.text} for t, r in zip(case.turns, results, strict=False)]
        if reply is not None:
            meta["reply"] = results[-1].text
    return meta


def _offline_judge(judge: str, config: RunConfig) -> Judge | None:
    """The judge itself when it needs no model connection (offline, trained, a plug-in's), built once per scorer."""
    if not judge_model_specs([judge]):
        return build_judge(judge, {}, config)
    return None


async def _judge_with_model(
    judge: str, config: RunConfig, spec: ProtocolSpec, case: Case, response: Response | None, label: str | None
) -> Judgment:
    """An LLM judge's verdict. The client is opened per sample: a connection pool lives on the event loop
    Inspect runs the eval on, and a scorer has no hook to close one at the end of the eval."""
    from mheval.models import open_models

    async with open_models([judge], concurrency=1, timeout_s=config.timeout_s) as [model]:
        llm = build_judge(judge, {judge: model}, config)
        return await llm.judge(spec, case, response, crisis_label=label)


def _case_from_state(state: TaskState) -> Case:
    """The case the sample came from: its input conversation (system and tool messages left out) and the
    metadata `case_to_sample` put there; a sample from another dataset gets defaults."""
    meta = state.metadata or {}
    messages = [ChatMessageUser(content=state.input)] if isinstance(state.input, str) else state.input
    turns = [Turn(role=m.role, content=m.text) for m in messages if m.role in ("user", "assistant") and m.text]
    given = meta.get("language")  # another dataset may say "English" or nothing: then the text decides
    language = given if given in LANGUAGES else detect_language(" ".join(t.content for t in turns))
    label = meta.get("crisis_label")
    return Case(
        id=str(state.sample_id),
        turns=turns,
        language=language,
        crisis_label=label if label in CRISIS_LABELS else None,
        locale=meta.get("locale"),
        source=meta.get("source"),
        metadata=dict(meta.get("case_metadata") or {}),
    )


def _response_from_state(state: TaskState) -> Response:
    """The model's reply as an mheval Response; no text when the model gave none (then it is unscored)."""
    output = state.output
    text = output.completion if output.completion.strip() else None
    usage = output.usage
    return Response(
        case_id=str(state.sample_id),
        model=str(output.model or state.model),
        sample=max(state.epoch - 1, 0),
        text=text,
        usage=Usage(
            prompt_tokens=usage.input_tokens if usage else 0, completion_tokens=usage.output_tokens if usage else 0
        ),
        latency_s=output.time or 0.0,
        error=output.error or (None if text is not None else "empty reply"),
    )


def _crisis_label(state: TaskState, target: Target) -> str | None:
    """The gold crisis label: from the metadata, else the target when it is one of the seven labels."""
    label = (state.metadata or {}).get("crisis_label") or target.text
    return label if label in CRISIS_LABELS else None


# -- scores ------------------------------------------------------------------------------------


def score_keys(spec: ProtocolSpec) -> list[str]:
    """The keys of a protocol's score dict: its dimensions and multi-dimension aggregates, or its labels
    (and, for crisis triage, agreement with the gold label)."""
    if spec.kind == "label":
        labels = list(spec.labels or [])
        return [*labels, GOLD_AGREEMENT] if spec.id == CRISIS_TRIAGE else labels
    # An aggregate of one dimension (appropriateness' total) would only repeat it.
    aggregates = [name for name, agg in spec.definition.aggregation.items() if len(agg.of) > 1]
    return [*spec.dimensions, *aggregates]


def metric_key(spec: ProtocolSpec, key: str) -> str:
    """A score key as it is named in the score's value and in Inspect's log: `<protocol>/<key>` (e.g.
    `psycrisis/total`, `crisis-triage/agrees_with_gold`), so two protocols' keys never collide."""
    return f"{spec.id}/{key}"


def _metrics(spec: ProtocolSpec) -> dict[str, list[Metric]]:
    return {metric_key(spec, key): [mean(), stderr()] for key in score_keys(spec)}


def judgment_to_score(
    spec: ProtocolSpec, judgment: Judgment, gold: str | None = None, language: str | None = None
) -> Score:
    """An mheval judgment as an Inspect score (`gold`: the case's crisis label, for triage agreement;
    `language`: the rubric language the case was judged in, kept in the metadata)."""
    meta: dict[str, Any] = {"protocol": spec.id, "judge": judgment.judge, "status": judgment.status}
    if language is not None:
        meta["language"] = language
    if judgment.flags:
        meta["flags"] = list(judgment.flags)
    if judgment.status != "ok":
        kind = str(judgment.reason or "unscored")
        reason = judgment.reason_text or kind
        meta |= {"reason": reason, "raw": judgment.raw}
        return Score.unscored(reason=_INSPECT_REASONS.get(kind, "scoring_failed"), explanation=reason, metadata=meta)
    value: dict[str, float] = {}
    if spec.kind == "label":
        for label in spec.labels or []:
            value[metric_key(spec, label)] = 1.0 if judgment.label == label else 0.0
        if spec.id == CRISIS_TRIAGE:
            # NaN is Inspect's per-key "not scored": a case without a gold label is left out of this mean.
            value[metric_key(spec, GOLD_AGREEMENT)] = math.nan if gold is None else float(judgment.label == gold)
        answer = judgment.label
    else:
        aggregates = spec.aggregate(judgment.scores)
        for key in score_keys(spec):
            found = judgment.scores.get(key, aggregates.get(key))
            if found is None and key == "total":
                found = judgment.total
            value[metric_key(spec, key)] = math.nan if found is None else float(found)
        answer = None if judgment.total is None else f"{judgment.total:g}"
    meta |= {"label": judgment.label, "total": judgment.total, "evidence": judgment.evidence}
    return Score(value=value, answer=answer, explanation=judgment.rationale, metadata=meta)


# The built-in protocols' scorers are registered when Inspect loads this module (through the package's
# `inspect_ai` entry point), so `inspect score` and `--scorer mheval/<id>` find them by name.
_FACTORIES: dict[str, tuple[tuple[str, ...], Callable[..., Scorer]]] = {}
for _protocol_id in BUILTIN_ORDER:
    _register(load_protocol(_protocol_id))
