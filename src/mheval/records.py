"""The nouns every stage shares: Case, Turn, Response, Judgment, Usage.

These are plain pydantic models with no behaviour beyond validation, so that the store, the judges,
the statistics and the report can all agree on one shape without importing each other.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mheval.labels import CRISIS_LABELS as CRISIS_LABELS  # re-exported: records.CRISIS_LABELS stays importable

LANGUAGES: tuple[str, ...] = ("en", "zh")

Role = Literal["system", "user", "assistant"]
Status = Literal["ok", "unscored"]


class Reason(StrEnum):
    """Why a judgment is unscored (its `detail` says more). Stored as these strings."""

    PARSE_FAILURE = "parse_failure"  # the judge's output held no readable verdict
    SCHEMA_VIOLATION = "schema_violation"  # a verdict, but not the protocol's (missing dimension, unknown label)
    OUT_OF_RANGE = "out_of_range"  # a score outside the scale
    UNGROUNDED = "ungrounded"  # the judge's evidence is not in the text judged
    REFUSED = "refused"  # the judge declined to judge
    PROVIDER_ERROR = "provider_error"  # the judge's endpoint failed (retried on resume)
    NO_RESPONSE = "no_response"  # there was no reply to judge (its generation failed; retried on resume)
    UNSUPPORTED = "unsupported"  # this judge cannot judge this protocol or unit
    RATER_UNSURE = "rater_unsure"  # a human rater answered "unsure"
    SIMULATOR_FAILURE = "simulator_failure"  # a simulated user broke its role (multi-turn)

    @property
    def retryable(self) -> bool:
        """The failure was the provider's, not the judge's: another attempt may succeed."""
        return self in (Reason.PROVIDER_ERROR, Reason.NO_RESPONSE)


UNSCORED_REASONS: tuple[str, ...] = tuple(r.value for r in Reason)


def reason_text(reason: Reason | None, detail: str | None) -> str | None:
    """Why something went unscored as people read it, "kind: detail" (the kind alone without a detail); None
    when nothing went wrong. Judgments and parse verdicts say it the same way."""
    if reason is None:
        return None
    return f"{reason.value}: {detail}" if detail else reason.value


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Turn(_Record):
    role: Role
    content: str


class Case(_Record):
    """What a user said: a conversation that ends on a user turn."""

    id: str = Field(min_length=1)
    turns: list[Turn] = Field(min_length=1)
    language: Literal["en", "zh"] = "en"
    crisis_label: str | None = None
    locale: str | None = None
    source: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("crisis_label")
    @classmethod
    def _known_label(cls, value: str | None) -> str | None:
        if value is not None and value not in CRISIS_LABELS:
            raise ValueError(f"unknown crisis_label {value!r}; choose one of {', '.join(CRISIS_LABELS)}")
        return value

    @model_validator(mode="after")
    def _ends_on_user(self) -> Case:
        if self.turns[-1].role != "user":
            raise ValueError("a case must end on a user turn")
        if not self.turns[-1].content.strip():
            raise ValueError("the last user turn is empty")
        return self

    @property
    def last_user_text(self) -> str:
        return self.turns[-1].content

    def transcript(self) -> str:
        """The conversation as plain text, one `role: content` block per turn."""
        return "\n".join(f"{t.role}: {t.content}" for t in self.turns)


class Usage(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class Response(_Record):
    """One model's reply to one case. `text` is None when the call failed (`error` says why)."""

    case_id: str
    model: str
    sample: int = 0
    text: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    error: str | None = None
    cached: bool = False
    # The reply was longer than the run's max_reply_chars and `text` holds only its beginning.
    truncated: bool = False


class Judgment(_Record):
    """One judge's verdict under one protocol.

    For a protocol that judges the user's input (crisis triage) `model` and `sample` are None.
    `status == "unscored"` means no verdict could be had; `reason` says why, and `scores`/`label`
    stay empty so that a failure can never be counted as a low or high score.
    """

    case_id: str
    protocol: str
    judge: str
    model: str | None = None
    sample: int | None = None
    repeat: int = 0
    label: str | None = None
    scores: dict[str, float] = Field(default_factory=dict)
    total: float | None = None
    rationale: str | None = None
    evidence: dict[str, list[str]] = Field(default_factory=dict)
    status: Status = "ok"
    reason: Reason | None = None
    detail: str | None = None
    raw: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    flags: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _split_reason(cls, data: Any) -> Any:
        """Older stores and exports kept "kind: detail" in one string: read it as kind and detail."""
        if isinstance(data, dict) and isinstance(data.get("reason"), str) and ":" in data["reason"]:
            kind, _, detail = data["reason"].partition(":")
            data = {**data, "reason": kind.strip(), "detail": data.get("detail") or detail.strip() or None}
        return data

    @property
    def reason_text(self) -> str | None:
        """ "kind: detail", for people to read."""
        return reason_text(self.reason, self.detail)

    @model_validator(mode="after")
    def _unscored_is_empty(self) -> Judgment:
        if self.status == "unscored":
            if not self.reason:
                raise ValueError("an unscored judgment needs a reason")
            if self.scores or self.label is not None or self.total is not None:
                raise ValueError("an unscored judgment carries no scores, label or total")
        return self

    @classmethod
    def unscored(cls, reason: Reason | str, detail: str | None = None, **fields: Any) -> Judgment:
        """An unscored judgment: why (a Reason) and, in words, what happened."""
        return cls(status="unscored", reason=Reason(reason), detail=detail or None, **fields)


class Exchange(_Record):
    """One turn pair of a multi-turn conversation (scenario x model x sample): what the simulated user said
    and the target's reply. `turn` counts from 1. `reply` is None when the target's call failed (`error`)."""

    scenario_id: str
    model: str
    sample: int = 0
    turn: int = Field(ge=1)
    beat: int = Field(ge=0)  # index of the scenario beat the user turn played
    user: str
    reply: str | None = None
    usage: Usage = Field(default_factory=Usage)  # target and simulator calls together
    latency_s: float = 0.0
    error: str | None = None
    # Simulated turns that a guard refused before this one was accepted, as "reason: detail" lines.
    rejected: list[str] = Field(default_factory=list)
    # The first turn a stateful app got in a new session although earlier turns exist (a resumed run): that
    # session never saw them (engine/conversation_stages.py).
    new_session: bool = False


class Conversation(_Record):
    """How one conversation ended. `status == "unscored"` (reason simulator_failure) keeps it out of every
    score; `stop_reason` is one of conversations.scenario.STOP_REASONS."""

    scenario_id: str
    model: str
    sample: int = 0
    mode: Literal["adaptive", "replay", "imported"]  # imported: a recorded conversation (conversations/imported.py)
    simulator: str | None = None
    turns: int = 0
    stop_reason: str
    status: Status = "ok"
    reason: Reason | None = None
    detail: str | None = None
    # A stateful app (a class target, an HTTP app with sessions) played the turns from `resumed_at_turn` on in a
    # new session: the run was cut mid-conversation and that session never saw the earlier turns
    # (engine/conversation_stages.py; `on_resume: restart` in the app file replays the conversation instead).
    resumed_in_new_session: bool = False
    resumed_at_turn: int | None = None
