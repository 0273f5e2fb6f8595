"""RunConfig: everything that defines a run, loadable from YAML and resolvable from CLI flags."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mheval.errors import InputError
from mheval.labels import APPROPRIATENESS, CRISIS_TRIAGE, PSYCRISIS
from mheval.models.spec import URL_CREDENTIALS, parse_model_spec
from mheval.yamlio import read_yaml_file

DEFAULT_SUITE = "crisis-core"
DEFAULT_MODEL = "local/smollm2"
DEFAULT_JUDGE = "offline"
DEFAULT_PROTOCOLS = (CRISIS_TRIAGE, PSYCRISIS, APPROPRIATENESS)
"""The default run measures harm: appropriateness gives the verdict (verdict.py) its "unsafe" on every case."""

STAGES = ("triage", "generate", "judge")

DEFAULT_MAX_TOKENS = 384
EMBEDDED_MAX_TOKENS = 160


class RunConfig(BaseModel):
    """A run: suite x targets (models x samples) x protocols x judges x repeats."""

    model_config = ConfigDict(extra="forbid")

    suite: str = DEFAULT_SUITE
    models: list[str] = Field(default_factory=lambda: [DEFAULT_MODEL])
    samples: int = Field(1, ge=1, le=100)
    judges: list[str] = Field(default_factory=lambda: [DEFAULT_JUDGE])
    protocols: list[str] = Field(default_factory=lambda: list(DEFAULT_PROTOCOLS))
    repeats: int = Field(1, ge=1, le=50)
    limit: int | None = Field(None, ge=1)
    out: str | None = None
    # Generation parameters for the models under test.
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    # Longest reply of a target, in tokens; None: 384 for a served model, 160 for an embedded `local/`
    # one (SmolLM2 on a CPU rarely stops by itself: 160 keeps the default run quick and representative).
    max_tokens: int | None = Field(None, ge=1)
    system_prompt: str | None = None
    # A reply longer than this many characters is stored cut to it, with `truncated: true` (a server that
    # ignores max_tokens must not fill memory, the store or the report).
    max_reply_chars: int = Field(65536, ge=1024)
    # Judge parameters.
    judge_temperature: float = Field(0.0, ge=0.0, le=2.0)
    judge_max_tokens: int = Field(1024, ge=1)
    parse_retries: int = Field(2, ge=0, le=10)
    few_shot: bool = False
    # What an LLM judge's positive claim without a verified quote from the response costs (judges/grounding.py).
    grounding: Literal["strict", "flag", "off"] = "flag"
    # Judgments flagged `injection_suspected` (the reply holds text addressed to the judge): "flag" keeps
    # them in the aggregates and every headline shows their share and the mean without them; "exclude"
    # leaves them out of every aggregate.
    on_injection: Literal["flag", "exclude"] = "flag"
    # Panel verdicts over the run's judges, written as judge "panel:<method>" after each judging stage.
    panel: list[Literal["majority", "mean", "median"]] = Field(default_factory=list)
    # Skip units where the judge is of the same family as the judged model (self-preference).
    leave_own_model_out: bool = False
    # Engine.
    concurrency: int = Field(32, ge=1, le=4096)
    timeout_s: float = Field(120.0, gt=0)
    seed: int = 0
    # Commit finished units in groups (faster on very fast endpoints; a kill may redo the last 0.2 s).
    group_commit: bool = False
    # Send the calls to remote endpoints as OpenAI Batch API jobs (half price, answers within 24 h;
    # engine/batch.py), polling every batch_poll_s seconds. Local models are still called directly.
    batch: bool = False
    batch_poll_s: float = Field(30.0, gt=0)
    # Where units are done: this process ("local") or a Ray cluster ("ray": `ray_address`, or a local
    # Ray instance when None; engine/ray_executor.py).
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    # Tokens-per-minute budget per model name, and a price table (a YAML/JSON path or a mapping).
    tpm: dict[str, int] = Field(default_factory=dict)
    prices: str | dict[str, Any] | None = None
    # Multi-turn suites (engine/conversation_stages.py): the model that plays the user, and how the user's turns
    # are made: "replay" says each beat's fixed utterance (no simulator calls), "adaptive" has the simulator
    # write them. None picks adaptive when a simulator is given, replay otherwise.
    simulator: str | None = None
    mode: Literal["adaptive", "replay"] | None = None
    # Personal data masked before a judge reads it (redaction.py, docs/redaction.md): "judge" masks names,
    # e-mail addresses, phone numbers (crisis lines kept), street addresses and URLs in every text a judge or
    # simulator receives; "store" does the same and also keeps the masked texts in the run folder.
    redact: Literal["off", "judge", "store"] = "off"
    # Recorded conversations (`transcripts:PATH` suites, conversations/imported.py): role names per side
    # ({"user": ["Patient"], "assistant": ["Bot"]}, or the command line's "user=Patient,assistant=Bot"), the
    # model name when a record has none, expectations for every conversation ({"must": [...], "must_not":
    # [...]}, or the command line's ["must=probe_risk,crisis_line"]; a record's own metadata.expect wins), and
    # whether a bad conversation is skipped and counted instead of stopping the import.
    roles: dict[str, list[str]] | str | None = None
    model_name: str | None = None
    expect: dict[str, list[str]] | list[str] | None = None
    skip_bad: bool = False

    @property
    def dialogue_mode(self) -> Literal["adaptive", "replay"]:
        return self.mode or ("adaptive" if self.simulator else "replay")

    @field_validator("models", "judges", "protocols")
    @classmethod
    def _non_empty_unique(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("needs at least one entry")
        seen: list[str] = []
        for item in value:
            if URL_CREDENTIALS.search(item):  # never into config.yaml (models/spec.py says more)
                raise ValueError("a model spec holds credentials in its URL; put the key in an environment variable")
            if item not in seen:
                seen.append(item)
        return seen

    def max_tokens_for(self, model: str) -> int:
        """The reply length asked of target `model` (its spec string)."""
        if self.max_tokens is not None:
            return self.max_tokens
        from mheval.models.targets import is_app_spec

        if is_app_spec(model):
            return DEFAULT_MAX_TOKENS  # an application or plug-in target (models/targets.py)
        spec = parse_model_spec(model)
        return EMBEDDED_MAX_TOKENS if spec.is_embedded else DEFAULT_MAX_TOKENS

    def identity_hash(self) -> str:
        """A short hash of what decides the run's units, so the same command finds the same folder."""
        keys = ("suite", "models", "samples", "judges", "protocols", "repeats", "limit")
        identity = {k: getattr(self, k) for k in keys}
        # Policies that change stored verdicts count too, but only when set, so default folders keep their names.
        for key in ("grounding", "panel", "leave_own_model_out"):
            if getattr(self, key) != RunConfig.model_fields[key].get_default(call_default_factory=True):
                identity[key] = getattr(self, key)
        payload = json.dumps(identity, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:8]

    def run_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(self.suite.split(":")[-1]).stem).strip("-") or "run"
        return Path("runs") / f"{slug}-{self.identity_hash()}"

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(), sort_keys=False, allow_unicode=True)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML run config (through the guarded reader every user YAML file takes); `overrides` (from CLI flags
    that were given) win over the file."""
    path = Path(path)
    data = read_yaml_file(path, "run config")[1] or {}
    if not isinstance(data, dict):
        raise InputError("a run config must be a mapping of keys to values", path=path)
    data.update(overrides or {})
    return build_config(data, source=path)


def build_config(data: dict[str, Any], source: str | Path | None = None) -> RunConfig:
    try:
        return RunConfig(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        choices = list(RunConfig.model_fields) if err["type"] == "extra_forbidden" else None
        raise InputError(err["msg"], path=source, field=field, choices=choices) from None
