"""Two runs side by side: per model and crisis category, how much did each headline number move?

Values are first averaged per case (over samples), so a case counts once whatever its sample count.
When the runs share cases, the comparison is paired over the shared cases: the mean of the per-case
differences (b minus a) with a bootstrap interval, and a Wilcoxon signed-rank test. Otherwise the two
means are compared with independent bootstraps and a Mann-Whitney U test.

The first metric, `unsafe_rate`, is the share of unsafe replies by verdict.py's one definition (what the
verdict at the top of the report counts); `harmful_rate` is its appropriateness part alone.

Where people rated units of both runs, the corrected rates are compared too: `unsafe_rate_corrected` (replies
rated in an annotate study or as `human:` judgments) and `unsafe_conversations_corrected` (whole conversations
rated in a conversation-flow study; per model, and for all models together when both runs have several). Each
run's rate is its PPI++ estimate; the difference b minus a gets a normal interval and z test from the two
estimates' variances, taken as independent since their ratings are of different units (`corrected_difference`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from mheval.labels import CONVERSATION_FLOW
from mheval.reporting.metrics import ALL, response_values
from mheval.reporting.rundata import RunData, category_sort_key, load_run
from mheval.stats.intervals import DEFAULT_N_BOOT, bootstrap_mean_ci, bootstrap_sums, percentile_ci
from mheval.verdict import HARMFUL_LEVEL, reply_verdicts

UNSAFE = "unsafe_rate"
"""The share of unsafe replies, by verdict.py's one definition (the verdict at the top of the report)."""
METRICS: tuple[tuple[str, str], ...] = (
    (UNSAFE, "*"),  # (metric, protocol): "*" = every protocol the verdict reads
    ("appropriateness", "appropriateness"),
    ("harmful_rate", "appropriateness"),
    ("psycrisis_total", "psycrisis"),
)
MIN_TESTED = 2  # fewer paired cases than this: a difference, but no interval or test

COLUMNS = [
    "metric",
    "model_a",
    "model_b",
    "judge_a",
    "judge_b",
    "category",
    "n_a",
    "n_b",
    "n_paired",
    "mean_a",
    "mean_b",
    "diff",
    "diff_low",
    "diff_high",
    "test",
    "p_value",
    "note",
    "flagged_a",
    "flagged_b",
    "mean_a_clean",
    "mean_b_clean",
    "diff_clean",
]


def _per_case(run: RunData, metric: str, protocol: str) -> pd.DataFrame:
    """model, judge, case_id, category, value, clean, verdicts, flagged: one row per case (samples averaged).

    `clean` is the value over the verdicts not flagged injection_suspected (NaN when all are), the
    number an injection cannot have moved; `verdicts` and `flagged` count the case's verdicts.
    """
    values = _unsafe_values(run) if metric == UNSAFE else response_values(run, protocol)
    if values.empty:
        return values
    if metric == "harmful_rate":
        values = values.assign(value=(values["value"] <= HARMFUL_LEVEL).astype(float))
    values = values.assign(
        clean=values["value"].where(~values["injected"].astype(bool)), flagged=values["injected"].astype(int)
    )
    keys = ["model", "judge", "case_id", "category"]
    return values.groupby(keys, as_index=False, sort=False).agg(
        value=("value", "mean"), clean=("clean", "mean"), verdicts=("value", "size"), flagged=("flagged", "sum")
    )


def _unsafe_values(run: RunData) -> pd.DataFrame:
    """One row per judged reply and judge: value 1.0 when verdict.py calls it unsafe, else 0.0 (replies
    with no verdict are left out, as in the report's verdict); `injected` when a harm verdict of it is flagged."""
    from mheval.reporting.verdict_block import crisis_labels
    from mheval.runfolder.export import is_injected

    judgments = [j for j in run.judgments if not j.judge.startswith("human:")]
    injected = {(j.case_id, j.model, j.sample or 0, j.judge) for j in judgments if j.model and is_injected(j)}
    rows = [
        {
            "model": v.model,
            "judge": v.judge,
            "case_id": v.case_id,
            "sample": v.sample,
            "category": run.category.get(v.case_id, "unlabelled"),
            "value": float(bool(v.unsafe)),
            "injected": (v.case_id, v.model, v.sample, v.judge) in injected,
        }
        for v in reply_verdicts(judgments, crisis_labels(run))
        if v.unsafe is not None
    ]
    return pd.DataFrame(rows, columns=["model", "judge", "case_id", "sample", "category", "value", "injected"])


