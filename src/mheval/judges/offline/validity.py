"""How far the shipped offline judges can be trusted, read from the figures file the build writes.

`weights/figures.json` is written by `python -m mheval.training.build_shipped` together with the model
files: every figure is measured on data the models never saw (nested cross-validation holding out
whole source datasets or dialogues) or on mheval's own contrast sets (their `holdout` split, which no
cue list or weight was tuned on). Nothing here is typed by hand: the report, `mheval judges --validity`
and the tables of docs/offline-judges.md (`python -m mheval.judges.offline.validity --write-docs`) all
read the file.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mheval.labels import APPROPRIATENESS, CRISIS_TRIAGE, DIALOGUE_SAFETY, HIGH_RISK, PSYCRISIS
from mheval.stats.intervals import rate_upper_bound
from mheval.verdict import INAPPROPRIATE_LEVEL

WEIGHTS = Path(__file__).resolve().parent / "weights"
FIGURES = WEIGHTS / "figures.json"
TRAINED_ON_SUITES: tuple[str, ...] = ("crisis-core",)
BASE_RATE = 0.05
"""The share of harmful replies at which a card states the detector's positive predictive value (how many
flagged replies are really harmful): 5%, about what the published help_harm replies hold."""
"""Built-in suites the shipped triage model learned from: agreement on them is not a quality figure."""
DOC_START, DOC_END = "<!-- figures:start (generated from weights/figures.json; do not edit) -->", "<!-- figures:end -->"


SPEEDS = (("default", "offline"), ("fast", "offline:fast"))  # (figures.json key, judge name)


@functools.lru_cache(maxsize=4)
def load_figures(path: Path = FIGURES) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def trained_on(judge: str, protocol: str, source: str | None) -> bool:
    """Did this shipped judge learn from cases of `source` under `protocol`? Then agreement with their
    gold labels measures memory, not quality."""
    return judge in ("offline", "offline:fast") and protocol == CRISIS_TRIAGE and source in TRAINED_ON_SUITES


def held_out_note(judge: str, protocol: str) -> str:
    """One line: the judge's figure on data it never saw, for where a trained-on figure would have stood."""
    card = validity_card(judge, protocol)
    first = card["figures"][0] if card and card["figures"] else None
    if first is None:
        return "the judge was trained on these cases; no held-out figure is recorded"
    return (
        f"the judge was trained on these cases, so agreement with their labels is not a quality figure; "
        f"on data it never saw: {first['name']} {first['value']} (n={first['n']}, {first['how']})"
    )


def _pct(share: dict[str, Any] | None) -> str:
    if not share or share.get("n") in (None, 0):
        return "n/a"
    return f"{share['hits']}/{share['n']} ({100 * share['share']:.0f}%)"


def _fig(name: str, value: Any, n: Any, how: str) -> dict[str, Any]:
    return {"name": name, "value": value, "n": n, "how": how}


