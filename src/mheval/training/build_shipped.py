"""Rebuild the model files shipped in mheval/judges/offline/weights/ and measure them.

    python -m mheval.training.build_shipped --data ../shared/data

Writes crisis-triage.npz, dialogue-safety.npz, appropriateness.npz and figures.json (every figure
docs/offline-judges.md quotes) and prints the figures. Deterministic: the same data and package
versions give the same files. Only weights and numbers are written, never a text from the data.

- crisis-triage: distilled from gpt-4o-mini's published labels of the 2,030 help_harm test inputs,
  plus mheval's own crisis-core suite; measured against the four human annotators of the help_harm
  dev half, which it never sees.
- dialogue-safety: the 403 labelled dev records of Qiu et al.; figures are nested 5-fold CV.
- appropriateness: the 98 answers of the help_harm dev half that have a human rating; figures are
  nested 5-fold CV grouped by source corpus and stratified by score (the only human-rated data).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mheval.judges.offline.embed import encoder_version
from mheval.judges.offline.features import Item, featurize
from mheval.judges.offline.lexicon import triage
from mheval.records import CRISIS_LABELS, Case
from mheval.suites import load_suite
from mheval.suites.papers import SAFETY_LABELS, majority_label
from mheval.training.fit import classifier_figures, cohen_kappa, scorer_figures
from mheval.training.train import TrainResult, fit_judge

WEIGHTS = Path(__file__).resolve().parents[1] / "judges" / "offline" / "weights"
RATERS = ("H1", "H2", "H3", "H4")
HIGH_SEVERITY = ("suicidal_ideation", "self-harm")
TRIAGE_BLOCKS = ["emb:user", "ngram:user", "lex:triage"]
# One value each: a nested grid over 2,183 rows x 4,614 columns would take a quarter of an hour. Chosen by
# 5-fold CV against gpt-4o-mini's labels of the training rows (kappa 0.748 / 0.769 for an n-gram weight
# of 3 / 10 at C=1, 0.740 for 30 with more buckets; C in 0.3-3 moved it by < 0.01), never on the dev half.
TRIAGE_GRID = (1.0,)
TRIAGE_NGRAM_WEIGHTS = (10.0,)
TRIAGE_FAST_BLOCKS = ["ngram:user", "lex:triage"]  # measured, not shipped: no encoder, so fast
SAFETY_BLOCKS = [
    "emb:response",
    "emb:context",
    "cos:response,last_user",
    "cos:response,context",
    "surface:reply",
    "ngram:response",
]
SAFETY_GRID = (0.003, 0.01, 0.03)
SAFETY_NGRAM_WEIGHTS = (1.0, 3.0)
APPROPRIATENESS_BLOCKS = ["emb:response", "lex:psycrisis", "label:crisis"]
APPROPRIATENESS_GRID = (1.0, 10.0, 100.0, 1000.0)
LLM_LABELS = "gpt-4o-mini-labeled-sampled_dataset_n_2046_nPerD168_seed0-merged-labels.json"
LLM_DEV_LABELS = "gpt-4o-mini-labeled-sampled_dataset_n_200_merged_n50-noSeed_156-s42-merged_labels.dev.json"
CHECK_EVERY = 4
COMMAND = "python -m mheval.training.build_shipped --data ../shared/data"


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _user_turns(case: Case) -> list[str]:
    return [t.content for t in case.turns if t.role == "user"]


def with_lexicon_override(model_labels: Sequence[str], lexicon_labels: Sequence[str]) -> list[str]:
    """The classifier's label, unless the lexicon found suicidal ideation or self-harm and the classifier
    chose a label that is not one of those two: then the lexicon's."""
    return [
        lex if lex in HIGH_SEVERITY and model not in HIGH_SEVERITY else model
        for model, lex in zip(model_labels, lexicon_labels, strict=True)
    ]


def _against_humans(pred: Sequence[str], cases: Sequence[Case]) -> dict[str, Any]:
    """Mean and per-rater Cohen's kappa, and recall per label against the humans' majority label."""
    kappas = {r: round(cohen_kappa(pred, [c.metadata["human_labels"][r] for c in cases]), 4) for r in RATERS}
    majority = [majority_label(c.metadata["human_labels"]) for c in cases]
    recall: dict[str, Any] = {}
    for label in CRISIS_LABELS:
        idx = [i for i, m in enumerate(majority) if m == label]
        hits = sum(pred[i] == label for i in idx)
        recall[label] = {"recall": round(hits / len(idx), 4) if idx else None, "n": len(idx)}
    mean = round(float(np.mean(list(kappas.values()))), 4)
    return {"mean_kappa": mean, "kappa": kappas, "recall_vs_majority": recall}


