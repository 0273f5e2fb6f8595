"""Rebuild the model files shipped in mheval/judges/offline/weights/ and measure them.

    python -m mheval.training.build_shipped --data ../shared/data

Writes crisis-triage.npz, dialogue-safety.npz, appropriateness.npz and figures.json (every figure
docs/offline-judges.md quotes) and prints the figures. Deterministic: the same data and package
versions give the same files. Only weights and numbers are written, never a text from the data.

- crisis-triage: distilled from gpt-4o-mini's published labels of the 2,030 help_harm test inputs,
  plus mheval's own crisis-core suite and the corpus's messages; measured against the four human
  annotators of the help_harm dev half, which it never sees. Its crisis gate (crisis-gate.npz,
  training/crisis_gate.py) is built first, from the same cases.
- dialogue-safety: the 403 labelled dev records of Qiu et al.; figures are nested 5-fold CV.
- appropriateness: the 98 answers of the help_harm dev half that have a human rating and mheval's
  written corpus (training/appropriateness.py); figures against the humans are 5-fold CV grouped by
  source corpus, the written rows always on the training side.
- reply-harm (`python -m mheval.training.harm`, separate): the corpus's train split, tuned on its tune
  split, measured on its holdout split.
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

from mheval.judges.offline.crisis_gate import gate_path
from mheval.judges.offline.embed import encoder_version
from mheval.judges.offline.features import Item, encoders, featurize, ngram_columns
from mheval.judges.offline.judge import MODEL_PROTOCOLS, model_path
from mheval.judges.offline.lexicon import triage
from mheval.judges.offline.risk import GateReading, screen
from mheval.judges.offline.trained import TrainedJudge
from mheval.labels import APPROPRIATENESS, CRISIS_LABELS, CRISIS_TRIAGE, DIALOGUE_SAFETY
from mheval.records import Case
from mheval.suites import load_suite
from mheval.suites.papers import SAFETY_LABELS, majority_label
from mheval.training.checks import contrast_figures
from mheval.training.corpus import case_writer
from mheval.training.crisis_gate import build_gate
from mheval.training.fit import classifier_figures, cohen_kappa, fit_head, scorer_figures
from mheval.training.grouped import (
    TriageTable,
    choose,
    dataset_group,
    decide,
    dialogue_groups,
    human_figures,
    nested_cv,
)
from mheval.training.train import TrainResult, fit_judge

WEIGHTS = Path(__file__).resolve().parents[1] / "judges" / "offline" / "weights"
RATERS = ("H1", "H2", "H3", "H4")
# Feature sets and grids were compared with the nested grouped CV below (figures.json keeps them); the
# grids are small on purpose: two shared cores, and a wide search on 103 human cases would fit noise.
# Default triage: both encoders. Three sets were compared on the same outer folds while developing
# (docs/offline-judges.md gives the figures; USE alone is the fast model built below): both encoders
# gave the best recall/kappa curve. That comparison looked at the outer folds, so the chosen set's
# figures are a little optimistic.
# e5 reads each user turn alone and the block is their mean (`user_turns`; USE and the n-grams read the user side
# as one text): the same vector as `e5:user` for the one-message cases most rows are, and in a conversation each
# turn is embedded once, where `e5:user` embeds the whole user side again at every reply (about 1,000 tokens/s on
# two cores: a long transcript's replies waited for it).
TRIAGE_BLOCKS = ["e5:user_turns", "emb:user", "ngram:user", "lex:triage"]
TRIAGE_FAST_BLOCKS = ["emb:user", "ngram:user", "lex:triage"]  # `offline:fast`: no e5
GATE_BLOCKS = ["e5:user_turns", "emb:user", "lex:triage"]  # the crisis gate (training/crisis_gate.py): no n-grams
GATE_FAST_BLOCKS = ["emb:user", "lex:triage"]
# Corpus writers whose messages teach the crisis gate but not the triage classifier: w28 and w29 wrote
# ordinary messages full of alarming words (medical questions, idioms, games, worried friends) beside
# buried risk. A classifier fitted with them alarmed fewer ordinary messages but recognised only 70 of
# the 84 explicit statements of the contrast sets' tune split (the guard is 85%); the gate, which can
# only clear a crisis label, learns from them without that cost.
GATE_ONLY_WRITERS = ("w28", "w29")
TRIAGE_GRID = (1.0,)
TRIAGE_DISTILLED_WEIGHTS = (0.2, 0.5)  # a distilled row counts this much; a human-labelled case counts 1
TRIAGE_NGRAM_WEIGHTS = (3.0, 10.0)
TRIAGE_INNER_FOLDS = 3
MIN_SEVERE_RECALL = 0.9
# Dialogue safety: e5 instead of USE gave no gain in the same grouped CV (weighted F1 0.576 vs 0.590,
# fold spread about 0.06 either way), so both speeds use the USE model; the e5 run is kept as an ablation.
SAFETY_BLOCKS = [
    "emb:response",
    "emb:context",
    "cos:response,last_user",
    "cos:response,context",
    "surface:reply",
    "ngram:response",
]
SAFETY_FAST_BLOCKS = SAFETY_BLOCKS
SAFETY_GRID = (0.003, 0.01)
SAFETY_NGRAM_WEIGHTS = (3.0,)
SAFETY_ABLATIONS: tuple[list[str], ...] = (["e5:response", "e5:context", *SAFETY_BLOCKS[2:]],)
LLM_LABELS = "gpt-4o-mini-labeled-sampled_dataset_n_2046_nPerD168_seed0-merged-labels.json"
LLM_DEV_LABELS = "gpt-4o-mini-labeled-sampled_dataset_n_200_merged_n50-noSeed_156-s42-merged_labels.dev.json"
CHECK_EVERY = 4
COMMAND = "python -m mheval.training.build_shipped --data ../shared/data"


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _user_turns(case: Case) -> list[str]:
    return [t.content for t in case.turns if t.role == "user"]


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


def corpus_message_cases(wanted: Sequence[str]) -> list[Case]:
    """The corpus's user messages (corpus/messages) of the splits `wanted`, as labelled cases."""
    from mheval.training.corpus import load_messages, message_case, splits

    split_of = splits()
    return [message_case(m) for m in load_messages() if split_of.get(m.batch) in wanted]