def _judge(frame: pd.DataFrame, run: RunData, prefer: str | None = None) -> str | None:
    judges = list(dict.fromkeys(frame["judge"])) if not frame.empty else []
    if prefer in judges:
        return prefer
    ordered = [j for j in run.judges if j in judges]
    return (ordered or judges or [None])[0]


def _model_pairs(models_a: list[str], models_b: list[str]) -> list[tuple[str, str]]:
    shared = [m for m in models_a if m in models_b]
    if shared:
        return [(m, m) for m in shared]
    if len(models_a) == 1 and len(models_b) == 1:
        return [(models_a[0], models_b[0])]  # one model against another: the usual "which is safer" question
    return []


def _wilcoxon(d: np.ndarray) -> tuple[float | None, str]:
    if not np.any(d != 0):
        return 1.0, "no case changed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(sps.wilcoxon(d, zero_method="wilcox").pvalue), ""


def _mannwhitney(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) == 0 or len(b) == 0:
        return None
    if np.all(a == a[0]) and np.all(b == b[0]) and a[0] == b[0]:
        return 1.0
    return float(sps.mannwhitneyu(b, a, alternative="two-sided").pvalue)


def _unpaired_ci(a: pd.Series, b: pd.Series, n_boot: int, seed: int) -> tuple[float | None, float | None]:
    """Independent bootstraps of each run's mean. A side's seed follows from its own cases (sorted), not
    from whether it came first, so swapping the runs gives the same replicates and the interval negated."""
    if len(a) < 2 or len(b) < 2:
        return None, None
    a, b = a.sort_index(), b.sort_index()
    a_first = [str(c) for c in a.index] <= [str(c) for c in b.index]
    seed_a, seed_b = (seed, seed + 1) if a_first else (seed + 1, seed)
    ra = bootstrap_sums(a.to_numpy(dtype=float)[:, None], n_boot, seed_a)[:, 0] / len(a)
    rb = bootstrap_sums(b.to_numpy(dtype=float)[:, None], n_boot, seed_b)[:, 0] / len(b)
    lo, hi, _ = percentile_ci(rb - ra)
    return lo, hi


def _compare_cell(a: pd.Series, b: pd.Series, n_boot: int, seed: int) -> dict[str, object]:
    """a, b: per-case values indexed by case id."""
    # Sorted, so the paired resamples do not depend on the order either run stored its cases in.
    shared = a.index.intersection(b.index).sort_values()
    row: dict[str, object] = {
        "n_a": len(a),
        "n_b": len(b),
        "n_paired": len(shared),
        "mean_a": a.mean() if len(a) else None,
        "mean_b": b.mean() if len(b) else None,
        "note": "",
    }
    if len(shared):
        d = (b.loc[shared] - a.loc[shared]).to_numpy(dtype=float)
        left_out = len(a) + len(b) - 2 * len(shared)
        notes = [f"{left_out} case(s) in only one run left out of the paired comparison"] if left_out else []
        if len(d) < MIN_TESTED:
            notes.insert(0, "one shared case: no interval or test")
            row.update(
                diff=float(d.mean()), diff_low=None, diff_high=None, test="paired", p_value=None, note="; ".join(notes)
            )
            return row
        est = bootstrap_mean_ci(d, n_boot=n_boot, seed=seed)
        p, note = _wilcoxon(d)
        if note:
            notes.insert(0, note)
        row.update(
            diff=est.value,
            diff_low=est.ci_low,
            diff_high=est.ci_high,
            test="Wilcoxon signed-rank (paired)",
            p_value=p,
            note="; ".join(notes),
        )
        return row
    av, bv = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    if len(av) == 0 or len(bv) == 0:
        row.update(diff=None, diff_low=None, diff_high=None, test="", p_value=None, note="no values in one run")
        return row
    lo, hi = _unpaired_ci(a, b, n_boot, seed)
    row.update(
        diff=float(bv.mean() - av.mean()),
        diff_low=lo,
        diff_high=hi,
        test="Mann-Whitney U (unpaired)",
        p_value=_mannwhitney(av, bv),
        note="the runs share no cases: independent samples",
    )
    return row


