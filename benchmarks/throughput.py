"""Judgments per second through mheval's full path, and the same workload through Inspect.

The workload: an already-answered suite (a JSONL with a `response` column, so only the judge stage
calls a model) judged under psycrisis by an LLM judge `vllm/bench@http://127.0.0.1:PORT/v1`. The judge
server (benchmarks/_server.py) runs in its own process and answers a valid verdict after a set latency.
Each measurement runs in a fresh interpreter (this script with --worker; --quick runs one harness's
points in one interpreter to save start-ups), so one harness's imports, caches or event loop never
touch another's, and the timing covers the whole call: loading the suite, opening the store,
rendering prompts, the HTTP calls, parsing, and committing every judgment.

    python benchmarks/throughput.py            # latencies 0, 0.2, 1 s x concurrency 1..512, + Inspect
    python benchmarks/throughput.py --quick    # small sizes, under 30 s (what CI runs)

Prints one JSON document. `judgments_per_s` counts the whole `run()` call (start-up included);
`stage_judgments_per_s` counts from the judge stage's start to its last judgment (the steady rate a
long run sees). `efficiency` and `stage_efficiency` divide them by the ideal concurrency/latency.
Inspect (inspect_ai) is not a dependency of mheval: when it is not installed the JSON says so.
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
FULL_CONCURRENCY = (1, 8, 32, 64, 128, 256, 512)
QUICK_CONCURRENCY = (1, 64)
FULL_INSPECT_CONCURRENCY = (16, 64, 256)


def units_for(latency: float, concurrency: int, quick: bool) -> int:
    """How many judgments one point measures: enough waves to hide start-up, bounded in time."""
    if latency <= 0:
        return 150 if quick else 4000
    if quick:
        return max(10, concurrency * 3)
    # 10 waves (10 x latency seconds at full speed); short-latency points keep at least 50 units.
    return max(50, concurrency * 10) if latency < 1 else concurrency * 10


# -- workers (each in its own interpreter) ------------------------------------------------------


class StageClock:
    """A progress sink that notes when the judge stage starts and when its last judgment lands, so the
    steady rate can be told apart from the run's fixed start-up (loading the suite, opening the store)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.last: float | None = None

    def start(self, stage: str, total: int | None) -> None:
        self.started = time.perf_counter()

    def advance(self, stage: str, usage: object = None, *, failed: bool = False) -> None:
        self.last = time.perf_counter()


def mheval_worker(url: str, n: int, concurrency: int) -> dict[str, Any]:
    from mheval.config import RunConfig
    from mheval.engine.runner import run
    from mheval.runfolder.store import Store

    with tempfile.TemporaryDirectory(prefix="mheval-bench-") as tmp:
        suite = write_answered_suite(Path(tmp) / "suite.jsonl", n)
        config = RunConfig(
            suite=suite,
            judges=[judge_spec(url)],
            protocols=["psycrisis"],
            concurrency=concurrency,
            out=str(Path(tmp) / "run"),
        )
        clock = StageClock()
        started = time.perf_counter()
        result = run(config, stages=("judge",), progress=clock)
        seconds = time.perf_counter() - started
        with Store.open_existing(result.run_dir) as store:
            ok = sum(1 for j in store.iter_judgments() if j.status == "ok")
    stage = (clock.last - clock.started) if clock.started and clock.last else None
    return {
        "judgments": n,
        "ok": ok,
        "seconds": round(seconds, 3),
        "model_calls": result.model_calls,
        "stage_seconds": round(stage, 3) if stage else None,
    }