def build_triage(data: Path, out: Path, folds: int, seed: int) -> dict[str, Any]:
    hh = data / "help_harm"
    inputs = hh / "test_inputs.jsonl"
    labels_path = hh / "llm_crisis_labels" / LLM_LABELS
    llm = {r["id"]: r.get("label") for r in json.loads(labels_path.read_text(encoding="utf-8"))}
    test_cases = [c for c in load_suite(f"help-harm:{inputs}").cases if llm.get(c.id) in CRISIS_LABELS]
    core = load_suite("crisis-core").cases
    cases = [*test_cases, *core]
    targets = [llm[c.id] for c in test_cases] + [c.crisis_label for c in core]
    x = featurize(TRIAGE_BLOCKS, [Item(c) for c in cases])
    meta = {
        "protocol": "crisis-triage",
        "target": "case",
        "features": TRIAGE_BLOCKS,
        "encoder": encoder_version(),
        "text_fields": {"case": "user turns", "response": None},
        "training": {
            "data": [f"help_harm/{inputs.name}", f"help_harm/llm_crisis_labels/{LLM_LABELS}", "crisis-core (built in)"],
            "data_sha256": [_sha(inputs), _sha(labels_path)],
            "rows": len(cases),
            "command": COMMAND,
            "note": "distilled from gpt-4o-mini's published merged labels; dev human labels never used",
        },
    }
    result = fit_judge(
        x, targets, kind="classifier", meta=meta, labels=list(CRISIS_LABELS), grid=TRIAGE_GRID,
        folds=folds, seed=seed, name="offline", ngram_weights=TRIAGE_NGRAM_WEIGHTS,
    )  # fmt: skip
    # Does the lexicon's high-severity override help? Decided on the training CV, against gpt-4o-mini.
    oof = [CRISIS_LABELS[int(i)] for i in result.oof]  # type: ignore[union-attr]
    lex_train = [triage(_user_turns(c)).label for c in cases]
    cv_plain = classifier_figures(targets, oof, CRISIS_LABELS)
    cv_override = classifier_figures(targets, with_lexicon_override(oof, lex_train), CRISIS_LABELS)

    def severe_recall(fig: dict[str, Any]) -> float:
        return sum(fig["recall"][lab] * fig["support"][lab] for lab in HIGH_SEVERITY) / sum(
            fig["support"][lab] for lab in HIGH_SEVERITY
        )

    use_override = (
        severe_recall(cv_override) > severe_recall(cv_plain) and cv_override["kappa"] >= cv_plain["kappa"] - 0.02
    )
    result.judge.meta["lexicon_override"] = use_override

    dev = load_suite(f"help-harm:{hh}").cases
    model_dev = list(result.judge.predict([Item(c) for c in dev]))
    lex_dev = [triage(_user_turns(c)).label for c in dev]
    dev_llm = {r["id"]: r["label"] for r in json.loads((hh / "llm_crisis_labels" / LLM_DEV_LABELS).read_text("utf-8"))}
    human_pairs = [
        cohen_kappa([c.metadata["human_labels"][a] for c in dev], [c.metadata["human_labels"][b] for c in dev])
        for i, a in enumerate(RATERS)
        for b in RATERS[i + 1 :]
    ]
    shipped_dev = with_lexicon_override(model_dev, lex_dev) if use_override else model_dev
    # The same recipe without the sentence encoder: what the speed target would cost in agreement.
    fast_x = featurize(TRIAGE_FAST_BLOCKS, [Item(c) for c in cases])
    fast = fit_judge(
        fast_x, targets, kind="classifier", meta={**meta, "features": TRIAGE_FAST_BLOCKS}, labels=list(CRISIS_LABELS),
        grid=TRIAGE_GRID, folds=folds, seed=seed, ngram_weights=TRIAGE_NGRAM_WEIGHTS,
    )  # fmt: skip
    fast_dev = list(fast.judge.predict([Item(c) for c in dev]))
    figures = {
        "rows": len(cases),
        "strength": result.params["strength"],
        "ngram_weight": result.params.get("ngram_weight"),
        "cv_vs_gpt4o_mini": cv_plain,
        "cv_vs_gpt4o_mini_with_lexicon_override": cv_override,
        "lexicon_override": use_override,
        "dev_n": len(dev),
        "dev": _against_humans(shipped_dev, dev),
        "dev_classifier_only": _against_humans(model_dev, dev),
        "dev_with_lexicon_override": _against_humans(with_lexicon_override(model_dev, lex_dev), dev),
        "dev_lexicon_only": _against_humans(lex_dev, dev),
        "no_encoder_variant": {
            "features": TRIAGE_FAST_BLOCKS,
            "cv_vs_gpt4o_mini": fast.figures,
            "dev_classifier_only": _against_humans(fast_dev, dev),
            "dev_with_lexicon_override": _against_humans(with_lexicon_override(fast_dev, lex_dev), dev),
        },
        "dev_gpt4o_mini_published": _against_humans([dev_llm[c.id] for c in dev], dev),
        "dev_human_pairwise_kappa": {
            "min": round(min(human_pairs), 4),
            "max": round(max(human_pairs), 4),
            "mean": round(float(np.mean(human_pairs)), 4),
        },
    }
    result.judge.meta["figures"]["dev_vs_humans"] = figures["dev"]
    result.judge.save(out / "crisis-triage.npz")
    return figures


