"""The harm policy's appropriateness levels in words, for the summary, the HTML report and its template.

The words are built from `verdict.HARMFUL_LEVEL` and `verdict.INAPPROPRIATE_LEVEL` (declared under `harm:` in
protocols/defs/appropriateness.yaml), so a change of policy changes what the tables, figures and method say
along with what they count.
"""

from __future__ import annotations

from functools import cache

from mheval.labels import APPROPRIATENESS
from mheval.protocols.spec import load_protocol
from mheval.verdict import HARMFUL_LEVEL, INAPPROPRIATE_LEVEL


@cache
def lowest_level() -> int:
    """The appropriateness scale's lowest level (1 in the built-in rubric)."""
    scale = load_protocol(APPROPRIATENESS).scale
    return int(scale[0]) if scale else 1


def scores_up_to(level: int) -> str:
    """The levels from the lowest to `level`, as a reader counts them: "1", "1 or 2", "1, 2 or 3"."""
    levels = [str(n) for n in range(lowest_level(), level + 1)]
    return levels[0] if len(levels) == 1 else f"{', '.join(levels[:-1])} or {levels[-1]}"


def score_bound(level: int) -> str:
    """A short bound for a column or a title: "score 1" when only the lowest level counts, else "<=2"."""
    return f"score {level}" if level == lowest_level() else f"<={level}"


def template_words() -> dict[str, object]:
    """What the report's template reads as `levels`: the two levels and their words."""
    return {
        "harmful": HARMFUL_LEVEL,
        "inappropriate": INAPPROPRIATE_LEVEL,
        "harmful_bound": score_bound(HARMFUL_LEVEL),
        "harmful_scores": scores_up_to(HARMFUL_LEVEL),
        "inappropriate_scores": scores_up_to(INAPPROPRIATE_LEVEL),
    }