def _injection_cell(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, object]:
    """Share of verdicts flagged injection_suspected in each run, and the difference without them.

    The difference without them is a point estimate over the cases that keep an unflagged verdict
    (paired over the shared ones, as the main difference); None when no verdict is flagged.
    """

    def share(x: pd.DataFrame) -> float | None:
        total = int(x["verdicts"].sum())
        return int(x["flagged"].sum()) / total if total else None

    row: dict[str, object] = {
        "flagged_a": share(a),
        "flagged_b": share(b),
        "mean_a_clean": None,
        "mean_b_clean": None,
        "diff_clean": None,
    }
    if not (a["flagged"].sum() or b["flagged"].sum()):
        return row
    ca, cb = a["clean"].dropna(), b["clean"].dropna()
    row["mean_a_clean"] = float(ca.mean()) if len(ca) else None
    row["mean_b_clean"] = float(cb.mean()) if len(cb) else None
    shared = ca.index.intersection(cb.index)
    if len(shared):
        row["diff_clean"] = float((cb.loc[shared] - ca.loc[shared]).mean())
    elif len(ca) and len(cb):
        row["diff_clean"] = float(cb.mean() - ca.mean())
    return row


def _per_conversation(run: RunData, metric: str) -> pd.DataFrame:
    """model, judge, case_id (the scenario), category (its family), value: the whole-conversation flow
    outcome (0-2, the worst answer) or whether it was harmful (1/0), samples averaged. Read from the stored
    flow judgments, as the multi-turn section reads them."""
    family = {s.id: s.family for s in run.dialogue.scenarios}
    flows = [
        j
        for j in run.stored
        if j.protocol == CONVERSATION_FLOW and j.status == "ok" and j.repeat == 0 and j.total is not None
    ]
    if not flows:
        return pd.DataFrame()
    rows = [
        {
            "model": j.model,
            "judge": j.judge,
            "case_id": j.case_id,
            "category": family.get(j.case_id, "unlabelled"),
            "value": float(j.total == 0.0) if metric == "flow_harmful" else float(j.total or 0.0),
        }
        for j in flows
    ]
    frame = pd.DataFrame(rows)
    frame = frame.groupby(["model", "judge", "case_id", "category"], as_index=False, sort=False)["value"].mean()
    return frame.assign(clean=frame["value"], verdicts=1, flagged=0)


def compare_runs(
    run_a: str | Path | RunData, run_b: str | Path | RunData, *, n_boot: int = DEFAULT_N_BOOT, seed: int = 0
) -> pd.DataFrame:
    """Differences b minus a of the unsafe rate (verdict.py), mean appropriateness, harmful rate and mean PsyCrisis
    total, per model x category;
    for multi-turn runs also of the whole-conversation flow outcome and harmful share, per model x scenario family.

    Categories come from run a (its first judge's triage, else gold), falling back to run b's for cases
    only b has, so a paired case sits in one category. An `all` row per model pools the categories.
    """
    a = run_a if isinstance(run_a, RunData) else load_run(run_a)
    b = run_b if isinstance(run_b, RunData) else load_run(run_b)
    rows: list[dict[str, object]] = []
    category = {**b.category, **a.category}
    for metric, protocol in METRICS:
        rows += _metric_rows(metric, _per_case(a, metric, protocol), _per_case(b, metric, protocol), a, b, category,
                             n_boot, seed)  # fmt: skip
    for metric in CONVERSATION_METRICS:
        fa, fb = _per_conversation(a, metric), _per_conversation(b, metric)
        families = {**dict(zip(fb.get("case_id", []), fb.get("category", []), strict=True)),
                    **dict(zip(fa.get("case_id", []), fa.get("category", []), strict=True))}  # fmt: skip
        rows += _metric_rows(metric, fa, fb, a, b, families, n_boot, seed)
    rows += _corrected_rows(a, b)
    rows += corrected_conversation_rows(a, b)
    return pd.DataFrame(rows, columns=COLUMNS)


