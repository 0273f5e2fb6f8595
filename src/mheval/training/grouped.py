"""Grouped, nested cross-validation for the triage judge, with a safety-first decision threshold.

Why a module of its own: the shipped triage model learns from two kinds of labels, and only one of
them may judge it. The 103 cases of the help_harm dev half carry four human labels each; the 2,030
test inputs carry gpt-4o-mini's labels (distillation, weighted below the humans); mheval's own
crisis-core cases carry the labels their authors wrote. Figures are computed on human-labelled cases
only, always from models that never saw the source dataset (`dataset_id`) those cases came from:

- outer folds hold out whole datasets (every row of a held-out dataset, distilled or human, leaves
  training); the held-out human cases are the evaluation set;
- inside each outer training part, inner folds (again whole datasets) choose the distillation
  weight and regularisation by mean kappa against the humans, then the decision threshold;
- the threshold: when p(suicidal_ideation) + p(self-harm) reaches `t`, the more likely of those two
  labels is given whatever else is likelier. Of the thresholds whose inner recall of both labels
  reaches `min_recall`, the largest (the one that changes the fewest labels) is kept; if none does,
  the largest of those that come closest (each label's recall counted up to `min_recall`).

Recall counts a case as suicidal ideation (or self-harm) when at least two of the four raters said so,
the measure the unseen-data check used. The `figures` are plain numbers; nothing here reads files.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mheval.judges.offline.risk import GateReading, RiskScreen, decide_triage
from mheval.judges.offline.trained import LinearHead, decide_severe
from mheval.labels import CRISIS_LABELS, HIGH_RISK
from mheval.training.fit import cohen_kappa, fit_head, fold_spread

HUMAN, DISTILLED, AUTHORED = "human", "distilled", "authored"
THRESHOLDS: tuple[float, ...] = (0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 1.01)
"""Candidate thresholds on p(SI) + p(SH); 1.01 means plain argmax."""


def dataset_group(dataset_id: str | None) -> str:
    """One name per source corpus: the released files spell some `hugg_4`, others `hugging_4`; both are
    taken to be the same corpus (the cautious reading: a held-out fold then holds out both)."""
    name = str(dataset_id or "unknown").strip().lower()
    return "hugg_" + name.removeprefix("hugging_").removeprefix("hugg_") if name.startswith("hugg") else name


@dataclass
class TriageTable:
    """Training rows over cases: `x` has one row per case; a human case gives one row per rater."""

    case_index: np.ndarray  # row -> case
    y: np.ndarray  # row -> label index (CRISIS_LABELS)
    source: np.ndarray  # row -> HUMAN, DISTILLED or AUTHORED
    group: np.ndarray  # row -> source dataset (AUTHORED rows: "crisis-core", never held out)
    raters: dict[int, list[str]] = field(default_factory=dict)  # human case -> its raters' labels
    # case -> the explicit-risk screen of its user turns (risk.screen), when the decision uses it
    screens: list[RiskScreen] | None = None
    # case -> the crisis gate's out-of-fold probability, and the gate's cut-offs (training/crisis_gate.py)
    own_crisis: np.ndarray | None = None
    vetoes: tuple[float, float] | None = None  # (veto, floor_veto)

    def screens_of(self, cases: Sequence[int]) -> list[RiskScreen] | None:
        return None if self.screens is None else [self.screens[c] for c in cases]

    def gates_of(self, cases: Sequence[int]) -> list[GateReading] | None:
        if self.own_crisis is None or self.vetoes is None:
            return None
        return [GateReading(float(self.own_crisis[c]), *self.vetoes) for c in cases]

    def subset(self, keep: Sequence[int]) -> TriageTable:
        """The table of the cases `keep` (increasing), numbered 0, 1, ... in that order; the crisis gate's
        cut-offs carry over."""
        number = {int(old): new for new, old in enumerate(keep)}
        rows = np.isin(self.case_index, list(number))
        return TriageTable(
            np.array([number[int(c)] for c in self.case_index[rows]], dtype=self.case_index.dtype),
            self.y[rows],
            self.source[rows],
            self.group[rows],
            {number[c]: labels for c, labels in self.raters.items() if c in number},
            self.screens_of(keep),
            None if self.own_crisis is None else self.own_crisis[list(keep)],
            self.vetoes,
        )

    @classmethod
    def build(
        cls,
        human: Sequence[tuple[str, Sequence[str]]],
        distilled: Sequence[tuple[str, str]],
        authored: Sequence[str],
    ) -> TriageTable:
        """Cases in this order: `human` (dataset, rater labels), `distilled` (dataset, label),
        `authored` (label)."""
        rows: list[tuple[int, int, str, str]] = []  # (case, label index, source, group)
        raters: dict[int, list[str]] = {}
        case = 0
        for dataset, labels in human:
            raters[case] = list(labels)
            rows += [(case, CRISIS_LABELS.index(label), HUMAN, dataset_group(dataset)) for label in labels]
            case += 1
        for dataset, label in distilled:
            rows.append((case, CRISIS_LABELS.index(label), DISTILLED, dataset_group(dataset)))
            case += 1
        for label in authored:
            rows.append((case, CRISIS_LABELS.index(label), AUTHORED, "crisis-core"))
            case += 1
        case_index, y, source, group = (
            (list(column) for column in zip(*rows, strict=True)) if rows else ([], [], [], [])
        )
        return cls(np.array(case_index), np.array(y, dtype=float), np.array(source), np.array(group), raters)

    def weights(self, distilled_weight: float) -> np.ndarray:
        """A human case counts 1 in all (its raters share it), a distilled row `distilled_weight`, an
        authored row 1."""
        per_rater = np.array([1.0 / len(self.raters[int(c)]) if s == HUMAN else 0.0 for c, s in zip(
            self.case_index, self.source, strict=True)])  # fmt: skip
        return np.where(self.source == HUMAN, per_rater, np.where(self.source == DISTILLED, distilled_weight, 1.0))

    def human_cases(self, groups: Sequence[str] | None = None) -> list[int]:
        """Human-labelled cases (sorted), optionally only those of `groups`."""
        wanted = None if groups is None else set(groups)
        cases = {
            int(c)
            for c, s, g in zip(self.case_index, self.source, self.group, strict=True)
            if s == HUMAN and (wanted is None or g in wanted)
        }
        return sorted(cases)

    def case_group(self, case: int) -> str:
        return str(self.group[np.flatnonzero(self.case_index == case)[0]])


def decide(
    proba: np.ndarray,
    threshold: float,
    screens: Sequence[RiskScreen] | None = None,
    gates: Sequence[GateReading] | None = None,
) -> np.ndarray:
    """Label indices as the judge gives them: with the cases' risk screens, `risk.decide_triage`
    (explicit-risk floor, the crisis gate's veto when `gates` are given, framing, threshold gated by a
    severe cue); without, argmax except that p(SI) + p(SH) >= threshold gives the likelier of the two
    (trained.decide_severe)."""
    if screens is None:
        return decide_severe(proba, list(CRISIS_LABELS), threshold)
    labels = list(CRISIS_LABELS)
    gate_list = list(gates) if gates is not None else [None] * len(screens)
    return np.array(
        [decide_triage(p, labels, threshold, s, gate=g) for p, s, g in zip(proba, screens, gate_list, strict=True)],
        dtype=int,
    )


def human_figures(pred: Sequence[str], raters: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Mean and per-rater Cohen's kappa; recall of each label over the cases at least two raters gave it."""
    n_raters = len(raters[0])
    kappas = [cohen_kappa(pred, [r[i] for r in raters]) for i in range(n_raters)]
    recall: dict[str, Any] = {}
    for label in CRISIS_LABELS:
        idx = [i for i, r in enumerate(raters) if sum(v == label for v in r) >= 2]
        hits = sum(pred[i] == label for i in idx)
        recall[label] = {"recall": round(hits / len(idx), 4) if idx else None, "n": len(idx)}
    return {
        "n": len(pred),
        "mean_kappa": round(float(np.mean(kappas)), 4),
        "kappa": {f"H{i + 1}": round(k, 4) for i, k in enumerate(kappas)},
        "recall_2_of_4": recall,
    }


