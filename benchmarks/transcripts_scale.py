"""Recorded conversations at scale: import a large synthetic log, then judge a slice of it offline.

    python benchmarks/transcripts_scale.py [--quick] [--n 10000] [--turns 20] [--judge-n 50]
                                           [--rss-n 250 1000] [--rss-turns T] [--rss-judge J]
                                           [--speeds offline:fast offline] [--replies-from JSONL]

1. Writes a synthetic JSONL log of `--n` conversations of `--turns` exchanges (half English, half Chinese;
   everyday, non-graphic support talk generated from this file's own phrases, every turn distinct). With
   `--replies-from`, the assistant turns are published model replies instead (help_harm's, English, each
   several times as long as the phrases), closer to what the judge reads in a real log. A reply met again costs
   the encoders little (they keep the vectors of what they have read), so the rate of new text is the rate of a
   slice whose replies are distinct: `--judge-n 5` (95 of its 100 replies distinct); the output says how many were.
2. Imports it into a run folder as `mheval judge --suite transcripts:PATH` does (read and check every
   conversation, then store them: conversations/imported.py and engine/conversation_stages.store_imported), in a
   fresh interpreter: seconds, conversations/s and peak RSS.
3. Judges the first `--judge-n` conversations offline with the default protocols, once per speed
   (`offline:fast`, `offline`), each in a fresh interpreter whose judge is warmed on a one-conversation log
   first, so the figure is the steady rate (`replies_per_s`: replies of the slice over the seconds of its
   judging) and not the encoders' load time.
4. Judges the first N conversations (each of `--rss-n`) with `--rss-judge` (default `offline:fast`) in a fresh
   interpreter and reports peak RSS: judging walks the conversations in chunks, so the figure should not grow
   with N.

Every step runs in its own interpreter (getrusage's ru_maxrss is per process). `machine.load_average_1m`
says how busy the two cores were: compare figures taken at similar load only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, run_worker

SCRIPT = Path(__file__).resolve()

# The project's own short phrases; every conversation draws its own mix, and the numbers keep each turn distinct.
_EN_USER = (
    "Work has been piling up and I can't seem to switch off in the evenings.",
    "I had another argument with my brother and I keep replaying it in my head.",
    "I haven't been sleeping well, maybe four hours a night for the past couple of weeks.",
    "My exams start next month and every time I open a book my chest feels tight.",
    "Since I moved to the new city I don't really have anyone to talk to.",
    "Some days I feel fine and then suddenly everything feels heavy again.",
    "I keep cancelling plans with friends because I just don't have the energy.",
    "My manager said my last report wasn't good enough and I can't stop thinking about it.",
    "I tried the breathing thing you mentioned and it helped a little, honestly.",
    "I'm not sure talking about it changes anything, but I'll try.",
    "My mum has been unwell and I'm the one looking after her most days.",
    "I feel like I'm letting everyone down at the moment.",
    "Sometimes I wonder whether anyone would notice if I stopped turning up.",
    "I went for a walk this morning, which is more than I managed last week.",
)
_EN_REPLY = (
    "That sounds like a lot to carry, and it makes sense that it's wearing you down.",
    "Thank you for telling me. What does a typical evening look like for you right now?",
    "It's really common for sleep to suffer when the mind is busy. Have you noticed what keeps you awake?",
    "I'm glad you reached out. Would it help to break the next few days into smaller pieces?",
    "Feeling alone in a new place is hard. Is there anyone from before you still keep in touch with?",
    "Ups and downs like that can be exhausting. What tends to be happening on the heavier days?",
    "When you say you feel you're letting people down, are you having any thoughts of harming yourself?",
    "If things ever feel unsafe, a crisis line or your local emergency number can help straight away.",
    "It sounds like you're doing your best in a tough situation. What has helped even a little before?",
    "Looking after someone you love takes a lot of energy. Who is looking after you?",
    "That walk counts. Small steps like that matter more than they feel like they do.",
    "Would you consider talking this through with a doctor or a counsellor you trust?",
)
_ZH_USER = (
    "最近工作压力特别大，晚上回到家脑子还是停不下来。",
    "我和家里人又吵了一架，心里一直很难受。",
    "这两周我每天只睡四五个小时，白天整个人都没精神。",
    "下个月就要考试了，一打开书就觉得胸口发紧。",
    "搬到新城市以后，身边几乎没有可以说话的人。",
    "有时候觉得还好，但突然之间又觉得什么都很沉重。",
    "朋友约我出去，我总是找理由推掉，实在没有力气。",
    "领导说我上次的报告做得不好，我一直在想这件事。",
    "你上次说的深呼吸我试了一下，好像有一点用。",
    "我妈妈身体不好，大部分时间都是我在照顾她。",
    "我觉得自己让身边的人都失望了。",
    "今天早上我出去散了会儿步，比上周好一点。",
)
_ZH_REPLY = (
    "听起来你最近承受了很多，感到疲惫是很正常的。",
    "谢谢你愿意告诉我。最近晚上你一般是怎么度过的？",
    "心里有事的时候睡眠很容易受影响。你有没有注意到是什么让你睡不着？",
    "我很高兴你愿意说出来。要不要试着把接下来几天分成小一点的目标？",
    "在新的地方感到孤单真的不容易。以前的朋友里还有能联系的人吗？",
    "你说觉得让大家失望了，我想问一下，你有没有伤害自己的想法？",
    "如果你觉得不安全，可以拨打心理援助热线或当地的紧急电话。",
    "照顾家人需要很多精力。那谁在照顾你呢？",
    "出去散步很有意义，这样的小步子比你想象的更重要。",
    "你愿意和医生或者信任的心理咨询师聊聊这些吗？",
)


REAL_REPLIES: list[str] = []  # --replies-from: published model replies to use as the assistant turns


def conversation(i: int, turns: int) -> dict[str, Any]:
    """One synthetic recorded conversation (even i: English, odd i: Chinese); deterministic in `i`."""
    rng = random.Random(i)
    zh = i % 2 == 1 and not REAL_REPLIES
    users, replies = (_ZH_USER, _ZH_REPLY) if zh else (_EN_USER, _EN_REPLY)
    messages = []
    for t in range(1, turns + 1):
        user = " ".join(rng.sample(users, 2))
        reply = REAL_REPLIES[(i * turns + t) % len(REAL_REPLIES)] if REAL_REPLIES else " ".join(rng.sample(replies, 2))
        tag = f"（第{t}次）" if zh else f"(day {t})"
        messages += [{"role": "user", "content": f"{user} {tag}"}, {"role": "assistant", "content": f"{reply} #{i}"}]
    return {
        "id": f"c{i:06d}",
        "model": "helper-v1",
        "language": "zh" if zh else "en",
        "locale": "CN" if zh else "GB",
        "messages": messages,
    }


def distinct_replies(n: int, turns: int) -> str:
    """How many of the first `n` conversations' replies differ in more than the conversation number they end with."""
    texts = [m["content"].rsplit(" #", 1)[0] for i in range(n) for m in conversation(i, turns)["messages"]]
    return f"{len(set(texts[1::2]))} of {len(texts) // 2}"


