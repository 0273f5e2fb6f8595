"""The crisis gate: triage's second reading of whether the user is in a crisis of their own.

Unit facts about how triage decides with it (risk.decide_triage), the shipped gate files, and pairs of
messages that share most of their words (an ordinary message and a message with the writer's own risk),
in English, simplified and traditional Chinese, read by the shipped judge.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from mheval.judges.offline.crisis_gate import CrisisGate, gate_path, load_gate
from mheval.judges.offline.judge import WEIGHTS_DIR, OfflineJudge
from mheval.judges.offline.risk import GateReading, RiskScreen, decide_triage, screen
from mheval.labels import CRISIS_LABELS, CRISIS_TRIAGE, HIGH_RISK, NO_CRISIS
from mheval.records import Case, Turn

LABELS = list(CRISIS_LABELS)


def _proba(label: str, p: float = 0.9) -> np.ndarray:
    out = np.full(len(LABELS), (1.0 - p) / (len(LABELS) - 1))
    out[LABELS.index(label)] = p
    return out


def test_a_gate_below_its_veto_clears_what_the_classifier_calls_a_crisis() -> None:
    proba = _proba("suicidal_ideation", 0.95)
    quiet = RiskScreen()
    assert LABELS[decide_triage(proba, LABELS, 0.02, quiet)] == "suicidal_ideation"
    assert LABELS[decide_triage(proba, LABELS, 0.02, quiet, gate=GateReading(0.1, 0.2, 0.01))] == NO_CRISIS
    assert LABELS[decide_triage(proba, LABELS, 0.02, quiet, gate=GateReading(0.3, 0.2, 0.01))] == "suicidal_ideation"
    anxious = _proba("anxiety_crisis")
    assert LABELS[decide_triage(anxious, LABELS, 0.02, quiet, gate=GateReading(0.1, 0.2, 0.01))] == NO_CRISIS


def test_an_explicit_statement_of_risk_is_overruled_only_below_the_floor_veto() -> None:
    """The explicit findings are cue lists: they set a floor the gate lowers only when it is very sure."""
    found = screen(["I have already written the goodbye letters and picked the date."])
    assert found.floor in HIGH_RISK, found
    calm = _proba(NO_CRISIS, 0.95)
    assert LABELS[decide_triage(calm, LABELS, 0.02, found, gate=GateReading(0.05, 0.2, 0.01))] in HIGH_RISK
    assert LABELS[decide_triage(calm, LABELS, 0.02, found, gate=GateReading(0.005, 0.2, 0.01))] == NO_CRISIS


@pytest.mark.parametrize("fast", [False, True])
def test_the_shipped_gate_loads_beside_its_triage_model(fast: bool) -> None:
    gate = load_gate(gate_path(WEIGHTS_DIR, fast))
    assert isinstance(gate, CrisisGate)
    assert any(b.startswith("e5:") for b in gate.blocks) is not fast
    assert 0.0 < gate.veto < 0.5  # chosen to keep nearly all risk messages (training/crisis_gate.py)
    assert 0.0 <= gate.floor_veto <= gate.veto
    x = np.zeros((2, gate.mean.shape[0]))
    p = gate.probability(x)
    assert p.shape == (2,) and np.all((p >= 0) & (p <= 1))


def test_a_judge_without_gate_files_decides_as_before(tmp_path: Path) -> None:
    """A model folder with triage weights but no gate: the judge reads no gate and says none in its raw."""
    import json
    import shutil

    shutil.copy(WEIGHTS_DIR / f"{CRISIS_TRIAGE}.npz", tmp_path / f"{CRISIS_TRIAGE}.npz")
    judge = OfflineJudge(models=tmp_path)
    assert judge.crisis_gate() is None
    j = asyncio.run(judge.judge(_P(CRISIS_TRIAGE), _case("I can't sleep before my exam."), None))
    assert json.loads(j.raw)["crisis_gate"] is None


class _P:
    def __init__(self, id: str) -> None:
        self.id = id


def _case(text: str) -> Case:
    return Case(id="t", turns=[Turn(role="user", content=text)], language="zh" if not text.isascii() else "en")


# (ordinary message, a message with the writer's own risk that shares most of its words)
PAIRS = [
    (
        "My friend keeps saying he's exhausted and can't keep going with his job. How do I support him?",
        "I keep saying I'm exhausted and can't keep going with anything. I don't see the point of being here.",
    ),
    (
        "I burned my hand on hot oil while cooking and it's blistered. Should I see a doctor?",
        "I burned my hand on purpose again last night and it's blistered. Nobody knows and I can't stop.",
    ),
    ("累死了，今天加班到十点，回家只想好好睡一觉。", "活着太累了，今天又加班到十点，真想睡过去就不要再醒来。"),
    ("朋友話佢好攰唔想再撐份工，我應該點樣幫佢？", "我好攰唔想再撐落去，覺得冇咗我大家會好啲。"),
    ("我朋友說她最近壓力很大，每天都很累，我該怎麼陪她？", "我最近壓力很大，每天都很累，常常想乾脆消失算了。"),
]


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge()


@pytest.mark.parametrize(("ordinary", "risky"), PAIRS)
def test_the_gate_reads_whose_crisis_it_is(judge: OfflineJudge, ordinary: str, risky: str) -> None:
    """The gate's probability is higher for the writer's own risk than for its ordinary partner, and the
    judge's labels are opposite: no crisis for the first, a crisis for the second."""
    import json

    async def read(text: str) -> tuple[str, float]:
        j = await judge.judge(_P(CRISIS_TRIAGE), _case(text), None)
        return str(j.label), json.loads(j.raw)["crisis_gate"]["probability"]

    (calm, p_calm), (alarm, p_alarm) = asyncio.run(read(ordinary)), asyncio.run(read(risky))
    assert p_alarm > p_calm, (p_calm, p_alarm)
    assert calm == NO_CRISIS, (ordinary, calm, p_calm)
    assert alarm != NO_CRISIS, (risky, alarm, p_alarm)
