"""Peak resident memory of one run: 100,000 cases x 1 model x 1 protocol (psycrisis).

The suite is already answered (a JSONL with a `response` column), so the run is the judge stage over
100,000 responses. The judge is the loopback LLM judge by default (`--judge llm`: the full path with
prompt rendering, HTTP calls, the call cache and the store, against benchmarks/_server.py in its own
process) or the offline lexicon judge (`--judge offline`: no network). The run happens in a fresh
interpreter whose peak RSS (getrusage ru_maxrss) is the figure, so neither the suite generation nor
the server counts; `baseline_rss_mb` is that interpreter's RSS after importing mheval, before the run.

    python benchmarks/memory.py [--quick] [--n 100000] [--judge llm|offline]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from _common import emit, judge_spec, machine, run_worker, write_answered_suite
from _server import judge_server

SCRIPT = Path(__file__).resolve()


def _rss_mb() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def worker(suite: str, judge: str, out: str, concurrency: int) -> dict[str, Any]:
    from mheval.config import RunConfig
    from mheval.engine.runner import run

    baseline = _rss_mb()
    config = RunConfig(suite=suite, judges=[judge], protocols=["psycrisis"], concurrency=concurrency, out=out)
    started = time.perf_counter()
    result = run(config, stages=("judge",))
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "judgments": result.counts.get("judgments", 0),
        "model_calls": result.model_calls,
        "baseline_rss_mb": round(baseline, 1),
        "peak_rss_mb": round(_rss_mb(), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="peak RSS of a 100,000-case run")
    parser.add_argument("--quick", action="store_true", help="500 cases instead of 100,000")
    parser.add_argument("--n", type=int, help="number of cases")
    parser.add_argument("--judge", choices=("llm", "offline"), default="llm")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--suite", help=argparse.SUPPRESS)
    parser.add_argument("--judge-spec", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.suite, args.judge_spec, args.out, args.concurrency)))
        return

    n = args.n or (500 if args.quick else 100_000)
    server = judge_server(0.0) if args.judge == "llm" else nullcontext(None)
    with tempfile.TemporaryDirectory(prefix="mheval-memory-") as tmp, server as url:
        suite = write_answered_suite(Path(tmp) / "suite.jsonl", n)
        spec = judge_spec(url) if url else "offline"
        figures = run_worker(
            SCRIPT,
            [
                "--worker",
                "--suite",
                suite,
                "--judge-spec",
                spec,
                "--out",
                str(Path(tmp) / "run"),
                "--concurrency",
                str(args.concurrency),
            ],
            timeout=3600,
        )
    emit(
        {
            "benchmark": "memory",
            "quick": args.quick,
            "workload": f"{n} cases x 1 model x psycrisis, judge stage, {args.judge} judge",
            "machine": machine(),
            "cases": n,
            "judge": args.judge,
            **figures,
            "target": {"peak_rss_mb_below": 1024},
        }
    )


if __name__ == "__main__":
    main()
