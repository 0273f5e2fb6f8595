"""One owner per text table: the CJK character ranges and the language guess are defined in mheval/textscan.py
only, and the two copies of the traditional/simplified pairs that remain (listed in docs/architecture.md as
debt) agree with each other until they are one.

The source scan reads the code as text: a character range of the CJK ideographs (U+4E00, U+3400 or U+9FFF as an
escape or as the character) outside textscan.py fails, except where it is known debt below; a debt entry that no
longer holds fails too, so that it is deleted from the list."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import mheval
from mheval.textscan import CJK_IDEOGRAPHS, detect_language

SRC = Path(mheval.__file__).resolve().parent
CJK_RANGE = re.compile(r"\\u(?:4e00|3400|9fff)|[\u4e00\u3400]-|-\u9fff", re.IGNORECASE)
DEFINITION = re.compile(r"^\s*def detect_language\b|^\s*def (?:is|has|count)_cjk\b", re.MULTILINE)
# Known copies outside textscan.py, each to be replaced by an import from it (harm.py's class also takes the
# Yijing hexagram block and leaves out Extension B).
DEBT = {"judges/offline/harm.py"}


def _sources() -> dict[str, str]:
    return {p.relative_to(SRC).as_posix(): p.read_text(encoding="utf-8") for p in SRC.rglob("*.py")}


def test_cjk_ranges_and_the_language_guess_are_defined_in_textscan_only():
    sources = _sources()
    ranges = {name for name, text in sources.items() if name != "textscan.py" and CJK_RANGE.search(text)}
    assert ranges - DEBT == set(), "import the CJK ranges from mheval.textscan instead"
    assert DEBT - ranges == set(), "a debt entry no longer holds: delete it from DEBT"
    defined = {name for name, text in sources.items() if DEFINITION.search(text)}
    assert defined == {"textscan.py"}


def test_the_shared_ranges_cover_chinese_and_the_guess_reads_them():
    assert re.fullmatch(f"[{CJK_IDEOGRAPHS}]+", "我最近睡不好㐀𠀀")
    assert detect_language("hi, hello, 我最近睡不好") == "zh" and detect_language("I can't sleep") == "en"


def test_the_two_copies_of_the_script_pairs_agree():
    """Every (simplified, traditional) pair that decides a scenario's script is a pair the offline lexicon folds
    traditional text by, so the two tables cannot drift apart unnoticed."""
    from mheval.conversations.scenario import _SCRIPT_PAIRS  # the pairs as scenario.py writes them

    doc = yaml.safe_load((SRC / "judges" / "offline" / "common.yaml").read_text(encoding="utf-8"))
    chars = re.sub(r"\s", "", doc["normalise"]["traditional"])
    to_simplified = {chars[i]: chars[i + 1] for i in range(0, len(chars), 2)}
    assert len(_SCRIPT_PAIRS) > 100
    apart = [pair for pair in _SCRIPT_PAIRS if to_simplified.get(pair[1]) != pair[0]]
    assert apart == [], "scenario.py pairs (simplified, traditional) the lexicon does not fold"
