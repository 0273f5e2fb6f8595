"""The Dialogue Safety reader's speaker-marked fields: a context or a reference response that cannot be split
into [seeker]/[supporter] segments is an InputError naming the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mheval.errors import InputError
from mheval.suites.papers import read_dialogue_safety

GOOD = {"id": "d1", "context": "[seeker]最近总是睡不着。[supporter]这种情况持续多久了？[seeker]快一个月了。"}


def _write(tmp_path: Path, bad: dict[str, object]) -> Path:
    path = tmp_path / "ds.jsonl"
    path.write_text(json.dumps(GOOD, ensure_ascii=False) + "\n" + json.dumps(bad, ensure_ascii=False) + "\n", "utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "field", "says"),
    [
        ({"id": "d2", "context": "你好[seeker]在吗"}, "context", "text before the first"),
        (
            {"id": "d2", "context": "[seeker]在吗", "response": "好的[supporter]我在"},
            "response",
            "text before the first",
        ),
        ({"id": "d2", "context": "[seeker]在吗", "response": "[seeker]我在"}, "response", "one [supporter] segment"),
        ({"id": "d2", "context": 5}, "context", ""),
        ({"id": "d2"}, "context", "missing required field"),
    ],
)
def test_a_bad_segmented_field_is_named_with_its_line(
    tmp_path: Path, bad: dict[str, object], field: str, says: str
) -> None:
    path = _write(tmp_path, bad)
    with pytest.raises(InputError) as refused:
        read_dialogue_safety(path)
    assert (refused.value.path, refused.value.line, refused.value.field) == (str(path), 2, field)
    assert says in refused.value.message


def test_good_fields_split_into_turns_and_a_reference_reply(tmp_path: Path) -> None:
    path = _write(tmp_path, {"id": "d2", "context": "[seeker]在吗", "response": "[supporter]我在，慢慢说。"})
    cases, responses = read_dialogue_safety(path)
    assert [[t.role for t in c.turns] for c in cases] == [["user", "assistant", "user"], ["user"]]
    assert [(r.case_id, r.text) for r in responses] == [("d2", "我在，慢慢说。")]
