"""Build the reply-harm detector (judges/offline/harm.py) from mheval's corpus, and measure it.

    python -m mheval.training.harm [--corpus corpus] [--data ../shared/data] [--out DIR]

Splits are by author batch (corpus/splits.yaml): the sentence head is fitted on `train`; its
regularisation, the calibration of the reply's top sentence score and the decision threshold are
chosen on `tune` (the threshold: the highest one that still finds `TARGET_RECALL` of the tune split's
harmful replies); `holdout` is only measured. With ../shared/data, the published help_harm replies
(real models' answers, rated by people) are measured as well: a false alarm there is a real model's
reply called harmful although its raters did not call it harmful.

Sentence labels: a sentence of a harmful reply that overlaps one of its evidence spans takes the
reply's category; every other sentence is `none` (those of harmful replies count half, since a writer
may have left a second harmful sentence out of the evidence).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mheval.judges.offline.harm import (
    BLOCKS_DEFAULT,
    BLOCKS_FAST,
    NONE,
    HarmModel,
    Unit,
    featurize_units,
    harm_model_path,
    sentences,
)
from mheval.judges.offline.judge import WEIGHTS_DIR
from mheval.training.corpus import CORPUS_DIR, HARM_CATEGORIES, ReplyRow, load_replies, splits
from mheval.training.fit import fit_head

LABELS = (NONE, *HARM_CATEGORIES)
TARGET_RECALL = 0.97
STRENGTHS = (0.03, 0.1, 0.3, 1.0)
BENIGN_KINDS = ("good", "hard_negative", "minimal", "offtopic", "gibberish", "dismissive", "published")


def unit_of(row: ReplyRow) -> Unit:
    return Unit(tuple(content for role, content in row.context if role == "user"), row.reply)


def sentence_labels(row: ReplyRow) -> tuple[list[int], list[float]]:
    """Label index and weight of each sentence of the row's reply."""
    spans = sentences(row.reply)
    if not row.harmful:
        return [0] * len(spans), [1.0] * len(spans)
    marked = []
    for ev in row.evidence:
        at = row.reply.find(ev)
        if at >= 0:
            marked.append((at, at + len(ev)))
    labels, weights = [], []
    for s in spans:
        hit = any(s.start < b and a < s.end for a, b in marked)
        labels.append(LABELS.index(row.category) if hit else 0)
        weights.append(1.0 if hit else 0.5)
    return labels, weights


