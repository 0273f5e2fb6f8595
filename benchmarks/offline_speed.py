"""Speed of the offline judge on this machine: load time, then units judged per second per protocol.

    python benchmarks/offline_speed.py [--data ../shared/data] [--n 1000] [--concurrency 32] [--speed both]

Times both speeds of the offline judge, `offline:fast` (USE, n-grams, lexicon) and `offline` (adds
multilingual-e5), and prints one JSON object with a section for each. Units go through
`OfflineJudge.judge` the way the engine calls it (a pool of `concurrency` coroutines), so the
encoders' micro-batching is measured too. Every unit is distinct
(no cache hits). Cases and replies are built from mheval's own crisis-core suite and this file's own
sentences; with --data, the 2,030 help_harm test inputs are timed as well (longer, real texts).
Not a test: the figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPLY_SENTENCES = [
    "That sounds really painful, and I'm glad you told me.",
    "Can you tell me more about what has been happening?",
    "Are you safe right now?",
    "Are you having thoughts of ending your life?",
    "Let's try a slow breath together: in for four, out for six.",
    "You could call or text 988 at any time, day or night.",
    "It might help to talk to someone you trust today.",
    "I'm here and I'm listening.",
    "Would you be willing to speak with a counsellor or your doctor?",
    "What usually helps you get through nights like this?",
    "听起来你真的很难受。",
    "能和我多说说最近发生了什么吗？",
    "你现在安全吗？",
    "如果你有危险，请拨打心理援助热线12356。",
]


def _cases(n: int, tag: str = "") -> list[Any]:
    from mheval.records import Case, Turn
    from mheval.suites import load_suite

    core = load_suite("crisis-core").cases
    out = []
    for i in range(n):
        base = core[i % len(core)]
        turns = [Turn(role=t.role, content=t.content) for t in base.turns]
        if i >= len(core) or tag:  # a distinct text: no embedding or triage cache hit
            turns[-1] = Turn(role="user", content=f"{turns[-1].content} ({i // len(core)}{tag})")
        out.append(Case(id=f"b{i}", turns=turns, language=base.language, crisis_label=base.crisis_label))
    return out


def _replies(cases: list[Any], seed: int = 0, tag: str = "") -> list[Any]:
    from mheval.records import Response

    rng = random.Random(seed)
    return [
        Response(
            case_id=c.id, model="bench", text=" ".join(rng.sample(REPLY_SENTENCES, rng.randint(2, 6))) + f" ({i}{tag})"
        )
        for i, c in enumerate(cases)
    ]


async def _pool(units: list[Any], worker: Any, concurrency: int) -> None:
    iterator = iter(units)

    async def drain() -> None:
        for unit in iterator:
            await worker(unit)

    await asyncio.gather(*(drain() for _ in range(concurrency)))


def _rate(judge: Any, protocol: str, cases: list[Any], replies: list[Any] | None, concurrency: int) -> dict[str, Any]:
    spec = SimpleNamespace(id=protocol)
    statuses: dict[str, int] = {}

    async def one(i: int) -> None:
        reply = replies[i] if replies is not None else None
        label = cases[i].crisis_label if protocol == "appropriateness" else None
        judgment = await judge.judge(spec, cases[i], reply, crisis_label=label)
        statuses[judgment.status] = statuses.get(judgment.status, 0) + 1

    started, cpu = time.perf_counter(), time.process_time()
    asyncio.run(_pool(list(range(len(cases))), one, concurrency))
    wall = time.perf_counter() - started
    return {
        "units": len(cases),
        "seconds": round(wall, 3),
        "per_second": round(len(cases) / wall, 1),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "statuses": statuses,
    }


def _measure(fast: bool, args: argparse.Namespace) -> dict[str, Any]:
    """Load and per-protocol rates of one speed of the offline judge, in this process."""
    from mheval.judges.offline import OfflineJudge
    from mheval.judges.offline.embed import get_encoder, user_text
    from mheval.judges.offline.features import Item, encoders, featurize

    started = time.perf_counter()
    judge = OfflineJudge(fast=fast)
    kinds: set[str] = set()
    for protocol in judge.models:
        kinds.update(encoders(judge.model(protocol).blocks))  # type: ignore[union-attr]
    for kind in sorted(kinds):
        get_encoder(kind)  # type: ignore[arg-type]
    load_s = time.perf_counter() - started

    tag = " fast" if fast else ""  # the two speeds judge different texts: no cache hit across them
    cases = _cases(args.n, tag)
    replies = _replies(cases, tag=tag)
    results: dict[str, Any] = {
        "judge": judge.name,
        "models": {p: path.name for p, path in judge.models.items()},
        "load_seconds (models and their encoders; the first speed measured also pays the imports)": round(load_s, 2),
    }
    for kind in sorted(kinds):
        texts = [f"{user_text(c)} [{kind} {i}]" for i, c in enumerate(cases)]  # distinct from every text judged
        started = time.perf_counter()
        get_encoder(kind).encode(texts)  # type: ignore[arg-type]
        results[f"encoder {kind} alone, texts per second (crisis-core user texts, one batch)"] = round(
            len(texts) / (time.perf_counter() - started), 1
        )
    started = time.perf_counter()
    featurize(["ngram:user", "lex:triage"], [Item(c) for c in cases])  # what a triage head without any encoder reads
    results["ngram+lexicon features only, cases per second (no encoder)"] = round(
        len(cases) / (time.perf_counter() - started), 1
    )
    results["crisis-triage (crisis-core based)"] = _rate(judge, "crisis-triage", cases, None, args.concurrency)
    results["psycrisis"] = _rate(judge, "psycrisis", cases, replies, args.concurrency)
    results["dialogue-safety"] = _rate(judge, "dialogue-safety", _cases(args.n, tag)[::-1], replies, args.concurrency)
    results["appropriateness"] = _rate(judge, "appropriateness", cases, _replies(cases, 1, tag), args.concurrency)
    if args.data is not None:
        from mheval.suites import load_suite

        # Each speed gets its own slice of the inputs, so neither reads the other's cached embeddings.
        start = args.n if fast else 0
        real = load_suite(f"help-harm:{args.data / 'help_harm' / 'test_inputs.jsonl'}").cases[start : start + args.n]
        results["crisis-triage (help_harm test inputs)"] = _rate(judge, "crisis-triage", real, None, args.concurrency)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="../shared/data, to time real help_harm inputs too")
    parser.add_argument("--n", type=int, default=1000, help="units per protocol")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--speed", choices=("both", "default", "fast"), default="both", help="which judge to time")
    args = parser.parse_args()

    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_average_1m_at_start": round(os.getloadavg()[0], 2)},
        "embed_threads": os.environ.get("MHEVAL_EMBED_THREADS", "auto"),  # auto: the free cores, per call
    }
    # The fast judge first: it loads no e5, so its load time is not flattered by the other's.
    for name in ("fast", "default"):
        if args.speed in (name, "both"):
            results["offline:fast" if name == "fast" else "offline"] = _measure(name == "fast", args)
    results["machine"]["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