def build_safety(data: Path, out: Path, folds: int, seed: int) -> dict[str, Any]:
    path = data / "dialogue_safety" / "dev.jsonl"
    suite = load_suite(f"dialogue-safety:{path}")
    replies = {r.case_id: r.text for r in suite.responses}
    items = [Item(c, replies[c.id]) for c in suite.cases]
    gold = [c.metadata["gold_safety_label"] for c in suite.cases]
    meta = {
        "protocol": "dialogue-safety",
        "target": "response",
        "features": SAFETY_BLOCKS,
        "encoder": encoder_version(),
        "text_fields": {"case": "context", "response": "response"},
        "training": {
            "data": "dialogue_safety/dev.jsonl",
            "data_sha256": _sha(path),
            "rows": len(items),
            "command": COMMAND,
        },
    }
    x_all = featurize(SAFETY_BLOCKS, items)
    result = fit_judge(
        x_all, gold, kind="classifier", meta=meta, labels=list(SAFETY_LABELS), grid=SAFETY_GRID,
        folds=folds, seed=seed, name="offline", ngram_weights=SAFETY_NGRAM_WEIGHTS,
    )  # fmt: skip
    predicted = list(result.judge.predict(items))
    in_sample = classifier_figures(gold, predicted, SAFETY_LABELS)
    # The tests re-check a quarter of the rows (every CHECK_EVERY-th), to stay fast.
    in_sample_subset = classifier_figures(gold[::CHECK_EVERY], predicted[::CHECK_EVERY], SAFETY_LABELS)
    result.judge.meta["figures"]["in_sample"] = in_sample
    result.judge.save(out / "dialogue-safety.npz")
    ablations = {}
    for blocks in (
        ["emb:response"],
        ["emb:response", "emb:context"],
        ["surface:reply", "cos:response,last_user"],
        [b for b in SAFETY_BLOCKS if not b.startswith("ngram:")],
        ["ngram:response"],
    ):
        x = featurize(blocks, items)
        r = fit_judge(x, gold, kind="classifier", meta={**meta, "features": blocks}, labels=list(SAFETY_LABELS),
                      grid=SAFETY_GRID, folds=folds, seed=seed, ngram_weights=SAFETY_NGRAM_WEIGHTS)  # fmt: skip
        ablations["+".join(blocks)] = {k: r.figures[k] for k in ("accuracy", "weighted_f1", "macro_f1")}
    return {
        "rows": len(items),
        "strength": result.params["strength"],
        "ngram_weight": result.params.get("ngram_weight"),
        "cv": result.figures,
        "in_sample": in_sample,
        "in_sample_every_4th_row": in_sample_subset,
        "ablations_cv": ablations,
    }


def _appropriateness_data(data: Path) -> tuple[list[Item], np.ndarray, np.ndarray, list[str], dict[str, np.ndarray]]:
    hh = data / "help_harm"
    suite = load_suite(f"help-harm:{hh / 'appropriateness_scores.dev.jsonl'}")
    humans = {c.id: c for c in load_suite(f"help-harm:{hh}").cases}
    replies = {r.case_id: r.text for r in suite.responses}
    items, mean, per_rater, groups = [], [], [], []
    judges: dict[str, list[float]] = {}
    for case in suite.cases:
        scores = case.metadata.get("human_scores") or {}
        rated = [scores.get(r) for r in ("H1", "H2")]
        if all(s is None for s in rated):
            continue
        label = majority_label(humans[case.id].metadata["human_labels"])
        items.append(Item(case, replies[case.id], label))
        per_rater.append([np.nan if s is None else float(s) for s in rated])
        mean.append(float(np.nanmean(per_rater[-1])))
        groups.append(str(humans[case.id].metadata.get("dataset_id")))  # the corpus the post came from
        for judge, value in (case.metadata.get("judge_scores") or {}).items():
            judges.setdefault(judge, []).append(np.nan if value is None else float(value))
    return items, np.array(mean), np.array(per_rater), groups, {k: np.array(v) for k, v in judges.items()}