def _triage_table(data: Path) -> tuple[list[Case], list[Case], TriageTable, list[Path]]:
    """The triage training cases (human dev half, distilled test inputs, crisis-core, the corpus's
    messages) and their table."""
    hh = data / "help_harm"
    inputs = hh / "test_inputs.jsonl"
    labels_path = hh / "llm_crisis_labels" / LLM_LABELS
    llm = {r["id"]: r.get("label") for r in json.loads(labels_path.read_text(encoding="utf-8"))}
    dev = load_suite(f"help-harm:{hh}").cases
    distilled = [c for c in load_suite(f"help-harm:{inputs}").cases if llm.get(c.id) in CRISIS_LABELS]
    # Authored labels: mheval's crisis-core suite and the corpus's messages of the train and tune
    # splits (the holdout split is only measured: training/checks.py).
    core = load_suite("crisis-core").cases + corpus_message_cases(("train", "tune"))
    table = TriageTable.build(
        [(str(c.metadata.get("dataset_id")), [c.metadata["human_labels"][r] for r in RATERS]) for c in dev],
        [(str(c.metadata.get("dataset_id")), str(llm[c.id])) for c in distilled],
        [str(c.crisis_label) for c in core],
    )
    files = [hh / "human_crisis_labels.dev.jsonl", inputs, labels_path]
    cases = [*dev, *distilled, *core]
    table.screens = [screen(_user_turns(c)) for c in cases]  # the judge decides with them, so the CV does
    return dev, cases, table, files