def _severe_recalls(pred: np.ndarray, raters: Sequence[Sequence[str]]) -> list[float]:
    out = []
    for label in HIGH_RISK:
        idx = [i for i, r in enumerate(raters) if sum(v == label for v in r) >= 2]
        out.append(float(np.mean([CRISIS_LABELS[int(pred[i])] == label for i in idx])) if idx else 1.0)
    return out


def _mean_kappa(pred: np.ndarray, raters: Sequence[Sequence[str]]) -> float:
    labels = [CRISIS_LABELS[int(p)] for p in pred]
    return float(np.mean([cohen_kappa(labels, [r[i] for r in raters]) for i in range(len(raters[0]))]))


def _fold_groups(table: TriageTable, groups: Sequence[str], folds: int, seed: int) -> list[list[str]]:
    """Split dataset groups into folds, stratified by the human cases' majority labels (scikit-learn's
    StratifiedGroupKFold over the human cases); groups without human cases go to folds round-robin."""
    from sklearn.model_selection import StratifiedGroupKFold

    cases = table.human_cases(groups)
    case_groups = [table.case_group(c) for c in cases]
    strata = [_majority(table.raters[c]) for c in cases]
    folds = max(2, min(folds, len(set(case_groups))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "least populated class has fewer members than n_splits"
        splitter = StratifiedGroupKFold(folds, shuffle=True, random_state=seed)
        split = list(splitter.split(np.zeros(len(cases)), strata, case_groups))
    out = [sorted({case_groups[i] for i in test}) for _, test in split]
    spare = sorted(set(groups) - {g for fold in out for g in fold})
    for i, g in enumerate(spare):
        out[i % folds].append(g)
    return out


@dataclass
class Choice:
    strength: float
    distilled_weight: float
    threshold: float
    ngram_weight: float = 1.0
    inner: dict[str, Any] = field(default_factory=dict)


def _fit(
    x: np.ndarray, table: TriageTable, rows: np.ndarray, strength: float, distilled_weight: float,
    ngram: np.ndarray | None, ngram_weight: float,
) -> LinearHead:  # fmt: skip
    return fit_head(
        x[table.case_index[rows]], table.y[rows], kind="classifier", n_labels=len(CRISIS_LABELS),
        strength=strength, ngram=ngram, ngram_weight=ngram_weight,
        sample_weight=table.weights(distilled_weight)[rows],
    )  # fmt: skip


def oof_proba(
    x: np.ndarray, table: TriageTable, groups: Sequence[str], folds: list[list[str]], *, strength: float,
    distilled_weight: float, ngram: np.ndarray | None, ngram_weight: float,
) -> tuple[list[int], np.ndarray, list[int]]:  # fmt: skip
    """Out-of-fold probabilities of the human cases of `groups`: (cases, proba, fold of each case)."""
    cases, probas, fold_of = [], [], []
    allowed = set(groups) | {"crisis-core"}
    for k, held in enumerate(folds):
        held_set = set(held)
        rows = np.flatnonzero([g in allowed and g not in held_set for g in table.group])
        head = _fit(x, table, rows, strength, distilled_weight, ngram, ngram_weight)
        test = table.human_cases(held)
        if test:
            cases += test
            probas.append(head.proba(x[test]))
            fold_of += [k] * len(test)
    return cases, np.vstack(probas), fold_of


def pick_threshold(
    proba: np.ndarray, raters: Sequence[Sequence[str]], thresholds: Sequence[float], min_recall: float,
    screens: Sequence[RiskScreen] | None = None, gates: Sequence[GateReading] | None = None,
) -> float:  # fmt: skip
    """The largest threshold whose recall of both severe labels reaches `min_recall`; when none does, the
    largest of those with the most recall short of it (each label's recall counted up to `min_recall`,
    so a label that no threshold helps does not hide the other one's gains; lowering the threshold
    further would cost agreement and buy nothing)."""
    reached = {
        t: sum(min(min_recall, r) for r in _severe_recalls(decide(proba, t, screens, gates), raters))
        for t in thresholds
    }
    return max(thresholds, key=lambda t: (round(reached[t], 9), t))


def choose(
    x: np.ndarray, table: TriageTable, groups: Sequence[str], *, grid: Sequence[float],
    distilled_weights: Sequence[float], thresholds: Sequence[float] = THRESHOLDS, min_recall: float = 0.9,
    folds: int = 3, seed: int = 0, ngram: np.ndarray | None = None, ngram_weights: Sequence[float] = (1.0,),
) -> Choice:  # fmt: skip
    """Strength, distillation weight and n-gram weight by inner-CV mean kappa (on `groups` only), then the
    threshold on the chosen setting's inner out-of-fold probabilities."""
    inner = _fold_groups(table, groups, folds, seed)
    best: tuple[float, Choice, np.ndarray, list[int]] | None = None
    scores: dict[str, float] = {}
    for ngram_weight in ngram_weights if ngram is not None else [1.0]:
        for weight in distilled_weights:
            for strength in grid:
                cases, proba, _ = oof_proba(
                    x, table, groups, inner, strength=strength, distilled_weight=weight, ngram=ngram,
                    ngram_weight=ngram_weight,
                )  # fmt: skip
                kappa = _mean_kappa(proba.argmax(axis=1), [table.raters[c] for c in cases])
                scores[f"C={strength:g},w={weight:g},ngram={ngram_weight:g}"] = round(kappa, 4)
                if best is None or kappa > best[0] + 1e-12:
                    best = (kappa, Choice(strength, weight, 1.01, ngram_weight), proba, cases)
    assert best is not None
    _, choice, proba, cases = best
    raters = [table.raters[c] for c in cases]
    screens, gates = table.screens_of(cases), table.gates_of(cases)
    choice.threshold = pick_threshold(proba, raters, thresholds, min_recall, screens, gates)
    curve = {t: _severe_recalls(decide(proba, t, screens, gates), raters) for t in thresholds}
    choice.inner = {
        "kappa_by_setting": scores,
        "inner_recall_by_threshold": {f"{t:g}": [round(r, 3) for r in v] for t, v in curve.items()},
    }
    return choice


def nested_cv(
    x: np.ndarray, table: TriageTable, *, grid: Sequence[float], distilled_weights: Sequence[float],
    thresholds: Sequence[float] = THRESHOLDS, min_recall: float = 0.9, folds: int = 5, inner_folds: int = 3,
    seed: int = 0, ngram: np.ndarray | None = None, ngram_weights: Sequence[float] = (1.0,),
) -> dict[str, Any]:  # fmt: skip
    """Outer folds of whole datasets; everything chosen inside. Returns pooled and per-fold figures, the
    choices made in each fold, and the recall/kappa curve over `thresholds` (outer models, pooled)."""
    groups = sorted({g for g in table.group if g != "crisis-core"})
    outer = _fold_groups(table, groups, folds, seed)
    pooled_cases: list[int] = []
    pooled_pred: list[int] = []
    pooled_proba: list[np.ndarray] = []
    per_fold, choices = [], []
    for held in outer:
        train_groups = [g for g in groups if g not in set(held)]
        choice = choose(
            x, table, train_groups, grid=grid, distilled_weights=distilled_weights, thresholds=thresholds,
            min_recall=min_recall, folds=inner_folds, seed=seed, ngram=ngram, ngram_weights=ngram_weights,
        )  # fmt: skip
        rows = np.flatnonzero([g not in set(held) for g in table.group])  # crisis-core is never held out
        head = _fit(x, table, rows, choice.strength, choice.distilled_weight, ngram, choice.ngram_weight)
        test = table.human_cases(held)
        proba = head.proba(x[test])
        pred = decide(proba, choice.threshold, table.screens_of(test), table.gates_of(test))
        per_fold.append(
            {"groups": held, **human_figures([CRISIS_LABELS[p] for p in pred], [table.raters[c] for c in test])}
        )
        choices.append({"strength": choice.strength, "distilled_weight": choice.distilled_weight,
                        "ngram_weight": choice.ngram_weight, "threshold": choice.threshold,
                        **choice.inner})  # fmt: skip
        pooled_cases += test
        pooled_pred += pred.tolist()
        pooled_proba.append(proba)
    raters = [table.raters[c] for c in pooled_cases]
    proba_all = np.vstack(pooled_proba)
    curve = []
    for t in thresholds:
        chosen = decide(proba_all, t, table.screens_of(pooled_cases), table.gates_of(pooled_cases))
        fig = human_figures([CRISIS_LABELS[p] for p in chosen], raters)
        curve.append({"threshold": t, "mean_kappa": fig["mean_kappa"],
                      **{f"recall_{lab}": fig["recall_2_of_4"][lab]["recall"] for lab in HIGH_RISK}})  # fmt: skip
    return {
        "pooled": human_figures([CRISIS_LABELS[p] for p in pooled_pred], raters),
        "spread": spread(per_fold),
        "per_fold": per_fold,
        "choices": choices,
        "threshold_curve": curve,
    }


def spread(per_fold: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean, sample std, min and max across folds of mean kappa and the severe labels' recall (folds
    without a case of a label are left out of that label's spread)."""
    out = {"mean_kappa": fold_spread([f["mean_kappa"] for f in per_fold])}
    for label in HIGH_RISK:
        out[f"recall_{label}"] = fold_spread([f["recall_2_of_4"][label]["recall"] for f in per_fold])
    return out


def dialogue_groups(first_turns: Sequence[str]) -> list[str]:
    """One group per dialogue: records whose conversation opens with the same turn are the same
    dialogue at different points (the dialogue-safety file has several), so they are held out together."""
    index: dict[str, str] = {}
    return [index.setdefault(t.strip(), f"d{len(index)}") for t in first_turns]


def _majority(labels: Sequence[str]) -> str:
    """The label most raters gave (ties: the larger label name, so the choice is stable)."""
    return max(set(labels), key=lambda label: (labels.count(label), label))