def inspect_worker(url: str, n: int, concurrency: int) -> dict[str, Any]:
    """The same judging through Inspect: a solver that hands over the stored reply (no model call) and
    a model-graded scorer that renders mheval's psycrisis prompt, calls the judge through Inspect's
    OpenAI provider, and parses the verdict with mheval's parser."""
    import logging

    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import (
        ChatMessageSystem,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
        ResponseSchema,
        get_model,
    )
    from inspect_ai.scorer import Score, Target, mean, scorer
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.util import JSONSchema

    from mheval.protocols import load_protocol, parse_verdict, render_messages
    from mheval.records import Case, Turn

    logging.getLogger("inspect_ai").setLevel(logging.ERROR)
    protocol = load_protocol("psycrisis")
    schema = protocol.output_schema()

    @solver
    def answered():  # type: ignore[no-untyped-def]
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            state.output = ModelOutput.from_content(model="reference", content=state.metadata["response"])
            return state

        return solve

    @scorer(metrics=[mean()])
    def psycrisis_judge():  # type: ignore[no-untyped-def]
        judge = get_model(
            "openai/bench",
            base_url=url,
            api_key="bench",
            responses_api=False,
            config=GenerateConfig(max_connections=concurrency),
        )
        config = GenerateConfig(
            temperature=0.0,
            max_tokens=1024,
            seed=0,
            response_schema=ResponseSchema(name="psycrisis", json_schema=JSONSchema.model_validate(schema)),
        )

        async def score(state: TaskState, target: Target) -> Score:
            case = Case(id=str(state.sample_id), turns=[Turn(role="user", content=state.input_text)])
            rendered = render_messages(protocol, case, state.output.completion)
            messages = [
                ChatMessageSystem(content=m["content"])
                if m["role"] == "system"
                else ChatMessageUser(content=m["content"])
                for m in rendered
            ]
            output = await judge.generate(messages, config=config)
            verdict = parse_verdict(protocol, output.completion)
            if not verdict.ok:
                return Score(value=float("nan"), explanation=verdict.reason)
            return Score(value=float(verdict.total or 0), explanation=verdict.rationale)

        return score

    with tempfile.TemporaryDirectory(prefix="inspect-bench-") as tmp:
        suite_path = Path(tmp) / "suite.jsonl"
        write_answered_suite(suite_path, n)
        samples = []
        for line in suite_path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            samples.append(Sample(id=row["id"], input=row["text"], metadata={"response": row["response"]}))
        task = Task(dataset=MemoryDataset(samples), solver=answered(), scorer=psycrisis_judge())
        started = time.perf_counter()
        logs = inspect_eval(
            task,
            model="mockllm/model",
            display="none",
            log_level="error",
            log_dir=str(Path(tmp) / "logs"),
            log_samples=False,
            log_realtime=False,
            score_display=False,
            max_samples=concurrency,
            max_connections=concurrency,
        )
        seconds = time.perf_counter() - started
    log = logs[0]
    error = str(log.error.message)[:300] if log.error is not None else None
    scored = 0
    if log.results is not None and log.results.scores:
        scored = int(log.results.scores[0].scored_samples or 0)
    return {
        "judgments": n,
        "ok": scored,
        "status": log.status,
        **({"error_message": error} if error else {}),
        "seconds": round(seconds, 3),
        "inspect_version": _version("inspect_ai"),
    }


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def inspect_unavailable() -> str | None:
    """Why Inspect cannot be measured here, or None if it can."""
    try:
        import inspect_ai  # noqa: F401
    except Exception as exc:  # an import that fails for any reason means "not measurable here"
        return (
            f"inspect_ai is not importable in this environment ({type(exc).__name__}: {exc}); "
            "install it with `pip install inspect-ai` to compare (it is not an mheval dependency)"
        )
    return None


# -- the benchmark ------------------------------------------------------------------------------


