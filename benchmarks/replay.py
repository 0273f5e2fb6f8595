"""A second run of a finished run: how long it takes and how many model calls it makes (must be zero).

The first run judges an already-answered suite (10,000 cases; --quick: 300) under psycrisis with an
LLM judge on the loopback server (benchmarks/_server.py, its own process, 0 ms latency). The second
run is the same command again in a fresh interpreter: it must find every unit finished and call no
model. `seconds` is the second run's `run()` call; `process_seconds` adds interpreter start-up and
imports (what a user waits for when typing the command again). `server_calls` is counted by the
server itself, so a call that bypassed mheval's own counters would still show.

    python benchmarks/replay.py [--quick] [--n 10000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, judge_spec, machine, run_worker, write_answered_suite
from _server import judge_server, reset_stats, server_stats

SCRIPT = Path(__file__).resolve()


def worker(suite: str, url: str, out: str, concurrency: int) -> dict[str, Any]:
    from mheval.config import RunConfig
    from mheval.engine.runner import run

    config = RunConfig(suite=suite, judges=[judge_spec(url)], protocols=["psycrisis"], concurrency=concurrency, out=out)
    started = time.perf_counter()
    result = run(config, stages=("judge",))
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "model_calls": result.model_calls,
        "cache_hits": result.cache_hits,
        "judgments": result.counts.get("judgments", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="seconds and model calls of a second, identical run")
    parser.add_argument("--quick", action="store_true", help="300 cases instead of 10,000")
    parser.add_argument("--n", type=int, help="cases (judgments) in the run")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--suite", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.suite, args.url, args.out, args.concurrency)))
        return

    n = args.n or (300 if args.quick else 10_000)
    with tempfile.TemporaryDirectory(prefix="mheval-replay-") as tmp, judge_server(0.0) as url:
        suite = write_answered_suite(Path(tmp) / "suite.jsonl", n)
        common = [
            "--worker",
            "--suite",
            suite,
            "--url",
            url,
            "--out",
            str(Path(tmp) / "run"),
            "--concurrency",
            str(args.concurrency),
        ]
        first = run_worker(SCRIPT, common)
        first["server_calls"] = server_stats(url)["calls"]
        reset_stats(url)
        started = time.perf_counter()
        second = run_worker(SCRIPT, common)
        second["process_seconds"] = round(time.perf_counter() - started, 3)
        second["server_calls"] = server_stats(url)["calls"]
    emit(
        {
            "benchmark": "replay",
            "quick": args.quick,
            "workload": f"{n} psycrisis judgments by an LLM judge on a loopback server, then the same command again",
            "machine": machine(),
            "judgments": n,
            "first_run": first,
            "second_run": second,
            "seconds": second.get("seconds"),
            "model_calls": second.get("model_calls"),
            "target": {"seconds_below": 2.0, "model_calls": 0},
        }
    )


if __name__ == "__main__":
    main()
