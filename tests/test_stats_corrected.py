"""Judge-error-corrected estimates: PPI / PPI++ against ppi_py, stratified and weighted designs, Rogan-Gladen,
coverage by simulation, allocation and the ratings that would halve an interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mheval.stats.corrected import corrected_mean, corrected_unsafe_rate, rogan_gladen, tuned_lambda
from mheval.stats.design import inclusion_probabilities, neyman_allocation, ratings_to_halve

ppi_py = pytest.importorskip("ppi_py")

TOL = 1e-6


def _biased_judge(rng: np.random.Generator, n_units: int, rate: float, false_alarm: float = 0.2):
    """Truth ~ Bernoulli(rate); the judge calls 20% of the safe units unsafe (errors in one direction)."""
    truth = (rng.random(n_units) < rate).astype(float)
    judge = truth.copy()
    judge[(truth == 0) & (rng.random(n_units) < false_alarm)] = 1.0
    return truth, judge


def _rated(rng: np.random.Generator, truth: np.ndarray, n: int) -> np.ndarray:
    human = np.full(truth.size, np.nan)
    idx = rng.choice(truth.size, n, replace=False)
    human[idx] = truth[idx]
    return human


def _scores(rng: np.random.Generator, n_units: int):
    """A 1-5 human score and a judge that is noisy and lenient by half a point."""
    truth = np.clip(np.round(rng.normal(3.2, 1.0, n_units)), 1, 5)
    judge = np.clip(truth + 0.5 + rng.normal(0, 0.8, n_units), 1, 5)
    return truth, judge


# ----------------------------------------------------------------------------------------- reference


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
def test_matches_ppi_py(seed: int, lam: float | None) -> None:
    rng = np.random.default_rng(seed)
    if seed % 2:
        truth, judge = _biased_judge(rng, 1500, 0.15)
    else:
        truth, judge = _scores(rng, 800)
    human = _rated(rng, truth, 60 + 25 * seed)
    rated = np.isfinite(human)
    y, yhat, yhat_u = human[rated], judge[rated], judge[~rated]
    ours = corrected_mean(judge, human, lam=lam)
    point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam))[0])
    lo, hi = (float(np.ravel(v)[0]) for v in ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=lam))
    assert ours.corrected == pytest.approx(point, abs=TOL)
    assert ours.ci is not None
    assert ours.ci[0] == pytest.approx(lo, abs=TOL)
    assert ours.ci[1] == pytest.approx(hi, abs=TOL)
    assert ours.n_human == int(rated.sum()) and ours.n_judged == judge.size
    assert ours.judge_only == pytest.approx(judge.mean())
    assert ours.human_only == pytest.approx(y.mean())
    assert ours.method == {None: "ppi++", 1.0: "ppi", 0.0: "human-only"}.get(lam, "ppi (lambda=0.4)")


def test_stratified_is_ppi_py_per_stratum_weighted_by_size() -> None:
    rng = np.random.default_rng(7)
    truth, judge = _scores(rng, 3000)
    strata = np.where(judge >= 3.5, "high", "low")
    human = np.full(truth.size, np.nan)
    # Oversample the stratum the judge scored high: 80 of it, 40 of the other.
    for label, k in (("high", 80), ("low", 40)):
        idx = rng.choice(np.flatnonzero(strata == label), k, replace=False)
        human[idx] = truth[idx]
    ours = corrected_mean(judge, human, strata=strata)
    z = 1.959963984540054
    value = var = 0.0
    for label in ("high", "low"):
        here = strata == label
        r = here & np.isfinite(human)
        u = here & ~np.isfinite(human)
        w = here.sum() / judge.size
        point = float(np.ravel(ppi_py.ppi_mean_pointestimate(truth[r], judge[r], judge[u], lam=None))[0])
        lo, hi = (float(np.ravel(v)[0]) for v in ppi_py.ppi_mean_ci(truth[r], judge[r], judge[u], alpha=0.05))
        value += w * point
        var += w * w * ((hi - lo) / (2 * z)) ** 2
    assert ours.corrected == pytest.approx(value, abs=TOL)
    assert ours.ci is not None
    assert ours.ci[0] == pytest.approx(value - z * math.sqrt(var), abs=TOL)
    assert ours.method == "stratified ppi++"


def test_strata_by_the_judges_verdict_give_the_stratified_human_mean() -> None:
    """Within a stratum of one verdict the judge is constant, so each stratum's estimate is its humans' mean."""
    rng = np.random.default_rng(8)
    truth, judge = _biased_judge(rng, 3000, 0.1)
    human = np.full(truth.size, np.nan)
    for flag, k in ((1.0, 80), (0.0, 40)):
        idx = rng.choice(np.flatnonzero(judge == flag), k, replace=False)
        human[idx] = truth[idx]
    ours = corrected_mean(judge, human, strata=judge)
    expected = sum((judge == f).mean() * np.nanmean(human[judge == f]) for f in (0.0, 1.0))
    assert ours.corrected == pytest.approx(expected, abs=TOL)
    assert ours.human_only == pytest.approx(expected, abs=TOL)


def test_tuned_lambda_is_ppi_py_formula() -> None:
    rng = np.random.default_rng(3)
    truth, judge = _scores(rng, 500)
    y, fl, fu = truth[:80], judge[:80], judge[80:]
    cov = np.mean((y - y.mean()) * (fl - fl.mean()))
    expected = cov / ((1 + 80 / 420) * np.var(np.concatenate([fl, fu]), ddof=1))
    assert tuned_lambda(y, fl, fu)[0] == pytest.approx(min(max(expected, 0), 1))


# ----------------------------------------------------------------------------------------- coverage


def _covers(est, value: float) -> bool:
    return est.ci is not None and est.ci[0] <= value <= est.ci[1]


def test_coverage_with_a_judge_wrong_in_one_direction() -> None:
    """Judge-only misses the truth; PPI++ from 150 ratings covers it in about 95% of runs."""
    rng = np.random.default_rng(2024)
    rate, reps = 0.12, 400
    hits = {"ppi++": 0, "ppi": 0, "rg": 0, "judge": 0, "stratified": 0}
    for _ in range(reps):
        truth, judge = _biased_judge(rng, 2000, rate)
        human = _rated(rng, truth, 150)
        est = corrected_unsafe_rate(judge, human)
        hits["ppi++"] += _covers(est, rate)
        hits["judge"] += est.judge_only_ci is not None and est.judge_only_ci[0] <= rate <= est.judge_only_ci[1]
        hits["ppi"] += _covers(corrected_mean(judge, human, lam=1.0), rate)
        hits["rg"] += _covers(rogan_gladen(judge, human), rate)
        # A design that rates 100 flagged and 50 unflagged units, estimated per stratum.
        strat = np.full(truth.size, np.nan)
        for flag, k in ((1.0, 100), (0.0, 50)):
            idx = rng.choice(np.flatnonzero(judge == flag), k, replace=False)
            strat[idx] = truth[idx]
        hits["stratified"] += _covers(corrected_unsafe_rate(judge, strat, strata=judge), rate)
    cover = {k: v / reps for k, v in hits.items()}
    assert cover["judge"] < 0.05, cover
    for key in ("ppi++", "ppi", "rg", "stratified"):
        assert 0.91 <= cover[key] <= 0.985, (key, cover)


def test_naive_mean_of_an_oversampled_design_is_biased_but_weights_fix_it() -> None:
    rng = np.random.default_rng(11)
    rate, reps = 0.1, 300
    naive, weighted, covered = [], [], 0
    for _ in range(reps):
        truth, judge = _biased_judge(rng, 2000, rate)
        # Poisson sampling: a flagged unit is rated with probability 0.3, another with 0.03.
        prob = np.where(judge == 1, 0.3, 0.03)
        chosen = rng.random(truth.size) < prob
        human = np.where(chosen, truth, np.nan)
        naive.append(np.nanmean(human))
        est = corrected_unsafe_rate(judge, human, inclusion=prob)
        weighted.append(est.corrected)
        covered += _covers(est, rate)
    assert np.mean(naive) > rate + 0.1  # the rated set is mostly flagged units
    assert abs(np.mean(weighted) - rate) < 0.005
    assert 0.91 <= covered / reps <= 0.985


# ----------------------------------------------------------------------------------------- edge cases


def test_no_human_ratings_is_undefined_with_a_reason() -> None:
    est = corrected_mean([1, 0, 1, 1], [np.nan] * 4)
    assert est.corrected is None and est.ci is None and est.human_only is None
    assert est.judge_only == 0.75 and est.n_human == 0 and est.n_judged == 4
    assert est.note is not None and "no human ratings" in est.note


def test_one_rating_has_no_interval() -> None:
    est = corrected_mean([1, 0, 1, 1], [1, np.nan, np.nan, np.nan])
    assert est.corrected is None and est.human_only == 1.0
    assert est.note is not None and "one human rating" in est.note


def test_constant_judge_falls_back_to_the_humans() -> None:
    human = np.array([1, 0, 0, 1, np.nan, np.nan, np.nan, np.nan])
    est = corrected_mean(np.ones(8), human)
    assert est.lam == 0.0 and est.corrected == pytest.approx(0.5)
    assert est.note is not None and "same output" in est.note
    assert np.isfinite(est.ci).all()


def test_every_unit_rated_is_the_human_mean() -> None:
    est = corrected_mean([1, 0, 1, 0], [1, 0, 0, 0])
    assert est.corrected == pytest.approx(0.25)
    assert est.note is not None and "every judged unit" in est.note


def test_unjudged_units_are_left_out_and_counted() -> None:
    est = corrected_mean([1, np.nan, 0, 1, 0], [1, 1, 0, np.nan, np.nan])
    assert est.n_judged == 4 and est.n_human == 2
    assert est.note is not None and "1 unit(s) without a judge output" in est.note


def test_stratum_without_two_ratings_is_undefined() -> None:
    judge = np.array([1, 1, 1, 0, 0, 0])
    human = np.array([1, 0, np.nan, 0, np.nan, np.nan])
    est = corrected_mean(judge, human, strata=judge)
    assert est.corrected is None
    assert est.note is not None and "fewer than 2" in est.note and "0 (1)" in est.note


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        corrected_mean([1, 0], [1])
    with pytest.raises(ValueError):
        corrected_mean([1, 0], [1, 0], strata=[0, 1], inclusion=[1, 1])
    with pytest.raises(ValueError):
        corrected_mean([1, 0], [1, np.nan], inclusion=[0.0, 1.0])
    with pytest.raises(ValueError):
        corrected_mean([1, 0], [1, 0], lam=2.0)
    with pytest.raises(ValueError):
        rogan_gladen([0.5, 1], [1, 0])


def test_rate_is_clipped_to_the_unit_interval() -> None:
    judge = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1], dtype=float)
    human = np.array([0, 0, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, 1, 1])
    est = corrected_unsafe_rate(judge, human)
    assert est.ci is not None and 0 <= est.ci[0] <= est.ci[1] <= 1


# ----------------------------------------------------------------------------------------- Rogan-Gladen


def test_rogan_gladen_by_hand() -> None:
    # 10 rated: 4 human positives (judge says 3 of them), 6 negatives (judge says 1 of them); 40 unrated.
    judge = np.array([1, 1, 1, 0] + [1, 0, 0, 0, 0, 0] + [1] * 12 + [0] * 28, dtype=float)
    human = np.array([1, 1, 1, 1] + [0] * 6 + [np.nan] * 40)
    est = rogan_gladen(judge, human)
    p, q1, q0 = 16 / 50, 3 / 4, 5 / 6
    theta = (p + q0 - 1) / (q0 + q1 - 1)
    se = math.sqrt(p * (1 - p) / 50 + (1 - theta) ** 2 * q0 * (1 - q0) / 6 + theta**2 * q1 * (1 - q1) / 4)
    se /= q0 + q1 - 1
    assert est.corrected == pytest.approx(theta)
    assert est.ci is not None
    assert est.ci[0] == pytest.approx(max(0.0, theta - 1.959963984540054 * se))
    assert est.ci[1] == pytest.approx(min(1.0, theta + 1.959963984540054 * se))
    assert est.judge_only == pytest.approx(p) and est.human_only == pytest.approx(0.4)
    assert est.method == "rogan-gladen"


def test_rogan_gladen_undefined_when_the_judge_is_no_better_than_chance() -> None:
    judge = np.array([0, 1, 0, 1, 1, 0], dtype=float)
    human = np.array([1, 0, 1, 0, np.nan, np.nan])  # the judge is always wrong: q0 + q1 = 0
    est = rogan_gladen(judge, human)
    assert est.corrected is None and est.ci is None
    assert est.note is not None and "<= 1" in est.note


def test_rogan_gladen_needs_both_classes() -> None:
    est = rogan_gladen([1, 0, 1, 0], [0, 0, np.nan, np.nan])
    assert est.corrected is None and est.note is not None and "no unit rated positive" in est.note


# ----------------------------------------------------------------------------------------- design


def test_neyman_allocation() -> None:
    alloc = neyman_allocation([1000, 100, 10], [0.1, 0.5, 0.5], 100)
    assert alloc.sum() == 100
    # Proportional to N*S = 100, 50, 5 with at least 2 each: about 64, 32, 3-4.
    assert alloc[0] > alloc[1] > alloc[2] >= 2
    assert abs(alloc[0] - 100 * 100 / 155) <= 2
    capped = neyman_allocation([5, 1000], [1.0, 0.01], 50)
    assert capped[0] == 5 and capped.sum() == 50
    assert neyman_allocation([3, 3], [0, 0], 100).tolist() == [3, 3]
    assert neyman_allocation([10, 10, 0], [0.2, 0.2, 0.3], 3).sum() == 3
    assert inclusion_probabilities([10, 0], [5, 0]).tolist() == [0.5, 0.0]


def test_neyman_beats_proportional_on_a_skewed_judge() -> None:
    rng = np.random.default_rng(5)
    widths: dict[str, list[float]] = {"neyman": [], "proportional": []}
    for _ in range(60):
        truth, judge = _biased_judge(rng, 3000, 0.05)
        sizes = np.array([(judge == 0).sum(), (judge == 1).sum()])
        # Pilot spreads: the judge rarely misses (flag 0) and is often wrong when it flags (flag 1).
        for name, spreads in (("neyman", [0.05, 0.5]), ("proportional", [1.0, 1.0])):
            alloc = neyman_allocation(sizes, spreads, 150)
            human = np.full(truth.size, np.nan)
            for flag, k in zip((0.0, 1.0), alloc, strict=True):
                idx = rng.choice(np.flatnonzero(judge == flag), int(k), replace=False)
                human[idx] = truth[idx]
            widths[name].append(corrected_unsafe_rate(judge, human, strata=judge).width or np.inf)
    assert np.median(widths["neyman"]) < 0.9 * np.median(widths["proportional"])


def test_ratings_to_halve_does_halve() -> None:
    rng = np.random.default_rng(9)
    truth, judge = _scores(rng, 20000)
    first = [corrected_mean(judge, _rated(rng, truth, 100)) for _ in range(20)]
    more = [ratings_to_halve(e) for e in first]
    assert all(m is not None and 250 < m < 450 for m in more)  # about 3 x 100 when the human part dominates
    extra = int(np.mean([m for m in more if m is not None]))
    widths = [corrected_mean(judge, _rated(rng, truth, 100 + extra)).width for _ in range(20)]
    assert np.mean(widths) == pytest.approx(np.mean([e.width for e in first]) / 2, rel=0.1)


def test_ratings_to_halve_none_when_the_judge_part_dominates() -> None:
    from mheval.stats.corrected import CorrectedEstimate

    est = CorrectedEstimate(0.5, 0.5, 0.5, (0.4, 0.6), 50, 100, "ppi++", var_human=1e-4, var_judge=1e-3)
    assert ratings_to_halve(est) is None
    assert ratings_to_halve(corrected_mean([1, 0], [np.nan, np.nan])) is None
