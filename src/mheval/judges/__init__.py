"""Judges: the offline judge, or an LLM judge named by a model spec."""

from __future__ import annotations

from collections.abc import Mapping

from mheval.config import RunConfig
from mheval.judges.base import Judge
from mheval.models.base import ChatModel

OFFLINE = "offline"


def judge_model_specs(judges: list[str]) -> list[str]:
    """The judge names that are chat models (everything but the offline judge)."""
    return [j for j in judges if j != OFFLINE]


def build_judge(name: str, models: Mapping[str, ChatModel], config: RunConfig) -> Judge:
    if name == OFFLINE:
        from mheval.judges.offline import OfflineJudge

        return OfflineJudge()
    from mheval.judges.llm import LLMJudge

    return LLMJudge(
        models[name],
        temperature=config.judge_temperature,
        max_tokens=config.judge_max_tokens,
        parse_retries=config.parse_retries,
        few_shot=config.few_shot,
        seed=config.seed,
        grounding=config.grounding,
    )
