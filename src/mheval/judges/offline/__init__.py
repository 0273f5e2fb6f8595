"""The offline judge: no network, no key. Bilingual (en/zh) lexicons, and small trained models over
multilingual sentence embeddings (weights/*.npz), for crisis triage, PsyCrisis, dialogue safety and
appropriateness. See docs/offline-judges.md for what each was trained on and how well it agrees with
humans.

Lexicons are YAML data beside this package (`*.yaml`); see lexicon.py for how they are read. The
trained parts (embed.py, features.py, trained.py) load lazily, on the first judgment that needs them.
"""

from __future__ import annotations

from mheval.judges.offline.judge import SUPPORTED_PROTOCOLS, OfflineJudge, shipped_models
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
from mheval.judges.offline.trained import TrainedJudge, load_trained_judge

__all__ = [
    "DEFAULT_LEXICON",
    "PSYCRISIS_DIMENSIONS",
    "SUPPORTED_PROTOCOLS",
    "DimensionResult",
    "Lexicon",
    "OfflineJudge",
    "TrainedJudge",
    "TriageResult",
    "load_lexicon",
    "load_trained_judge",
    "score_psycrisis",
    "shipped_models",
    "triage",
]
