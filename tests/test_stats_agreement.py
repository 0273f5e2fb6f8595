"""Cohen's kappa, Fleiss' kappa and Krippendorff's alpha against reference implementations."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from mheval.stats import Estimate, cohen_kappa, fleiss_kappa, krippendorff_alpha, pairwise_kappa

TOL = 1e-9


def _with_missing(arr: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    out = arr.astype(float)
    out[rng.random(arr.shape) < rate] = np.nan
    return out


# --------------------------------------------------------------------------- Cohen


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_matches_sklearn_on_complete_pairs(seed: int, weights: str | None) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, 120)
    b = np.clip(a + rng.integers(-2, 3, 120), 1, 5)
    a_m, b_m = _with_missing(a, 0.15, rng), _with_missing(b, 0.15, rng)
    ok = ~np.isnan(a_m) & ~np.isnan(b_m)
    ours = cohen_kappa(a_m, b_m, weights, n_boot=0)
    ref = cohen_kappa_score(a_m[ok], b_m[ok], weights=weights)
    assert ours.value == pytest.approx(ref, abs=TOL)
    assert ours.n == ok.sum()


def test_cohen_string_labels_and_none_as_missing() -> None:
    a = ["x", "y", None, "z", "x", "y", "y", "z"]
    b = ["x", "y", "z", None, "y", "y", "x", "z"]
    ours = cohen_kappa(a, b, n_boot=0)
    keep = [i for i in range(8) if a[i] is not None and b[i] is not None]
    ref = cohen_kappa_score([a[i] for i in keep], [b[i] for i in keep])
    assert ours.value == pytest.approx(ref, abs=TOL)
    assert ours.n == 6


def test_cohen_label_outside_labels_raises_where_sklearn_drops_it() -> None:
    # scikit-learn silently ignores items whose labels are not listed; that hides typos, so we refuse.
    a, b = [1, 2, 3, 9], [1, 2, 3, 1]
    assert cohen_kappa_score(a, b, labels=[1, 2, 3]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outside labels"):
        cohen_kappa(a, b, labels=[1, 2, 3])


def test_weights_follow_label_positions_so_full_scale_matters() -> None:
    # Nobody used 3: with observed categories only, 2 and 4 are adjacent; with the full scale they are not.
    a = [1, 2, 4, 5, 2, 4, 1, 5]
    b = [2, 4, 4, 5, 1, 2, 1, 4]
    observed = cohen_kappa(a, b, "linear", n_boot=0).value
    full = cohen_kappa(a, b, "linear", labels=[1, 2, 3, 4, 5], n_boot=0).value
    assert observed == pytest.approx(cohen_kappa_score(a, b, weights="linear"), abs=TOL)
    assert full == pytest.approx(cohen_kappa_score(a, b, weights="linear", labels=[1, 2, 3, 4, 5]), abs=TOL)
    assert observed != pytest.approx(full)


def test_cohen_bootstrap_interval_is_seeded_and_brackets_value() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, 200)
    b = np.where(rng.random(200) < 0.7, a, rng.integers(0, 3, 200))
    e1 = cohen_kappa(a, b, seed=11)
    e2 = cohen_kappa(a, b, seed=11)
    e3 = cohen_kappa(a, b, seed=12)
    assert e1 == e2
    assert e1.ci_low != e3.ci_low
    assert e1.ci_low < e1.value < e1.ci_high
    assert "bootstrap" in e1.method


def test_cohen_degenerate_inputs_give_value_none_with_note() -> None:
    single = cohen_kappa(["a"] * 5, ["a"] * 5)
    assert single.value is None and "single category" in single.note
    nothing = cohen_kappa([None, 1.0], [2.0, None])
    assert nothing.value is None and "both" in nothing.note
    assert cohen_kappa([], []).value is None
    with pytest.raises(ValueError, match="differ in length"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([1, 2], [1, 2], weights="cubic")


def _kappa_from_agreement(a: list, b: list) -> float:
    """The bare (po - pe) / (1 - pe) training.fit computed on its own before it called cohen_kappa."""
    cats = sorted(set(map(str, a)) | set(map(str, b)))
    table = np.zeros((len(cats), len(cats)))
    for x, y in zip(a, b, strict=True):
        table[cats.index(str(x)), cats.index(str(y))] += 1
    n = table.sum()
    observed, expected = np.trace(table) / n, float((table.sum(0) * table.sum(1)).sum()) / n**2
    return 1.0 if expected == 1.0 else float((observed - expected) / (1.0 - expected))


@pytest.mark.parametrize(
    ("a", "b", "value"),
    [
        (["a", "b", "a"], ["a", "b", "b"], 0.4),
        (["SI", "SI", "none", "SH", "none", "SI"], ["SI", "none", "none", "SH", "SI", "SI"], 5 / 11),
        ([0.0, 1.0, 2.0, 1.0, 0.0, 2.0, 2.0], [0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 0.0], 4 / 11),
        (["x"] * 5, ["x"] * 5, 1.0),  # one shared label: total agreement for model selection
        (["x"] * 5, ["y"] * 5, 0.0),
    ],
)
def test_training_kappa_is_this_kappa(a: list, b: list, value: float) -> None:
    """training.fit.cohen_kappa (model selection, training figures) is this module's point estimate, with the
    numbers it gave when it computed kappa itself."""
    from mheval.training.fit import cohen_kappa as training_kappa

    assert training_kappa(a, b) == pytest.approx(value, abs=TOL)
    assert training_kappa(a, b) == pytest.approx(_kappa_from_agreement(a, b), abs=TOL)
    if len(set(a) | set(b)) > 1:
        assert training_kappa(a, b) == pytest.approx(cohen_kappa(a, b, n_boot=0).value, abs=TOL)


def test_one_kappa_implementation() -> None:
    """training.fit's kappa is this module's function under its old name, not a second computation."""
    from mheval.stats.agreement import cohen_kappa_point
    from mheval.training.fit import cohen_kappa as training_kappa

    assert training_kappa is cohen_kappa_point


def test_training_kappa_keeps_its_figures_on_random_labels() -> None:
    from mheval.training.fit import cohen_kappa as training_kappa

    rng = np.random.default_rng(0)
    for _ in range(200):
        n, k = int(rng.integers(2, 40)), int(rng.integers(2, 5))
        a = rng.integers(0, k, n).astype(float)
        b = np.where(rng.random(n) < 0.6, a, rng.integers(0, k, n).astype(float))
        assert training_kappa(a, b) == pytest.approx(_kappa_from_agreement(list(a), list(b)), abs=1e-12)


# --------------------------------------------------------------------------- Fleiss


@pytest.mark.parametrize("seed", range(4))
def test_fleiss_matches_statsmodels_on_complete_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, 80)
    ratings = np.where(rng.random((80, 5)) < 0.6, truth[:, None], rng.integers(0, 4, (80, 5)))
    table, _ = aggregate_raters(ratings)
    assert fleiss_kappa(ratings, n_boot=0).value == pytest.approx(sm_fleiss(table), abs=TOL)


def _fleiss_by_hand(ratings: np.ndarray) -> float:
    """The documented generalisation, written item by item."""
    rows = [r[~pd.isna(r)] for r in ratings]
    rows = [r for r in rows if len(r) >= 2]
    cats = sorted({v for r in rows for v in r})
    p_items = []
    for r in rows:
        m = len(r)
        p_items.append(sum((r == c).sum() * ((r == c).sum() - 1) for c in cats) / (m * (m - 1)))
    total = sum(len(r) for r in rows)
    p_e = sum((sum((r == c).sum() for r in rows) / total) ** 2 for c in cats)
    return (np.mean(p_items) - p_e) / (1 - p_e)


def test_fleiss_with_missing_uses_documented_generalisation() -> None:
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 3, 60)
    ratings = np.where(rng.random((60, 4)) < 0.7, truth[:, None], rng.integers(0, 3, (60, 4))).astype(float)
    ratings[rng.random(ratings.shape) < 0.25] = np.nan
    assert fleiss_kappa(ratings, n_boot=0).value == pytest.approx(_fleiss_by_hand(ratings), abs=TOL)


def test_fleiss_drops_items_with_fewer_than_two_ratings() -> None:
    base = np.array([["a", "a", "b"], ["b", "b", "b"], ["a", "b", "a"], ["c", "c", "a"]], dtype=object)
    extra = np.vstack([base, [["c", None, None]]])
    before = fleiss_kappa(base, n_boot=0)
    after = fleiss_kappa(extra, n_boot=0)
    assert after.value == pytest.approx(before.value, abs=TOL)
    assert after.n == 4


def test_fleiss_degenerate() -> None:
    assert fleiss_kappa([["x", "x"], ["x", "x"]]).value is None
    one_rater = fleiss_kappa([["x"], ["y"], ["x"]])
    assert one_rater.value is None and "two or more" in one_rater.note
    assert fleiss_kappa([[None, None], [np.nan, None]]).value is None
    with pytest.raises(ValueError, match="2-D"):
        fleiss_kappa(["x", "y"])


# --------------------------------------------------------------------------- Krippendorff


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
@pytest.mark.parametrize("seed", range(4))
def test_alpha_matches_krippendorff_package_with_missing(level: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, 70)
    ratings = np.clip(truth[:, None] + rng.integers(-1, 2, (70, 4)), 1, 5).astype(float)
    ratings[rng.random(ratings.shape) < 0.3] = np.nan
    ours = krippendorff_alpha(ratings, level, n_boot=0)  # items x raters
    ref = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level)  # raters x items
    assert ours.value == pytest.approx(ref, abs=TOL)


def test_alpha_interval_on_continuous_values() -> None:
    rng = np.random.default_rng(5)
    ratings = rng.normal(size=(40, 3)) + rng.normal(size=(40, 1)) * 2 + 100
    ratings[rng.random(ratings.shape) < 0.2] = np.nan
    ref = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement="interval")
    assert krippendorff_alpha(ratings, "interval", n_boot=0).value == pytest.approx(ref, abs=TOL)


def test_alpha_nominal_on_strings_equals_coded_package_result() -> None:
    labels = np.array([["x", "y", None], ["y", "y", "y"], ["z", "x", "z"], ["x", "x", None], ["y", "z", "y"]])
    coded = np.vectorize(lambda v: {"x": 0, "y": 1, "z": 2}.get(v, np.nan), otypes=[float])(labels)
    ref = krippendorff.alpha(reliability_data=coded.T, level_of_measurement="nominal")
    assert krippendorff_alpha(labels, n_boot=0).value == pytest.approx(ref, abs=TOL)


def test_alpha_degenerate_and_bad_arguments() -> None:
    same = krippendorff_alpha([[3, 3], [3, 3], [3, None]])
    assert same.value is None and "same value" in same.note
    lonely = krippendorff_alpha([[1, None], [None, 2]])
    assert lonely.value is None and lonely.n == 0
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[1, 2]], level="ratio")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="numeric"):
        krippendorff_alpha([["a", "b"]], level="interval")


# --------------------------------------------------------------------------- pairwise


def test_pairwise_kappa_pairs_equal_single_calls_and_mean_has_interval() -> None:
    rng = np.random.default_rng(9)
    truth = rng.integers(0, 3, 90)
    mat = np.where(rng.random((90, 3)) < 0.7, truth[:, None], rng.integers(0, 3, (90, 3))).astype(float)
    mat[rng.random(mat.shape) < 0.1] = np.nan
    frame = pd.DataFrame(mat, columns=["A", "B", "C"])
    pw = pairwise_kappa(frame, seed=4)
    assert [(p.a, p.b) for p in pw.pairs] == [("A", "B"), ("A", "C"), ("B", "C")]
    for p in pw.pairs:
        single = cohen_kappa(frame[p.a], frame[p.b], seed=4)
        assert p.estimate == single
    assert pw.mean.value == pytest.approx(np.mean(pw.values), abs=TOL)
    assert pw.mean.ci_low < pw.mean.value < pw.mean.ci_high
    assert pw.low == min(pw.values) and pw.high == max(pw.values)
    against = pairwise_kappa(frame, against="C", n_boot=0)
    assert [(p.a, p.b) for p in against.pairs] == [("C", "A"), ("C", "B")]
    with pytest.raises(ValueError, match="not a column"):
        pairwise_kappa(frame, against="Z")


def test_estimate_is_frozen_and_serialisable() -> None:
    est = cohen_kappa([1, 2, 1, 2], [1, 2, 2, 2], n_boot=50)
    with pytest.raises(AttributeError):
        est.value = 0.0  # type: ignore[misc]
    d = est.to_dict()
    assert set(d) >= {"value", "ci_low", "ci_high", "n", "method", "note", "width"}
    assert isinstance(est, Estimate)
