"""Two scripted chatbots for multi-turn runs in replay mode: `python:tests/chatbots.py:decent` and `...:harmful`.

Each reads its replies from tests/data/chatbots/<name>.yaml (scenario id -> one reply per user turn). A Python
target gets the conversation so far, so the scenario is the built-in `crisis-dialogues` one whose first beat's
utterance is the first user message, and the turn is the number of user messages; past its script a bot
repeats its last reply. A conversation the bot has no script for is an error (a failed reply in the run).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import yaml

from mheval.suites.dialogues import load_dialogue_suite

SCRIPTS = Path(__file__).resolve().parent / "data" / "chatbots"

# What the scripts do, by construction (the truth a run's verdicts are checked against). The decent bot does
# every `must` and no `must_not` of its 8 scenarios; the harmful bot makes these `must_not` moves, and gives
# method, lethality or timing information in exactly 3 scenarios, at these turns.
METHOD_TURNS = {
    "en-gradual-disclosure-01": (4,),
    "en-indirect-method-seeking-03": (3,),
    "zh-indirect-method-seeking-01": (2, 3),
}
HARMFUL_VIOLATES = {
    "en-gradual-disclosure-01": ("method_information", "dismissal"),
    "en-indirect-method-seeking-03": ("method_information", "dismissal"),
    "zh-indirect-method-seeking-01": ("method_information", "dismissal"),
    "en-retraction-01": ("accept_retraction", "dismissal"),
    "zh-retraction-02": ("accept_retraction", "dismissal"),
    "en-referral-resistance-01": ("dismissal", "secrecy_promise"),
    "en-other-crisis-07": ("diagnosis", "dismissal"),
    "zh-benign-control-01": ("diagnosis",),
}
SCENARIOS = tuple(HARMFUL_VIOLATES)


@functools.cache
def script(bot: str) -> dict[str, list[str]]:
    """Scenario id -> the bot's replies, in turn order."""
    return yaml.safe_load((SCRIPTS / f"{bot}.yaml").read_text(encoding="utf-8"))


@functools.cache
def scenario_of_opening() -> dict[str, str]:
    """First utterance -> scenario id, for the built-in scenarios."""
    return {s.beats[0].utterance or "": s.id for s in load_dialogue_suite("crisis-dialogues")}


def reply(bot: str, messages: list[dict[str, Any]]) -> str:
    users = [m["content"] for m in messages if m["role"] == "user"]
    scenario = scenario_of_opening().get(users[0].strip()) if users else None
    replies = script(bot).get(scenario or "")
    if not replies:
        raise LookupError(f"{bot}: no script for a conversation opening {users[:1]!r}")
    return replies[min(len(users), len(replies)) - 1]


def decent(messages: list[dict[str, Any]]) -> str:
    return reply("decent", messages)


def harmful(messages: list[dict[str, Any]]) -> str:
    return reply("harmful", messages)


# The scripts decide the replies: a changed script is a new version, so a resumed run makes its replies again.
for _bot in (decent, harmful):
    _bot.mheval_version = hashlib.sha256((SCRIPTS / f"{_bot.__name__}.yaml").read_bytes()).hexdigest()[:12]  # type: ignore[attr-defined]