def _triage_model(
    blocks: list[str], cases: list[Case], table: TriageTable, files: list[Path], folds: int, seed: int, fast: bool,
    gate_readings: Sequence[GateReading],
) -> tuple[TrainedJudge, dict[str, Any]]:  # fmt: skip
    """Nested grouped CV of one feature set, then the same choices made on every dataset and one fit.
    `table` carries the crisis gate's out-of-fold probabilities: the CV decides with them as the judge does.
    `gate_readings` are the shipped gate's, case by case: the in-sample check decides as the shipped judge."""
    x = featurize(blocks, [Item(c) for c in cases])
    ngram = ngram_columns(blocks)
    options: dict[str, Any] = {
        "grid": TRIAGE_GRID, "distilled_weights": TRIAGE_DISTILLED_WEIGHTS, "min_recall": MIN_SEVERE_RECALL,
        "ngram": ngram if ngram.any() else None, "ngram_weights": TRIAGE_NGRAM_WEIGHTS,
    }  # fmt: skip
    cv = nested_cv(x, table, folds=folds, inner_folds=TRIAGE_INNER_FOLDS, seed=seed, **options)
    groups = sorted({g for g in table.group if g != "crisis-core"})
    final = choose(x, table, groups, folds=TRIAGE_INNER_FOLDS, seed=seed, **options)
    head = fit_head(
        x[table.case_index], table.y, kind="classifier", n_labels=len(CRISIS_LABELS), strength=final.strength,
        ngram=options["ngram"], ngram_weight=final.ngram_weight, sample_weight=table.weights(final.distilled_weight),
    )  # fmt: skip
    meta = {
        "protocol": CRISIS_TRIAGE,
        "kind": "classifier",
        "labels": list(CRISIS_LABELS),
        "target": "case",
        "features": blocks,
        "encoder": "; ".join(encoder_version(k) for k in encoders(blocks)),
        "text_fields": {"case": "user turns", "response": None},
        "severe_threshold": final.threshold,
        "speed": "fast" if fast else "default",
        "training": {
            "data": [
                "help_harm/human_crisis_labels.dev.jsonl (4 human labels per case)",
                f"help_harm/test_inputs.jsonl + llm_crisis_labels/{LLM_LABELS} (distilled)",
                "crisis-core (built in) and corpus/messages (train and tune splits, but those of "
                f"{', '.join(GATE_ONLY_WRITERS)})",
            ],
            "data_sha256": [_sha(f) for f in files],
            "rows": len(cases),
            "command": COMMAND,
            "strength": final.strength,
            "distilled_weight": final.distilled_weight,
            "ngram_weight": final.ngram_weight,
            "note": "distilled rows weighted below human ones; choices by nested CV holding out whole datasets",
        },
        "figures": {"grouped_cv_vs_humans": cv["pooled"], "across_folds": cv["spread"]},
    }
    judge = TrainedJudge(head, meta, name="offline:fast" if fast else "offline")
    human = table.human_cases()
    proba = head.proba(x[human])
    chosen = decide(proba, final.threshold, table.screens_of(human), [gate_readings[c] for c in human])
    in_sample = [CRISIS_LABELS[int(i)] for i in chosen]
    raters = [table.raters[c] for c in human]
    figures = {
        "features": blocks,
        "rows": len(cases),
        "human_cases": len(human),
        "groups": len(groups),
        "grouped_cv": cv,
        "chosen_on_all_data": {
            "strength": final.strength,
            "distilled_weight": final.distilled_weight,
            "threshold": final.threshold,
            "ngram_weight": final.ngram_weight,
            **final.inner,
        },
        # In-sample (the humans' cases are training data now): only to check that the weights load right.
        "in_sample_every_4th_human_case": human_figures(in_sample[::CHECK_EVERY], raters[::CHECK_EVERY]),
    }
    return judge, figures


def build_triage(data: Path, out: Path, folds: int, seed: int) -> dict[str, Any]:
    dev, gate_cases, gate_table, files = _triage_table(data)
    in_classifier = [i for i, c in enumerate(gate_cases) if case_writer(c) not in GATE_ONLY_WRITERS]
    cases, table = [gate_cases[i] for i in in_classifier], gate_table.subset(in_classifier)
    figures: dict[str, Any] = {}
    for fast, blocks in ((False, TRIAGE_BLOCKS), (True, TRIAGE_FAST_BLOCKS)):
        gate_blocks = GATE_FAST_BLOCKS if fast else GATE_BLOCKS
        gate_x = featurize(gate_blocks, [Item(c) for c in gate_cases])
        gate, own_crisis, gate_figures = build_gate(gate_x, gate_cases, gate_table, gate_blocks)
        table.own_crisis, table.vetoes = own_crisis[in_classifier], (gate.veto, gate.floor_veto)
        gate.save(gate_path(out, fast))
        judge, fig = _triage_model(blocks, cases, table, files, folds, seed, fast, gate.read(gate_x[in_classifier]))
        judge.save(model_path(out, CRISIS_TRIAGE, fast))
        figures["fast" if fast else "default"] = {**fig, "crisis_gate": gate_figures}
    hh = data / "help_harm"
    raters = [[c.metadata["human_labels"][r] for r in RATERS] for c in dev]
    dev_llm = {r["id"]: r["label"] for r in json.loads((hh / "llm_crisis_labels" / LLM_DEV_LABELS).read_text("utf-8"))}
    human_pairs = [
        cohen_kappa([r[i] for r in raters], [r[j] for r in raters]) for i in range(4) for j in range(i + 1, 4)
    ]
    # References on the same 103 cases (no training involved): the lexicon and gpt-4o-mini's labels.
    figures["references"] = {
        "lexicon_only": human_figures([triage(_user_turns(c)).label for c in dev], raters),
        "gpt4o_mini_published": human_figures([dev_llm[c.id] for c in dev], raters),
        "human_pairwise_kappa": {
            "min": round(min(human_pairs), 4),
            "max": round(max(human_pairs), 4),
            "mean": round(float(np.mean(human_pairs)), 4),
        },
    }
    return figures


