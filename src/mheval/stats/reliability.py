"""Can this judge stand in for a human rater? Verdicts built from agreement estimates.

Three questions per judge x dimension:

1. **How precisely do we know its agreement?** MentalAlign's rule grades the width of the 95%
   interval of the agreement statistic: Good if width <= 0.355, Moderate if <= 0.560, Poor above.
   (MentalAlign applies it to ICC intervals; we apply the same thresholds to whatever headline
   statistic is given, kappa included, and say which in the result.)
2. **Is it lenient?** The judge inflates when the bias (judge minus human) is above zero and its
   interval excludes zero; it deflates in the mirror case.
3. **Is it within human disagreement?** Its agreement with humans is compared with the range
   (min..max) of the human-vs-human pairwise agreements: ``position`` says below / within / above,
   ``ci_overlap`` says whether the judge's interval reaches into that range (or above it), and
   ``within_human_range`` is True when the judge's value is at least the lowest human pair's, i.e.
   the judge disagrees with humans no more than some humans disagree with each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mheval.stats.intervals import Estimate

GOOD_WIDTH = 0.355
MODERATE_WIDTH = 0.560

Verdict = Literal["Good", "Moderate", "Poor"]
Leniency = Literal["inflates", "deflates", "no clear bias"]


def width_verdict(estimate: Estimate, *, good: float = GOOD_WIDTH, moderate: float = MODERATE_WIDTH) -> Verdict | None:
    """Good / Moderate / Poor from the interval width; None when there is no interval."""
    width = estimate.width
    if estimate.value is None or width is None:
        return None
    if width <= good:
        return "Good"
    if width <= moderate:
        return "Moderate"
    return "Poor"


def width_verdicts(estimates: Mapping[str, Estimate]) -> dict[str, Verdict | None]:
    """`width_verdict` of each named estimate (e.g. both ICC(C,1) and ICC(A,1), as MentalAlign reports)."""
    return {name: width_verdict(est) for name, est in estimates.items()}


def leniency(bias: Estimate) -> Leniency | None:
    """Direction of a judge-minus-human bias that its interval supports; None without an interval."""
    if bias.value is None or bias.ci_low is None or bias.ci_high is None:
        return None
    if bias.value > 0 and bias.ci_low > 0:
        return "inflates"
    if bias.value < 0 and bias.ci_high < 0:
        return "deflates"
    return "no clear bias"


@dataclass(frozen=True)
class HumanRange:
    """Where a judge's agreement sits relative to human-vs-human agreement."""

    low: float | None
    high: float | None
    n_pairs: int
    position: Literal["below", "within", "above"] | None
    ci_overlap: bool | None
    within_human_range: bool | None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def human_range(judge: Estimate, humans: Sequence[Estimate]) -> HumanRange:
    """Compare a judge-vs-human agreement with the human-vs-human pairwise agreements."""
    vals = [h.value for h in humans if h.value is not None]
    if not vals:
        return HumanRange(None, None, 0, None, None, None, "no defined human-vs-human agreement")
    low, high = min(vals), max(vals)
    if judge.value is None:
        return HumanRange(low, high, len(vals), None, None, None, "judge agreement is undefined")
    position: Literal["below", "within", "above"]
    position = "below" if judge.value < low else "above" if judge.value > high else "within"
    overlap = None if judge.ci_high is None else judge.ci_high >= low
    return HumanRange(low, high, len(vals), position, overlap, judge.value >= low)


@dataclass(frozen=True)
class Assessment:
    """The verdicts for one judge on one dimension (or label set)."""

    judge: str
    dimension: str | None
    statistic: str
    agreement: Estimate
    verdict: Verdict | None
    bias: Estimate | None
    leniency: Leniency | None
    human: HumanRange | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "dimension": self.dimension,
            "statistic": self.statistic,
            "agreement": self.agreement.to_dict(),
            "verdict": self.verdict,
            "bias": self.bias.to_dict() if self.bias else None,
            "leniency": self.leniency,
            "human_range": self.human.to_dict() if self.human else None,
        }


def assess(
    judge: str,
    dimension: str | None,
    statistic: str,
    agreement: Estimate,
    *,
    bias: Estimate | None = None,
    human: Sequence[Estimate] = (),
) -> Assessment:
    """All three verdicts for one judge x dimension; ``human`` holds the human pairwise estimates."""
    return Assessment(
        judge=judge,
        dimension=dimension,
        statistic=statistic,
        agreement=agreement,
        verdict=width_verdict(agreement),
        bias=bias,
        leniency=leniency(bias) if bias is not None else None,
        human=human_range(agreement, human) if human else None,
    )


__all__ = [
    "GOOD_WIDTH",
    "MODERATE_WIDTH",
    "Assessment",
    "HumanRange",
    "assess",
    "human_range",
    "leniency",
    "width_verdict",
    "width_verdicts",
]
