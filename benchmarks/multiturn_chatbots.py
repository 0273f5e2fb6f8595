"""Two scripted chatbots on 8 scenarios of `crisis-dialogues`, judged offline: what the conversation verdicts say.

The bots are tests/chatbots.py (`decent` and `harmful`, replies in tests/data/chatbots/*.yaml), played in
replay mode on the 8 scenarios their scripts cover: en and zh, gradual disclosure, indirect method-seeking (en,
zh), retraction (en, zh), referral resistance, an anxiety crisis and a benign control. `mheval run` has no
option that picks scenarios by id (`--limit` takes a balanced head of the suite), so the 8 built-in scenario
files are copied into a folder given as `--suite scenarios:DIR`. One run per judge (`offline`, `offline:fast`)
with both bots, in a fresh interpreter; then the run folder's conversations are read as the report reads them
(runfolder/conversation_views.py `run_views`: verdict.py `conversation_verdict` per conversation and judge).

Per judge and bot: conversations unsafe of N, which and why (with the turns that make them unsafe); conversations
that handled the risk (every `must` met); every expectation's state, turn and evidence; for the harmful bot,
`method_information` per scenario and in how many of the 3 scenarios whose replies give method, lethality or
timing information it was found violated. `wrong` lists every verdict that contradicts what the scripts do by
construction (tests/chatbots.py: METHOD_TURNS, HARMFUL_VIOLATES): a decent conversation called unsafe, a `must`
of the decent bot missed, a `must_not` in the wrong state, a method violation cited at a turn without it.

    python benchmarks/multiturn_chatbots.py [--judge offline --judge offline:fast] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import emit, machine

ROOT = Path(__file__).resolve().parent.parent
BOTS = ("decent", "harmful")


def chatbots() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chatbots", ROOT / "tests" / "chatbots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def command(suite: Path, judge: str, out: Path) -> list[str]:
    models = [arg for bot in BOTS for arg in ("--model", f"python:tests/chatbots.py:{bot}")]
    return ["mheval", "run", "--suite", f"scenarios:{suite}", *models, "--judge", judge, "--out", str(out), "--quiet"]


def cited(evidence: list[str] | tuple[str, ...]) -> set[int | None]:
    """The turns that evidence spans (`t<turn>: <quote>`) cite; {None} when there is none."""
    from mheval.conversations.flow import quoted_turn

    return {quoted_turn(span) for span in evidence} or {None}


def expected_state(bot: str, scenario: str, eid: str, bots: ModuleType) -> str:
    if bot == "decent":
        return "met"
    return "violated" if eid in bots.HARMFUL_VIOLATES[scenario] else "met"


def missed(expectations: dict[str, Any]) -> dict[str, str]:
    return {e: o["state"] for e, o in expectations.items() if o["kind"] == "must" and o["state"] != "met"}


def contradictions(bot: str, view: Any, bots: ModuleType) -> list[dict[str, Any]]:
    """The verdicts of one conversation that contradict what the bot's script does there."""
    sid, verdict, must = view.key[0], view.verdict, view.scenario.expectations.must
    out: list[dict[str, Any]] = []

    def wrong(what: str, expected: Any, observed: Any) -> None:
        out.append({"bot": bot, "scenario": sid, "what": what, "expected": expected, "observed": observed})

    if verdict.unsafe is not (bot == "harmful"):
        wrong("unsafe", bot == "harmful", [verdict.unsafe, *verdict.reasons])
    for eid, o in view.outcomes.items():
        if eid in must:
            if bot == "decent" and o.state != "met":
                wrong(eid, "met", [o.state, o.turn, *o.evidence])
            continue
        want = expected_state(bot, sid, eid, bots)
        turns = bots.METHOD_TURNS.get(sid, ())
        if o.state != want:
            wrong(eid, want, [o.state, o.turn, *o.evidence])
        elif eid == "method_information" and want == "violated" and not cited(o.evidence) <= set(turns):
            wrong(f"{eid} turn", list(turns), [o.turn, *o.evidence])
    return out


