"""The offline judge on mheval's own contrast sets (tests/data/offline_checks/), for figures.json.

The sets were written apart from the cue lists, in English and Chinese, and split: `tune` rows may
guide the cue lists and weights, `holdout` rows only ever measure. Figures are given per split:

- triage_risk: statements a clinician would always flag (plans, means, places of danger, attempts,
  farewells, self-harm): the share recognised as suicidal ideation or self-harm, per family and language;
- triage_benign: idioms, fiction and research framing, third parties, professionals, ordinary stress:
  the share triaged as any crisis (false alarms) and as suicidal ideation or self-harm;
- replies: each user message with a textbook, a bare, a dismissive and a harmful reply: the mean
  appropriateness level per kind, the AUC of textbook replies against the rest, the highest level
  any harmful reply got, and the share of harmful replies rated inappropriate or worse (at or below
  `verdict.INAPPROPRIATE_LEVEL`, under a key that names the level: `harmful_at_most_2`).
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from mheval.judges.offline.judge import OfflineJudge
from mheval.labels import APPROPRIATENESS, CRISIS_TRIAGE, HIGH_RISK, NO_CRISIS
from mheval.records import Case, Response, Turn
from mheval.verdict import INAPPROPRIATE_LEVEL

CHECKS = Path(__file__).resolve().parents[3] / "tests" / "data" / "offline_checks"
SPLITS = ("tune", "holdout")


class _Protocol:
    def __init__(self, id: str) -> None:
        self.id = id


def _rows(folder: Path, name: str) -> list[dict[str, Any]]:
    with (folder / f"{name}.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _share(hits: int, n: int) -> dict[str, Any]:
    return {"hits": hits, "n": n, "share": round(hits / n, 4) if n else None}


async def _triage(judge: OfflineJudge, rows: list[dict[str, Any]]) -> list[str]:
    protocol = _Protocol(CRISIS_TRIAGE)
    out = []
    for r in rows:
        case = Case(id=r["id"], language=r["language"], turns=[Turn(role="user", content=r["text"])])
        out.append(str((await judge.judge(protocol, case, None)).label))
    return out


def _by(rows: list[dict[str, Any]], hit: list[bool], key: str) -> dict[str, Any]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for r, h in zip(rows, hit, strict=True):
        groups[f"{r[key]}/{r['language']}"].append(h)
    return {k: _share(sum(v), len(v)) for k, v in sorted(groups.items())}


async def triage_figures(judge: OfflineJudge, folder: Path = CHECKS) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name in ("triage_risk", "triage_benign"):
        rows = _rows(folder, name)
        labels = await _triage(judge, rows)
        for split in SPLITS:
            idx = [i for i, r in enumerate(rows) if r["split"] == split]
            part, got = [rows[i] for i in idx], [labels[i] for i in idx]
            severe = [label in HIGH_RISK for label in got]
            if name == "triage_risk":
                entry = {"recognised": _share(sum(severe), len(got)), "by_family": _by(part, severe, "family")}
            else:
                crisis = [label != NO_CRISIS for label in got]
                entry = {
                    "crisis": _share(sum(crisis), len(got)),
                    "severe": _share(sum(severe), len(got)),
                    "by_family": _by(part, crisis, "family"),
                }
            figures.setdefault(name, {})[split] = entry
    return figures


def auc(positive: list[float], negative: list[float]) -> float | None:
    """P(a positive scores above a negative), ties counting half."""
    if not positive or not negative:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return round(wins / (len(positive) * len(negative)), 4)


async def reply_figures(judge: OfflineJudge, folder: Path = CHECKS) -> dict[str, Any]:
    protocol = _Protocol(APPROPRIATENESS)
    rows = _rows(folder, "replies")
    levels = []
    for r in rows:
        case = Case(
            id=r["message_id"], language=r["language"], locale=r["locale"], crisis_label=r["crisis_label"],
            turns=[Turn(role="user", content=r["user"])],
        )  # fmt: skip
        reply = Response(case_id=case.id, model="contrast", sample=0, text=r["reply"])
        judgment = await judge.judge(protocol, case, reply, crisis_label=r["crisis_label"])
        levels.append(judgment.total)
    figures: dict[str, Any] = {}
    for split in SPLITS:
        by_kind: dict[str, list[float]] = defaultdict(list)
        for r, level in zip(rows, levels, strict=True):
            if r["split"] == split and level is not None:
                by_kind[r["kind"]].append(float(level))
        rest = [v for kind, values in by_kind.items() if kind != "textbook" for v in values]
        figures[split] = {
            "n": sum(len(v) for v in by_kind.values()),
            "unscored": sum(1 for r, level in zip(rows, levels, strict=True) if r["split"] == split and level is None),
            "mean_by_kind": {k: round(sum(v) / len(v), 3) for k, v in sorted(by_kind.items())},
            "auc_textbook_vs_rest": auc(by_kind["textbook"], rest),
            "harmful_max_level": max(by_kind["harmful"], default=None),
            f"harmful_at_most_{INAPPROPRIATE_LEVEL}": _share(
                sum(v <= INAPPROPRIATE_LEVEL for v in by_kind["harmful"]), len(by_kind["harmful"])
            ),
        }
    return figures


async def corpus_triage_figures(judge: OfflineJudge) -> dict[str, Any]:
    """Triage of the corpus's holdout messages (corpus/messages, never trained or tuned on): risk
    recognised (any crisis label, and the severe ones as severe) and ordinary messages alarmed, per kind
    and language."""
    from mheval.training.corpus import load_messages, message_case, splits

    split_of = splits()
    rows = [m for m in load_messages() if split_of.get(m.batch) == "holdout"]
    protocol = _Protocol(CRISIS_TRIAGE)
    got = [str((await judge.judge(protocol, message_case(m), None)).label) for m in rows]
    risk = [(m, g) for m, g in zip(rows, got, strict=True) if m.crisis_label != NO_CRISIS]
    ordinary = [(m, g) for m, g in zip(rows, got, strict=True) if m.crisis_label == NO_CRISIS]

    def by(pairs: list, hit: Any, key: Any) -> dict[str, Any]:
        groups: dict[str, list[bool]] = defaultdict(list)
        for m, g in pairs:
            groups[key(m)].append(hit(m, g))
        return {k: _share(sum(v), len(v)) for k, v in sorted(groups.items())}

    def lang(m: Any) -> str:
        return m.language + ("-yue" if m.variety else "")

    def recognised(m: Any, g: str) -> bool:
        return g != NO_CRISIS and (g in HIGH_RISK) == (m.crisis_label in HIGH_RISK)

    severe = [(m, g) for m, g in risk if m.crisis_label in HIGH_RISK]
    return {
        "batches": sorted({m.batch for m in rows}),
        "risk_recognised": _share(sum(recognised(m, g) for m, g in risk), len(risk)),
        "risk_any_crisis": _share(sum(g != NO_CRISIS for _, g in risk), len(risk)),
        "severe_recall": _share(sum(g in HIGH_RISK for _, g in severe), len(severe)),
        "ordinary_alarmed": _share(sum(g != NO_CRISIS for _, g in ordinary), len(ordinary)),
        "ordinary_called_severe": _share(sum(g in HIGH_RISK for _, g in ordinary), len(ordinary)),
        "risk_by_kind": by(risk, recognised, lambda m: m.kind),
        "risk_by_language": by(risk, recognised, lang),
        "ordinary_alarmed_by_kind": by(ordinary, lambda m, g: g != NO_CRISIS, lambda m: m.kind),
        "ordinary_alarmed_by_language": by(ordinary, lambda m, g: g != NO_CRISIS, lang),
        "risk_recognised_by_batch": by(risk, recognised, lambda m: m.batch),
        "ordinary_alarmed_by_batch": by(ordinary, lambda m, g: g != NO_CRISIS, lambda m: m.batch),
    }


def contrast_figures(weights: Path, folder: Path = CHECKS) -> dict[str, Any]:
    """Both speeds of the offline judge built in `weights`, on the contrast sets and the corpus's
    holdout messages."""

    async def run() -> dict[str, Any]:
        out: dict[str, Any] = {"sets": str(folder.name), "splits": list(SPLITS)}
        for fast in (False, True):
            judge = OfflineJudge(models=weights, fast=fast)
            out[judge.name] = {
                **await triage_figures(judge, folder),
                "replies": await reply_figures(judge, folder),
                "corpus_messages_holdout": await corpus_triage_figures(judge),
            }
        return out

    return asyncio.run(run())
