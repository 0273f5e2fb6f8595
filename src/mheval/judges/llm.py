"""An LLM judge: a chat model prompted with a protocol's rubric, whose JSON answer is parsed honestly.

An answer that does not parse is asked again (a new seed, so a cached or deterministic server does
not return the same broken text) a bounded number of times, then stored as `unscored` with the
parser's reason and the raw text. It is never turned into a score.

A parsed verdict on a response is then checked (judges/grounding.py): each positive claim must quote
the response, and the `grounding` policy decides what an unverified claim costs (`strict`: withdrawn;
`flag`, the default: flagged; `off`). Every judgment of a response also carries the lexical flags of
judges/flags.py: `injection_suspected` (+ `injection:<kind>`) when the reply holds text written to
steer a judge, `pseudo_alignment`, and `referral:<status>` comparing the crisis lines it names with
the case's locale.
"""

from __future__ import annotations

from typing import Any

from mheval.judges.flags import detect_injection, response_flags
from mheval.judges.grounding import GROUNDING_POLICIES, GroundingPolicy, apply_grounding
from mheval.models.base import ChatModel, ModelError
from mheval.protocols import ProtocolSpec, Verdict, parse_verdict, render_messages
from mheval.records import Case, Judgment, Reason, Response, Usage


def judgment_from_verdict(verdict: Verdict, *, raw: str | None, **fields: Any) -> Judgment:
    """The Judgment for a parsed verdict (ok or not): aggregates such as css/ars join the scores, the
    parser's flags become flags, and an unparsed verdict is unscored with the parser's reason."""
    flags = list(verdict.flags)
    if not verdict.ok:
        reason = verdict.reason or Reason.PARSE_FAILURE
        return Judgment.unscored(reason, verdict.detail, raw=raw, flags=flags, **fields)
    scores = {**verdict.scores, **verdict.aggregates}
    return Judgment(
        flags=flags,
        label=verdict.label,
        scores=scores,
        total=verdict.total,
        rationale=verdict.rationale,
        evidence=verdict.evidence,
        raw=raw,
        **fields,
    )


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
        grounding: GroundingPolicy | str = "flag",
        text_flags: bool = True,
    ) -> None:
        if grounding not in GROUNDING_POLICIES:
            raise ValueError(f"unknown grounding policy {grounding!r}; choose one of {', '.join(GROUNDING_POLICIES)}")
        self.model = model
        self.name = model.name
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.parse_retries = parse_retries
        self.few_shot = few_shot
        self.seed = seed
        self.grounding = grounding
        self.text_flags = text_flags  # injection, pseudo-alignment and referral flags on the judged text

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
        judgment = await self._judge(protocol, case, response, repeat=repeat, crisis_label=crisis_label)
        return self._checked(judgment, protocol, case, response)

    async def _judge(
        self, protocol: ProtocolSpec, case: Case, response: Response | None, *, repeat: int, crisis_label: str | None
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
        verdict = Verdict.fail("parse_failure", "no attempt")
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
                return Judgment.unscored("provider_error", str(exc), usage=usage or Usage(), latency_s=latency, **ids)
            usage = completion.usage if usage is None else usage + completion.usage
            latency += completion.latency_s
            text = completion.text
            verdict = parse_verdict(protocol, text)
            if verdict.ok:
                break
        return judgment_from_verdict(verdict, raw=text, usage=usage or Usage(), latency_s=latency, **ids)

    def _checked(self, judgment: Judgment, protocol: ProtocolSpec, case: Case, response: Response | None) -> Judgment:
        """Grounding and text flags for a judgment of a reply; injection flags for a judgment of the case."""
        if protocol.target == "response":
            text = response.text if response is not None else None
            if text is None:
                return judgment
            judgment, _ = apply_grounding(judgment, text, self.grounding, protocol)
            extra = response_flags(text, case.locale) if self.text_flags else []
        else:
            kinds = detect_injection("\n".join(t.content for t in case.turns)) if self.text_flags else []
            extra = ["injection_suspected", *(f"injection:{k}" for k in kinds)] if kinds else []
        if not extra:
            return judgment
        return judgment.model_copy(update={"flags": [*judgment.flags, *(f for f in extra if f not in judgment.flags)]})


def _unit_fields(
    protocol: ProtocolSpec, case: Case, response: Response | None, judge: str, repeat: int
) -> dict[str, object]:
    fields: dict[str, object] = {"case_id": case.id, "protocol": protocol.id, "judge": judge, "repeat": repeat}
    if protocol.target == "response" and response is not None:
        fields["model"] = response.model
        fields["sample"] = response.sample
    return fields