def measure(harness: str, url: str, latency: float, pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Measure (units, concurrency) pairs in one worker interpreter; the server's counters are read
    around each point by the worker itself."""
    spec = ",".join(f"{n}:{c}" for n, c in pairs)
    out = run_worker(SCRIPT, ["--worker", harness, "--url", url, "--points", spec])
    points = out.get("points") or [
        {"error": out.get("error", "no result"), "judgments": n, "concurrency": c} for n, c in pairs
    ]
    for point in points:
        point.update(harness=harness, latency_s=latency)
        if "seconds" in point and point["seconds"] > 0:
            point["judgments_per_s"] = round(point["judgments"] / point["seconds"], 1)
            if point.get("stage_seconds"):
                point["stage_judgments_per_s"] = round(point["judgments"] / point["stage_seconds"], 1)
            if latency > 0:
                ideal = point["concurrency"] / latency
                point["efficiency"] = round(point["judgments_per_s"] / ideal, 3)
                if point.get("stage_judgments_per_s"):
                    point["stage_efficiency"] = round(point["stage_judgments_per_s"] / ideal, 3)
    return points


def run_points(harness: str, url: str, spec: str) -> dict[str, Any]:
    """The worker side of `measure`: each point runs after resetting the server's counters."""
    worker = mheval_worker if harness == "mheval" else inspect_worker
    points = []
    for item in spec.split(","):
        n, c = (int(x) for x in item.split(":"))
        reset_stats(url)
        point = worker(url, n, c)
        stats = server_stats(url)
        point.update(concurrency=c, server_calls=stats["calls"], server_max_in_flight=stats["max_in_flight"])
        points.append(point)
    return {"points": points}


def main() -> None:
    parser = argparse.ArgumentParser(description="judgments per second, mheval vs Inspect")
    parser.add_argument("--quick", action="store_true", help="small sizes (under 30 s)")
    parser.add_argument("--latencies", type=float, nargs="+", help="server latencies in seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", help="concurrency levels for mheval")
    parser.add_argument("--inspect-concurrency", type=int, nargs="*", help="concurrency levels for Inspect")
    parser.add_argument("--no-inspect", action="store_true", help="skip the Inspect comparison")
    parser.add_argument("--worker", choices=("mheval", "inspect"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--points", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(run_points(args.worker, args.url, args.points)))
        return

    quick = args.quick
    latencies = args.latencies or ((0.0, 0.2) if quick else (0.0, 0.2, 1.0))
    levels = args.concurrency or (QUICK_CONCURRENCY if quick else FULL_CONCURRENCY)
    if args.inspect_concurrency is not None:
        inspect_levels = tuple(args.inspect_concurrency)
    else:
        inspect_levels = (64,) if quick else FULL_INSPECT_CONCURRENCY
    why_not = "skipped (--no-inspect)" if args.no_inspect else inspect_unavailable()

    started = time.perf_counter()
    points: list[dict[str, Any]] = []
    inspect_points: list[dict[str, Any]] = []
    for latency in latencies:
        with judge_server(latency) as url:
            pairs = [(units_for(latency, c, quick), c) for c in levels]
            if latency == 0 and why_not is None:
                # mheval also at Inspect's concurrency levels, for like-for-like ratios.
                pairs += [(units_for(0.0, c, quick), c) for c in inspect_levels if c not in levels]
            if quick:
                points += measure("mheval", url, latency, pairs)  # one interpreter: quick, not pristine
            else:
                for pair in pairs:
                    points += measure("mheval", url, latency, [pair])
            if latency == 0 and why_not is None:
                for c in inspect_levels:
                    [point] = measure("inspect", url, latency, [(40 if quick else 1000, c)])
                    if "error" in point:
                        why_not = f"Inspect ran but failed: {point['error']}"
                        break
                    inspect_points.append(point)

    comparison: dict[str, Any] = {"available": why_not is None and bool(inspect_points)}
    if why_not is not None:
        comparison["reason"] = why_not
    else:
        ratios = []
        for ip in inspect_points:
            mp = next(p for p in points if p["latency_s"] == 0 and p["concurrency"] == ip["concurrency"])
            if ip.get("judgments_per_s") and mp.get("judgments_per_s"):
                ratios.append(
                    {
                        "concurrency": ip["concurrency"],
                        "mheval_per_s": mp["judgments_per_s"],
                        "inspect_per_s": ip["judgments_per_s"],
                        "ratio": round(mp["judgments_per_s"] / ip["judgments_per_s"], 1),
                    }
                )
        best_m = max((p.get("judgments_per_s", 0) for p in points if p["latency_s"] == 0), default=0)
        best_i = max((p.get("judgments_per_s", 0) for p in inspect_points), default=0)
        comparison.update(
            points=inspect_points,
            ratios=ratios,
            best_mheval_per_s=best_m,
            best_inspect_per_s=best_i,
            ratio_mheval_over_inspect=round(best_m / best_i, 1) if best_i else None,
        )

    zero = [p.get("judgments_per_s", 0) for p in points if p["latency_s"] == 0]
    at_1s_256 = next((p for p in points if p["latency_s"] == 1.0 and p["concurrency"] == 256), None)
    emit(
        {
            "benchmark": "throughput",
            "quick": quick,
            "workload": "psycrisis LLM judge over an already-answered suite, judge stage only",
            "machine": machine(),
            "points": points,
            "best_per_s_at_0ms": max(zero, default=0),
            "efficiency_at_1s_c256": at_1s_256.get("efficiency") if at_1s_256 else None,
            "stage_efficiency_at_1s_c256": at_1s_256.get("stage_efficiency") if at_1s_256 else None,
            "inspect": comparison,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
