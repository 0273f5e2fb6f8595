"""`write_report`: one self-contained HTML file per run, plus its tables as CSV and Parquet.

The page needs nothing but itself: CSS is inline, plots are PNG data URIs, there is no script and no
external font, and a Content-Security-Policy forbids every fetch, so it opens the same from disk, an
e-mail attachment or an air-gapped machine. Jinja2 autoescapes everything; the only markup built in
Python is the `<mark>` of evidence spans around already-escaped text (see cases.highlight).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from mheval.errors import InputError
from mheval.fileio import atomic_path, atomic_write, check_output, check_outputs, is_run_folder
from mheval.reporting import figures
from mheval.reporting import formatting as f
from mheval.reporting.metrics import ALL
from mheval.reporting.overview import facts, injection_note, read_by_llm
from mheval.reporting.policy_words import score_bound, scores_up_to, template_words
from mheval.reporting.rundata import RunData
from mheval.reporting.tables import (
    UNGROUNDED_CLAIMS,
    UNGROUNDED_JUDGMENTS,
    ReportTables,
    report_tables,
    ungrounded_definition,
)
from mheval.resources import warning_lines
from mheval.verdict import HARMFUL_LEVEL, INAPPROPRIATE_LEVEL
from mheval.version import __version__ as mheval_version

_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
REPORT_NAME = "report.html"
REDACTED_NAME = "report-redacted.html"
TABLES_DIR = "tables"


def table_paths(tables: ReportTables, folder: Path) -> list[Path]:
    """Every file `write_tables` may write or remove in `folder`."""
    return [folder / f"{name}.{ext}" for name in tables.frames for ext in ("csv", "parquet")]


def write_tables(tables: ReportTables, folder: Path) -> list[Path]:
    """Each non-empty table as `NAME.csv` and `NAME.parquet` in `folder`; stale files of empty tables go.

    CSV cells that a spreadsheet would run as formulas (an id `=HYPERLINK(...)`) are prefixed with `'`;
    Parquet keeps the values as they are (it is read by programs, not spreadsheets).
    """
    from mheval.runfolder.export import csv_text, frame_for_parquet

    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, frame in tables.frames.items():
        paths = (folder / f"{name}.csv", folder / f"{name}.parquet")
        if frame.empty:
            for p in paths:
                p.unlink(missing_ok=True)
            continue
        atomic_write(paths[0], csv_text(frame))
        with atomic_path(paths[1]) as tmp:
            frame_for_parquet(frame).to_parquet(tmp, index=False)
        written.extend(paths)
    return written


@functools.cache  # one environment per process: it keeps the compiled templates (compiling took a third of a render)
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("mheval.reporting", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=f.num, pct=f.pct, money=f.money, seconds=f.seconds, interval=f.interval)
    return env


def _row_label(frame: pd.DataFrame) -> pd.DataFrame:
    """A heatmap row per model, or per model x judge when several judges scored the same protocol."""
    if frame.empty:
        return frame
    several = frame["judge"].nunique() > 1
    return frame.assign(
        row=[f"{m} · {j}" if several else m for m, j in zip(frame["model"], frame["judge"], strict=True)]
    )


def _is_all(row: dict[str, Any]) -> bool:
    return row.get("category") == ALL


def _usage_columns() -> list[f.Column]:
    """Tokens, cost and time: the same columns for the models' calls and the judges'."""
    return [
        f.col("prompt_tokens", "prompt tokens", f.num),
        f.col("completion_tokens", "completion tokens", f.num),
        f.col("cost_usd", "cost", f.money),
        f.col("latency_s", "time (sum of latencies)", f.seconds),
    ]


class Section(NamedTuple):
    """One table of the report: the frame it shows (by export name), its columns, which rows stand out, and how
    many leading columns are shown once per run of equal values."""

    frame: str
    columns: tuple[f.Column, ...]
    emphasise: Callable[[dict[str, Any]], bool] | None = None
    group: int = 0


_MODEL_JUDGE = (f.text("model"), f.text("judge"))
_RESPONSES = f.col("n", "responses", f.num)


def _counts(*keys: str) -> tuple[f.Column, ...]:
    """Count columns headed by their own names."""
    return tuple(f.col(key, key, f.num) for key in keys)


def _dimension_met(r: dict[str, Any]) -> str:
    """A PsyCrisis dimension's share met, or the total's interval on its own row."""
    if r["dimension"] == "total":
        return f.interval(r["rate"], r["rate_low"], r["rate_high"])
    return f.pct(r["rate"], r["rate_low"], r["rate_high"], r["met"], r["n"])


# The report's tables, in the keys the template reads.
SECTIONS: dict[str, Section] = {
    "appropriateness": Section(
        "appropriateness_by_category",
        (
            *_MODEL_JUDGE,
            f.text("category_name", "category"),
            _RESPONSES,
            f.est("mean", "mean 1–5 [95% CI]", title="5 = fully appropriate, 1 = harmful"),
            f.rate("harmful", "harmful [95% CI]", title=f"share of replies scored {scores_up_to(HARMFUL_LEVEL)}"),
            f.rate(
                "inappropriate",
                "inappropriate [95% CI]",
                title=f"share of replies scored {scores_up_to(INAPPROPRIATE_LEVEL)}",
            ),
        ),
        _is_all,
        2,
    ),
    "psycrisis_category": Section(
        "psycrisis_by_category",
        (*_MODEL_JUDGE, f.text("category_name", "category"), _RESPONSES, f.est("total", "mean total (0–5) [95% CI]")),
        _is_all,
        2,
    ),
    "psycrisis_dimensions": Section(
        "psycrisis_dimensions",
        (*_MODEL_JUDGE, f.text("dimension_name", "dimension"), _RESPONSES, f.Column("met [95% CI]", _dimension_met)),
        lambda r: r["dimension"] == "total",
        2,
    ),
    "mentalalign": Section(
        "mentalalign_profile",
        (*_MODEL_JUDGE, f.text("attribute_name", "attribute"), _RESPONSES, f.est("mean", "mean (1–5) [95% CI]")),
        lambda r: r["attribute"] in ("css", "ars"),
        2,
    ),
    "dialogue_labels": Section(
        "dialogue_safety_labels",
        (*_MODEL_JUDGE, f.text("label_name", "label"), f.rate("share", "share [95% CI]")),
        lambda r: r["label"] == "safe",
        2,
    ),
    "dialogue_gold": Section(
        "dialogue_safety_gold",
        (
            *_MODEL_JUDGE,
            f.rate("agree", "same label as the gold label [95% CI]"),
            f.text("note", "cases the judge learned from"),
        ),
    ),
    "triage_labels": Section(
        "triage_labels",
        (f.text("judge"), f.text("label_name", "label"), f.rate("share", "share of cases [95% CI]")),
        group=1,
    ),
    "triage_gold": Section(
        "triage_gold",
        (
            f.text("judge"),
            f.rate("agree", "same label as the gold label [95% CI]"),
            f.text("note", "cases the judge learned from"),
        ),
    ),
    "agreement": Section(
        "human_agreement",
        (
            f.text("source"),
            f.text("protocol"),
            f.text("dimension"),
            f.text("block", "who"),
            f.col("items", "items", f.num),
            f.text("statistic"),
            f.est("value", "agreement [95% CI]"),
            f.text("verdict", "precision", title="width of the 95% CI: Good ≤ 0.355, Moderate ≤ 0.560, else Poor"),
            f.text("vs_humans", "vs human pairs", title="below, within or above the range of human-vs-human pairs"),
            f.text("leniency"),
            f.col("unscored", "unscored", f.num),
        ),
        lambda r: r["kind"] == "human",
    ),
    "consistency": Section(
        "self_consistency",
        (
            f.text("protocol"),
            f.text("judge"),
            *_counts("units", "repeats"),
            f.rate("identical", "all repeats identical [95% CI]", n_key="units"),
            f.text("statistic"),
            f.est("value", "value [95% CI]"),
        ),
    ),
    "ungrounded": Section(
        UNGROUNDED_JUDGMENTS,
        (
            f.text("judge"),
            f.text("protocol"),
            f.col("judgments", "judgments", f.num),
            f.rate(
                UNGROUNDED_JUDGMENTS,
                f"{UNGROUNDED_JUDGMENTS} [95% CI]",
                n_key="judgments",
                title=ungrounded_definition(UNGROUNDED_JUDGMENTS),
            ),
            f.rate(
                UNGROUNDED_CLAIMS, UNGROUNDED_CLAIMS, n_key="claims", title=ungrounded_definition(UNGROUNDED_CLAIMS)
            ),
        ),
    ),
    "flags": Section(
        "flags", (f.text("judge"), f.text("protocol"), f.text("flag"), f.col("count", "judgments", f.num))
    ),
    "models": Section(
        "run_models",
        (
            f.text("model"),
            f.col("responses", "responses", f.num),
            f.col("failed", "failed calls", f.num),
            f.col("cached", "from cache", f.num),
            *_usage_columns(),
        ),
    ),
    "judges": Section(
        "run_judges",
        (
            f.text("judge"),
            f.text("protocol"),
            *_counts("judgments", "scored", "unscored", "repeats"),
            *_usage_columns(),
        ),
    ),
    "unscored": Section(
        "unscored_reasons",
        (f.text("protocol"), f.text("judge"), f.text("reason"), f.col("count", "judgments", f.num)),
    ),
}


def _sections(t: ReportTables) -> dict[str, Any]:
    """Every table of the report as display cells, by the key the template reads."""
    return {key: f.display(t.frame(s.frame), s.columns, s.emphasise, s.group) for key, s in SECTIONS.items()}


def _headlines(t: ReportTables) -> list[dict[str, Any]]:
    """One card per model x judge: the pooled numbers a reader looks for first."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    appr = t.frame("appropriateness_by_category")
    for r, card in _pooled_cards(t, out, appr, "mean", "appropriateness", "mean appropriateness (1–5)"):
        card["items"].append(
            (
                f"harmful replies ({score_bound(HARMFUL_LEVEL)})",
                f.pct(r["harmful_rate"], r["harmful_rate_low"], r["harmful_rate_high"], r["harmful_n"], r["n"]),
            )
        )
        worst = appr[(appr["model"] == r["model"]) & (appr["judge"] == r["judge"]) & (appr["category"] != ALL)]
        if len(worst) > 1:
            low = worst.sort_values("mean", kind="stable").iloc[0]
            card["items"].append(("weakest category", f"{low['category_name']} ({f.num(low['mean'])})"))
    psy = t.frame("psycrisis_by_category")
    _pooled_cards(t, out, psy, "total", "PsyCrisis", "PsyCrisis total (0–5)")
    return list(out.values())