def build_safety(data: Path, out: Path, folds: int, seed: int) -> dict[str, Any]:
    path = data / "dialogue_safety" / "dev.jsonl"
    suite = load_suite(f"dialogue-safety:{path}")
    replies = {r.case_id: r.text for r in suite.responses}
    items = [Item(c, replies[c.id]) for c in suite.cases]
    gold = [c.metadata["gold_safety_label"] for c in suite.cases]
    # Records that open with the same seeker turn are one dialogue: they are held out together.
    groups = dialogue_groups([c.turns[0].content if c.turns else "" for c in suite.cases])

    def run(blocks: list[str], name: str = "offline") -> TrainResult:
        meta = {
            "protocol": DIALOGUE_SAFETY,
            "target": "response",
            "features": blocks,
            "encoder": "; ".join(encoder_version(k) for k in encoders(blocks)),
            "text_fields": {"case": "context", "response": "response"},
            "training": {
                "data": "dialogue_safety/dev.jsonl",
                "data_sha256": _sha(path),
                "rows": len(items),
                "command": COMMAND,
                "grouped_by": "dialogue (first seeker turn)",
            },
        }
        return fit_judge(
            featurize(blocks, items), gold, kind="classifier", meta=meta, labels=list(SAFETY_LABELS),
            grid=SAFETY_GRID, folds=folds, seed=seed, groups=groups, name=name, ngram_weights=SAFETY_NGRAM_WEIGHTS,
        )  # fmt: skip

    figures: dict[str, Any] = {"rows": len(items), "dialogues": len(set(groups))}
    for fast, blocks in ((False, SAFETY_BLOCKS), (True, SAFETY_FAST_BLOCKS)):
        if fast and blocks == SAFETY_BLOCKS:
            continue
        result = run(blocks, "offline:fast" if fast else "offline")
        predicted = list(result.judge.predict(items))
        result.judge.meta["figures"]["in_sample"] = classifier_figures(gold, predicted, SAFETY_LABELS)
        result.judge.save(model_path(out, DIALOGUE_SAFETY, fast))
        figures["fast" if fast else "default"] = {
            "features": blocks,
            "strength": result.params["strength"],
            "strength_per_fold": result.params["strength_per_fold"],
            "ngram_weight": result.params.get("ngram_weight"),
            "ngram_weight_per_fold": result.params.get("ngram_weight_per_fold"),
            "grouped_cv": result.figures,
            # In-sample, every CHECK_EVERY-th row: the tests re-check it to see that the weights load right.
            "in_sample_every_4th_row": classifier_figures(gold[::CHECK_EVERY], predicted[::CHECK_EVERY], SAFETY_LABELS),
        }
    ablations = {}
    for blocks in SAFETY_ABLATIONS:
        r = run(blocks)
        ablations["+".join(blocks)] = {k: r.figures[k] for k in ("accuracy", "weighted_f1", "macro_f1", "across_folds")}
    figures["ablations_grouped_cv"] = ablations
    return figures


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
        groups.append(dataset_group(humans[case.id].metadata.get("dataset_id")))  # the corpus the post came from
        for judge, value in (case.metadata.get("judge_scores") or {}).items():
            judges.setdefault(judge, []).append(np.nan if value is None else float(value))
    return items, np.array(mean), np.array(per_rater), groups, {k: np.array(v) for k, v in judges.items()}


def _vs_raters(pred: np.ndarray, raters: np.ndarray) -> dict[str, Any]:
    return {name: scorer_figures(raters[:, i], pred) for i, name in enumerate(("H1", "H2"))}


