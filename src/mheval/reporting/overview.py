"""What a run was and what it cost: suites, models, judges, protocols, counts, tokens, cost, time."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pandas as pd

from mheval.reporting.rundata import RunData


def reason_kind(reason: str | None) -> str:
    """The reason's name, or "unspecified"."""
    return str(reason) if reason else "unspecified"


def models_frame(run: RunData) -> pd.DataFrame:
    """Per target model: responses, failed calls, tokens, cost and summed latency."""
    rows: dict[str, dict[str, Any]] = {}
    for r in run.responses:
        row = rows.setdefault(
            r.model,
            {
                "model": r.model,
                "responses": 0,
                "failed": 0,
                "cached": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cost_usd": 0.0,
                "latency_s": 0.0,
            },
        )
        row["responses"] += 1
        row["failed"] += int(r.text is None)
        row["cached"] += int(r.cached)
        row["prompt_tokens"] += r.usage.prompt_tokens
        row["completion_tokens"] += r.usage.completion_tokens
        row["cost_usd"] += r.usage.cost_usd
        row["latency_s"] += r.latency_s
    return pd.DataFrame(
        list(rows.values()),
        columns=[
            "model",
            "responses",
            "failed",
            "cached",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "latency_s",
        ],
    )


def judges_frame(run: RunData) -> pd.DataFrame:
    """Per judge x protocol: judgments, scored, unscored, repeats, tokens, cost and summed latency."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for j in run.judgments:
        row = rows.setdefault(
            (j.judge, j.protocol),
            {
                "judge": j.judge,
                "protocol": j.protocol,
                "judgments": 0,
                "scored": 0,
                "unscored": 0,
                "repeats": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cost_usd": 0.0,
                "latency_s": 0.0,
            },
        )
        row["judgments"] += 1
        row["scored"] += int(j.status == "ok")
        row["unscored"] += int(j.status != "ok")
        row["repeats"] = max(row["repeats"], j.repeat + 1)
        row["prompt_tokens"] += j.usage.prompt_tokens
        row["completion_tokens"] += j.usage.completion_tokens
        row["cost_usd"] += j.usage.cost_usd
        row["latency_s"] += j.latency_s
    order = {p: i for i, p in enumerate(run.protocols)}
    judges = run.judges
    ordered = sorted(rows.values(), key=lambda r: (judges.index(r["judge"]), order.get(r["protocol"], 99)))
    return pd.DataFrame(
        ordered,
        columns=[
            "judge",
            "protocol",
            "judgments",
            "scored",
            "unscored",
            "repeats",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "latency_s",
        ],
    )


def unscored_frame(run: RunData) -> pd.DataFrame:
    """Unscored judgments by protocol, judge and reason (the part before the colon)."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for j in run.judgments:
        if j.status != "ok":
            counts[(j.protocol, j.judge, reason_kind(j.reason))] += 1
    rows = [{"protocol": p, "judge": jd, "reason": r, "count": n} for (p, jd, r), n in sorted(counts.items())]
    return pd.DataFrame(rows, columns=["protocol", "judge", "reason", "count"])


def read_by_llm(judge: str, run_judges: list[str]) -> bool:
    """Whether an LLM read the replies this judge's verdicts rest on: a chat-model judge, or a panel over
    the run's judges when one of them is. The offline judge, a trained judge file and human raters read
    no instructions, so text in a reply addressed to the judge cannot steer them."""
    from mheval.judges import OFFLINE_JUDGES, judge_model_specs
    from mheval.judges.panel import PANEL_PREFIX

    if judge.startswith("human:") or judge in OFFLINE_JUDGES:
        return False
    if judge.startswith(PANEL_PREFIX):
        return any(read_by_llm(j, []) for j in run_judges if not j.startswith(PANEL_PREFIX))
    return bool(judge_model_specs([judge]))


def injection_note(run: RunData) -> str | None:
    """What was found of text addressed to the judge inside replies, and what the run did with it, in one
    sentence for the report and the summary; None when no LLM judge read the replies (nothing to steer)."""
    from mheval.runfolder.export import INJECTION_FLAG, is_injected

    readers = [j for j in run.judges if read_by_llm(j, run.judges)]
    pool = [j for j in (*run.judgments, *run.excluded) if j.judge in readers and j.model is not None]
    if not pool:
        return None
    flagged = [j for j in pool if is_injected(j)]
    who = ", ".join(readers)
    if not flagged:
        return (
            f"LLM judge(s) {who} read the replies; none of the {len(pool)} judgment(s) of a reply found text "
            f"addressed to the judge ({INJECTION_FLAG})"
        )
    found = (
        f"LLM judge(s) {who} read the replies; {len(flagged)} of {len(pool)} judgment(s) were of replies "
        f"holding text addressed to the judge (flagged {INJECTION_FLAG})"
    )
    if run.injection_policy == "exclude":
        return f"{found}: they are left out of every number (on_injection=exclude)"
    return (
        f"{found}: they are counted (on_injection=flag), and the headlines show their share and the means without them"
    )


def facts(run: RunData) -> dict[str, Any]:
    """Headline facts of the run for the header and the terminal summary. A multi-turn run counts its
    conversations and turns (exchanges), and its per-turn and whole-conversation judgments, models, judges,
    protocols and tokens with the rest."""
    d = run.dialogue
    languages: Counter[str] = Counter(str(c.language) for c in run.cases.values())
    languages.update(d.languages[c.scenario_id] for c in d.conversations if c.scenario_id in d.languages)
    turns = Counter("multi-turn" if len(c.turns) > 1 else "single-turn" for c in run.cases.values())
    judgments = [*run.judgments, *d.judgments]
    tokens: defaultdict[str, int] = defaultdict(int)
    cost = 0.0
    for usage in [*(r.usage for r in run.responses), *(e.usage for e in d.exchanges), *(j.usage for j in judgments)]:
        tokens["prompt"] += usage.prompt_tokens
        tokens["completion"] += usage.completion_tokens
        cost += usage.cost_usd
    from mheval.protocols.spec import BUILTIN_ORDER

    protocols = list(dict.fromkeys([*run.protocols, *(j.protocol for j in d.judgments)]))
    order = {p: i for i, p in enumerate(BUILTIN_ORDER)}
    return {
        "run_dir": str(run.run_dir),
        "suite": run.suite,
        "cases": len(run.cases),
        "conversations": len(d.conversations),
        "exchanges": len(d.exchanges),
        "failed_conversations": sum(1 for c in d.conversations if c.status != "ok"),
        "languages": dict(languages),
        "turns": dict(turns),
        "models": list(dict.fromkeys([*run.models, *(c.model for c in d.conversations)])),
        "judges": list(dict.fromkeys([*run.judges, *(j.judge for j in d.judgments)])),
        "protocols": sorted(protocols, key=lambda p: (order.get(p, len(order)), p)),
        "samples": run.config.get("samples"),
        "repeats": max([j.repeat + 1 for j in judgments], default=0),
        "responses": len(run.responses),
        "failed_responses": sum(1 for r in run.responses if r.text is None),
        "judgments": len(judgments),
        "unscored": sum(1 for j in judgments if j.status != "ok"),
        "prompt_tokens": tokens["prompt"],
        "completion_tokens": tokens["completion"],
        "cost_usd": cost,
        "response_latency_s": sum(r.latency_s for r in run.responses) + sum(e.latency_s for e in d.exchanges),
        "judge_latency_s": sum(j.latency_s for j in judgments),
        "category_note": run.category_note(),
    }


__all__ = ["facts", "injection_note", "judges_frame", "models_frame", "read_by_llm", "reason_kind", "unscored_frame"]
