"""The offline appropriateness scorer, fitted on human-rated replies and on mheval's written corpus.

The 98 help_harm replies with a human rating are the only human-rated data, and almost none of them is
gibberish, off-topic or a textbook crisis reply; the corpus (corpus/, GUIDE.md) has every kind of reply
at a written level (gibberish, off-topic, minimal and dismissive at 2, good replies at 3-5). The scorer
is one ridge line over both: a corpus row counts `CORPUS_WEIGHT`, a human-rated one 1.

- The ridge strength is chosen on the corpus's tune split (Spearman with the written levels), never on
  the human ratings or the holdout split.
- Figures against the humans are grouped cross-validation over help_harm's source corpora, the written
  rows (train and tune splits) always on the training side: no human-rated reply is scored by a model
  that saw it.
- Figures on the corpus holdout split: the scorer's mean level per reply kind.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from mheval.judges.offline.features import Item, featurize
from mheval.judges.offline.trained import TrainedJudge
from mheval.training.corpus import CORPUS_DIR, load_replies, reply_case, splits
from mheval.training.fit import _splits, fit_head, scorer_figures

BLOCKS = ["emb:response", "cos:response,last_user", "surface:reply", "lex:psycrisis", "label:crisis"]
GRID = (10.0, 100.0, 1000.0)
CORPUS_WEIGHT = 0.5


def corpus_items(corpus: Path = CORPUS_DIR) -> dict[str, tuple[list[Item], np.ndarray, list[str]]]:
    """split -> (items, written levels, kinds) of the corpus's reply rows."""
    split_of = splits(corpus)
    out: dict[str, tuple[list[Item], list[float], list[str]]] = defaultdict(lambda: ([], [], []))
    for row in load_replies(corpus):
        items, levels, kinds = out[split_of[row.batch]]
        items.append(Item(reply_case(row), row.reply, row.crisis_label))
        levels.append(float(row.appropriateness))
        kinds.append(row.kind)
    return {s: (i, np.array(v), k) for s, (i, v, k) in out.items()}


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: float) -> Any:
    return fit_head(x, y, kind="scorer", strength=alpha, sample_weight=w)


def build(
    human_items: list[Item],
    human_target: np.ndarray,
    groups: list[str],
    meta: dict[str, Any],
    *,
    corpus: Path = CORPUS_DIR,
    folds: int = 5,
    seed: int = 0,
) -> tuple[TrainedJudge, dict[str, Any], np.ndarray]:
    """(the shipped scorer, its figures, out-of-fold predictions on the human-rated replies)."""
    parts = corpus_items(corpus)
    train_items, train_y, _ = parts["train"]
    tune_items, tune_y, _ = parts["tune"]
    x_h = featurize(BLOCKS, human_items)
    x_train, x_tune = featurize(BLOCKS, train_items), featurize(BLOCKS, tune_items)

    # The strength: fitted on the human rows and the train split, scored on the tune split.
    x = np.vstack([x_h, x_train])
    y = np.concatenate([human_target, train_y])
    w = np.concatenate([np.ones(len(human_target)), np.full(len(train_y), CORPUS_WEIGHT)])
    search = {}
    for alpha in GRID:
        pred = _fit(x, y, w, alpha).score(x_tune)
        search[alpha] = scorer_figures(tune_y, np.clip(np.round(pred), 1, 5))["spearman"] or -1.0
    alpha = max(GRID, key=lambda a: search[a])

    # Against the humans: grouped folds over help_harm's sources, every written row on the training side.
    written_x = np.vstack([x_train, x_tune])
    written_y = np.concatenate([train_y, tune_y])
    oof = np.zeros(len(human_target))
    for train, test in _splits(human_target, "scorer", folds, seed, groups):
        head = _fit(
            np.vstack([x_h[train], written_x]),
            np.concatenate([human_target[train], written_y]),
            np.concatenate([np.ones(len(train)), np.full(len(written_y), CORPUS_WEIGHT)]),
            alpha,
        )
        oof[test] = head.score(x_h[test])

    head = _fit(
        np.vstack([x_h, written_x]),
        np.concatenate([human_target, written_y]),
        np.concatenate([np.ones(len(human_target)), np.full(len(written_y), CORPUS_WEIGHT)]),
        alpha,
    )
    meta = {
        **meta,
        "features": BLOCKS,
        "kind": "scorer",
        "labels": None,
        "training": {
            **meta.get("training", {}),
            "corpus_rows": len(written_y),
            "corpus_weight": CORPUS_WEIGHT,
            "strength": alpha,
            "strength_grid": list(GRID),
        },
    }
    judge = TrainedJudge(head, meta, name="offline")
    rounded = judge._round(oof)
    figures: dict[str, Any] = {
        "strength": alpha,
        "strength_search_tune_spearman": {str(a): s for a, s in search.items()},
        "cv_vs_mean": scorer_figures(human_target, rounded),
        "corpus_rows": {s: len(p[1]) for s, p in parts.items()},
    }
    if "holdout" in parts:
        items, levels, kinds = parts["holdout"]
        pred = judge._round(head.score(featurize(BLOCKS, items)))
        by_kind: dict[str, list[float]] = defaultdict(list)
        for kind, p in zip(kinds, pred, strict=True):
            by_kind[kind].append(float(p))
        figures["holdout_scorer_mean_by_kind"] = {k: round(float(np.mean(v)), 2) for k, v in sorted(by_kind.items())}
        figures["holdout_vs_written"] = scorer_figures(levels, pred)
    judge.meta["figures"] = {"cross_validated": figures["cv_vs_mean"]}
    return judge, figures, np.asarray(oof, dtype=float)
