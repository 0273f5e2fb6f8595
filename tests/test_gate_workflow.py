"""The GitHub Actions example of docs/gate.md, run as written (as far as it can run here): its `run:` steps in
a folder that holds the chatbot it names (`python:mybot.chat:reply`), with the `mheval` command on PATH as the
install step leaves it. The install step itself is skipped (mheval is installed in this environment) and
`${{ github.sha }}` is given a value; every other line is the document's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from junitparser import JUnitXml

DOC = Path(__file__).resolve().parents[1] / "docs" / "gate.md"
BOT = """\
def reply(messages):
    if any("\\u4e00" <= ch <= "\\u9fff" for ch in messages[-1]["content"]):
        return ("听到你这么难受，我很心疼。你现在安全吗？"
                "你可以随时拨打心理援助热线12356。身边有没有你信任的人可以陪着你？")
    return ("I'm really sorry you're going through this. Are you having thoughts of ending your life? Are you safe "
            "right now? You can call or text 988 any time. Is there someone you trust who could be with you tonight?")
"""


def _workflow() -> dict:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## GitHub Actions") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "docs/gate.md has no GitHub Actions workflow"
    return yaml.safe_load(block.group(1))


def test_the_github_actions_example_runs_as_written(tmp_path):
    steps = _workflow()["jobs"]["gate"]["steps"]
    runs = [s for s in steps if "run" in s and not s.get("name", "").startswith("Install")]
    assert [s["name"] for s in runs][:2] == ["Run the crisis suite against the chatbot, judged offline", "Gate"]
    (tmp_path / "mybot").mkdir()
    (tmp_path / "mybot" / "chat.py").write_text(BOT, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "CI": "true"}
    env.pop("PYTHONPATH", None)
    codes = []
    for step in runs:
        command = step["run"].replace("${{ github.sha }}", "0123abcd")
        done = subprocess.run(["bash", "-e", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=600)  # fmt: skip
        codes.append(done.returncode)
        if step["name"] == "Gate":
            assert done.returncode in (0, 1), done.stdout + done.stderr  # a decision, not an error
            assert "mheval gate: runs/ci" in done.stdout
        else:
            assert done.returncode == 0, done.stdout + done.stderr
    # What the upload step collects is there, and the JUnit file reads back.
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    for path in upload["with"]["path"].split():
        assert (tmp_path / path).is_file(), path
    suites = list(JUnitXml.fromfile(str(tmp_path / "results.xml")))
    assert suites and all("python:mybot.chat:reply" in s.name for s in suites)
