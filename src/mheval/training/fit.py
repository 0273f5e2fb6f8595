"""Linear heads over feature matrices: fitting, nested cross-validation and the figures it reports.

Classifiers are multinomial logistic regressions (class-weighted by default), scorers ridge lines; both
on scaled features: dense blocks (embeddings, lexicon scores...) are standardised, hashed n-gram blocks
are weighted by idf times a block weight and not centred (see `_scaling`). Everything is deterministic
given the seed. scikit-learn is needed only here,
to train: judging with a saved head is plain numpy (judges/offline/trained.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mheval.judges.offline.trained import LinearHead
from mheval.stats.agreement import cohen_kappa_point as cohen_kappa  # one kappa; the name stays for importers

_MISSING_CLASS = -30.0  # intercept of a class absent from a training fold: never predicted


def _sklearn() -> Any:
    try:
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the install
        from mheval.errors import InputError

        raise InputError("training needs scikit-learn: pip install 'mheval[train]'") from exc
    import sklearn.linear_model as linear_model
    import sklearn.model_selection as model_selection

    return linear_model, model_selection


def _scaling(
    x: np.ndarray, ngram: np.ndarray | None = None, ngram_weight: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) with z = (x - mean) / scale. Dense columns: standardised. Hashed n-gram columns
    (`ngram` mask): mean 0 and scale 1 / (idf * ngram_weight), i.e. tf-idf. Standardising those would
    blow up buckets seen in two or three texts, and the weight sets how much the n-grams count
    against the embedding (one knob instead of hundreds of standardised columns)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-8] = 1.0
    if ngram is not None and ngram.any():
        seen = (x[:, ngram] > 0).sum(axis=0)
        idf = np.log((1.0 + len(x)) / (1.0 + seen)) + 1.0
        mean[ngram] = 0.0
        scale[ngram] = 1.0 / (idf * ngram_weight)
    # Rounded to float32 now, so a model behaves the same before and after it is saved.
    return mean.astype(np.float32).astype(np.float64), scale.astype(np.float32).astype(np.float64)


def fit_head(
    x: np.ndarray,
    y: np.ndarray,
    *,
    kind: str,
    n_labels: int = 0,
    strength: float = 1.0,
    class_weight: str | None = "balanced",
    ngram: np.ndarray | None = None,
    ngram_weight: float = 1.0,
    sample_weight: np.ndarray | None = None,
) -> LinearHead:
    """One head on all of (x, y). `strength` is C (classifier) or alpha (scorer); y holds label indices
    (classifier) or scores (scorer); `ngram` marks hashed n-gram columns (features.ngram_columns);
    `sample_weight` counts some rows less (distilled labels against human ones)."""
    linear_model, _ = _sklearn()
    with _one_thread():
        return _fit_head(
            linear_model, x, y, kind=kind, n_labels=n_labels, strength=strength, class_weight=class_weight,
            ngram=ngram, ngram_weight=ngram_weight, sample_weight=sample_weight,
        )  # fmt: skip


def _one_thread() -> Any:
    """BLAS on one thread while fitting: multi-threaded sums differ in the last bits from run to run,
    and the shipped files are meant to be rebuilt bit for bit."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn depends on threadpoolctl
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _fit_head(
    linear_model: Any, x: np.ndarray, y: np.ndarray, *, kind: str, n_labels: int, strength: float,
    class_weight: str | None, ngram: np.ndarray | None = None, ngram_weight: float = 1.0,
    sample_weight: np.ndarray | None = None,
) -> LinearHead:  # fmt: skip
    mean, scale = _scaling(x, ngram, ngram_weight)
    z = (x - mean) / scale
    if kind == "scorer":
        model = linear_model.Ridge(alpha=strength).fit(z, y, sample_weight=sample_weight)
        coef, intercept = model.coef_.reshape(1, -1), np.array([model.intercept_])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence chatter on tiny folds
            model = linear_model.LogisticRegression(C=strength, max_iter=5000, class_weight=class_weight)
            model.fit(z, y, sample_weight=sample_weight)
        coef = np.zeros((n_labels, x.shape[1]))
        intercept = np.full(n_labels, _MISSING_CLASS)
        present = model.classes_.astype(int)
        if len(present) == 2:  # scikit-learn keeps one column for two classes: expand to both
            coef[present[1]], intercept[present[1]] = model.coef_[0], model.intercept_[0]
            intercept[present[0]] = 0.0
        else:
            coef[present], intercept[present] = model.coef_, model.intercept_
    return LinearHead(
        mean=mean,
        scale=scale,
        coef=coef.astype(np.float32).astype(np.float64),
        intercept=intercept.astype(np.float32).astype(np.float64),
    )


def predict(head: LinearHead, x: np.ndarray, kind: str) -> np.ndarray:
    return head.score(x) if kind == "scorer" else head.proba(x).argmax(axis=1)


def _splits(y: np.ndarray, kind: str, folds: int, seed: int, groups: Sequence[Any] | None) -> list:
    _, model_selection = _sklearn()
    strata = np.round(y).astype(int) if kind == "scorer" else y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "least populated class has fewer members than n_splits"
        if groups is not None:
            # Inner folds of a nested CV see fewer groups than the outer ones: never ask for more.
            folds = max(2, min(folds, len(set(groups))))
            splitter = model_selection.StratifiedGroupKFold(folds, shuffle=True, random_state=seed)
            return list(splitter.split(np.zeros(len(y)), strata, groups))
        splitter = model_selection.StratifiedKFold(folds, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(y)), strata))


def _loss(kind: str, gold: np.ndarray, pred: np.ndarray) -> float:
    """What inner CV minimises: MAE for scorers, 1 - Cohen's kappa for classifiers."""
    if kind == "scorer":
        return float(np.mean(np.abs(gold - pred)))
    return 1.0 - cohen_kappa(gold, pred)


