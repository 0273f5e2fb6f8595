"""Deprecated: the gate is a CI decision, not a report, and lives in `mheval.gating`.

This module stays so that code importing from `mheval.report.gate` keeps working: each name is looked up in
`mheval.gating` on access, with a DeprecationWarning that names the new home.
"""

from __future__ import annotations

import warnings
from typing import Any

from mheval import gating


def __getattr__(name: str) -> Any:
    if name in gating.__all__:
        warnings.warn(
            f"mheval.report.gate is deprecated: import {name} from mheval.gating", DeprecationWarning, stacklevel=2
        )
        return getattr(gating, name)
    raise AttributeError(f"module 'mheval.report.gate' has no attribute {name!r}")


__all__ = list(gating.__all__)
