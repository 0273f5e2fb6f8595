"""A study's progress and its live human-human agreement, computed on the units rated so far."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mheval.annotate.study import Study
from mheval.labels import CONVERSATION_FLOW
from mheval.stats.agreement import cohen_kappa, krippendorff_alpha
from mheval.stats.corrected import CorrectedEstimate
from mheval.stats.intervals import Estimate

FAST_SECONDS_PER_QUESTION = 2.0
"""A median below this many seconds per question on a unit is flagged: reading a reply in a crisis conversation
and answering takes longer than that (the browser test's scripted rater needs under a second and is flagged)."""


@dataclass
class RaterStatus:
    rater: str
    done: int
    assigned: int
    median_seconds: float | None
    too_fast: bool


@dataclass
class QuestionAgreement:
    question: str
    level: str  # nominal or ordinal
    units: int  # units rated by two or more raters
    alpha: Estimate
    pairs: list[tuple[str, str, Estimate]] = field(default_factory=list)  # Cohen's kappa (weighted when ordinal)


@dataclass
class Precision:
    """The corrected estimate of the study's headline measure now, and what would halve its interval."""

    measure: str
    judge: str
    estimate: CorrectedEstimate
    more_to_halve: int | None  # further human-rated units (None: more ratings cannot halve it)
    left_to_rate: int  # judged units no human has rated yet

    def to_dict(self) -> dict[str, Any]:
        return {"measure": self.measure, "judge": self.judge, "estimate": self.estimate.to_dict(),
                "more_to_halve": self.more_to_halve, "left_to_rate": self.left_to_rate}  # fmt: skip

    def sentence(self) -> str:
        e = self.estimate
        if e.ci is None or e.corrected is None:
            return f"{self.measure} ({self.judge}): no corrected estimate yet ({e.note})"
        head = (f"{self.measure} ({self.judge}): {e.corrected:.3f} [{e.ci[0]:.3f}, {e.ci[1]:.3f}] from {e.n_human} "
                f"rated of {e.n_judged} judged ({e.method})")  # fmt: skip
        if self.more_to_halve is None:
            return head + "; more ratings alone cannot halve this interval (the judge's own part dominates)"
        tail = f"; about {self.more_to_halve} more rated units would halve the interval"
        if self.more_to_halve > self.left_to_rate:
            tail += f" (only {self.left_to_rate} judged units are left unrated)"
        return head + tail


@dataclass
class StudyStatus:
    study: str
    protocol: str
    units: int
    raters: list[RaterStatus]
    agreement: list[QuestionAgreement]
    precision: list[Precision] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "protocol": self.protocol,
            "units": self.units,
            "raters": [r.__dict__ for r in self.raters],
            "precision": [p.to_dict() for p in self.precision],
            "agreement": [
                {
                    "question": a.question,
                    "level": a.level,
                    "units": a.units,
                    "alpha": a.alpha.to_dict(),
                    "pairs": [{"a": x, "b": y, "kappa": k.to_dict()} for x, y, k in a.pairs],
                }
                for a in self.agreement
            ],
        }


def study_status(run_dir: str | Path, study: str | None = None) -> StudyStatus:
    s = Study.open(run_dir, study)
    try:
        s.add_units()  # units the run gained since are planned before counting
        raters = []
        for rater in s.raters():
            done, assigned = s.progress(rater)
            times = s.seconds_per_unit(rater)
            median = statistics.median(times) if times else None
            questions = len(s.form_for("en", None).questions) or 1
            too_fast = median is not None and median < FAST_SECONDS_PER_QUESTION * questions
            raters.append(RaterStatus(rater, done, assigned, median, too_fast))
        rated = list(s.rated())
        units = sorted({key for _, key, _, _, _ in rated})
        names = s.raters()
        agreement = []
        for q in s.form_for("en", None).questions:
            # As `agree` reads them: numbers (binary and scale answers) are ordinal, labels nominal.
            level = "nominal" if q.kind == "choice" and s.protocol != CONVERSATION_FLOW else "ordinal"
            order = [o.value for o in q.options]
            matrix = np.full((len(units), len(names)), None, dtype=object)
            index = {u: i for i, u in enumerate(units)}
            for rater, key, _, _, answers in rated:
                a = answers.get(q.id)
                if a is not None and not a.unsure and a.value is not None and a.value in order:
                    matrix[index[key], names.index(rater)] = order.index(a.value)
            shared = [i for i in range(len(units)) if sum(v is not None for v in matrix[i]) >= 2]
            alpha = krippendorff_alpha(matrix[shared] if shared else matrix[:0], level=level)  # type: ignore[arg-type]
            pairs = []
            for x, y in itertools.combinations(range(len(names)), 2):
                both = [i for i in shared if matrix[i, x] is not None and matrix[i, y] is not None]
                if len(both) >= 2:
                    kappa = cohen_kappa([matrix[i, x] for i in both], [matrix[i, y] for i in both],
                                        weights="quadratic" if level == "ordinal" else None,
                                        labels=list(range(len(order))))  # fmt: skip
                    pairs.append((names[x], names[y], kappa))
            agreement.append(QuestionAgreement(q.id, level, len(shared), alpha, pairs))
        total = len({u for r in s.raters() for u in s.queue(r)})
        return StudyStatus(s.id, s.protocol, total, raters, agreement, _precision(s))
    finally:
        s.close()


def _precision(s: Study) -> list[Precision]:
    """Per judge, the headline measure's corrected estimate from the ratings so far (stratified if the study is)."""
    from mheval.analysis.corrected import headline_measure, human_values, judge_values
    from mheval.analysis.judgments import load_judgments
    from mheval.annotate.export import human_labels
    from mheval.stats.corrected import corrected_mean
    from mheval.stats.design import ratings_to_halve

    measure = headline_measure(s.protocol)
    labels = human_labels(s)
    if measure is None or labels.empty:
        return []
    # A conversation-flow study's measure is the conversations' verdict, which this table holds for it.
    frame = load_judgments(run_dir=s.run_dir, protocol=s.protocol)
    if frame is None or frame.empty:
        return []
    frame = frame[(frame["protocol"].astype(str) == s.protocol) & ~frame["judge"].astype(str).str.startswith("human:")]
    design = s.design()
    strata = None
    if design is not None:
        strata = {(c, m, str(n) if n >= 0 else ""): st for (c, m, n), (st, _) in design[1].items()}
    human = human_values(labels, measure)
    out = []
    for judge, values in sorted(judge_values(frame, measure).items()):
        units = [u for u in values if strata is None or u in strata]
        f = np.array([values[u] for u in units], dtype=float)
        y = np.array([human.get(u, np.nan) for u in units], dtype=float)
        st = None if strata is None else np.array([strata[u] for u in units], dtype=object)
        est = corrected_mean(f, y, strata=st)
        out.append(Precision(measure.name, judge, est, ratings_to_halve(est), int(np.isnan(y).sum())))
    return out