CORRECTED = "unsafe_rate_corrected"
"""The unsafe-reply rate corrected for the judge's errors by people's ratings (PPI++, reporting/verdict_block.py)."""
CORRECTED_CONVERSATIONS = "unsafe_conversations_corrected"
"""The unsafe-conversation rate corrected by people's answers in a conversation-flow study (reporting/multiturn.py)."""
CORRECTED_TEST = "normal, independent PPI++ estimates"
RATES = (UNSAFE, "harmful_rate", CORRECTED, CORRECTED_CONVERSATIONS)
"""The metrics that are shares (shown in percent and percentage points)."""


def _corrected_rows(a: RunData, b: RunData) -> list[dict[str, object]]:
    """Where people rated replies of both runs: the difference of the two corrected unsafe rates (PPI++,
    reporting/verdict_block.py), per model (`corrected_difference`)."""
    from mheval.reporting.verdict_block import verdict_block

    def corrected(run: RunData) -> dict[str, tuple[str | None, dict[str, Any]]]:
        return {
            r.model: (r.judge, r.corrected) for r in verdict_block(run).rows if r.corrected and _defined(r.corrected)
        }

    return corrected_difference(CORRECTED, corrected(a), corrected(b), "human ratings")


def corrected_conversation_rows(a: RunData, b: RunData) -> list[dict[str, object]]:
    """Where people rated conversations of both runs (a conversation-flow study with answers): per model, and
    for all models when both runs have several, the difference b minus a of the corrected unsafe-conversation
    rates (reporting/multiturn.corrected_conversations), by `corrected_difference`. The judge is run a's first
    judge with a corrected rate, and the same judge in run b when it has one there."""
    judge_a, ca = conversation_estimates(a)
    judge_b, cb = conversation_estimates(b, judge_a)
    return corrected_difference(CORRECTED_CONVERSATIONS, {m: (judge_a, e) for m, e in ca.items()},
                                {m: (judge_b, e) for m, e in cb.items()}, "human-rated conversations")  # fmt: skip


def conversation_estimates(run: RunData, prefer: str | None = None) -> tuple[str | None, dict[str, dict[str, Any]]]:
    """The judge whose unsafe-conversation rate people's ratings correct (`prefer` when it has one, else the
    run's first such judge) and its corrected estimates by model (`ALL_MODELS` too for several models), the
    defined ones only (a rate and an interval); (None, {}) without ratings."""
    from mheval.reporting.multiturn import corrected_conversations

    found: dict[str, dict[str, dict[str, Any]]] = {}
    for (model, judge), est in corrected_conversations(run).items():
        if est and _defined(est):
            found.setdefault(judge, {})[model] = est
    if not found:
        return None, {}
    order = [j for j in run.judges if j in found] + sorted(j for j in found if j not in run.judges)
    judge = prefer if prefer in found else order[0]
    return judge, found[judge]


def _defined(est: dict[str, Any]) -> bool:
    return est.get("corrected") is not None and est.get("ci") is not None


def _standard_error(est: dict[str, Any]) -> float:
    """The estimate's standard error: from its variance parts (var_human + var_judge) when it carries them, else
    from its interval's width. The variance is preferred because a rate's interval is clipped to [0, 1]."""
    from scipy.stats import norm

    if est.get("var_human") is not None and est.get("var_judge") is not None:
        return float(np.sqrt(max(float(est["var_human"]) + float(est["var_judge"]), 0.0)))
    low, high = est["ci"]
    return (float(high) - float(low)) / (2 * float(norm.ppf(0.975)))


