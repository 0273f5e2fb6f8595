"""Judges: the offline judge, a trained judge file or fine-tuned folder (`mheval train`), a plug-in's judge
(entry point group `mheval.judges`, judges/registry.py), or an LLM judge named by a model spec."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mheval.config import RunConfig
from mheval.judges.base import Judge
from mheval.judges.registry import JUDGES, JudgeKind
from mheval.models.base import ChatModel

OFFLINE = "offline"
OFFLINE_FAST = "offline:fast"
OFFLINE_JUDGES: frozenset[str] = frozenset({OFFLINE, OFFLINE_FAST})
"""The offline judge at its two speeds (see judges/offline/judge.py)."""


def is_model_file(name: str) -> bool:
    """A judge saved by `mheval train` is named by its path."""
    return name.endswith(".npz")


def is_finetuned_folder(name: str) -> bool:
    """A judge fine-tuned by `mheval train --finetune` is a folder: an existing one, or a path ending in /."""
    return name.endswith(("/", "\\")) or Path(name).is_dir()


def judge_model_specs(judges: list[str]) -> list[str]:
    """The judge names that are chat models: those no registered kind takes (not the offline judge, a trained
    judge file or folder, or a plug-in's judge)."""
    return [j for j in judges if JUDGES.find(j) is None]


def build_judges(models: Mapping[str, ChatModel], config: RunConfig) -> dict[str, Judge]:
    """The run's judges, keyed by their names (what units and stored judgments call them)."""
    return {j.name: j for j in (build_judge(spec, models, config) for spec in config.judges)}


def build_judge(name: str, models: Mapping[str, ChatModel], config: RunConfig) -> Judge:
    """The judge `name` means: the registered kind that takes it (judges/registry.py), else an LLM judge over
    the chat model of that spec, which `models` must hold."""
    kind = JUDGES.find(name)
    if kind is not None:
        return kind.build(name, models, config)
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


# -- the built-in kinds, asked before any plug-in, in this order ------------------------------------------------
# The heavy modules load only when a judge of their kind is built.


def _offline_judge(name: str, models: Mapping[str, ChatModel], config: RunConfig) -> Judge:
    from mheval.judges.offline import OfflineJudge

    return OfflineJudge(fast=name == OFFLINE_FAST)


def _trained_judge(name: str, models: Mapping[str, ChatModel], config: RunConfig) -> Judge:
    from mheval.judges.offline.trained import load_trained_judge

    return load_trained_judge(name)


def _finetuned_judge(name: str, models: Mapping[str, ChatModel], config: RunConfig) -> Judge:
    from mheval.judges.offline.finetuned import load_finetuned_judge

    return load_finetuned_judge(name)


JUDGES.register(JudgeKind("offline", lambda name: name in OFFLINE_JUDGES, _offline_judge))
JUDGES.register(JudgeKind("trained judge file", is_model_file, _trained_judge))
JUDGES.register(JudgeKind("fine-tuned judge folder", is_finetuned_folder, _finetuned_judge))
