"""Plain-text summaries for the terminal: the report's headline numbers, and a run comparison.

Plain text (not rich markup) so the same string prints in a terminal, a CI log or a file; column
widths count East Asian wide characters as two cells.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from mheval.labels import CRISIS_TRIAGE
from mheval.reporting import formatting as f
from mheval.reporting.compare import RATES
from mheval.reporting.metrics import ALL
from mheval.reporting.overview import read_by_llm
from mheval.reporting.policy_words import score_bound
from mheval.reporting.rundata import label_name
from mheval.reporting.tables import (
    UNGROUNDED_DEFINITIONS,
    UNGROUNDED_JUDGMENTS,
    ReportTables,
    report_tables,
    ungrounded_definition,
)
from mheval.resources import digits, warning_lines
from mheval.verdict import HARMFUL_LEVEL, INAPPROPRIATE_LEVEL

if TYPE_CHECKING:
    from mheval.reporting.rundata import RunData
    from mheval.reporting.verdict_block import VerdictBlock


def content_line() -> str:
    """The content warning a summary opens with, its lines from mheval.resources.warning_lines in short:
    "US 988 · GB/IE Samaritans 116 123 · ... · elsewhere findahelpline.com" (a service's name is left out
    when it holds the number already)."""
    parts = []
    for line in warning_lines():
        if not line.codes:
            parts.append(f"elsewhere {line.number}")
            continue
        name = "" if digits(line.number) in digits(line.service) else f" {line.service}"
        parts.append(f"{'/'.join(line.codes)}{name} {line.number}")
    return "Content warning: crisis topics. Support now: " + " · ".join(parts)


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def _pad(text: str, width: int, right: bool) -> str:
    space = " " * max(0, width - _width(text))
    return space + text if right else text + space


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool] | None = None) -> str:
    """Aligned columns; a column with no value in any row ("–" throughout) is left out."""
    numeric = list(numeric or [False] * len(headers))
    keep = [i for i in range(len(headers)) if not rows or any(r[i] not in ("–", "") for r in rows)]
    headers, numeric = [headers[i] for i in keep], [numeric[i] for i in keep]
    rows = [[r[i] for i in keep] for r in rows]
    widths = [max([_width(h), *(_width(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines = ["  ".join(_pad(h, w, n) for h, w, n in zip(headers, widths, numeric, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(_pad(c, w, n) for c, w, n in zip(r, widths, numeric, strict=True)).rstrip() for r in rows)
    return "\n".join(lines)


def _category(cat: str) -> str:
    return "all categories" if cat == ALL else label_name(CRISIS_TRIAGE, cat)


# The pooled appropriateness figures a headline row carries (those the table has).
_APPROPRIATENESS_KEYS = (
    "n", "mean", "mean_low", "mean_high",
    "harmful_n", "harmful_rate", "harmful_rate_low", "harmful_rate_high",
    "inappropriate_n", "inappropriate_rate", "inappropriate_rate_low", "inappropriate_rate_high",
    "injected_n", "injected_rate", "injected_rate_low", "injected_rate_high",
    "mean_clean", "mean_clean_low", "mean_clean_high",
)  # fmt: skip


def _pooled(frame: pd.DataFrame, model: str, judge: str) -> tuple[pd.DataFrame, Any]:
    """A by-category table's rows of one model and judge, and their pooled ("all") row, or None."""
    sel = frame[(frame["model"] == model) & (frame["judge"] == judge)]
    pooled = sel[sel["category"] == ALL]
    return sel, (pooled.iloc[0] if not pooled.empty else None)


def headline_frame(tables: ReportTables) -> pd.DataFrame:
    """One row per model x judge: pooled appropriateness, harmful and inappropriate rates, PsyCrisis total."""
    appr = tables.frame("appropriateness_by_category")
    psy = tables.frame("psycrisis_by_category")
    keys: list[tuple[str, str]] = []
    for frame in (appr, psy):
        if not frame.empty:
            keys.extend(zip(frame["model"], frame["judge"], strict=True))
    rows = []
    for model, judge in dict.fromkeys(keys):
        row: dict[str, object] = {"model": model, "judge": judge}
        if not appr.empty:
            sel, r = _pooled(appr, model, judge)
            if r is not None:
                row.update({k: r[k] for k in _APPROPRIATENESS_KEYS if k in r})
                cats = sel[sel["category"] != ALL].dropna(subset=["mean"])
                if len(cats) > 1:
                    low = cats.sort_values("mean", kind="stable").iloc[0]
                    row["weakest_category"], row["weakest_mean"] = low["category"], low["mean"]
        if not psy.empty:
            sel, r = _pooled(psy, model, judge)
            if r is not None:
                row.update(
                    {
                        "psycrisis_n": r["n"],
                        "psycrisis_total": r["total"],
                        "psycrisis_total_low": r["total_low"],
                        "psycrisis_total_high": r["total_high"],
                        "psycrisis_injected_n": r.get("injected_n"),
                        "psycrisis_injected_rate": r.get("injected_rate"),
                        "psycrisis_total_clean": r.get("total_clean"),
                        "psycrisis_total_clean_low": r.get("total_clean_low"),
                        "psycrisis_total_clean_high": r.get("total_clean_high"),
                    }
                )
            cats = sel[sel["category"] != ALL].dropna(subset=["total"])
            if "weakest_category" not in row and len(cats) > 1:  # no appropriateness: PsyCrisis decides
                low = cats.sort_values("total", kind="stable").iloc[0]
                row["weakest_category"], row["weakest_mean"] = low["category"], low["total"]
        rows.append(row)
    return pd.DataFrame(rows)


