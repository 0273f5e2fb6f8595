"""A study's progress and its live human-human agreement, computed on the units rated so far."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mheval.annotate.study import Study
from mheval.stats.agreement import cohen_kappa, krippendorff_alpha
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
class StudyStatus:
    study: str
    protocol: str
    units: int
    raters: list[RaterStatus]
    agreement: list[QuestionAgreement]

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "protocol": self.protocol,
            "units": self.units,
            "raters": [r.__dict__ for r in self.raters],
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
            level = "ordinal" if q.kind == "scale" or s.protocol == "conversation-flow" else "nominal"
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
        return StudyStatus(s.id, s.protocol, total, raters, agreement)
    finally:
        s.close()
