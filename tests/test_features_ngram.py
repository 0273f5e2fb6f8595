"""Hashed n-gram feature blocks: deterministic, language-neutral, text-free in a saved model, and scaled
by idf (not standardised) when a head is fitted. Every text here is written for these tests; nothing
here loads the sentence encoder.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mheval.errors import InputError
from mheval.judges.offline.features import (
    NGRAM_BUCKETS,
    Item,
    featurize,
    ngram_columns,
    ngram_vector,
    width,
)
from mheval.records import Case, Turn
from mheval.training import fit, train_judge

TEXTS = {
    "suicidal_ideation": [
        "I don't want to be alive anymore",
        "I keep thinking about ending my life",
        "I wish I could sleep and never wake up",
        "我不想活了，活着没有意义",
        "everyone would be better off without me",
        "I have been planning how to end it",
    ],
    "no_crisis": [
        "can you suggest a recipe for dinner",
        "what is a good book about gardening",
        "how do I fix a flat bicycle tyre",
        "周末去哪里散步比较好",
        "recommend a film for a rainy evening",
        "which houseplants need little light",
    ],
}


def _case(text: str, i: int = 0) -> Case:
    return Case(id=f"c{i}", turns=[Turn(role="user", content=text)])


def test_ngram_vector_shape_norm_and_determinism() -> None:
    for text in ("I feel alone tonight", "我今晚觉得很孤单", "mixed 混合 text!", ""):
        v = ngram_vector(text)
        assert v.shape == (NGRAM_BUCKETS,) and v.dtype == np.float32
        assert np.all(v >= 0) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
        np.testing.assert_array_equal(v, ngram_vector(text))


def test_ngram_vector_is_the_same_in_a_fresh_process() -> None:
    """The hash must not depend on Python's per-process salt (PYTHONHASHSEED)."""
    code = (
        "import json; from mheval.judges.offline.features import ngram_vector; "
        "v = ngram_vector('Are you safe right now? 你现在安全吗？'); "
        "print(json.dumps([int(i) for i in v.nonzero()[0]]))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1
    here = ngram_vector("Are you safe right now? 你现在安全吗？")
    assert json.loads(outs.pop()) == [int(i) for i in here.nonzero()[0]]


def test_ngram_vector_ignores_case_and_whitespace_and_sees_shared_words() -> None:
    np.testing.assert_array_equal(ngram_vector("Hello   World"), ngram_vector("hello world"))
    a, b, c = ngram_vector("I want to end my life"), ngram_vector("I want to end it all"), ngram_vector("周末散步")
    assert float(a @ b) > float(a @ c)
    # Chinese needs no segmenter: texts sharing characters share buckets.
    near, far = ngram_vector("我真的不想活"), ngram_vector("周末去哪里散步")
    assert float(ngram_vector("我不想活了") @ near) > 2 * float(ngram_vector("我不想活了") @ far)


def test_ngram_blocks_are_named_sized_and_masked() -> None:
    assert width("ngram:user") == width("ngram:response") == NGRAM_BUCKETS
    with pytest.raises(InputError):
        width("ngram:nowhere")
    mask = ngram_columns(["lex:triage", "ngram:user", "len:response"])
    assert mask.shape == (6 + NGRAM_BUCKETS + 1,) and mask.sum() == NGRAM_BUCKETS and mask[6] and not mask[5]
    x = featurize(["ngram:user", "lex:triage"], [Item(_case("I want to end my life"))])  # no encoder needed
    assert x.shape == (1, NGRAM_BUCKETS + 6)
    np.testing.assert_array_equal(x[0, :NGRAM_BUCKETS], ngram_vector("I want to end my life"))


def test_ngram_columns_are_scaled_by_idf_not_standardised() -> None:
    rng = np.random.default_rng(0)
    dense = rng.normal(3.0, 2.0, size=(40, 2))
    sparse = np.zeros((40, 3))
    sparse[:, 0] = 0.5  # in every row
    sparse[:4, 1] = 0.5  # in a tenth of them
    x = np.hstack([dense, sparse])
    mask = np.array([False, False, True, True, True])
    mean, scale = fit._scaling(x, mask, ngram_weight=2.0)
    np.testing.assert_allclose(mean[:2], dense.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(scale[:2], dense.std(axis=0), rtol=1e-6)
    assert np.all(mean[2:] == 0.0)
    idf = 1.0 / (scale[2:] * 2.0)
    assert idf[0] == pytest.approx(np.log(41 / 41) + 1.0, rel=1e-6)
    assert idf[1] == pytest.approx(np.log(41 / 5) + 1.0, rel=1e-6)
    assert idf[2] > idf[1] > idf[0]  # the rarer a bucket, the more it weighs


@pytest.fixture(scope="module")
def labelled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [{"text": t, "label": label} for label, texts in TEXTS.items() for t in texts]
    path = tmp_path_factory.mktemp("ngram") / "labels.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_an_ngram_judge_trains_saves_reloads_and_stores_no_text(labelled: Path, tmp_path: Path) -> None:
    from mheval.training import load_trained_judge

    kwargs = {"text_fields": ["text"], "label_field": "label", "folds": 3, "seed": 0}
    first = train_judge(labelled, features=["ngram:user"], ngram_weights=(1.0, 3.0), grid=(1.0, 10.0), **kwargs)
    again = train_judge(labelled, features=["ngram:user"], ngram_weights=(1.0, 3.0), grid=(1.0, 10.0), **kwargs)
    assert first.figures == again.figures and first.params == again.params
    assert first.params["ngram_weight"] in (1.0, 3.0) and len(first.params["ngram_weight_per_fold"]) == 3
    path = first.judge.save(tmp_path / "ngram.npz")
    assert path.read_bytes() == again.judge.save(tmp_path / "again.npz").read_bytes()
    with zipfile.ZipFile(path) as zf:
        stored = b"".join(zf.read(name) for name in zf.namelist())
    for texts in TEXTS.values():
        for text in texts:
            for word in text.split()[:3]:
                if len(word) > 4:
                    assert word.encode("utf-8") not in stored, word
            assert text.encode("utf-8") not in stored
    loaded = load_trained_judge(path)
    probe = [Item(_case("I am thinking about ending my life", 1)), Item(_case("a good recipe for dinner?", 2))]
    np.testing.assert_array_equal(loaded.predict_proba(probe), first.judge.predict_proba(probe))
    assert loaded.predict(probe) == ["suicidal_ideation", "no_crisis"]
    judgment = asyncio.run(loaded.judge(SimpleNamespace(id="crisis-triage"), probe[0].case, None))
    assert judgment.status == "ok" and judgment.label == "suicidal_ideation"