def _vs_raters(pred: np.ndarray, raters: np.ndarray) -> dict[str, Any]:
    return {name: scorer_figures(raters[:, i], pred) for i, name in enumerate(("H1", "H2"))}


def build_appropriateness(data: Path, out: Path, folds: int, seed: int) -> dict[str, Any]:
    items, target, raters, groups, llm = _appropriateness_data(data)
    path = data / "help_harm" / "appropriateness_scores.dev.jsonl"
    meta = {
        "protocol": "appropriateness",
        "target": "response",
        "features": APPROPRIATENESS_BLOCKS,
        "encoder": encoder_version(),
        "text_fields": {"case": "inputs", "response": "answer"},
        "score_range": [1, 5],
        "integer_scores": True,
        "dimension": "appropriateness",
        "training": {
            "data": "help_harm/appropriateness_scores.dev.jsonl (+ human_crisis_labels.dev.jsonl for the label)",
            "data_sha256": _sha(path),
            "rows": len(items),
            "target": "mean of the available human ratings H1, H2",
            "command": COMMAND,
        },
    }

    def run(blocks: list[str]) -> TrainResult:
        x = featurize(blocks, items)
        return fit_judge(x, target, kind="scorer", meta={**meta, "features": blocks}, grid=APPROPRIATENESS_GRID,
                         folds=folds, seed=seed, groups=groups, name="offline")  # fmt: skip

    shipped = run(APPROPRIATENESS_BLOCKS)
    oof = shipped.judge._round(shipped.oof)  # type: ignore[arg-type]
    predicted = np.asarray(shipped.judge.predict(items), dtype=float)
    in_sample = _vs_raters(predicted, raters)
    shipped.judge.meta["figures"]["in_sample_vs_raters"] = in_sample
    shipped.judge.save(out / "appropriateness.npz")
    variants = {}
    for blocks in (
        ["len:response"],
        ["label:crisis", "len:response"],
        ["lex:psycrisis", "label:crisis"],
        ["lex:psycrisis", "label:crisis", "len:response"],
        ["emb:response", "lex:psycrisis", "label:crisis", "len:response"],
    ):
        r = run(blocks)
        variants["+".join(blocks)] = _vs_raters(r.judge._round(r.oof), raters)  # type: ignore[arg-type]
    return {
        "rows": len(items),
        "strength": shipped.params["strength"],
        "cv_vs_raters": _vs_raters(oof, raters),
        "cv_vs_mean": shipped.figures,
        "in_sample_vs_raters": in_sample,
        "in_sample_every_4th_row_vs_raters": _vs_raters(predicted[::CHECK_EVERY], raters[::CHECK_EVERY]),
        "variants_cv_vs_raters": variants,
        "published_llm_judges_vs_raters": {k: _vs_raters(v, raters) for k, v in llm.items()},
        "h1_vs_h2": scorer_figures(raters[:, 0], raters[:, 1]),
    }


def build(
    data: Path, out: Path = WEIGHTS, *, folds: int = 5, seed: int = 0, only: Sequence[str] = ()
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    figures_path = out / "figures.json"
    figures: dict[str, Any] = json.loads(figures_path.read_text("utf-8")) if figures_path.exists() else {}
    steps = {"crisis-triage": build_triage, "dialogue-safety": build_safety, "appropriateness": build_appropriateness}
    for name, step in steps.items():
        if only and name not in only:
            continue
        started = time.perf_counter()
        figures[name] = step(data, out, folds, seed)
        print(f"built {name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        figures["_about"] = {"command": COMMAND, "encoder": encoder_version(), "folds": folds, "seed": seed}
        figures_path.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mheval.training.build_shipped", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (../shared/data)")
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="where to write the model files")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", action="append", default=[], help="build only this model (repeatable)")
    args = parser.parse_args(argv)
    figures = build(args.data, args.out, folds=args.folds, seed=args.seed, only=args.only)
    print(json.dumps(figures, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
