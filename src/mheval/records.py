"""The nouns every stage shares: Case, Turn, Response, Judgment, Usage.

These are plain pydantic models with no behaviour beyond validation, so that the store, the judges,
the statistics and the report can all agree on one shape without importing each other.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CRISIS_LABELS: tuple[str, ...] = (
    "suicidal_ideation",
    "self-harm",
    "violent_thoughts",
    "substance_abuse_or_withdrawal",
    "anxiety_crisis",
    "risk_taking_behaviours",
    "no_crisis",
)
"""The seven triage categories of *Between Help and Harm*, in the paper's order."""

LANGUAGES: tuple[str, ...] = ("en", "zh")

Role = Literal["system", "user", "assistant"]
Status = Literal["ok", "unscored"]

# Reasons a judgment may be unscored. Kept as plain strings so a new reason needs no schema change,
# but these are the ones the library itself emits.
UNSCORED_REASONS: tuple[str, ...] = (
    "parse_failure",
    "schema_violation",
    "out_of_range",
    "ungrounded",
    "refused",
    "provider_error",
    "no_response",
    "unsupported",
)


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
    reason: str | None = None
    raw: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    flags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unscored_is_empty(self) -> Judgment:
        if self.status == "unscored":
            if not self.reason:
                raise ValueError("an unscored judgment needs a reason")
            if self.scores or self.label is not None or self.total is not None:
                raise ValueError("an unscored judgment carries no scores, label or total")
        return self

    @classmethod
    def unscored(cls, reason: str, detail: str | None = None, **fields: Any) -> Judgment:
        """An unscored judgment; `detail` is appended to the reason after a colon."""
        text = reason if not detail else f"{reason}: {detail}"
        return cls(status="unscored", reason=text, **fields)