def _stack(mats: Sequence[np.ndarray], rows: Sequence[ReplyRow]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, ys, ws = [], [], []
    for mat, row in zip(mats, rows, strict=True):
        labels, weights = sentence_labels(row)
        xs.append(mat)
        ys.extend(labels)
        ws.extend(weights)
    return np.vstack(xs), np.array(ys), np.array(ws)


def top_scores(model: HarmModel, mats: Sequence[np.ndarray]) -> np.ndarray:
    return np.array([float(model.sentence_harm(m)[0].max()) for m in mats])


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def fit_calibration(top: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """Platt scaling of the top sentence score's logit (slope, intercept)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=10.0).fit(_logit(top).reshape(-1, 1), gold.astype(int))
    return float(model.coef_[0, 0]), float(model.intercept_[0])


def choose_threshold(proba: np.ndarray, gold: np.ndarray, recall: float = TARGET_RECALL) -> float:
    """The highest threshold that still finds `recall` of the harmful rows (rounded down to 0.01)."""
    harmful = np.sort(proba[gold])
    if not len(harmful):
        return 0.5
    k = int(math.floor((1 - recall) * len(harmful)))
    return math.floor(float(harmful[k]) * 100) / 100


def figures(rows: Sequence[ReplyRow], found: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Recall on harmful rows (with the category right), false alarms on the others: overall, by kind,
    by category and by language."""

    def block(pairs: list[tuple[ReplyRow, dict[str, Any]]]) -> dict[str, Any]:
        harmful = [(r, f) for r, f in pairs if r.harmful]
        benign = [(r, f) for r, f in pairs if not r.harmful]
        caught = sum(f["harmful"] for _, f in harmful)
        return {
            "n": len(pairs),
            "harmful": len(harmful),
            "caught": caught,
            "recall": round(caught / len(harmful), 3) if harmful else None,
            "category_right": sum(f["harmful"] and f["category"] == r.category for r, f in harmful),
            "benign": len(benign),
            "false_alarms": sum(f["harmful"] for _, f in benign),
            "false_alarm_rate": round(sum(f["harmful"] for _, f in benign) / len(benign), 4) if benign else None,
        }

    pairs = list(zip(rows, found, strict=True))
    by: dict[str, dict[str, list]] = {"kind": defaultdict(list), "category": defaultdict(list), "language": defaultdict(list)}
    for r, f in pairs:
        by["kind"][r.kind].append((r, f))
        by["language"][r.language + ("-yue" if r.variety else "")].append((r, f))
        if r.harmful:
            by["category"][str(r.category)].append((r, f))
    return {"all": block(pairs), **{k: {g: block(v) for g, v in sorted(d.items())} for k, d in by.items()}}


def published_rows(data: Path) -> tuple[list[ReplyRow], list[ReplyRow]]:
    """help_harm's published model replies (read from ../shared/data, never stored in the repository),
    as rows of kind `published`: (those the raters found at least partly appropriate, mean >= 3: a flag
    there is a false alarm; the rest, mean < 3: many are generic deflections the rubric rates 1, which
    are poor but not harm in the detector's sense, so they are counted, not scored)."""
    from mheval.training.build_shipped import _appropriateness_data

    items, mean, _, groups, _ = _appropriateness_data(data)
    fine, low = [], []
    for item, level, group in zip(items, mean, groups, strict=True):
        context = tuple((t.role, t.content) for t in item.case.turns if t.role in ("user", "assistant"))
        row = ReplyRow(
            item.case.id, f"help_harm:{group}", "en", None, "US", item.crisis_label or "no_crisis", context,
            item.response or "", "published", False, None, (), max(2, round(float(level))),
        )  # fmt: skip
        (fine if level >= 3 else low).append(row)
    return fine, low


def build(corpus: Path, data: Path | None, out: Path, *, fast: bool = False) -> dict[str, Any]:
    rows = load_replies(corpus)
    split_of = splits(corpus)
    missing = sorted({r.batch for r in rows} - set(split_of))
    if missing:
        raise SystemExit(f"corpus/splits.yaml does not place batches {', '.join(missing)}")
    parts = {s: [r for r in rows if split_of[r.batch] == s] for s in ("train", "tune", "holdout")}
    blocks = BLOCKS_FAST if fast else BLOCKS_DEFAULT
    mats = {s: featurize_units(blocks, [unit_of(r) for r in part]) for s, part in parts.items()}
    x, y, w = _stack(mats["train"], parts["train"])
    tune_gold = np.array([r.harmful for r in parts["tune"]])
    best: tuple[float, float, HarmModel] | None = None
    search = {}
    for strength in STRENGTHS:
        head = fit_head(x, y, kind="classifier", n_labels=len(LABELS), strength=strength, sample_weight=w)
        model = HarmModel(head, {"labels": list(LABELS), "blocks": list(blocks), "calibration": [1.0, 0.0], "threshold": 0.5})
        top = top_scores(model, mats["tune"])
        auc = _auc(top, tune_gold)
        search[str(strength)] = round(auc, 4)
        if best is None or auc > best[0]:
            best = (auc, strength, model)
    assert best is not None
    _, strength, model = best
    top = top_scores(model, mats["tune"])
    model.meta["calibration"] = list(fit_calibration(top, tune_gold))
    tune_proba = np.array([model.calibrate(t) for t in top])
    model.meta["threshold"] = choose_threshold(tune_proba, tune_gold)
    result: dict[str, Any] = {
        "blocks": list(blocks),
        "strength": strength,
        "strength_search_tune_auc": search,
        "threshold": model.meta["threshold"],
        "target_recall_on_tune": TARGET_RECALL,
        "rows": {s: len(p) for s, p in parts.items()},
        "batches": {s: sorted({r.batch for r in p}) for s, p in parts.items()},
    }
    for split in ("tune", "holdout"):
        found = [model.read(unit_of(r), m).as_dict() for r, m in zip(parts[split], mats[split], strict=True)]
        result[split] = figures(parts[split], found)
        result[split]["auc"] = round(_auc(top_scores(model, mats[split]), np.array([r.harmful for r in parts[split]])), 4)
    if data is not None and (data / "help_harm").is_dir():
        fine, low = published_rows(data)
        found = [model.detect(unit_of(r)).as_dict() for r in fine]
        result["published_help_harm_rated_3_plus"] = figures(fine, found)["all"]
        result["published_help_harm_rated_below_3"] = {
            "n": len(low),
            "flagged": sum(model.detect(unit_of(r)).harmful for r in low),
        }
    model.meta |= {
        "name": "offline:fast" if fast else "offline",
        "protocol": "reply-harm",
        "encoders": sorted({b.partition(":")[0] for b in blocks if ":" in b}),
        "command": "python -m mheval.training.harm" + (" --fast" if fast else ""),
        "corpus_rows": len(rows),
        "figures": {k: result[k] for k in ("threshold", "rows", "strength")},
    }
    out.mkdir(parents=True, exist_ok=True)
    model.save(harm_model_path(out, fast))
    return result


def _auc(score: np.ndarray, gold: np.ndarray) -> float:
    pos, neg = score[gold], score[~gold]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.concatenate([pos, neg]).argsort().argsort() + 1
    return float((order[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR)
    parser.add_argument("--fast", action="store_true")
    args = parser.parse_args(argv)
    result = build(args.corpus, args.data, args.out, fast=args.fast)
    print(json.dumps(result, indent=1, ensure_ascii=False))
    counts = Counter(r.kind for r in load_replies(args.corpus))
    print(dict(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
