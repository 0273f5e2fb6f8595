"""Reliability statistics: pure functions over arrays and DataFrames (no I/O, no globals).

Every statistic returns an `Estimate`; an undefined statistic has ``value=None`` and a ``note``.
"""

from mheval.stats.agreement import (
    PairEstimate,
    Pairwise,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_kappa,
)
from mheval.stats.corrected import CorrectedEstimate, corrected_mean, corrected_unsafe_rate, rogan_gladen
from mheval.stats.correlation import (
    BlandAltman,
    bias,
    bland_altman,
    lin_ccc,
    mae,
    pearson,
    rmse,
    spearman,
    within,
)
from mheval.stats.design import neyman_allocation, ratings_to_halve
from mheval.stats.icc import ICC_KINDS, icc, icc_bootstrap_ci, pairwise_icc
from mheval.stats.intervals import Estimate, bootstrap_mean_ci, t_mean_ci, wilson
from mheval.stats.reliability import (
    GOOD_WIDTH,
    MODERATE_WIDTH,
    Assessment,
    HumanRange,
    assess,
    human_range,
    leniency,
    width_verdict,
)

__all__ = [
    "GOOD_WIDTH",
    "ICC_KINDS",
    "MODERATE_WIDTH",
    "Assessment",
    "BlandAltman",
    "CorrectedEstimate",
    "Estimate",
    "HumanRange",
    "PairEstimate",
    "Pairwise",
    "assess",
    "bias",
    "bland_altman",
    "bootstrap_mean_ci",
    "cohen_kappa",
    "corrected_mean",
    "corrected_unsafe_rate",
    "fleiss_kappa",
    "human_range",
    "icc",
    "icc_bootstrap_ci",
    "krippendorff_alpha",
    "leniency",
    "lin_ccc",
    "mae",
    "neyman_allocation",
    "pairwise_icc",
    "pairwise_kappa",
    "pearson",
    "ratings_to_halve",
    "rmse",
    "rogan_gladen",
    "spearman",
    "t_mean_ci",
    "width_verdict",
    "wilson",
    "within",
]
