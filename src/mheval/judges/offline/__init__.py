"""The offline judge: no network, no key. Bilingual (en/zh) lexicon detectors for crisis triage and PsyCrisis.

Lexicons are YAML data beside this package (`*.yaml`); see lexicon.py for how they are read.
"""

from __future__ import annotations

from mheval.judges.offline.judge import SUPPORTED_PROTOCOLS, OfflineJudge
from mheval.judges.offline.lexicon import (
    DEFAULT_LEXICON,
    PSYCRISIS_DIMENSIONS,
    DimensionResult,
    Lexicon,
    TriageResult,
    load_lexicon,
    score_psycrisis,
    triage,
)

__all__ = [
    "DEFAULT_LEXICON",
    "PSYCRISIS_DIMENSIONS",
    "SUPPORTED_PROTOCOLS",
    "DimensionResult",
    "Lexicon",
    "OfflineJudge",
    "TriageResult",
    "load_lexicon",
    "score_psycrisis",
    "triage",
]