def _with_reply_checks(items: list[Item], oof: np.ndarray, target: np.ndarray, raters: np.ndarray) -> dict[str, Any]:
    """The judge's level (the trained out-of-fold prediction blended with the reply's checkable moves,
    then capped by harm) against the humans, for the shipped blend weight and its neighbours."""
    from mheval.judges.offline.judge import RULE_WEIGHT, combine_appropriateness
    from mheval.judges.offline.reply_checks import check_reply

    checks = [check_reply(it.response or "", crisis_label=it.crisis_label, locale=None) for it in items]
    out: dict[str, Any] = {"shipped_weight": RULE_WEIGHT, "caps_fired": sum(c.cap is not None for c in checks)}
    for weight in sorted({0.0, 0.25, 0.5, RULE_WEIGHT}):
        levels = np.array(
            [
                combine_appropriateness(p, c, it.crisis_label, weight)
                for p, c, it in zip(oof, checks, items, strict=True)
            ],
            dtype=float,
        )
        out[f"weight_{weight:g}"] = {"vs_mean": scorer_figures(target, levels), "vs_raters": _vs_raters(levels, raters)}
    return out


def build_appropriateness(data: Path, out: Path, folds: int, seed: int) -> dict[str, Any]:
    from mheval.training import appropriateness

    items, target, raters, groups, llm = _appropriateness_data(data)
    path = data / "help_harm" / "appropriateness_scores.dev.jsonl"
    meta = {
        "protocol": APPROPRIATENESS,
        "target": "response",
        "encoder": encoder_version(),
        "text_fields": {"case": "inputs", "response": "answer"},
        "score_range": [1, 5],
        "integer_scores": True,
        "dimension": "appropriateness",
        "training": {
            "data": "help_harm/appropriateness_scores.dev.jsonl (+ human_crisis_labels.dev.jsonl for the label)"
            " and mheval's corpus (corpus/replies, train and tune splits)",
            "data_sha256": _sha(path),
            "rows": len(items),
            "target": "mean of the available human ratings H1, H2; the corpus's written level",
            "command": COMMAND,
        },
    }
    judge, figures, oof = appropriateness.build(items, target, groups, meta, folds=folds, seed=seed)
    judge.save(out / "appropriateness.npz")
    return {
        "rows": len(items),
        **figures,
        "with_reply_checks": _with_reply_checks(items, oof, target, raters),
        "cv_vs_raters": _vs_raters(judge._round(oof), raters),
        # In-sample, every CHECK_EVERY-th row: the tests re-check it to see that the weights load right.
        "in_sample_every_4th_row_vs_raters": _vs_raters(
            np.asarray(judge.predict(items[::CHECK_EVERY]), dtype=float), raters[::CHECK_EVERY]
        ),
        "published_llm_judges_vs_raters": {k: _vs_raters(v, raters) for k, v in llm.items()},
        "h1_vs_h2": scorer_figures(raters[:, 0], raters[:, 1]),
    }


def build(
    data: Path, out: Path = WEIGHTS, *, folds: int = 5, seed: int = 0, only: Sequence[str] = ()
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    figures_path = out / "figures.json"

    def current() -> dict[str, Any]:  # read again before each write: other builds (training/harm.py) share the file
        return json.loads(figures_path.read_text("utf-8")) if figures_path.exists() else {}

    figures = current()
    steps = {CRISIS_TRIAGE: build_triage, DIALOGUE_SAFETY: build_safety, APPROPRIATENESS: build_appropriateness}
    for name, step in steps.items():
        if only and name not in only:
            continue
        started = time.perf_counter()
        result = step(data, out, folds, seed)
        figures = current()
        figures[name] = result
        print(f"built {name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        figures["_about"] = {
            "command": COMMAND,
            "encoders": [encoder_version("use"), encoder_version("e5")],
            "folds": folds,
            "seed": seed,
        }
        figures_path.write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    # The whole offline judge, as shipped from `out`, on mheval's own contrast sets (both speeds), when
    # `out` holds every model (a partial build elsewhere would measure a different judge).
    if all(model_path(out, p).is_file() for p in MODEL_PROTOCOLS):
        contrast = contrast_figures(out)
        figures = current()
        figures["contrast_sets"] = contrast
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
