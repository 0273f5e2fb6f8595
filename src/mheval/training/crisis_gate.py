"""Build the crisis gate (judges/offline/crisis_gate.py) from triage's training cases.

Target: whether the case's writer is in a crisis of their own (any crisis label; a human case by its
raters' majority). Rows: the corpus's messages of the train and tune splits, crisis-core, the help_harm
human dev half and the distilled help_harm test inputs (weighted `DISTILLED_WEIGHT`, as their labels are
a model's). Out-of-fold probabilities hold out one corpus writer, crisis-core, or a quarter of the
help_harm datasets at a time; the veto is the probability that keeps `KEEP_RISK` of the corpus's risk
messages out of fold, the floor veto the one that keeps `KEEP_EXPLICIT` of those of them with an
explicit-risk finding (risk.screen), and those probabilities are what triage's own cross-validation
decides with (build_shipped.py), so its figures include the gate.

Settings (hidden units, weight decay) were compared out of fold on the same folds while developing: the
network's AUC on the corpus messages, writers held out, was 0.974 against 0.960 for a logistic head on
the same features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mheval.judges.offline.crisis_gate import CrisisGate
from mheval.labels import CRISIS_LABELS, NO_CRISIS
from mheval.records import Case
from mheval.training.corpus import case_writer
from mheval.training.grouped import DISTILLED, HUMAN, TriageTable

HIDDEN = 64
ALPHA = 1.0
KEEP_RISK = 0.97
KEEP_EXPLICIT = 0.995  # the gate overrules an explicit finding only when it is this sure
DISTILLED_WEIGHT = 0.5
HELP_HARM_FOLDS = 4
SEED = 0


def targets(cases: Sequence[Case], table: TriageTable) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(own crisis 0/1, row weight, fold group) per case."""
    y, weight, group = np.zeros(len(cases)), np.ones(len(cases)), []
    for i, case in enumerate(cases):
        rows = np.flatnonzero(table.case_index == i)
        labels = [CRISIS_LABELS[int(table.y[r])] for r in rows]
        y[i] = float(2 * sum(label != NO_CRISIS for label in labels) > len(labels))
        source = str(table.source[rows[0]])
        writer = case_writer(case)
        if writer is not None:
            group.append(f"corpus:{writer}")
        elif source in (HUMAN, DISTILLED):
            group.append(f"help_harm:{table.group[rows[0]]}")
            weight[i] = DISTILLED_WEIGHT if source == DISTILLED else 1.0
        else:
            group.append("crisis-core")
    return y, weight, group


def _fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> dict[str, np.ndarray]:
    from sklearn.neural_network import MLPClassifier

    from mheval.training.fit import _one_thread

    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-8] = 1.0
    z = (x - mean) / scale
    # Balanced classes: each class weighs the same in all, whatever its share of the rows.
    balance = np.where(y == 1, len(y) / (2 * max(y.sum(), 1)), len(y) / (2 * max((1 - y).sum(), 1)))
    with _one_thread():
        net = MLPClassifier((HIDDEN,), alpha=ALPHA, max_iter=300, random_state=SEED)
        net.fit(z, y.astype(int), sample_weight=weight * balance)
    return {
        "mean": mean,
        "scale": scale,
        "hidden_coef": net.coefs_[0],
        "hidden_intercept": net.intercepts_[0],
        "coef": net.coefs_[1].reshape(-1),
        "intercept": net.intercepts_[1].reshape(-1),
    }


def _gate(
    arrays: dict[str, np.ndarray], blocks: Sequence[str], vetoes: tuple[float, float], meta: dict[str, Any]
) -> CrisisGate:
    return CrisisGate(
        arrays["mean"], arrays["scale"], arrays["hidden_coef"], arrays["hidden_intercept"], arrays["coef"],
        float(arrays["intercept"][0]), tuple(blocks), *vetoes, meta,
    )  # fmt: skip


def _folds(group: Sequence[str]) -> list[list[str]]:
    names = sorted(set(group))
    help_harm = [g for g in names if g.startswith("help_harm:")]
    return [[g] for g in names if not g.startswith("help_harm:")] + [
        help_harm[i::HELP_HARM_FOLDS] for i in range(HELP_HARM_FOLDS)
    ]


def _auc(score: np.ndarray, truth: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(truth, score)), 4) if 0 < truth.sum() < len(truth) else None


def build_gate(
    x: np.ndarray, cases: Sequence[Case], table: TriageTable, blocks: Sequence[str]
) -> tuple[CrisisGate, np.ndarray, dict[str, Any]]:
    """(the gate fitted on every case, each case's out-of-fold probability, figures)."""
    y, weight, group = targets(cases, table)
    groups = np.array(group)
    oof = np.zeros(len(cases))
    for held in _folds(group):
        test = np.isin(groups, held)
        oof[test] = _gate(_fit(x[~test], y[~test], weight[~test]), blocks, (0.0, 0.0), {}).probability(x[test])
    corpus = np.array([g.startswith("corpus:") for g in group])
    human = np.isin(np.arange(len(cases)), table.human_cases())
    risk, ordinary = corpus & (y == 1), corpus & (y == 0)
    veto = float(np.quantile(oof[risk], 1.0 - KEEP_RISK))
    assert table.screens is not None, "the gate's floor veto needs the cases' risk screens"
    explicit = risk & np.array([s.floor is not None for s in table.screens])
    floor_veto = min(veto, float(np.quantile(oof[explicit], 1.0 - KEEP_EXPLICIT)))
    figures = {
        "features": list(blocks),
        "hidden_units": HIDDEN,
        "alpha": ALPHA,
        "keep_risk": KEEP_RISK,
        "veto": round(veto, 4),
        "keep_explicit": KEEP_EXPLICIT,
        "floor_veto": round(floor_veto, 6),
        "out_of_fold": {
            "auc_corpus_messages": _auc(oof[corpus], y[corpus]),
            "auc_help_harm_human_cases": _auc(oof[human], y[human]),
            "corpus_risk_kept": round(float((oof[risk] >= veto).mean()), 4),
            "corpus_ordinary_vetoed": round(float((oof[ordinary] < veto).mean()), 4),
            "corpus_explicit_kept": round(float((oof[explicit] >= floor_veto).mean()), 4),
            "n_corpus_explicit": int(explicit.sum()),
            "n_corpus_risk": int(risk.sum()),
            "n_corpus_ordinary": int(ordinary.sum()),
        },
    }
    meta = {"training": {"rows": len(cases), "target": "own crisis (any crisis label)", **figures}}
    return _gate(_fit(x, y, weight), blocks, (round(veto, 6), round(floor_veto, 6)), meta), oof, figures