def _injection_cells(r: dict[str, object], policy: str, judges: list[str]) -> list[str]:
    """Under "flag": the share flagged injection_suspected, and each mean without them (when any is flagged);
    nothing for a judge no LLM read for."""
    if policy == "exclude" or not read_by_llm(str(r["judge"]), judges):
        return ["–", "–", "–"]
    appr_n, psy_n = r.get("injected_n"), r.get("psycrisis_injected_n")
    shares = []
    if not f.missing(appr_n):
        shares.append(f.pct(r.get("injected_rate"), None, None, appr_n, r.get("n")))
    if not f.missing(psy_n):
        shares.append(f.pct(r.get("psycrisis_injected_rate"), None, None, psy_n, r.get("psycrisis_n")))
    if len(shares) == 2:  # both protocols scored: say which share is which
        shares = [f"appr. {shares[0]}", f"psy. {shares[1]}"]
    share = " | ".join(shares) if shares else "–"
    appr = (
        f.interval(r.get("mean_clean"), r.get("mean_clean_low"), r.get("mean_clean_high"))
        if not f.missing(appr_n) and appr_n
        else "–"
    )
    psy = (
        f.interval(
            r.get("psycrisis_total_clean"), r.get("psycrisis_total_clean_low"), r.get("psycrisis_total_clean_high")
        )
        if not f.missing(psy_n) and psy_n
        else "–"
    )
    return [share, appr, psy]


def run_units(fx: dict[str, Any]) -> str:
    """What the run evaluated: its cases, or a multi-turn run's conversations and turns."""
    if not fx["conversations"]:
        return f"{fx['cases']} cases"
    played = f"{fx['conversations']} conversations ({fx['failed_conversations']} unscored), {fx['exchanges']} turns"
    return played + (f", {fx['cases']} cases" if fx["cases"] else "")


def summary_data(run_dir: str | Path | RunData, *, tables: ReportTables | None = None) -> dict[str, Any]:
    """`mheval summary --format json`: the run's facts (counts, models, judges, protocols, tokens, cost)
    and the protocol x model x judge table, as plain JSON values. Takes a run folder (read once) or the
    run as read (a RunData)."""
    import json

    from mheval.reporting.multiturn import summary_data as multiturn_data
    from mheval.reporting.overview import facts
    from mheval.reporting.tables import summary_frame

    t = tables or report_tables(run_dir)
    table = summary_frame(t.run)
    multiturn = multiturn_data(t.run)  # None for a single-turn run (reporting/multiturn.py)
    return {
        "verdict": run_verdict(t.run).to_dict(),  # first: how many replies were unsafe (reporting/verdict_block.py)
        "run": facts(t.run),
        "table": json.loads(table.to_json(orient="records", force_ascii=False)),
        "multiturn": multiturn,
    }


def run_verdict(run: RunData) -> VerdictBlock:
    """The run's verdict (reporting/verdict_block.py) from a RunData, with the conversations' hook."""
    from mheval.reporting.verdict_block import conversation_section, verdict_block

    return verdict_block(run, conversations=conversation_section(run))


# The headline table's columns: header, and whether the column holds numbers (right-aligned).
_HEADLINE_COLUMNS = (
    ("model", False),
    ("judge", False),
    ("appropriateness 1-5", True),
    (f"harmful ({score_bound(HARMFUL_LEVEL)})", True),
    (f"inappropriate ({score_bound(INAPPROPRIATE_LEVEL)})", True),
    ("psycrisis 0-5", True),
    ("weakest category", False),
    ("flagged injection", True),
    ("appropriateness w/o flagged", True),
    ("psycrisis w/o flagged", True),
)

