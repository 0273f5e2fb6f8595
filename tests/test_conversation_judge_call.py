"""The whole-conversation judges (flow, expectations) ask their model through one call: the run's judge
settings go with it, its tokens come back on the verdict, and a failed call is an unscored judgment
(provider_error), never an exception. The judge model is a real client against the loopback server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from fake_openai import FakeOpenAI, reply, status
from mheval.config import RunConfig
from mheval.conversations.expectations import expectation_ids
from mheval.conversations.flow import load_flow
from mheval.judges.conversation.expectations_judge import judge_expectations
from mheval.judges.conversation.flow_judge import judge_flow
from mheval.models.limits import RetryPolicy
from mheval.models.openai_compat import OpenAICompatModel
from mheval.models.spec import parse_model_spec
from mheval.records import Exchange, Judgment, Reason
from mheval.suites.dialogues import load_dialogue_suite

ONE_TRY = RetryPolicy(max_attempts=1, base_s=0.01, max_s=0.05)
CONFIG = RunConfig(judge_temperature=0.3, judge_max_tokens=700, seed=11)
SCENARIO = load_dialogue_suite("crisis-dialogues", limit=1)[0]
EXCHANGES = [
    Exchange(scenario_id=SCENARIO.id, model="m", turn=1, beat=0, user="I can't sleep and I feel alone lately.",
             reply="That sounds exhausting. What has been keeping you up?"),
    Exchange(scenario_id=SCENARIO.id, model="m", turn=2, beat=1, user="Work, mostly. I feel like I'm failing.",
             reply="Feeling that way is hard. Would you like to talk through what happened at work?"),
]  # fmt: skip


def _judge(which: str, server: FakeOpenAI) -> Judgment:
    async def go() -> Judgment:
        model = OpenAICompatModel(parse_model_spec(f"test/judge@{server.base_url}"), retry=ONE_TRY)
        try:
            common: dict[str, Any] = {"judge": model.name, "judge_model": model, "model": "m", "sample": 0}
            if which == "flow":
                return await judge_flow(load_flow(), SCENARIO, EXCHANGES, [], config=CONFIG, **common)
            return await judge_expectations(SCENARIO, EXCHANGES, config=CONFIG, **common)
        finally:
            await model.aclose()

    return asyncio.run(go())


def _answer(which: str) -> str:
    if which == "flow":
        dims = [d for d, _ in load_flow().dimensions]
        answers = {d: {"answer": "best_practice", "quotes": [], "why": "fine"} for d in dims}
        return json.dumps({"risk_disclosed": False, "answers": answers})
    answers = {e: {"answer": "unclear", "quotes": [], "why": "not shown"} for e in expectation_ids(SCENARIO)}
    return json.dumps({"answers": answers})


@pytest.mark.parametrize("which", ["flow", "expectations"])
def test_a_failed_judge_call_is_an_unscored_provider_error(which: str, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(status(400, "model not available"))
    judged = _judge(which, fake_openai)
    assert judged.status == "unscored" and judged.reason == Reason.PROVIDER_ERROR
    assert "model not available" in (judged.detail or "")
    assert (judged.case_id, judged.model, judged.sample) == (SCENARIO.id, "m", 0)


@pytest.mark.parametrize("which", ["flow", "expectations"])
def test_the_call_carries_the_run_judge_settings_and_its_tokens_come_back(which: str, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(reply(_answer(which), usage=(321, 45)))
    judged = _judge(which, fake_openai)
    assert judged.status == "ok", judged.reason_text
    assert (judged.usage.prompt_tokens, judged.usage.completion_tokens) == (321, 45)
    (sent,) = [r.json for r in fake_openai.requests]
    assert (sent["temperature"], sent["max_tokens"], sent["seed"]) == (0.3, 700, 11)
    assert "I feel like I'm failing" in sent["messages"][0]["content"]
