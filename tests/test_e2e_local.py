"""End to end with the real embedded target: llama.cpp's server and SmolLM2-135M, started and stopped
by mheval, the offline judge, and the console command a user types. Nothing here is mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mheval.engine.store import Store
from mheval.models.local import local_extra_installed

pytestmark = pytest.mark.llama


@pytest.fixture(autouse=True)
def _needs_local_extra():
    if not local_extra_installed():
        if os.environ.get("CI"):
            pytest.fail("CI must install mheval[local]: the end-to-end test cannot be skipped there")
        pytest.skip("needs the local extra: pip install -e '.[local]'")


def _mheval(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mheval", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def _llama_servers() -> int:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return sum("llama_cpp.server" in line for line in ps.splitlines())


def test_default_run_on_embedded_target(tmp_path):
    servers_before = _llama_servers()
    out = tmp_path / "run"
    # The defaults (crisis-core, local/smollm2, offline judge, crisis-triage + psycrisis) on a few cases.
    result = _mheval("run", "--limit", "4", "--max-tokens", "48", "--out", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"results: {out.resolve()}" in result.stdout.replace("\n", "")

    with Store.open_existing(out) as store:
        cases = store.cases()
        responses = store.responses()
        judgments = store.judgments()
    assert len(cases) == 4
    assert len(responses) == 4 and all(r.model == "local/smollm2" and r.text for r in responses)
    assert all(r.usage.completion_tokens > 0 for r in responses)
    for case in cases:
        mine = [j for j in judgments if j.case_id == case.id]
        assert sorted(j.protocol for j in mine) == ["crisis-triage", "psycrisis"]
    config = (out / "config.yaml").read_text()
    assert "local/smollm2" in config

    # The embedded server mheval started is gone after the run.
    assert _llama_servers() == servers_before

    # Run again: resumes, no model call, same counts.
    again = _mheval("run", "--limit", "4", "--max-tokens", "48", "--out", str(out), "--quiet", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 model calls" in again.stderr

    exported = _mheval("export", str(out), "--format", "jsonl", cwd=tmp_path)
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(rows) == 8 and {r["protocol"] for r in rows} == {"crisis-triage", "psycrisis"}