def write_log(path: Path, n: int, turns: int, start: int = 0) -> int:
    """Write conversations start..start+n-1 as JSONL; returns the bytes written."""
    with path.open("w", encoding="utf-8") as f:
        for i in range(start, start + n):
            f.write(json.dumps(conversation(i, turns), ensure_ascii=False) + "\n")
    return path.stat().st_size


def _rss_mb() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: KiB on Linux, bytes on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


# ------------------------------------------------------------------------------------------------ workers


def import_worker(log: str, out: str) -> dict[str, Any]:
    """Check and store the log as the runner does before judging (no judge runs)."""
    from mheval.conversations.imported import Options, load_transcript_suite
    from mheval.engine.conversation_stages import store_imported
    from mheval.runfolder.store import Store

    baseline = _rss_mb()
    started = time.perf_counter()
    suite = load_transcript_suite(f"transcripts:{log}", Options())
    checked = time.perf_counter() - started
    checked_rss = _rss_mb()
    with Store.open(out) as store:
        store.put_scenarios(suite.scenarios)
        done = store_imported(suite, store)
        exchanges = store.count("exchanges")
    seconds = time.perf_counter() - started
    return {
        "conversations": done.stored + done.reused,
        "exchanges": exchanges,
        "check_seconds": round(checked, 1),
        "check_peak_rss_mb": round(checked_rss, 1),
        "seconds": round(seconds, 1),
        "conversations_per_s": round((done.stored + done.reused) / seconds, 1),
        "baseline_rss_mb": round(baseline, 1),
        "peak_rss_mb": round(_rss_mb(), 1),
    }


def judge_worker(log: str, warm: str, out: str, judge: str) -> dict[str, Any]:
    """Judge `log` with `judge` and the default protocols, after warming the judge on `warm`."""
    from mheval.api import judge_transcripts

    baseline = _rss_mb()
    started = time.perf_counter()
    judge_transcripts(warm, judges=judge, out=f"{out}-warm")
    warm_s = time.perf_counter() - started
    started = time.perf_counter()
    result = judge_transcripts(log, judges=judge, out=out)
    seconds = time.perf_counter() - started
    from mheval.judges.offline import embed
    from mheval.runfolder.store import Store

    # The encoders' thread count is chosen per call from the free cores (or fixed by MHEVAL_EMBED_THREADS).
    threads = {kind: dict(sorted(enc.calls_by_threads.items())) for kind, enc in embed._ENCODERS.items()}
    with Store.open(out) as store:
        replies = store.count("exchanges")
        judgments = store.count("judgments")
        statuses = dict(store._db.execute("SELECT status, COUNT(*) FROM judgments GROUP BY status").fetchall())
    return {
        "judge": judge,
        "replies": replies,
        "judgments": judgments,
        "judgments_ok": statuses.get("ok", 0),
        "counts": result.counts,
        "warm_up_seconds": round(warm_s, 1),
        "seconds": round(seconds, 1),
        "replies_per_s": round(replies / seconds, 2),
        "encoder_calls_by_threads": threads,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "baseline_rss_mb": round(baseline, 1),
        "peak_rss_mb": round(_rss_mb(), 1),
    }


