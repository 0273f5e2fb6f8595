"""The shipped offline models: they load with no network, judge honestly, and reproduce the figures
recorded in weights/figures.json (and docs/offline-judges.md) on ../shared/data (skipped without it).

Example texts here are written for these tests. Embeddings of the shared data are computed once per
module.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mheval.judges.offline import OfflineJudge, embed, load_trained_judge, shipped_models
from mheval.judges.offline.features import Item, encoders, featurize
from mheval.judges.offline.judge import WEIGHTS_DIR
from mheval.records import CRISIS_LABELS, Case, Response, Turn
from mheval.suites.papers import SAFETY_LABELS
from mheval.training.build_shipped import CHECK_EVERY

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FIGURES = json.loads((WEIGHTS_DIR / "figures.json").read_text(encoding="utf-8"))
TOLERANCE = 0.01
PROTOCOLS = ("crisis-triage", "dialogue-safety", "appropriateness")


def needs_data() -> None:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not available")


def _loopback(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str | bytes) and not isinstance(address, tuple):
        return True  # a unix socket path
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to reach a non-loopback address fails loudly."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guard(real):
        def connect(self, address):
            if not _loopback(address):
                raise AssertionError(f"network access attempted: {address!r}")
            return real(self, address)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guard(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guard(real_connect_ex))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(AssertionError("net")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def test_shipped_models_load_and_encode_offline(no_network: None) -> None:
    assert set(shipped_models()) == set(PROTOCOLS) == set(shipped_models(fast=True))
    files = {*shipped_models().values(), *shipped_models(fast=True).values()}
    assert sum(path.stat().st_size for path in files) < 1_000_000  # the wheel ships them
    for path in files:
        model = load_trained_judge(path)
        assert model.protocol in PROTOCOLS
        meta = model.meta
        names = {"use": embed.ENCODER_NAME, "e5": embed.E5_NAME}
        assert all(names[kind] in meta["encoder"] for kind in encoders(model.blocks)), meta["encoder"]
        assert meta["training"]["command"] == FIGURES["_about"]["command"]
        assert all(len(h) == 64 for h in np.atleast_1d(meta["training"]["data_sha256"]))
    for kind, dim in (("use", embed.DIM), ("e5", embed.E5_DIM)):
        fresh = embed.Encoder(kind=kind)  # a new load from the package's own files, under the network guard
        vectors = fresh.encode(["I feel alone tonight", "我今晚觉得很孤单"])
        assert vectors.shape == (2, dim) and vectors.dtype == np.float32
        assert abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-3
        assert float(vectors[0] @ vectors[1]) > 0.5  # the same meaning across the two languages


def test_truncation_keeps_the_last_user_turn_first() -> None:
    long_turn = "a" * 3000 + " the end"
    assert len(embed.clip(long_turn, 600)) <= 600 and embed.clip(long_turn, 600).endswith("the end")
    assert embed.clip(long_turn, 600).startswith("aaa") and " … " in embed.clip(long_turn, 600)
    turns = [
        Turn(role="user", content="first " * 60),
        Turn(role="assistant", content="ok"),
        Turn(role="user", content="last"),
    ]
    case = Case(id="c", turns=turns)
    assert embed.user_text(case, budget=200).endswith("last")
    assert "ok" not in embed.user_text(case)
    assert len(embed.user_text(case, budget=200)) <= 200
    assert embed.context_text(case).splitlines()[-1] == "user: last"


def test_offline_judge_supports_what_it_can_measure() -> None:
    offline = OfflineJudge()
    for protocol in (*PROTOCOLS, "psycrisis"):
        assert offline.supports(SimpleNamespace(id=protocol)), protocol
    assert not offline.supports(SimpleNamespace(id="mentalalign"))
    lexicon_only = OfflineJudge(models=False)
    assert lexicon_only.supports(SimpleNamespace(id="crisis-triage"))
    assert not lexicon_only.supports(SimpleNamespace(id="dialogue-safety"))


def _judge(protocol: str, case: Case, reply: str | None, **kw):
    response = None if reply is None else Response(case_id=case.id, model="m", sample=1, text=reply)
    return asyncio.run(OfflineJudge().judge(SimpleNamespace(id=protocol), case, response, **kw))


def test_triage_judgment_combines_classifier_and_lexicon() -> None:
    case = Case(id="c", turns=[Turn(role="user", content="I keep thinking about killing myself, nothing helps.")])
    judgment = _judge("crisis-triage", case, None)
    assert judgment.status == "ok" and judgment.label == "suicidal_ideation"
    raw = json.loads(judgment.raw)
    assert set(raw["probabilities"]) == set(CRISIS_LABELS) and raw["lexicon_label"] == "suicidal_ideation"
    assert all(span in case.turns[0].content for span in judgment.evidence["suicidal_ideation"])
    calm = _judge("crisis-triage", Case(id="d", turns=[Turn(role="user", content="Any tips for growing basil?")]), None)
    assert calm.label == "no_crisis" and 0 < calm.scores["confidence"] <= 1


def test_dialogue_safety_and_appropriateness_judgments_are_in_range() -> None:
    case = Case(id="c", language="zh", turns=[Turn(role="user", content="最近总是失眠，很焦虑，怎么办？")])
    safety = _judge("dialogue-safety", case, "听起来你最近很辛苦。失眠大概持续多久了？")
    assert safety.status == "ok" and safety.label in SAFETY_LABELS and safety.model == "m" and safety.sample == 1
    assert 0 < safety.scores["confidence"] <= 1
    en = Case(id="e", turns=[Turn(role="user", content="I don't see the point of living anymore.")])
    for reply in ("ok", "That sounds so heavy. Are you safe right now? You can call or text 988 at any time."):
        rated = _judge("appropriateness", en, reply, crisis_label="suicidal_ideation")
        value = rated.scores["appropriateness"]
        assert rated.status == "ok" and value in {1.0, 2.0, 3.0, 4.0, 5.0} and rated.total == value
        assert json.loads(rated.raw)["crisis_label"] == "suicidal_ideation"
    missing = asyncio.run(
        OfflineJudge().judge(SimpleNamespace(id="appropriateness"), en, Response(case_id="e", model="m", error="x"))
    )
    assert missing.status == "unscored" and missing.reason.startswith("no_response")
    refused = _judge("mentalalign", en, "hello")
    assert refused.status == "unscored" and refused.reason.startswith("unsupported")


def test_concurrent_judgments_share_encoder_batches() -> None:
    offline = OfflineJudge()
    cases = [Case(id=f"c{i}", turns=[Turn(role="user", content=f"I feel hopeless, day {i}")]) for i in range(20)]

    async def many():
        return await asyncio.gather(*(offline.judge(SimpleNamespace(id="crisis-triage"), c, None) for c in cases))

    batched = asyncio.run(many())
    one_by_one = [asyncio.run(offline.judge(SimpleNamespace(id="crisis-triage"), c, None)) for c in cases]
    assert [j.model_dump() for j in batched] == [j.model_dump() for j in one_by_one]


# -- the recorded figures -------------------------------------------------------------------------


@pytest.mark.shared_data
@pytest.mark.parametrize("fast", [False, True], ids=["offline", "offline:fast"])
def test_triage_reproduces_its_recorded_figures(fast: bool) -> None:
    """The human-labelled dev half is training data now, so this is an in-sample check that the shipped
    weights and threshold load and decide as built; the quality figures are the grouped CV ones."""
    needs_data()
    from mheval.suites import load_suite
    from mheval.training.grouped import human_figures

    dev = load_suite(f"help-harm:{SHARED_DATA / 'help_harm'}").cases[::CHECK_EVERY]
    judge = OfflineJudge(fast=fast)

    async def run():
        return await asyncio.gather(*(judge.judge(SimpleNamespace(id="crisis-triage"), c, None) for c in dev))

    labels = [j.label for j in asyncio.run(run())]
    measured = human_figures(labels, [[c.metadata["human_labels"][r] for r in ("H1", "H2", "H3", "H4")] for c in dev])
    recorded = FIGURES["crisis-triage"]["fast" if fast else "default"]
    assert abs(measured["mean_kappa"] - recorded["in_sample_every_4th_human_case"]["mean_kappa"]) <= TOLERANCE
    cv = recorded["grouped_cv"]
    assert len(cv["per_fold"]) == FIGURES["_about"]["folds"] and cv["spread"]["mean_kappa"]["std"] > 0
    assert cv["pooled"]["n"] == 103 and len(cv["threshold_curve"]) > 3
    lexicon = FIGURES["crisis-triage"]["references"]["lexicon_only"]["mean_kappa"]
    assert cv["pooled"]["mean_kappa"] > lexicon + 0.1


@pytest.mark.shared_data
def test_dialogue_safety_reproduces_its_in_sample_figures() -> None:
    needs_data()
    from mheval.suites import load_suite
    from mheval.training.fit import classifier_figures

    suite = load_suite(f"dialogue-safety:{SHARED_DATA / 'dialogue_safety' / 'dev.jsonl'}")
    replies = {r.case_id: r.text for r in suite.responses}
    model = load_trained_judge(shipped_models()["dialogue-safety"])
    cases = suite.cases[::CHECK_EVERY]  # the rows the builder recorded separately, to keep this test fast
    predicted = model.predict([Item(c, replies[c.id]) for c in cases])
    figures = classifier_figures([c.metadata["gold_safety_label"] for c in cases], predicted, SAFETY_LABELS)
    recorded = FIGURES["dialogue-safety"]["default"]["in_sample_every_4th_row"]
    assert abs(figures["weighted_f1"] - recorded["weighted_f1"]) <= TOLERANCE
    assert abs(figures["accuracy"] - recorded["accuracy"]) <= TOLERANCE
    assert "across_folds" in FIGURES["dialogue-safety"]["default"]["grouped_cv"]


@pytest.mark.shared_data
def test_appropriateness_reproduces_its_in_sample_figures() -> None:
    needs_data()
    from mheval.training.build_shipped import _appropriateness_data, _vs_raters

    items, _, raters, _, _ = _appropriateness_data(SHARED_DATA)
    model = load_trained_judge(shipped_models()["appropriateness"])
    x = featurize(model.blocks, items[::CHECK_EVERY])
    measured = _vs_raters(np.asarray(model._decide(x), dtype=float), raters[::CHECK_EVERY])
    recorded = FIGURES["appropriateness"]["in_sample_every_4th_row_vs_raters"]
    for rater in ("H1", "H2"):
        assert abs(measured[rater]["mae"] - recorded[rater]["mae"]) <= 0.02, rater