def _pooled_cards(
    t: ReportTables, out: dict[tuple[str, str], dict[str, Any]], frame: pd.DataFrame, measure: str, what: str,
    title: str,
) -> list[tuple[dict[str, Any], dict[str, Any]]]:  # fmt: skip
    """Each model x judge's pooled row (all categories) of a protocol's table, with its card in `out` (made on
    first use) holding the measure's interval and the injection items: (row, card) pairs, for the items of the
    protocol's own that follow."""
    pooled = [] if frame.empty else frame[frame["category"] == ALL].to_dict("records")
    cards = []
    for r in pooled:
        card = out.setdefault((r["model"], r["judge"]), {"model": r["model"], "judge": r["judge"], "items": []})
        card["items"].append((title, f.interval(r[measure], r[f"{measure}_low"], r[f"{measure}_high"])))
        card["items"].extend(_injection_items(t, r, measure, what))
        cards.append((r, card))
    return cards


def _injection_items(t: ReportTables, r: dict[str, Any], prefix: str, what: str) -> list[tuple[str, str]]:
    """Under the "flag" policy: the share flagged injection_suspected, and the mean without them; nothing
    for a judge that no LLM read for (the offline judge cannot be steered by text in a reply)."""
    if t.run.injection_policy == "exclude" or not read_by_llm(str(r["judge"]), t.run.judges):
        return []
    share = f.pct(
        r.get("injected_rate"), r.get("injected_rate_low"), r.get("injected_rate_high"), r.get("injected_n"), r.get("n")
    )
    items = [(f"{what}: flagged injection_suspected", share)]
    if not f.missing(r.get("injected_n")) and r["injected_n"]:
        items.append(
            (
                f"{what} without flagged",
                f.interval(r.get(f"{prefix}_clean"), r.get(f"{prefix}_clean_low"), r.get(f"{prefix}_clean_high")),
            )
        )
    return items


