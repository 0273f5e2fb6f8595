"""One owner per text table: the CJK character ranges and the language guess are defined in mheval/textscan.py
only, and so are the traditional/simplified pairs that a scenario's script check and the offline lexicon read.

The source scan reads the code as text: a character range of the CJK ideographs (U+4E00, U+3400 or U+9FFF as an
escape or as the character) outside textscan.py fails, except where it is known debt below; a debt entry that no
longer holds fails too, so that it is deleted from the list."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import mheval
from mheval.textscan import (
    CJK_IDEOGRAPHS,
    SCRIPT_MARK_PAIRS,
    SIMPLIFIED_MARKS,
    TRADITIONAL_MARKS,
    TRADITIONAL_TO_SIMPLIFIED,
    detect_language,
)

SRC = Path(mheval.__file__).resolve().parent
CJK_RANGE = re.compile(r"\\u(?:4e00|3400|9fff)|[\u4e00\u3400]-|-\u9fff", re.IGNORECASE)
DEFINITION = re.compile(r"^\s*def detect_language\b|^\s*def (?:is|has|count)_cjk\b", re.MULTILINE)
# Known copies outside textscan.py, each to be replaced by an import from it (none today).
DEBT: set[str] = set()


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


def test_the_script_pairs_have_one_owner_that_the_scenarios_and_the_lexicon_read():
    """textscan owns the (simplified, traditional) pairs: a scenario's script check reads its marks, and the offline
    lexicon folds traditional text by its table; the shipped lexicon file holds no copy of the pairs."""
    from mheval.conversations import scenario
    from mheval.judges.offline.lexicon_files import load_lexicon

    assert scenario.SIMPLIFIED_ONLY is SIMPLIFIED_MARKS and scenario.TRADITIONAL_ONLY is TRADITIONAL_MARKS
    doc = yaml.safe_load((SRC / "judges" / "offline" / "common.yaml").read_text(encoding="utf-8"))
    assert "traditional" not in doc["normalise"]
    assert len(SCRIPT_MARK_PAIRS) > 100
    folded = load_lexicon().table
    apart = [pair for pair in SCRIPT_MARK_PAIRS if folded.get(ord(pair[1])) != pair[0]]
    assert apart == [], "marks the lexicon does not fold"
    assert all(folded[key] == value for key, value in TRADITIONAL_TO_SIMPLIFIED.items())


def test_a_lexicon_may_add_pairs_of_its_own(tmp_path):
    """A custom lexicon's `normalise.traditional` pairs are folded besides textscan's (著 is not in the table)."""
    from mheval.judges.offline.cues import LEXICON_FILES
    from mheval.judges.offline.lexicon_files import load_lexicon

    for name in LEXICON_FILES:
        (tmp_path / name).write_text((SRC / "judges" / "offline" / name).read_text(encoding="utf-8"), encoding="utf-8")
    common = tmp_path / "common.yaml"
    text = common.read_text(encoding="utf-8")
    common.write_text(text.replace("\nnegation:", '  traditional: "著着"\n\nnegation:', 1), encoding="utf-8")
    assert ord("著") not in load_lexicon().table
    table = load_lexicon(tmp_path).table
    assert table[ord("著")] == "着" and table[ord("這")] == "这"