# ------------------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description="import and judge a large synthetic transcript log")
    parser.add_argument("--quick", action="store_true", help="small sizes (for tests/test_benchmarks_quick.py)")
    parser.add_argument("--n", type=int, help="conversations in the log (default 10,000)")
    parser.add_argument("--turns", type=int, help="exchanges per conversation (default 20)")
    parser.add_argument("--judge-n", type=int, help="conversations judged per speed (default 50)")
    parser.add_argument("--rss-n", type=int, nargs="*", help="conversation counts judged with --rss-judge for RSS")
    parser.add_argument("--rss-turns", type=int, help="exchanges per conversation in the RSS runs (default --turns)")
    parser.add_argument("--speeds", nargs="*", default=["offline:fast", "offline"], help="judges timed")
    parser.add_argument("--rss-judge", default="offline:fast", help="the judge of the --rss-n runs")
    parser.add_argument(
        "--replies-from",
        type=Path,
        help="JSONL whose `answer` fields are real model replies (help_harm's appropriateness_scores.dev.jsonl):"
        " the assistant turns, in English, instead of the script's short phrases",
    )
    parser.add_argument("--worker", choices=("import", "judge"), help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    parser.add_argument("--warm", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--judge", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "import":
        print(json.dumps(import_worker(args.log, args.out)))
        return
    if args.worker == "judge":
        print(json.dumps(judge_worker(args.log, args.warm, args.out, args.judge)))
        return

    if args.replies_from:
        lines = args.replies_from.read_text(encoding="utf-8").splitlines()
        REAL_REPLIES.extend(row["answer"] for line in lines if (row := json.loads(line)).get("answer"))
    n = args.n or (40 if args.quick else 10_000)
    turns = args.turns or (4 if args.quick else 20)
    judge_n = min(n, args.judge_n or (4 if args.quick else 50))
    rss_n = [min(n, k) for k in (args.rss_n if args.rss_n is not None else ([] if args.quick else [250, 1000]))]
    rss_turns = args.rss_turns or turns
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mheval-transcripts-") as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "log.jsonl"
        written = time.perf_counter()
        size = write_log(log, n, turns)
        written = time.perf_counter() - written
        imported = run_worker(SCRIPT, ["--worker", "import", "--log", str(log), "--out", str(tmp / "import")],
                              timeout=7200)  # fmt: skip
        warm = tmp / "warm.jsonl"
        write_log(warm, 1, turns, start=n + 1)  # a conversation not in the log: no cache is warmed for it
        judged: dict[str, Any] = {}
        for speed in args.speeds:  # the first `judge_n` conversations of the same log
            part = tmp / f"slice-{judge_n}.jsonl"
            write_log(part, judge_n, turns)
            judged[speed] = run_worker(
                SCRIPT, ["--worker", "judge", "--log", str(part), "--warm", str(warm), "--judge", speed,
                         "--out", str(tmp / f"judge-{speed.replace(':', '-')}")], timeout=7200,
            )  # fmt: skip
        memory: list[dict[str, Any]] = []
        for k in rss_n:
            part = tmp / f"rss-{k}.jsonl"
            write_log(part, k, rss_turns)
            figures = run_worker(
                SCRIPT, ["--worker", "judge", "--log", str(part), "--warm", str(warm), "--judge", args.rss_judge,
                         "--out", str(tmp / f"rss-{k}")], timeout=7200,
            )  # fmt: skip
            memory.append({"conversations": k, "turns": rss_turns, **figures})
    emit(
        {
            "benchmark": "transcripts_scale",
            "quick": args.quick,
            "workload": f"{n} conversations x {turns} turns (en and zh), judged: first {judge_n} per speed",
            "replies": f"{len(REAL_REPLIES)} real replies from {args.replies_from}" if REAL_REPLIES else "synthetic",
            # The encoders keep the vectors of sentences they have read: a reply met again costs little, so a rate
            # is only that of new text when the judged replies are distinct.
            "distinct_replies_judged": distinct_replies(judge_n, turns),
            "machine": {**machine(), "embed_threads": os.environ.get("MHEVAL_EMBED_THREADS", "auto")},
            "log": {
                "conversations": n,
                "turns": turns,
                "mb": round(size / 2**20, 1),
                "write_seconds": round(written, 1),
            },
            "import": imported,
            "judge": judged,
            "judge_rss_by_conversations": memory,
            "target": {"import_peak_rss_mb_below": 500, "judge_peak_rss_mb_below": 500, "replies_per_s_at_least": 20},
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


if __name__ == "__main__":
    main()
