"""Train, save and use a judge from your own labelled file in three commands. Training runs the real console
entry point in a process of its own, so the judge the next two commands use is only what it saved to the file;
those two run in this process (tests/cli_inprocess.py: the entry point's exit code and error line)."""

from __future__ import annotations

import json
import subprocess
import sys

from cli_inprocess import mheval as inprocess
from mheval.runfolder.store import Store
from mheval.suites import load_suite


def _mheval(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mheval", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def test_train_then_judge_with_the_file(tmp_path):
    cases = load_suite("crisis-core").cases
    labelled = tmp_path / "labels.jsonl"
    labelled.write_text(
        "".join(
            json.dumps({"id": c.id, "text": c.last_user_text, "label": c.crisis_label}, ensure_ascii=False) + "\n"
            for c in cases
        ),
        encoding="utf-8",
    )
    model = tmp_path / "my-triage.npz"

    trained = _mheval(
        "train",
        str(labelled),
        "--text-field",
        "text",
        "--label-field",
        "label",
        "--protocol",
        "crisis-triage",
        "--folds",
        "3",
        "-o",
        str(model),
        cwd=tmp_path,
    )
    assert trained.returncode == 0, trained.stderr
    figures = json.loads(trained.stdout)
    assert model.is_file()
    assert "figures" in figures or "cv" in json.dumps(figures).lower()

    suite = tmp_path / "new.jsonl"
    suite.write_text(
        json.dumps({"id": "n1", "text": "I keep thinking everyone would be better off without me."})
        + "\n"
        + json.dumps({"id": "n2", "text": "Just wanted to say the exam went fine!"})
        + "\n"
    )
    out = tmp_path / "run"
    judged = inprocess(
        "triage", "--suite", f"jsonl:{suite}", "--judge", str(model), "--out", str(out), "--quiet", cwd=tmp_path
    )
    assert judged.returncode == 0, judged.stderr
    with Store.open_existing(out) as store:
        judgments = store.judgments()
    assert len(judgments) == 2 and all(j.status == "ok" and j.label for j in judgments)
    assert all(j.judge.startswith("trained:") for j in judgments)

    # A trained judge refuses protocols it was not trained for, before anything is written.
    refused = inprocess(
        "run",
        "--suite",
        f"jsonl:{suite}",
        "--judge",
        str(model),
        "--protocol",
        "psycrisis",
        "--out",
        str(tmp_path / "r2"),
        "--quiet",
        cwd=tmp_path,
    )
    assert refused.returncode == 2 and "judges only crisis-triage" in refused.stderr
    assert not (tmp_path / "r2").exists()