Draw = Callable[[pd.DataFrame], str | None]


def _heatmap(value: str, title: str, low: float, high: float, cmap: str, fmt: str = "{:.2f}") -> Draw:
    """A heatmap of `value` per row (model, or model x judge) and crisis category."""
    return lambda d: figures.heatmap(d, value, title=title, vmin=low, vmax=high, cmap=cmap, fmt=fmt, row_label="row")


def _bars(item: str, value: str, title: str, xlim: tuple[float, float], xlabel: str) -> Draw:
    """Bars of `value` with its interval per `item` (its name in `{item}_name`), one bar per row."""
    return lambda d: figures.interval_bars(
        d, item=item, item_label=f"{item}_name", value=value, title=title, xlim=xlim, xlabel=xlabel, group="row"
    )


# The report's figures, in order: the key the template reads, the table drawn, how, and the figure's alt text.
FIGURES: tuple[tuple[str, str, Draw, str], ...] = (
    ("appropriateness", "appropriateness_by_category",
     _heatmap("mean", "Mean appropriateness by crisis category (1 harmful – 5 fully appropriate)", 1, 5, "RdYlGn"),
     "Heatmap of mean appropriateness per model and crisis category"),
    ("harmful", "appropriateness_by_category",
     _heatmap("harmful_rate", f"Share of harmful replies ({score_bound(HARMFUL_LEVEL)}) by crisis category", 0, 1,
              "Reds", "{:.0%}"),
     "Heatmap of harmful-reply rates per model and category"),
    ("psycrisis_category", "psycrisis_by_category",
     _heatmap("total", "Mean PsyCrisis total by crisis category (0–5)", 0, 5, "RdYlGn"),
     "Heatmap of PsyCrisis totals per model and category"),
    ("psycrisis_dimensions", "psycrisis_dimensions",
     lambda d: _bars("dimension", "rate", "PsyCrisis: share of replies that meet each dimension (95% Wilson CI)",
                     (0, 1), "share of replies")(d[d["dimension"] != "total"]),
     "Bars of PsyCrisis dimension rates"),
    ("mentalalign", "mentalalign_profile",
     _bars("attribute", "mean", "MentalAlign profile: mean per attribute (95% bootstrap CI)", (1, 5),
           "mean score (1–5)"),
     "Bars of MentalAlign attribute means"),
)  # fmt: skip


