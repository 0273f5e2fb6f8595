"""Tokens per second of the embedded target (`local/smollm2` on xllamacpp) at 4, 8 and 16 slots (it runs with 4).

    python benchmarks/local_speed.py [--slots 4,8,16] [--prompts 24] [--max-tokens 200] [--model smollm2]

For each number of slots it starts the embedded server the way `mheval run` does (LocalServer, every
core, a context per slot), sends the first `--prompts` conversations of the built-in crisis-core suite
through the same client (EmbeddedModel) with as many requests in flight as there are slots, and
stops the server. Prints one JSON object: per slot count, the start-up time, the wall time, the
completion tokens and tokens/s, and the mean latency of one reply. The prompts are the same at each
slot count, with a fixed seed, but the replies (and so the token counts) can differ a little.
Not a test: the figures depend on the machine and on what else runs on it (see `load_average`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from typing import Any

from mheval.cpu import usable_cores
from mheval.models import EmbeddedModel, parse_model_spec
from mheval.models.local import XLLAMACPP_VERSION, LocalServer, free_cores
from mheval.suites.registry import load_suite


async def measure(model: str, slots: int, conversations: list[list[dict[str, str]]], max_tokens: int) -> dict[str, Any]:
    server = LocalServer(model, slots=slots)
    started = time.perf_counter()
    async with server:
        startup = time.perf_counter() - started
        client = EmbeddedModel(parse_model_spec(f"local/{model}"), server, timeout_s=600)
        gate = asyncio.Semaphore(slots)  # exactly `slots` requests in flight, as mheval sends them

        async def one(messages: list[dict[str, str]]) -> tuple[int, float]:
            async with gate:
                c = await client.complete(messages, temperature=0.7, max_tokens=max_tokens, seed=0)
                return c.usage.completion_tokens, c.latency_s

        began = time.perf_counter()
        results = await asyncio.gather(*(one(m) for m in conversations))
        wall = time.perf_counter() - began
        await client.aclose()
    tokens = sum(t for t, _ in results)
    return {
        "slots": slots,
        "threads": server.threads,
        "startup_s": round(startup, 2),
        "wall_s": round(wall, 2),
        "completion_tokens": tokens,
        "tokens_per_s": round(tokens / wall, 1),
        "mean_latency_s": round(sum(lat for _, lat in results) / len(results), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", default="4,8,16", help="comma-separated slot counts (default 4,8,16)")
    parser.add_argument("--prompts", type=int, default=24, help="conversations per slot count (default 24)")
    parser.add_argument("--max-tokens", type=int, default=200, help="reply length cap (default 200)")
    parser.add_argument("--model", default="smollm2", help="a local/ model: smollm2, a name or a PATH.gguf")
    args = parser.parse_args()

    cases = load_suite("crisis-core", limit=args.prompts).cases
    conversations = [[{"role": t.role, "content": t.content} for t in c.turns] for c in cases]
    runs = []
    for slots in (int(s) for s in args.slots.split(",")):
        runs.append(asyncio.run(measure(args.model, slots, conversations, args.max_tokens)))
    print(
        json.dumps(
            {
                "model": f"local/{args.model}",
                "xllamacpp": XLLAMACPP_VERSION,
                "cores": usable_cores(),
                "threads_chosen": free_cores(),
                "threads": [r["threads"] for r in runs],
                "machine": platform.machine(),
                "prompts": len(conversations),
                "max_tokens": args.max_tokens,
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "runs": runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
