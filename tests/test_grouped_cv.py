"""Grouped, nested cross-validation of the triage judge (training/grouped.py) and the safety-first
decision rule: whole datasets stay out of training, distilled rows are never judged, the threshold
only ever adds severe labels. Synthetic feature matrices: nothing here loads an encoder.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mheval.judges.offline.trained import decide_severe
from mheval.records import CRISIS_LABELS
from mheval.training.grouped import (
    DISTILLED,
    HUMAN,
    TriageTable,
    _fold_groups,
    dataset_group,
    decide,
    dialogue_groups,
    human_figures,
    nested_cv,
    oof_proba,
)

SI, SH, NC, ANX = "suicidal_ideation", "self-harm", "no_crisis", "anxiety_crisis"


def test_dataset_names_of_one_corpus_fall_into_one_group() -> None:
    assert dataset_group("hugging_100K") == dataset_group("hugg_100k") == "hugg_100k"
    assert dataset_group("hugging_4") == dataset_group("hugg_4") != dataset_group("hugg_40")
    assert dataset_group(None) == "unknown" and dataset_group("other") == "other"


def test_dialogue_groups_follow_the_opening_turn() -> None:
    groups = dialogue_groups(["hi there", "something else", " hi there ", "a third"])
    assert groups[0] == groups[2] and len(set(groups)) == 3


def test_a_human_case_counts_one_and_a_distilled_row_less() -> None:
    table = TriageTable.build([("hugg_1", [SI, SI, NC, SI]), ("hugg_2", [NC] * 4)], [("hugg_1", NC)], [ANX])
    weights = table.weights(0.25)
    assert len(weights) == 4 + 4 + 1 + 1
    assert weights[table.source == HUMAN].sum() == pytest.approx(2.0)
    assert weights[table.source == DISTILLED].tolist() == [0.25]
    assert table.human_cases() == [0, 1] and table.human_cases(["hugg_2"]) == [1]
    assert set(table.group) == {"hugg_1", "hugg_2", "crisis-core"}


def test_a_subset_keeps_its_cases_rows_and_raters_renumbered() -> None:
    """The triage classifier learns from a subset of the crisis gate's cases (training/build_shipped.py)."""
    table = TriageTable.build([("hugg_1", [SI, SI, NC, SI]), ("hugg_2", [NC] * 4)], [("hugg_1", NC)], [ANX, SI])
    table.own_crisis = np.array([0.9, 0.1, 0.2, 0.3, 0.8])
    sub = table.subset([1, 4])
    assert sub.case_index.tolist() == [0, 0, 0, 0, 1]
    assert [CRISIS_LABELS[int(y)] for y in sub.y] == [NC] * 4 + [SI]
    assert sub.raters == {0: [NC] * 4} and sub.group.tolist()[-1] == "crisis-core"
    assert sub.own_crisis is not None and sub.own_crisis.tolist() == [0.1, 0.8]


def test_the_threshold_only_ever_raises_a_severe_label() -> None:
    labels = list(CRISIS_LABELS)
    proba = np.full((3, len(labels)), 0.01)
    proba[0, labels.index(NC)], proba[0, labels.index(SI)], proba[0, labels.index(SH)] = 0.8, 0.05, 0.1
    proba[1, labels.index(ANX)], proba[1, labels.index(SI)] = 0.9, 0.02
    proba[2, labels.index(SI)] = 0.9
    plain = decide_severe(proba, labels, None)
    assert [labels[i] for i in plain] == [NC, ANX, SI]
    raised = decide_severe(proba, labels, 0.1)
    assert [labels[i] for i in raised] == [SH, ANX, SI]  # 0.15 reaches 0.1 and self-harm is the likelier
    assert [labels[i] for i in decide(proba, 0.01)] == [SH, SI, SI]
    assert decide_severe(proba, [*labels[:2]], 0.5).shape == (3,)  # works on any label list with the two


def test_recall_counts_cases_that_two_raters_agree_on() -> None:
    raters = [[SI, SI, NC, NC], [SI, NC, NC, NC], [SH, SH, SI, SI]]
    figures = human_figures([SI, NC, SH], raters)
    assert figures["recall_2_of_4"][SI] == {"recall": 0.5, "n": 2}  # the third case counts for both labels
    assert figures["recall_2_of_4"][SH] == {"recall": 1.0, "n": 1}
    assert figures["n"] == 3 and set(figures["kappa"]) == {"H1", "H2", "H3", "H4"}


def _synthetic(seed: int = 0) -> tuple[np.ndarray, TriageTable]:
    """Six datasets; a case's label shows in column 0-2; each dataset also has a marker column."""
    rng = np.random.default_rng(seed)
    human, distilled = [], []
    labels_of = [SI, NC, ANX]
    for g in range(6):
        for i in range(6):
            label = labels_of[(g + i) % 3]
            votes = [label, label, label, NC if label != NC else ANX]
            human.append((f"hugg_{g}", votes))
        for i in range(20):
            distilled.append((f"hugg_{g}", labels_of[i % 3]))
    table = TriageTable.build(human, distilled, [SI, NC, ANX])
    case_label = {}
    for row, case in enumerate(table.case_index):
        case_label.setdefault(int(case), int(table.y[row]) if table.source[row] != HUMAN else None)
    for case, votes in table.raters.items():
        case_label[case] = CRISIS_LABELS.index(votes[0])
    n_cases = int(table.case_index.max()) + 1
    x = rng.normal(0, 1, (n_cases, 10))
    signal = [CRISIS_LABELS.index(label) for label in labels_of]
    for case in range(n_cases):
        x[case, signal.index(case_label[case])] += 3
    return x, table


