"""An LLM judge: a chat model prompted with a protocol's rubric, whose JSON answer is parsed honestly.

An answer that does not parse is asked again (a new seed, so a cached or deterministic server does
not return the same broken text) a bounded number of times, then stored as `unscored` with the
parser's reason and the raw text. It is never turned into a score.
"""

from __future__ import annotations

from mheval.models.base import ChatModel, ModelError
from mheval.protocols import ProtocolSpec, parse_verdict, render_messages
from mheval.records import Case, Judgment, Response, Usage


class LLMJudge:
    def __init__(
        self,
        model: ChatModel,
        *,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        parse_retries: int = 2,
        few_shot: bool = False,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.name = model.name
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.parse_retries = parse_retries
        self.few_shot = few_shot
        self.seed = seed

    def supports(self, protocol: ProtocolSpec) -> bool:
        return True

    async def judge(
        self,
        protocol: ProtocolSpec,
        case: Case,
        response: Response | None,
        *,
        repeat: int = 0,
        crisis_label: str | None = None,
    ) -> Judgment:
        ids = _unit_fields(protocol, case, response, self.name, repeat)
        if protocol.target == "response" and (response is None or response.text is None):
            return Judgment.unscored("no_response", "the model produced no reply to judge", **ids)
        try:
            messages = render_messages(
                protocol,
                case,
                response.text if response is not None else None,
                crisis_label=crisis_label,
                few_shot=self.few_shot,
            )
        except ValueError as exc:  # e.g. appropriateness without any crisis label to pick the row
            return Judgment.unscored("unsupported", str(exc), **ids)

        schema = protocol.output_schema()
        usage: Usage | None = None
        latency = 0.0
        text = ""
        reason = "parse_failure: no attempt"
        for attempt in range(self.parse_retries + 1):
            seed = self.seed + 1000 * repeat + attempt
            try:
                completion = await self.model.complete(
                    messages,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                    seed=seed,
                    json_schema=schema,
                )
            except ModelError as exc:
                return Judgment.unscored("provider_error", str(exc), usage=usage or Usage(), **ids)
            usage = completion.usage if usage is None else usage + completion.usage
            latency += completion.latency_s
            text = completion.text
            verdict = parse_verdict(protocol, text)
            if verdict.ok:
                scores = dict(verdict.scores)
                # Aggregates (css, ars) are numbers in extras; flags are strings and stay flags.
                numbers = {k: v for k, v in verdict.extras.items() if type(v) in (int, float)}
                scores.update({k: float(v) for k, v in numbers.items()})
                return Judgment(
                    flags=list(verdict.extras.get("flags", [])),
                    label=verdict.label,
                    scores=scores,
                    total=verdict.total,
                    rationale=verdict.rationale,
                    evidence=verdict.evidence,
                    raw=text,
                    usage=usage,
                    latency_s=latency,
                    **ids,
                )
            reason = verdict.reason or "parse_failure"
        return Judgment(status="unscored", reason=reason, raw=text, usage=usage or Usage(), latency_s=latency, **ids)


def _unit_fields(
    protocol: ProtocolSpec, case: Case, response: Response | None, judge: str, repeat: int
) -> dict[str, object]:
    fields: dict[str, object] = {"case_id": case.id, "protocol": protocol.id, "judge": judge, "repeat": repeat}
    if protocol.target == "response" and response is not None:
        fields["model"] = response.model
        fields["sample"] = response.sample
    return fields