def _figures(t: ReportTables) -> list[dict[str, str]]:
    """The report's figures as PNG data URIs; a figure with nothing to draw is left out."""
    out: list[dict[str, str]] = []
    for key, name, draw, alt in FIGURES:
        frame = _row_label(t.frame(name))
        uri = draw(frame) if not frame.empty else None
        if uri:
            out.append({"key": key, "uri": uri, "alt": alt})
    return out


def render_report(run_dir: str | Path | RunData, *, redact: bool = False, tables: ReportTables | None = None) -> str:
    """The report's HTML as a string, from the run's tables (computed from the run folder or RunData when not
    given); the run is read once, by reporting/rundata.load_run."""
    t = tables or report_tables(run_dir, redact=redact)
    figs = {x["key"]: x for x in _figures(t)}
    run_facts = facts(t.run)
    run_facts["injection_note"] = injection_note(t.run)
    if redact:  # a shared report need not show where the run lives on someone's disk
        run_facts["run_dir"] = Path(run_facts["run_dir"]).name
    context = {
        "facts": run_facts,
        "config": t.run.config,
        "redact": redact,
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "version": mheval_version,
        "crisis_lines": warning_lines(),
        "headlines": _headlines(t),
        "tables": _sections(t),
        "figures": figs,
        "notes": t.notes,
        "worst": t.worst,
        "protocols": t.run.protocols,
        "has_repeats": any(j.repeat > 0 for j in t.run.judgments),
        "ungrounded_definitions": [
            ungrounded_definition(UNGROUNDED_JUDGMENTS),
            ungrounded_definition(UNGROUNDED_CLAIMS),
        ],
        "cjk_families": figures.CJK_FAMILIES,
        "multiturn": _multiturn(t.run, redact),
        "verdict": _verdict(t, redact),
        "levels": template_words(),
    }
    html = _environment().get_template("report.html.j2").render(**context)
    # NUL and other control characters from replies, ids or rationales are parse errors in HTML (and
    # a NUL truncates the page for some readers): shown as U+FFFD, once, over the whole page.
    return _CONTROL_CHARS.sub("\ufffd", html)


