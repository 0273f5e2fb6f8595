"""Kill-and-resume and concurrent writers, measured: what a run survives, and what it costs.

    python benchmarks/integrity.py [--kills 20] [--cases 60] [--seed 1]

Against the benchmark's loopback judge server (another process, 20 ms per call), one run folder is
judged with `mheval judge` under crisis-triage and psycrisis (2 units per case). The command is SIGKILLed
at a random moment `--kills` times, then run once more to the end. Then two `mheval judge` processes
start at once on a fresh folder. Printed as JSON:

- kills: how many SIGKILLs landed mid-run; resumed_ok: the final run exited 0;
- units / unique_units / duplicates: judgments stored, distinct (case, protocol, judge, repeat), and the
  difference; integrity_check: SQLite's PRAGMA integrity_check;
- calls: judge calls the server answered in all; repeated_calls: calls beyond one per unit (each kill
  may lose the calls it had in flight; everything committed is never asked again);
- concurrent: the same for two processes started together on one folder.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, judge_spec, machine, write_answered_suite
from _server import judge_server, server_stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


def _judge_cmd(suite: str, judge: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "mheval", "judge", "--suite", suite, "--judge", judge, "--protocol",
            "crisis-triage", "--protocol", "psycrisis", "--out", str(out), "--concurrency", "4", "--quiet"]  # fmt: skip


def _stored(out: Path) -> dict[str, Any]:
    with sqlite3.connect(out / "run.db") as db:
        keys = db.execute("SELECT case_id, protocol, judge, repeat FROM judgments").fetchall()
        ok = db.execute("PRAGMA integrity_check").fetchone()[0]
    return {"units": len(keys), "unique_units": len(set(keys)), "duplicates": len(keys) - len(set(keys)),
            "integrity_check": ok}  # fmt: skip


def _env() -> dict[str, str]:
    return {**os.environ, "MHEVAL_QUIET": "1"}


def kills(base_url: str, n_cases: int, n_kills: int, rng: random.Random, work: Path) -> dict[str, Any]:
    suite = write_answered_suite(work / "answered.jsonl", n_cases)
    out = work / "killed"
    cmd = _judge_cmd(suite, judge_spec(base_url), out)
    before = server_stats(base_url)["calls"]
    landed = 0
    for _ in range(n_kills):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        time.sleep(rng.uniform(0.5, 4.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            landed += 1
        proc.wait()
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), check=False)
    calls = server_stats(base_url)["calls"] - before
    units = 2 * n_cases
    return {"kills": landed, "resumed_ok": done.returncode == 0, **_stored(out), "expected_units": units,
            "calls": calls, "repeated_calls": calls - units}  # fmt: skip


def concurrent(base_url: str, n_cases: int, work: Path) -> dict[str, Any]:
    suite = write_answered_suite(work / "answered-2.jsonl", n_cases)
    out = work / "shared"
    cmd = _judge_cmd(suite, judge_spec(base_url), out)
    before = server_stats(base_url)["calls"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env()) for _ in range(2)]
    codes = [p.wait() for p in procs]
    calls = server_stats(base_url)["calls"] - before
    units = 2 * n_cases
    return {"processes": 2, "exit_codes": codes, **_stored(out), "expected_units": units, "calls": calls,
            "repeated_calls": calls - units}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, judge_server(latency=0.02) as base_url:
        work = Path(tmp)
        result = {
            "benchmark": "integrity",
            "command": f"python benchmarks/integrity.py --kills {args.kills} --cases {args.cases} --seed {args.seed}",
            "machine": machine(),
            "kill_and_resume": kills(base_url, args.cases, args.kills, rng, work),
            "concurrent_writers": concurrent(base_url, args.cases, work),
        }
    result["seconds"] = round(time.perf_counter() - started, 1)
    emit(result)


if __name__ == "__main__":
    main()