# The by-category appropriateness table's columns, as above.
_CATEGORY_COLUMNS = (
    ("model", False),
    ("judge", False),
    ("category", False),
    ("n", True),
    ("mean [95% CI]", True),
    ("harmful [95% CI]", True),
)


def _columns_table(columns: Sequence[tuple[str, bool]], rows: Sequence[Sequence[str]]) -> str:
    """text_table over (header, numeric) column definitions."""
    return text_table([name for name, _ in columns], rows, [numeric for _, numeric in columns])


def _run_lines(fx: dict[str, Any], verdict: str) -> list[str]:
    """The summary's opening: the run folder, the content warning, the verdict, then what the run held
    and what it cost."""
    langs = ", ".join(f"{v} {k}" for k, v in fx["languages"].items())
    return [
        f"mheval summary: {fx['run_dir']}",
        content_line(),
        "",
        verdict,
        "",
        f"suite {fx['suite']}: {run_units(fx)} ({langs})",
        f"models: {', '.join(fx['models']) or '-'} | judges: {', '.join(fx['judges']) or '-'} | "
        f"protocols: {', '.join(fx['protocols']) or '-'}",
        f"{fx['responses']} responses ({fx['failed_responses']} failed) | {fx['judgments']} judgments "
        f"({fx['unscored']} unscored) | tokens {f.num(fx['prompt_tokens'])} + {f.num(fx['completion_tokens'])} | "
        f"cost {f.money(fx['cost_usd'])} | time {f.seconds(fx['response_latency_s'])} responses, "
        f"{f.seconds(fx['judge_latency_s'])} judgments (sums of latencies)",
        f"crisis category: {fx['category_note']}",
    ]


def _weakest_cell(r: dict[str, Any]) -> str:
    """The lowest-scoring crisis category of a headline row with its mean, or "–" when there is none."""
    if f.missing(r.get("weakest_category")):
        return "–"
    return f"{_category(str(r['weakest_category']))} ({f.num(r['weakest_mean'])})"


def _headline_row(r: dict[str, Any], run: RunData) -> list[str]:
    """One model x judge row of the headline table, its cells in _HEADLINE_COLUMNS order."""
    return [
        str(r["model"]),
        str(r["judge"]),
        f.interval(r.get("mean"), r.get("mean_low"), r.get("mean_high")),
        f.pct(
            r.get("harmful_rate"), r.get("harmful_rate_low"), r.get("harmful_rate_high"), r.get("harmful_n"), r.get("n")
        ),
        f.pct(r.get("inappropriate_rate"), r.get("inappropriate_rate_low"), r.get("inappropriate_rate_high")),
        f.interval(r.get("psycrisis_total"), r.get("psycrisis_total_low"), r.get("psycrisis_total_high")),
        _weakest_cell(r),
        *_injection_cells(r, run.injection_policy, run.judges),
    ]


def _headline_lines(t: ReportTables) -> list[str]:
    """The headline table (pooled over crisis categories), or nothing when no reply was scored."""
    head = headline_frame(t)
    if head.empty:
        return []
    rows = [_headline_row(r, t.run) for r in head.to_dict("records")]
    return ["", "Headline (95% CIs; all crisis categories pooled)", _columns_table(_HEADLINE_COLUMNS, rows)]


def _category_lines(t: ReportTables) -> list[str]:
    """Appropriateness per crisis category (the pooled row left out), or nothing without appropriateness."""
    appr = t.frame("appropriateness_by_category")
    if appr.empty:
        return []
    rows = [
        [
            str(r["model"]),
            str(r["judge"]),
            _category(r["category"]),
            str(r["n"]),
            f.interval(r["mean"], r["mean_low"], r["mean_high"]),
            f.pct(r["harmful_rate"], r["harmful_rate_low"], r["harmful_rate_high"], r["harmful_n"], r["n"]),
        ]
        for r in appr.to_dict("records")
        if r["category"] != ALL
    ]
    return ["", "Appropriateness by crisis category", _columns_table(_CATEGORY_COLUMNS, rows)]


def _unscored_lines(t: ReportTables) -> list[str]:
    """One line counting unscored judgments by protocol, judge and reason, or nothing when all were scored."""
    unscored = t.frame("unscored_reasons")
    if unscored.empty:
        return []
    counts = "; ".join(f"{r['protocol']}/{r['judge']} {r['reason']} {r['count']}" for r in unscored.to_dict("records"))
    return ["", "Unscored judgments: " + counts]


