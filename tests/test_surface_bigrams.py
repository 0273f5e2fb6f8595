"""The surface block reads a conversation's bigrams from each turn's kept bigrams (features._turns_bigrams): the same
set as the bigrams of the turns joined by spaces, whatever the turns hold (seams, punctuation, empty turns, scripts
whose lower case depends on the neighbours, such as the Greek final sigma)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from mheval.judges.offline.features import _turns_bigrams

_SPACE_OR_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)


def joined_bigrams(texts: list[str]) -> set[str]:
    flat = _SPACE_OR_PUNCT.sub("", " ".join(texts).lower())
    return {flat[i : i + 2] for i in range(len(flat) - 1)}


@given(st.lists(st.text(alphabet="abXY Σσς你好嗎。!?\n_-1İ", max_size=12), max_size=6))
def test_turn_by_turn_bigrams_are_the_joined_texts_bigrams(texts: list[str]) -> None:
    assert _turns_bigrams(texts) == joined_bigrams(texts)


def test_a_seam_between_turns_is_a_bigram() -> None:
    assert "ab" in _turns_bigrams(["xa", "...", "by"]) and "ab" not in _turns_bigrams(["xa"]) | _turns_bigrams(["by"])