def corrected_difference(
    metric: str, ca: dict[str, tuple[str | None, dict[str, Any]]], cb: dict[str, tuple[str | None, dict[str, Any]]],
    rated: str,
) -> list[dict[str, object]]:  # fmt: skip
    """Per model pair (compare's pairing), the difference b minus a of two corrected estimates (model ->
    (judge, CorrectedEstimate.to_dict())) with a 95% normal interval and a two-sided z test. The runs'
    estimates are taken as independent: their human ratings are of different units. The interval is the
    difference plus or minus z times the root of the summed variances, so swapping the runs negates it exactly.
    `rated` names what the ratings counted in the note rate ("human ratings", "human-rated conversations")."""
    from scipy.stats import norm

    z = float(norm.ppf(0.975))
    rows: list[dict[str, object]] = []
    for model_a, model_b in _model_pairs(list(ca), list(cb)):
        (judge_a, ea), (judge_b, eb) = ca[model_a], cb[model_b]
        diff = float(eb["corrected"]) - float(ea["corrected"])
        spread = float(np.hypot(_standard_error(ea), _standard_error(eb)))
        p = float(2 * norm.sf(abs(diff) / spread)) if spread > 0 else None
        rows.append({
            "metric": metric, "model_a": model_a, "model_b": model_b, "judge_a": judge_a, "judge_b": judge_b,
            "category": ALL, "n_a": ea["n_judged"], "n_b": eb["n_judged"], "n_paired": None,
            "mean_a": ea["corrected"], "mean_b": eb["corrected"], "diff": diff,
            "diff_low": diff - z * spread, "diff_high": diff + z * spread, "test": CORRECTED_TEST, "p_value": p,
            "note": f"corrected with {ea['n_human']} / {eb['n_human']} {rated}",
        })  # fmt: skip
    return rows


CONVERSATION_METRICS = ("flow_outcome", "flow_harmful")
"""Multi-turn metrics: the flow's worst answer (0 harmful, 1 suboptimal, 2 best practice) and its harmful share."""


def _metric_rows(
    metric: str, fa: pd.DataFrame, fb: pd.DataFrame, a: RunData, b: RunData, category: dict[str, str],
    n_boot: int, seed: int,
) -> list[dict[str, object]]:  # fmt: skip
    if fa.empty or fb.empty:
        return []
    rows: list[dict[str, object]] = []
    judge_a = _judge(fa, a)
    judge_b = _judge(fb, b, prefer=judge_a)
    fa, fb = fa[fa["judge"] == judge_a], fb[fb["judge"] == judge_b]
    for model_a, model_b in _model_pairs(list(dict.fromkeys(fa["model"])), list(dict.fromkeys(fb["model"]))):
        sa = fa[fa["model"] == model_a].set_index("case_id")
        sb = fb[fb["model"] == model_b].set_index("case_id")
        cats = sorted({category.get(c, "unlabelled") for c in [*sa.index, *sb.index]}, key=category_sort_key)
        for cat in [*cats, ALL]:

            def pick(s: pd.DataFrame, cat: str = cat) -> pd.DataFrame:
                return s if cat == ALL else s[[category.get(c) == cat for c in s.index]]

            ca, cb = pick(sa), pick(sb)
            cell = _compare_cell(ca["value"], cb["value"], n_boot, seed)
            rows.append(
                {
                    "metric": metric,
                    "model_a": model_a,
                    "model_b": model_b,
                    "judge_a": judge_a,
                    "judge_b": judge_b,
                    "category": cat,
                    **cell,
                    **_injection_cell(ca, cb),
                }
            )
    return rows


__all__ = [
    "CORRECTED",
    "CORRECTED_CONVERSATIONS",
    "compare_runs",
    "conversation_estimates",
    "corrected_conversation_rows",
    "corrected_difference",
]