def validity_card(judge: str, protocol: str, figures: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The measured figures of a shipped offline judge under `protocol`, or None for other judges."""
    if judge not in ("offline", "offline:fast"):
        return None
    figures = load_figures() if figures is None else figures
    speed = "fast" if judge == "offline:fast" else "default"
    contrast = figures.get("contrast_sets", {}).get(judge, {})
    card: dict[str, Any] = {"judge": judge, "protocol": protocol, "figures": [], "trained_on": [], "note": ""}
    rows: list[dict[str, Any]] = card["figures"]
    if protocol == CRISIS_TRIAGE:
        cv = figures.get(CRISIS_TRIAGE, {}).get(speed, {}).get("grouped_cv", {})
        pooled = cv.get("pooled", {})
        held = "nested CV, 5 outer folds holding out whole source datasets of help_harm"
        if pooled:
            rows.append(_fig("mean Cohen's kappa vs 4 humans", pooled["mean_kappa"], pooled["n"], held))
            for label in HIGH_RISK:
                r = pooled["recall_2_of_4"][label]
                rows.append(_fig(f"recall of {label} (2 of 4 raters)", r["recall"], r["n"], held))
        own = "mheval's contrast sets, holdout split (never tuned on)"
        risk = contrast.get("triage_risk", {}).get("holdout", {}).get("recognised")
        benign = contrast.get("triage_benign", {}).get("holdout", {}).get("crisis")
        if risk:
            rows.append(_fig("explicit-risk statements recognised", risk["share"], risk["n"], own))
        if benign:
            rows.append(_fig("idioms, fiction, third-party and professional texts called a crisis", benign["share"],
                             benign["n"], own))  # fmt: skip
        corpus = contrast.get("corpus_messages_holdout", {})
        how = "mheval's corpus, holdout batches (other writers' wording, never trained or tuned on)"
        for key, name in (
            ("risk_recognised", "risk messages recognised"),
            ("severe_recall", "suicidal ideation and self-harm messages called severe"),
            ("ordinary_alarmed", "ordinary messages called a crisis"),
        ):
            if corpus.get(key):
                rows.append(_fig(name, corpus[key]["share"], corpus[key]["n"], how))
        card["trained_on"] = list(TRAINED_ON_SUITES)
        card["note"] = "a screen: it flags risk for review; agreement on crisis-core is not a quality figure"
    elif protocol == APPROPRIATENESS:
        rows.extend(_harm_figures(figures.get("reply-harm", {}).get(speed, {})))
        blend = figures.get(APPROPRIATENESS, {}).get("with_reply_checks", {})
        shipped = blend.get(f"weight_{blend.get('shipped_weight', 0.25):g}", {}).get("vs_mean", {})
        if shipped:
            how = "nested CV holding out whole source corpora, 98 human-rated help_harm replies"
            rows.append(_fig("Spearman with the human mean", shipped.get("spearman"), shipped.get("n"), how))
        replies = contrast.get("replies", {}).get("holdout", {})
        if replies:
            own = "mheval's contrast replies, holdout split (never tuned on)"
            rows.append(_fig("AUC textbook vs bare, dismissive and harmful", replies["auc_textbook_vs_rest"],
                             replies["n"], own))  # fmt: skip
            rows.append(_fig("highest level given to a harmful reply", replies["harmful_max_level"], None, own))
        card["note"] = (
            "a screen: level 1 (unsafe) only when the reply-harm detector finds harm, with its category and sentence; "
            "a bare reply at most 2"
        )
    elif protocol == DIALOGUE_SAFETY:
        cv = figures.get(DIALOGUE_SAFETY, {}).get(speed, {}).get("grouped_cv", {})
        if cv:
            how = "nested 5-fold CV holding out whole dialogues, Qiu et al. dev half"
            rows.append(_fig("weighted F1", cv.get("weighted_f1"), cv.get("n"), how))
        card["note"] = "rare unsafe labels (1-6 examples each) are never predicted"
    elif protocol == PSYCRISIS:
        card["note"] = "not measurable here: no public PsyCrisis ratings; a lexicon of checkable moves"
    else:
        card["note"] = "refused offline: no public data to build or measure a scorer"
    return card


def ppv(recall: float, false_alarm_rate: float, base_rate: float = BASE_RATE) -> float | None:
    """Of the replies flagged, the share that is really harmful when `base_rate` of all replies are."""
    flagged = recall * base_rate + false_alarm_rate * (1 - base_rate)
    return round(recall * base_rate / flagged, 3) if flagged else None


def _harm_figures(harm: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply-harm detector's figures on the corpus's holdout batches and on real models' replies."""
    hold = harm.get("holdout", {})
    kinds = hold.get("kind", {})
    if not hold:
        return []
    how = "mheval's corpus, holdout batches (one batch of every writer, never fitted or tuned on)"
    out = [_fig("harmful replies called unsafe (recall)", hold["all"]["recall"], hold["all"]["harmful"], how)]
    for kind in ("harmful_warm", "harmful_blunt"):
        if kind in kinds:
            out.append(_fig(f"  of which {kind.replace('_', ' ')}", kinds[kind]["recall"], kinds[kind]["harmful"], how))
    good = kinds.get("good", {})
    for kind, name in (("good", "good replies called unsafe"), ("hard_negative", "protective replies that name the "
                       "means or reflect the user's words called unsafe"),
                       ("dismissive", "dismissive but not harmful replies called unsafe")):  # fmt: skip
        if kind in kinds:
            out.append(_fig(name, kinds[kind]["false_alarm_rate"], kinds[kind]["benign"], how))
    real = harm.get("published_help_harm_rated_3_plus")
    if real:
        out.append(_fig("real models' replies rated 3+ by people called unsafe", real["false_alarm_rate"], real["n"],
                        "help_harm's published replies (../shared/data), never trained on"))  # fmt: skip
    recall = hold["all"].get("recall")
    for rate, source in ((good, "the corpus's good replies"), (real, "real models' replies")):
        if rate and recall is not None:
            # 0 false alarms of 70 is not a rate of 0: a PPV read from it would claim every flag is real.
            value = ppv(recall, rate_upper_bound(rate["false_alarms"], rate["benign"]))
            out.append(_fig(f"flagged replies really harmful at a {BASE_RATE:.0%} base rate (PPV), at least", value,
                            None, f"from the holdout recall and the 95% upper bound of the false-alarm rate on "
                            f"{source}"))  # fmt: skip
    return out


def card_text(card: dict[str, Any]) -> str:
    lines = [f"{card['judge']} · {card['protocol']}: {card['note']}"]
    for f in card["figures"]:
        value = f["value"] if not isinstance(f["value"], float) else f"{f['value']:.3f}".rstrip("0").rstrip(".")
        n = f" (n={f['n']})" if f["n"] is not None else ""
        lines.append(f"  {f['name']}: {value}{n} — {f['how']}")
    return "\n".join(lines)


# -- the generated tables of docs/offline-judges.md ------------------------------------------------


def markdown(figures: dict[str, Any]) -> str:
    """The figure tables of docs/offline-judges.md, from the figures file."""
    out = ["### Measured figures", ""]
    out += ["| judge | protocol | figure | value | n | how |", "| --- | --- | --- | --- | --- | --- |"]
    for judge in ("offline", "offline:fast"):
        for protocol in (CRISIS_TRIAGE, APPROPRIATENESS, DIALOGUE_SAFETY):
            card = validity_card(judge, protocol, figures)
            for f in card["figures"] if card else []:
                value = (
                    f"{f['value']:.3f}".rstrip("0").rstrip(".") if isinstance(f["value"], float) else str(f["value"])
                )
                out.append(f"| `{judge}` | {protocol} | {f['name']} | {value} | {f['n'] or ''} | {f['how']} |")
    for judge in ("offline", "offline:fast"):
        contrast = figures.get("contrast_sets", {}).get(judge)
        if not contrast:
            continue
        out += ["", f"### Contrast sets, `{judge}` (tune: cue lists were written with it in view; holdout: never)", ""]
        out += ["| set | split | figure | value |", "| --- | --- | --- | --- |"]
        for split in figures["contrast_sets"].get("splits", []):
            risk, benign, replies = (contrast[k][split] for k in ("triage_risk", "triage_benign", "replies"))
            rows = [("explicit risk", "recognised as suicidal ideation or self-harm", _pct(risk["recognised"]))]
            rows += [("explicit risk", family, _pct(share)) for family, share in risk["by_family"].items()]
            rows += [
                ("ordinary speech", "triaged as any crisis", _pct(benign["crisis"])),
                ("ordinary speech", "triaged as suicidal ideation or self-harm", _pct(benign["severe"])),
            ]
            rows += [("ordinary speech", f"{f}: any crisis", _pct(share)) for f, share in benign["by_family"].items()]
            means = ", ".join(f"{k} {v:.2f}" for k, v in replies["mean_by_kind"].items())
            rows += [
                ("replies", "mean level by kind", means),
                ("replies", "AUC textbook vs the rest", str(replies["auc_textbook_vs_rest"])),
                (
                    "replies",
                    f"harmful replies at level {INAPPROPRIATE_LEVEL} or below",
                    _pct(replies.get(f"harmful_at_most_{INAPPROPRIATE_LEVEL}")),
                ),
            ]
            out += [f"| {what} | {split} | {figure} | {value} |" for what, figure, value in rows]
        corpus = contrast.get("corpus_messages_holdout", {})
        for key, figure in (("risk_recognised_by_batch", "risk messages recognised"),
                            ("ordinary_alarmed_by_batch", "ordinary messages called a crisis")):  # fmt: skip
            out += [f"| corpus messages {b} | holdout | {figure} | {_pct(v)} |" for b, v in corpus.get(key, {}).items()]
    for speed, judge in SPEEDS:
        out += _harm_tables(figures.get("reply-harm", {}).get(speed), judge)
    out += _dismissal_table(figures.get("reply-dismissal", {}))
    blend = figures.get(APPROPRIATENESS, {}).get("with_reply_checks", {})
    if blend:
        out += ["", "### Appropriateness: trained scorer blended with the reply's moves (help_harm, out of fold)", ""]
        out += ["| weight of the moves | Spearman vs human mean | MAE | within 1 |", "| --- | --- | --- | --- |"]
        for key, value in sorted(blend.items()):
            if key.startswith("weight_"):
                m = value["vs_mean"]
                shipped = " (shipped)" if key == f"weight_{blend['shipped_weight']:g}" else ""
                out.append(
                    f"| {key.removeprefix('weight_')}{shipped} | {m['spearman']} | {m['mae']} | {m['within_1']} |"
                )
    return "\n".join(out) + "\n"


def _harm_tables(harm: dict[str, Any] | None, judge: str) -> list[str]:
    """The reply-harm detector's holdout figures by kind, category, language and author batch, and its
    threshold curve."""
    if not harm or "holdout" not in harm:
        return []
    hold = harm["holdout"]
    out = ["", f"### Reply-harm detector, `{judge}`: corpus holdout batches (threshold {harm['threshold']})", ""]
    out += ["| group | replies | harmful caught | category right | others flagged |", "| --- | --- | --- | --- | --- |"]
    for what in ("kind", "category", "language", "batch"):
        for name, b in hold.get(what, {}).items():
            caught = f"{b['caught']}/{b['harmful']}" if b["harmful"] else ""
            right = f"{b['category_right']}/{b['harmful']}" if b["harmful"] else ""
            flagged = f"{b['false_alarms']}/{b['benign']}" if b["benign"] else ""
            out.append(f"| {what}: {name} | {b['n']} | {caught} | {right} | {flagged} |")
    a = hold["all"]
    out.append(f"| all | {a['n']} | {a['caught']}/{a['harmful']} | {a['category_right']}/{a['harmful']} | "
               f"{a['false_alarms']}/{a['benign']} |")  # fmt: skip
    tuned, how = (
        (harm["out_of_fold"], "train + tune, writers held out") if "out_of_fold" in harm else (harm["tune"], "tune")
    )
    out += ["", f"AUC {hold['auc']} (holdout), {tuned['auc']} ({how}).", ""]
    out += ["| threshold | recall (holdout) | good flagged | hard negatives flagged |", "| --- | --- | --- | --- |"]
    for t, c in hold["curve"].items():
        shipped = " (shipped)" if float(t) == harm["threshold"] else ""
        out.append(f"| {t}{shipped} | {c['recall']} | {c['good_false_alarms']} | {c['hard_negative_false_alarms']} |")
    real = harm.get("published_help_harm_rated_3_plus")
    if real:
        out += ["", f"Real models' replies (help_harm, rated 3 or more by people): {real['false_alarms']} of "
                f"{real['n']} called unsafe."]  # fmt: skip
    return out


def _dismissal_table(dismissal: dict[str, Any]) -> list[str]:
    """The dismissal head's replies flagged per kind, both speeds: corpus holdout batches and real models' replies."""
    speeds = [(speed, judge) for speed, judge in SPEEDS if speed in dismissal]
    if not speeds:
        return []
    out = ["", "### Dismissal head: replies flagged as dismissive (corpus holdout batches; real models' replies)", ""]
    out += ["| replies | " + " | ".join(f"`{judge}`" for _, judge in speeds) + " |", "| --- |" + " --- |" * len(speeds)]
    kinds = sorted({k for speed, _ in speeds for k in dismissal[speed]["holdout"]})
    for kind in kinds:
        cells = [dismissal[speed]["holdout"].get(kind) for speed, _ in speeds]
        out.append(f"| {kind} | " + " | ".join(f"{c['flagged']}/{c['n']}" if c else "" for c in cells) + " |")
    for key, name in (("published_help_harm_rated_3_plus", "help_harm published, rated 3+"),
                      ("published_help_harm_rated_below_3", "help_harm published, rated below 3")):  # fmt: skip
        cells = [dismissal[speed].get(key) for speed, _ in speeds]
        if any(cells):
            out.append(f"| {name} | " + " | ".join(f"{c['flagged']}/{c['n']}" if c else "" for c in cells) + " |")
    thresholds = ", ".join(f"`{judge}` {dismissal[speed]['threshold']}" for speed, judge in speeds)
    return [*out, "", f"Thresholds: {thresholds} ({dismissal[speeds[0][0]]['threshold_rule']})."]


def write_docs(doc: Path, figures: dict[str, Any] | None = None) -> bool:
    """Replace the generated block of `doc` (between the markers); True when the file changed."""
    text = doc.read_text(encoding="utf-8")
    if DOC_START not in text or DOC_END not in text:
        raise ValueError(f"{doc} has no generated block ({DOC_START} ... {DOC_END})")
    head, rest = text.split(DOC_START, 1)
    _, tail = rest.split(DOC_END, 1)
    new = f"{head}{DOC_START}\n{markdown(load_figures() if figures is None else figures)}{DOC_END}{tail}"
    if new != text:
        doc.write_text(new, encoding="utf-8")
    return new != text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mheval.judges.offline.validity")
    parser.add_argument("--write-docs", type=Path, help="rewrite the generated tables of this markdown file")
    args = parser.parse_args(argv)
    if args.write_docs:
        changed = write_docs(args.write_docs)
        print(f"{args.write_docs}: {'updated' if changed else 'unchanged'}", file=sys.stderr)
    else:
        print(markdown(load_figures()), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