def choose_strength(
    x: np.ndarray,
    y: np.ndarray,
    *,
    kind: str,
    n_labels: int,
    grid: Sequence[float],
    folds: int,
    seed: int,
    groups: Sequence[Any] | None = None,
    class_weight: str | None = "balanced",
    ngram: np.ndarray | None = None,
    ngram_weights: Sequence[float] = (1.0,),
) -> tuple[float, float]:
    """The (strength, n-gram weight) pair of `grid` x `ngram_weights` with the best cross-validated loss
    on (x, y) (the first one on a tie, strengths varying fastest)."""
    weights = list(ngram_weights) if ngram is not None and ngram.any() else [1.0]
    pairs = [(float(w), float(s)) for w in weights for s in grid]
    if len(pairs) == 1:
        return pairs[0][1], pairs[0][0]
    losses = []
    for weight, strength in pairs:
        pred = np.zeros(len(y))
        for train, test in _splits(y, kind, folds, seed, groups):
            head = fit_head(
                x[train], y[train], kind=kind, n_labels=n_labels, strength=strength, class_weight=class_weight,
                ngram=ngram, ngram_weight=weight,
            )  # fmt: skip
            pred[test] = predict(head, x[test], kind)
        losses.append(_loss(kind, y, pred))
    weight, strength = pairs[int(np.argmin(losses))]
    return strength, weight


@dataclass
class CrossValidated:
    predictions: np.ndarray  # out-of-fold: label indices or raw scores
    strengths: list[float]  # the value chosen inside each outer fold
    ngram_weights: list[float]  # the n-gram block weight chosen inside each outer fold
    fold: np.ndarray | None = None  # the outer fold each row was held out in


def cross_validate(
    x: np.ndarray,
    y: np.ndarray,
    *,
    kind: str,
    n_labels: int = 0,
    grid: Sequence[float] = (1.0,),
    folds: int = 5,
    seed: int = 0,
    groups: Sequence[Any] | None = None,
    class_weight: str | None = "balanced",
    ngram: np.ndarray | None = None,
    ngram_weights: Sequence[float] = (1.0,),
) -> CrossValidated:
    """Out-of-fold predictions; with several grid values the choice is made inside each training fold
    (nested), so the figures are not flattered by the choice."""
    pred = np.zeros(len(y))
    fold = np.zeros(len(y), dtype=int)
    chosen: list[float] = []
    chosen_weights: list[float] = []
    group_array = None if groups is None else np.asarray(groups)
    for k, (train, test) in enumerate(_splits(y, kind, folds, seed, groups)):
        fold[test] = k
        inner_groups = None if group_array is None else group_array[train]
        strength, weight = choose_strength(
            x[train],
            y[train],
            kind=kind,
            n_labels=n_labels,
            grid=grid,
            folds=folds,
            seed=seed,
            groups=inner_groups,
            class_weight=class_weight,
            ngram=ngram,
            ngram_weights=ngram_weights,
        )
        head = fit_head(
            x[train], y[train], kind=kind, n_labels=n_labels, strength=strength, class_weight=class_weight,
            ngram=ngram, ngram_weight=weight,
        )  # fmt: skip
        pred[test] = predict(head, x[test], kind)
        chosen.append(strength)
        chosen_weights.append(weight)
    return CrossValidated(pred, chosen, chosen_weights, fold)


def fold_spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation, min and max of one figure across folds."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if not len(arr):
        return {}
    return {
        "mean": round(float(arr.mean()), 4),
        "std": round(float(arr.std(ddof=1)) if len(arr) > 1 else 0.0, 4),
        "min": round(float(arr.min()), 4),
        "max": round(float(arr.max()), 4),
    }


# -- figures --------------------------------------------------------------------------------------


def classifier_figures(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """accuracy, macro and weighted F1, Cohen's kappa, per-label recall and support."""
    gold_arr, pred_arr = np.asarray(gold), np.asarray(pred)
    recall: dict[str, float | None] = {}
    support: dict[str, int] = {}
    f1: dict[str, float] = {}
    for label in labels:
        is_gold, is_pred = gold_arr == label, pred_arr == label
        tp = int(np.sum(is_gold & is_pred))
        support[label] = int(is_gold.sum())
        recall[label] = round(tp / support[label], 4) if support[label] else None
        denom = int(is_gold.sum() + is_pred.sum())
        f1[label] = 2 * tp / denom if denom else 0.0
    present = [label for label in labels if support[label]]
    n = len(gold_arr)
    return {
        "n": n,
        "accuracy": round(float(np.mean(gold_arr == pred_arr)), 4),
        "macro_f1": round(float(np.mean([f1[label] for label in present])), 4),
        "weighted_f1": round(float(sum(f1[label] * support[label] for label in present) / n), 4),
        "kappa": round(cohen_kappa(gold_arr, pred_arr), 4),
        "recall": recall,
        "support": support,
    }


def scorer_figures(gold: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    """MAE and Spearman's rho of judged scores against gold (NaN gold rows are left out)."""
    from scipy.stats import spearmanr

    gold = np.asarray(gold, dtype=float)
    pred = np.asarray(pred, dtype=float)
    ok = ~np.isnan(gold)
    rho = spearmanr(pred[ok], gold[ok])[0] if ok.sum() > 2 else float("nan")
    return {
        "n": int(ok.sum()),
        "mae": round(float(np.mean(np.abs(pred[ok] - gold[ok]))), 4),
        "spearman": None if np.isnan(rho) else round(float(rho), 4),
        "within_1": round(float(np.mean(np.abs(pred[ok] - gold[ok]) <= 1.0)), 4),
    }