def _ungrounded_lines(t: ReportTables) -> list[str]:
    """Per kind of ungrounded judgment that occurred: its rate per judge and protocol, then what it means."""
    ungrounded = t.frame(UNGROUNDED_JUDGMENTS).to_dict("records")
    lines = []
    for name in UNGROUNDED_DEFINITIONS:
        found = [r for r in ungrounded if not f.missing(r.get(f"{name}_n")) and r[f"{name}_n"]]
        if found:
            rates = "; ".join(f"{r['judge']}/{r['protocol']} {f.pct(r[f'{name}_rate'])}" for r in found)
            lines += [f"{name.capitalize().replace('_', ' ')}: {rates}", f"  ({ungrounded_definition(name)})"]
    return lines


def _agreement_lines(t: ReportTables) -> list[str]:
    """One line of each judge's agreement with human labels, or nothing when no human labelled the run."""
    agreement = t.frame("human_agreement")
    if agreement.empty:
        return []
    judges = agreement[agreement["kind"] == "judge"]
    return [
        "Agreement with human labels: "
        + "; ".join(
            f"{r['block']} on {r['protocol']}{' ' + r['dimension'] if r['dimension'] else ''}: {r['statistic']} "
            f"{f.interval(r['value'], r.get('value_low'), r.get('value_high'))} ({r['verdict'] or 'n/a'}, "
            f"{r['vs_humans'] or 'n/a'} human range)"
            for r in judges.to_dict("records")
        )
    ]


def summary_text(run_dir: str | Path | RunData, *, tables: ReportTables | None = None) -> str:
    """The report's headline numbers as plain text (for `mheval summary`), the verdict first. Takes a run
    folder (read once) or the run as read (a RunData)."""
    from mheval.reporting.overview import facts, injection_note
    from mheval.reporting.verdict_view import verdict_text

    t = tables or report_tables(run_dir)
    note = injection_note(t.run)  # only where an LLM judge read the replies
    out = [
        *_run_lines(facts(t.run), verdict_text(run_verdict(t.run))),
        *_headline_lines(t),
        *([f"injection: {note}"] if note else []),
        *_category_lines(t),
        *_unscored_lines(t),
        *_ungrounded_lines(t),
        *_agreement_lines(t),
    ]
    # Prose lines wrapped at word boundaries (tables, several lines each, are kept as laid out).
    return "\n".join(line if "\n" in line else f.wrap(line) for line in out) + "\n"


def format_comparison(frame: pd.DataFrame) -> str:
    """`compare_runs` output as a plain-text table (differences are b minus a)."""
    if frame.empty:
        return "no comparable numbers: the runs share no model and metric\n"
    rows = []
    for r in frame.to_dict("records"):
        pct = r["metric"] in RATES
        scale = 100 if pct else 1
        unit = " pp" if pct else ""

        def v(x: Any, scale: float = scale) -> str:
            return "–" if f.missing(x) else f"{float(x) * scale:+.2f}" if scale == 1 else f"{float(x) * scale:+.0f}"

        model = r["model_a"] if r["model_a"] == r["model_b"] else f"{r['model_a']} -> {r['model_b']}"
        flagged = (
            "–"
            if f.missing(r.get("flagged_a")) and f.missing(r.get("flagged_b"))
            else (f"{f.pct(r.get('flagged_a'))}/{f.pct(r.get('flagged_b'))}")
        )
        rows.append(
            [
                r["metric"],
                model,
                _category(r["category"]),
                "/".join("–" if f.missing(r[k]) else str(int(r[k])) for k in ("n_a", "n_b", "n_paired")),
                " / ".join(f.pct(r.get(k)) if pct else f.num(r.get(k)) for k in ("mean_a", "mean_b")),
                f"{v(r['diff'])}{unit} [{v(r['diff_low'])}, {v(r['diff_high'])}]",
                "–" if f.missing(r["p_value"]) else f"{r['p_value']:.3g}",
                r["test"],
                flagged,
                "–" if f.missing(r.get("diff_clean")) else f"{v(r['diff_clean'])}{unit}",
            ]
        )
    return (
        text_table(
            [
                "metric",
                "model",
                "category",
                "n a/b/paired",
                "a / b",
                "b - a [95% CI]",
                "p",
                "test",
                "flagged injection a/b",
                "b - a w/o flagged",
            ],
            rows,
            [False, False, False, True, True, True, True, False, True, True],
        )
        + "\n"
    )


def comparison_text(frame: pd.DataFrame, fmt: str) -> str:
    """`compare_runs` output as a table, JSON records or CSV (formula-like text cells neutralised)."""
    from mheval.runfolder.export import csv_text

    if fmt == "table":
        return format_comparison(frame)
    if fmt == "json":
        return frame.to_json(orient="records", force_ascii=False, indent=2) + "\n"
    return csv_text(frame)


__all__ = [
    "comparison_text",
    "format_comparison",
    "headline_frame",
    "run_units",
    "summary_data",
    "summary_text",
    "text_table",
]
