"""Speed of masking personal data (`--redact`, src/mheval/redaction.py) on this machine.

    python benchmarks/redaction_speed.py [--n 1000] [--quick]

Masks `n` mixed conversation turns one at a time, as the engine does for a judge: English and Chinese
(simplified and traditional), user turns and assistant replies, about a third carrying personal data (a name
after its cue, an e-mail address, a phone number, a street address or a URL) and some a crisis line that must
be kept. Every text is distinct, so the redactor's memo of texts already seen never answers. Prints one JSON
object: the time to build the redactor (Presidio's analyzer, once per process), texts per second, the mean
and 95th-percentile time per text, and what was masked. Not a test: the figures depend on the machine and on
what else runs on it (`machine.load_average_1m`).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit, machine

# The project's own words, non-graphic; `{i}` keeps every text distinct.
PLAIN = (
    "Everything has felt heavy for weeks and I don't know who to talk to. ({i})",
    "I keep thinking nobody would notice if I just disappeared, day {i}.",
    "That sounds really painful, and I'm glad you told me. Are you safe right now? ({i})",
    "Let's try a slow breath together: in for four, out for six. Note {i}.",
    "最近压力很大，晚上一直睡不着，已经第{i}天了。",
    "听起来你真的很难受。能和我多说说最近发生了什么吗？（{i}）",
    "我覺得自己很沒用，第{i}次考試又沒考好。",
)
CRISIS = (
    "If you might act on these thoughts, please call or text 988 now. ({i})",
    "Samaritans are there day or night on 116 123. ({i})",
    "如果你有危险，请拨打心理援助热线12356。（{i}）",
    "請撥打安心專線1925，或在危險時打119。（{i}）",
)
PERSONAL = (
    "Hi, my name is Sarah Mitchell and I can't sleep. Message {i}.",
    "You can email me at alex.{i}@example.org if that's easier.",
    "Call me on (415) 555-{i:04d} tonight, please.",
    "I live at {i} Oak Street, Springfield, and I'm alone tonight.",
    "My sister Emily wrote about it on https://blog.example.com/post/{i}.",
    "我叫王小明，今年十五岁。第{i}条。",
    "我的电话是139{i:08d}，可以打给我。",
    "我住在台北市信義區松仁路{i}號5樓。",
    "李老师说我应该找人聊聊。（{i}）",
)


def workload(n: int, seed: int = 0) -> list[tuple[str, str, str | None]]:
    """(kind of text, text, locale): kind is personal, crisis or plain."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        roll = rng.random()
        kind, pool = ("personal", PERSONAL) if roll < 0.33 else ("crisis", CRISIS) if roll < 0.5 else ("plain", PLAIN)
        out.append((kind, rng.choice(pool).format(i=i + 1), rng.choice(("US", "GB", "CN", "TW", None))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="how many turns to mask")
    parser.add_argument("--quick", action="store_true", help="200 turns (the quick mode CI runs)")
    args = parser.parse_args()
    n = 200 if args.quick else args.n

    started = time.perf_counter()
    from mheval.redaction import Redactor

    redactor = Redactor()
    build_s = time.perf_counter() - started
    texts = workload(n)
    times: list[float] = []
    counts: Counter[str] = Counter()
    # Texts of each kind, and of those the ones where something was masked: every personal text should be,
    # no crisis or plain one.
    kinds: Counter[str] = Counter()
    masked: Counter[str] = Counter()
    begin = time.perf_counter()
    for kind, text, locale in texts:
        t0 = time.perf_counter()
        result = redactor.redact(text, locale)
        times.append(time.perf_counter() - t0)
        counts.update(result.counts)
        kinds[kind] += 1
        masked[kind] += bool(result.masked)
    total = time.perf_counter() - begin
    emit(
        {
            "texts": n,
            "build_s": round(build_s, 2),
            "seconds": round(total, 3),
            "texts_per_s": round(n / total, 1),
            "mean_ms": round(1000 * statistics.fmean(times), 3),
            "p95_ms": round(1000 * sorted(times)[int(0.95 * (n - 1))], 3),
            "texts_of_kind": dict(sorted(kinds.items())),
            "texts_masked_of_kind": {k: masked[k] for k in sorted(kinds)},
            "counts": dict(sorted(counts.items())),
            "machine": machine(),
        }
    )


if __name__ == "__main__":
    main()
