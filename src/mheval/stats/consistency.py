"""Self-consistency: how far one judge agrees with itself when asked the same thing again.

The input is a **units x repeats** matrix (one row per thing judged, one column per repeat, missing
as None/NaN), the same shape as the items x raters matrices of `mheval.stats.agreement`: a judge's
repeats are treated as raters of the same units.

* `unit_consistency` describes each unit on its own: how many values, the modal value (ties go to
  the earliest repeat), the share of values equal to it, whether all are identical, and for numbers
  mean, sample standard deviation, min and max.
* `repeat_consistency` summarises the units with two or more values: how many are identical, the mean
  modal share, the mean standard deviation (numbers), and one chance-corrected statistic over the
  repeats: Fleiss' kappa for categories (bootstrap interval) or ICC(A,1) for numbers (F interval).
  A unit seen once says nothing about consistency, so it is counted (``single``) and left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mheval.stats.agreement import as_matrix, fleiss_kappa
from mheval.stats.icc import icc
from mheval.stats.intervals import DEFAULT_CONFIDENCE, DEFAULT_N_BOOT, DEFAULT_SEED, Estimate, is_missing

FLEISS = "fleiss_kappa"
ICC_A1 = "icc_a1"
STATISTIC_NAMES = {FLEISS: "Fleiss' kappa over repeats", ICC_A1: "ICC(A,1) over repeats"}
UNIT_COLUMNS = ["n", "modal", "modal_share", "identical", "mean", "std", "min", "max"]


@dataclass(frozen=True)
class Consistency:
    """A judge's agreement with itself over the units it judged two or more times."""

    units: int  # units with two or more values
    single: int  # units with exactly one value (left out)
    repeats: int  # repeat columns that hold a value for some counted unit
    identical: int  # units whose values are all the same
    modal_share: float | None  # mean over units of the share of values equal to the unit's modal value
    mean_std: float | None  # numbers only: mean over units of the sample standard deviation
    statistic: str  # FLEISS or ICC_A1
    agreement: Estimate

    @property
    def identical_share(self) -> float | None:
        return self.identical / self.units if self.units else None

    @property
    def statistic_name(self) -> str:
        return STATISTIC_NAMES[self.statistic]


def is_categorical(values: np.ndarray) -> bool:
    """True when any present value is not a real number (a label); bools count as numbers (0/1)."""
    present = values[~is_missing(values)]
    return any(isinstance(v, str) or not isinstance(v, int | float | np.integer | np.floating) for v in present)


def _modal(values: Sequence[Any]) -> tuple[Any, int]:
    # Counter keeps first-seen order among equal counts, so a tie goes to the earliest repeat.
    return Counter(values).most_common(1)[0]


def unit_consistency(matrix: Any, *, numeric: bool | None = None) -> pd.DataFrame:
    """One row per unit with at least one value (index: the matrix's row labels or positions).

    Columns: ``n``, ``modal``, ``modal_share``, ``identical`` and, when the values are numbers
    (``numeric`` None: inferred), ``mean``, ``std`` (ddof 1; NaN for one value), ``min``, ``max``.
    """
    values, _ = as_matrix(matrix, "matrix")
    index = matrix.index if isinstance(matrix, pd.DataFrame) else pd.RangeIndex(len(values))
    if numeric is None:
        numeric = not is_categorical(values)
    present = ~is_missing(values)
    rows, keep = [], []
    for i in range(values.shape[0]):
        row = list(values[i][present[i]])
        if not row:
            continue
        modal, top = _modal(row)
        out: dict[str, Any] = {
            "n": len(row),
            "modal": modal,
            "modal_share": top / len(row),
            "identical": top == len(row),
        }
        if numeric:
            arr = np.asarray(row, dtype=float)
            std = float(arr.std(ddof=1)) if arr.size > 1 else float("nan")
            out.update(mean=float(arr.mean()), std=std, min=float(arr.min()), max=float(arr.max()))
        rows.append(out)
        keep.append(i)
    # Taking positions from the given index keeps its labels as they are (tuples stay tuples).
    return pd.DataFrame(rows, index=index[np.asarray(keep, dtype=np.intp)], columns=UNIT_COLUMNS)


def repeat_consistency(
    matrix: Any,
    *,
    categorical: bool | None = None,
    labels: Sequence[Any] | None = None,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int | None = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Consistency:
    """Self-consistency over a units x repeats matrix (see the module docstring).

    ``categorical`` None means: labels if any value is not a number. ``labels`` fixes the categories
    for Fleiss' kappa; ``n_boot``, ``seed`` and ``confidence`` set its bootstrap interval, and
    ``confidence`` the ICC's F interval.
    """
    values, names = as_matrix(matrix, "matrix")
    if categorical is None:
        categorical = is_categorical(values)
    counted = (~is_missing(values)).sum(axis=1)
    multi = values[counted >= 2]
    # A repeat that no counted unit has adds nothing but gaps (which would empty the ICC's complete rows).
    used = np.flatnonzero(~is_missing(multi).all(axis=0))
    multi = multi[:, used]
    frame = pd.DataFrame(multi, columns=[names[i] for i in used])
    numeric = not is_categorical(multi)  # binary scores get Fleiss' kappa and still a standard deviation
    per_unit = unit_consistency(frame, numeric=numeric)
    if categorical:
        statistic = FLEISS
        agreement = fleiss_kappa(frame, labels=labels, n_boot=n_boot, seed=seed, confidence=confidence)
    else:
        statistic = ICC_A1
        agreement = icc(frame.astype(float), "A,1", confidence=confidence)
    n_units = len(per_unit)
    return Consistency(
        units=n_units,
        single=int((counted == 1).sum()),
        repeats=len(used),
        identical=int(per_unit["identical"].sum()),
        modal_share=float(per_unit["modal_share"].mean()) if n_units else None,
        mean_std=float(per_unit["std"].mean()) if n_units and numeric else None,
        statistic=statistic,
        agreement=agreement,
    )


__all__ = [
    "FLEISS",
    "ICC_A1",
    "STATISTIC_NAMES",
    "Consistency",
    "is_categorical",
    "repeat_consistency",
    "unit_consistency",
]