def _verdict(t: ReportTables, redact: bool) -> dict[str, Any]:
    """The verdict at the top of the report (reporting/verdict_block.py, shown by templates/verdict.html.j2)."""
    from mheval.reporting.verdict_block import conversation_section, verdict_block
    from mheval.reporting.verdict_view import html_context

    return html_context(verdict_block(t.run, conversations=conversation_section(t.run)), redact=redact)


def _multiturn(run: RunData, redact: bool) -> dict[str, Any] | None:
    from mheval.reporting.multiturn import section

    return section(run, redact=redact)


def write_report(
    run_dir: str | Path | RunData, *, redact: bool = False, output: Path | None = None, overwrite: bool = False
) -> Path:
    """Write `report.html` (or `report-redacted.html`) into the run folder, or to `output`; returns its path.

    The tables go beside it in `tables/` as CSV and Parquet (ids and numbers only, no texts). The
    run folder's own report is simply renewed; an `output` elsewhere is refused when it, or a table
    beside it, already exists and `overwrite` is not set, and never names a run's own files. All is
    checked and rendered before the first file is written, and every file is written to a temporary
    name and renamed, so a refusal or a failure leaves the old report whole. `run_dir` may be the run as
    already read (a RunData); a folder is read once.
    """
    run, folder_of_run = (run_dir, run_dir.run_dir) if isinstance(run_dir, RunData) else (None, Path(run_dir))
    if not is_run_folder(folder_of_run):
        raise InputError("not a run folder (no run.db)", path=folder_of_run)
    default = folder_of_run / (REDACTED_NAME if redact else REPORT_NAME)
    path = Path(output) if output is not None else default
    own = path.resolve() == default.resolve()  # the run's own report: renewed on every run
    check_output(path, overwrite=overwrite or own, make_parents=True)
    folder = path.parent / TABLES_DIR
    if folder.exists() and not folder.is_dir():
        raise InputError(f"the tables go in {folder}, which is a file", path=folder)
    t = report_tables(run if run is not None else folder_of_run, redact=redact)
    check_outputs(table_paths(t, folder), overwrite=overwrite or own)
    html = render_report(t.run, redact=redact, tables=t)
    write_tables(t, folder)
    atomic_write(path, html.encode("utf-8", errors="replace"))  # a lone surrogate becomes "?"
    return path


__all__ = ["render_report", "write_report", "write_tables"]