def test_a_held_out_dataset_never_reaches_training() -> None:
    x, table = _synthetic()
    # Poison one dataset's distilled rows: if they leaked into the fold that holds that dataset out, its
    # human cases (which share a marker column with them) would come out as self-harm.
    poisoned = "hugg_3"
    rows = np.flatnonzero((table.group == poisoned) & (table.source == DISTILLED))
    table.y[rows] = CRISIS_LABELS.index(SH)
    cases = sorted({int(c) for c in table.case_index[table.group == poisoned]})
    x[cases, 9] += 8.0  # the marker
    groups = sorted({g for g in table.group if g != "crisis-core"})
    folds = _fold_groups(table, groups, 3, 0)
    assert sorted(g for fold in folds for g in fold) == groups  # each dataset in exactly one fold
    held, proba, _ = oof_proba(x, table, groups, folds, strength=1.0, distilled_weight=1.0, ngram=None, ngram_weight=1)
    assert set(held) == set(table.human_cases())  # every human case judged once; no distilled row judged
    target = [i for i, c in enumerate(held) if table.case_group(c) == poisoned]
    assert target and all(CRISIS_LABELS[int(p.argmax())] != SH for p in proba[target])


def test_nested_cv_reports_folds_spread_choices_and_a_monotone_curve() -> None:
    x, table = _synthetic()
    result = nested_cv(x, table, grid=(0.1, 1.0), distilled_weights=(0.2, 0.5), folds=3, inner_folds=2, seed=0)
    assert len(result["per_fold"]) == len(result["choices"]) == 3
    assert result["pooled"]["n"] == len(table.human_cases())
    assert result["spread"]["mean_kappa"]["min"] <= result["spread"]["mean_kappa"]["max"]
    for choice in result["choices"]:
        assert choice["distilled_weight"] in (0.2, 0.5) and choice["strength"] in (0.1, 1.0)
    curve = result["threshold_curve"]
    recalls = [row[f"recall_{SI}"] for row in curve]  # thresholds ascending: recall never rises
    assert all(a >= b for a, b in itertools.pairwise(recalls))
    again = nested_cv(x, table, grid=(0.1, 1.0), distilled_weights=(0.2, 0.5), folds=3, inner_folds=2, seed=0)
    assert again == result


def test_the_offline_judge_applies_a_models_threshold(tmp_path) -> None:
    """A triage model whose classifier prefers no_crisis (0.95) and gives the severe labels 0.05 in all
    (below the open threshold): with a model threshold of 0.04 the judge says suicidal ideation, and why,
    when the user's own words hold a severe cue; without a cue, or without a threshold, no_crisis."""
    import asyncio
    from types import SimpleNamespace

    from mheval.judges.offline import OfflineJudge
    from mheval.judges.offline.risk import OPEN_THRESHOLD
    from mheval.judges.offline.trained import LinearHead, TrainedJudge
    from mheval.records import Case, Turn

    labels = list(CRISIS_LABELS)
    probs = np.full(len(labels), 1e-6)
    probs[labels.index(NC)], probs[labels.index(SI)], probs[labels.index(SH)] = 0.95, 0.03, 0.02
    assert OPEN_THRESHOLD > 0.05
    d = 6  # lex:triage: no encoder needed
    head = LinearHead(np.zeros(d), np.ones(d), np.zeros((len(labels), d)), np.log(probs / probs.sum()))
    cue = Case(id="c", turns=[Turn(role="user", content="I feel hopeless and worthless lately.")])
    quiet = Case(id="q", turns=[Turn(role="user", content="a quiet evening at home")])
    for threshold, case, expected in ((0.04, cue, SI), (0.04, quiet, NC), (None, cue, NC)):
        meta = {"protocol": "crisis-triage", "kind": "classifier", "labels": labels, "target": "case",
                "features": ["lex:triage"], "severe_threshold": threshold}  # fmt: skip
        folder = tmp_path / f"{threshold}-{case.id}"
        TrainedJudge(head, meta, name="offline").save(folder / "crisis-triage.npz")
        verdict = asyncio.run(OfflineJudge(models=folder).judge(SimpleNamespace(id="crisis-triage"), case, None))
        assert verdict.label == expected, verdict.rationale
        assert ("safety threshold" in verdict.rationale) is (expected == SI)


def test_a_label_no_threshold_helps_does_not_hide_the_others_gains() -> None:
    from mheval.training.grouped import pick_threshold

    labels = list(CRISIS_LABELS)
    raters = [[SI] * 4, [SI] * 4, [SH] * 4, [NC] * 4]
    proba = np.full((4, len(labels)), 0.01)
    proba[0, labels.index(SI)] = 0.9  # found at any threshold
    proba[1, labels.index(NC)], proba[1, labels.index(SI)] = 0.8, 0.15  # found only at a threshold <= 0.16
    proba[2, labels.index(NC)] = 0.95  # self-harm missed at every threshold
    proba[3, labels.index(NC)] = 0.95
    assert pick_threshold(proba, raters, (0.1, 0.15, 0.5, 1.01), 0.9) == 0.15
    both = [[SI] * 4, [SI] * 4, [NC] * 4, [NC] * 4]
    assert pick_threshold(proba, both, (0.1, 0.15, 0.5, 1.01), 0.9) == 0.15  # the largest that meets it