def read(out: Path, judge: str, bots: ModuleType) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Per bot, what the verdicts say; and the verdicts that contradict the scripts."""
    from mheval.runfolder.conversation_views import run_views
    from mheval.runfolder.store import Store

    with Store.open_existing(out) as store:
        views = run_views(store, judges=[judge])
    result: dict[str, Any] = {}
    wrong: list[dict[str, Any]] = []
    for bot in BOTS:
        mine = sorted((v for v in views if v.key[1].endswith(f":{bot}")), key=lambda v: v.key[0])
        scenarios: dict[str, Any] = {}
        for v in mine:
            sid = v.key[0]
            assert v.scenario is not None
            must = list(v.scenario.expectations.must)
            scenarios[sid] = {
                "family": v.family,
                "language": v.language,
                "unsafe": v.verdict.unsafe,
                "handled_risk": v.verdict.handled_risk,
                "reasons": list(v.verdict.reasons),
                "unsafe_turns": {str(t): why for t, why in sorted(v.unsafe_turns.items())},
                "expectations": {
                    eid: {"kind": "must" if eid in must else "must_not", **o.as_dict()} for eid, o in v.outcomes.items()
                },
            }
            wrong += contradictions(bot, v, bots)
        unsafe = {sid: s["reasons"] for sid, s in scenarios.items() if s["unsafe"]}
        summary: dict[str, Any] = {
            "conversations": len(scenarios),
            "unsafe": len(unsafe),
            "unsafe_scenarios": unsafe,
            "handled_risk": sum(s["handled_risk"] is True for s in scenarios.values()),
            "not_handled": {
                sid: missed(s["expectations"]) for sid, s in scenarios.items() if s["handled_risk"] is not True
            },
            "must_not_violated": {
                sid: [e for e, o in s["expectations"].items() if o["kind"] == "must_not" and o["state"] == "violated"]
                for sid, s in scenarios.items()
            },
        }
        if bot == "harmful":
            method = {
                sid: s["expectations"].get("method_information", {"state": "not_listed"})
                for sid, s in scenarios.items()
            }
            violated = [sid for sid in bots.METHOD_TURNS if method.get(sid, {}).get("state") == "violated"]
            right_turn = [sid for sid in violated if cited(method[sid]["evidence"]) <= set(bots.METHOD_TURNS[sid])]
            summary["method_information"] = {
                "method_scenarios": list(bots.METHOD_TURNS),
                "method_turns": {sid: list(t) for sid, t in bots.METHOD_TURNS.items()},
                "violated_in": violated,
                "violated_of_3": len(violated),
                # ... citing only replies that give method, lethality or timing information (not another reply)
                "violated_at_method_turn": right_turn,
                "violated_at_method_turn_of_3": len(right_turn),
                "violated_elsewhere": [
                    sid for sid, m in method.items() if sid not in bots.METHOD_TURNS and m["state"] == "violated"
                ],
                "per_scenario": method,
            }
        result[bot] = {**summary, "scenarios": scenarios}
    return result, wrong


def main() -> None:
    parser = argparse.ArgumentParser(description="conversation verdicts of a decent and a harmful scripted bot")
    parser.add_argument("--judge", action="append", help="judge spec (repeatable; default: offline, offline:fast)")
    parser.add_argument("--keep", type=Path, help="keep the scenario folder and the run folders here")
    args = parser.parse_args()
    judges = args.judge or ["offline", "offline:fast"]
    bots = chatbots()
    from mheval.suites.dialogues import builtin_folder

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mheval-chatbots-") as tmp:
        base = args.keep or Path(tmp)
        suite = base / "scenarios"
        suite.mkdir(parents=True, exist_ok=True)
        for sid in bots.SCENARIOS:
            shutil.copy(builtin_folder("crisis-dialogues") / f"{sid}.yaml", suite / f"{sid}.yaml")
        per_judge: dict[str, Any] = {}
        for judge in judges:
            out = base / f"run-{judge.replace(':', '-')}"
            shutil.rmtree(out, ignore_errors=True)
            cmd = command(suite, judge, out)
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "mheval", *cmd[1:]], cwd=ROOT, capture_output=True, text=True)
            seconds = round(time.perf_counter() - t0, 1)
            entry: dict[str, Any] = {"command": " ".join(cmd), "seconds": seconds}
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
                per_judge[judge] = {**entry, "error": f"mheval exited {proc.returncode}: " + " | ".join(tail)}
                continue
            bots_result, wrong = read(out, judge, bots)
            per_judge[judge] = {**entry, "bots": bots_result, "wrong": wrong}
    emit({
        "benchmark": "multiturn_chatbots",
        "machine": machine(),
        "scenarios": list(bots.SCENARIOS),
        "judges": per_judge,
        "seconds": round(time.perf_counter() - started, 1),
    })  # fmt: skip


if __name__ == "__main__":
    main()
