"""The offline judge: lexicon crisis triage and lexicon PsyCrisis scoring, with no network and no key.

It is deterministic and fast, so it can judge every run for free and serve as a baseline the LLM
judges are compared against. It only looks at `protocol.id`, so it works with any object that has one.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol

from mheval.judges.offline.lexicon import (
    DEFAULT_LEXICON,
    NO_CRISIS,
    PSYCRISIS_DIMENSIONS,
    Lexicon,
    TriageResult,
    score_psycrisis,
    triage,
)
from mheval.records import Case, Judgment, Response

if TYPE_CHECKING:
    from mheval.protocols.spec import ProtocolSpec

CRISIS_TRIAGE = "crisis-triage"
PSYCRISIS = "psycrisis"
SUPPORTED_PROTOCOLS: frozenset[str] = frozenset({CRISIS_TRIAGE, PSYCRISIS})
_CACHE_SIZE = 4096


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


class OfflineJudge:
    """Judge `crisis-triage` (the case) and `psycrisis` (a response) with bilingual lexicons."""

    name = "offline"

    def __init__(self, lexicon: Lexicon | None = None) -> None:
        self.lexicon = lexicon or DEFAULT_LEXICON
        # PsyCrisis needs to know whether the case is a crisis; every response to a case shares it.
        self._triage_cache: OrderedDict[tuple[str, ...], TriageResult] = OrderedDict()

    def supports(self, protocol: ProtocolSpec | _HasId) -> bool:
        return getattr(protocol, "id", None) in SUPPORTED_PROTOCOLS

    async def judge(
        self,
        protocol: ProtocolSpec | _HasId,
        case: Case,
        response: Response | None,
        *,
        repeat: int = 0,
        crisis_label: str | None = None,
    ) -> Judgment:
        """Never raises for what it is given: an impossible unit comes back unscored with its reason."""
        protocol_id = str(getattr(protocol, "id", ""))
        ids = {"case_id": case.id, "protocol": protocol_id, "judge": self.name, "repeat": repeat}
        if protocol_id == CRISIS_TRIAGE:
            return self._triage(case, ids)
        if response is not None:  # a verdict on a response is stored against that response
            ids |= {"model": response.model, "sample": response.sample}
        if protocol_id == PSYCRISIS:
            if response is None or response.text is None:
                return Judgment.unscored("no_response", "the model produced no reply to judge", **ids)
            return self._psycrisis(case, response.text, crisis_label, ids)
        return Judgment.unscored(
            "unsupported",
            f"the offline judge handles {', '.join(sorted(SUPPORTED_PROTOCOLS))}, not {protocol_id!r}",
            **ids,
        )

    def triage_case(self, case: Case) -> TriageResult:
        """The lexicon triage of a case's user turns (cached, as PsyCrisis asks once per response)."""
        key = tuple(turn.content for turn in case.turns if turn.role == "user")
        result = self._triage_cache.get(key)
        if result is None:
            result = triage(key, self.lexicon)
            self._triage_cache[key] = result
            if len(self._triage_cache) > _CACHE_SIZE:
                self._triage_cache.popitem(last=False)
        else:
            self._triage_cache.move_to_end(key)
        return result

    def _triage(self, case: Case, ids: dict) -> Judgment:
        result = self.triage_case(case)
        return Judgment(
            **ids,
            label=result.label,
            scores={"confidence": result.confidence},
            evidence={result.label: list(result.evidence)},
            rationale=result.rationale,
            raw=json.dumps({"label_scores": result.scores}, sort_keys=True),
        )

    def _psycrisis(self, case: Case, text: str, crisis_label: str | None, ids: dict) -> Judgment:
        # The engine passes the triage (or gold) label; without one, triage the case here.
        label = crisis_label or case.crisis_label or self.triage_case(case).label
        dims = score_psycrisis(text, crisis=label != NO_CRISIS, lexicon=self.lexicon)
        scores = {name: 1.0 if dims[name].positive else 0.0 for name in PSYCRISIS_DIMENSIONS}
        detail = {name: {"positive": d.positive, "rejected": [list(r) for r in d.rejected]} for name, d in dims.items()}
        return Judgment(
            **ids,
            scores=scores,
            total=sum(scores.values()),
            evidence={name: list(d.evidence) for name, d in dims.items() if d.positive},
            rationale=" | ".join(dims[name].rationale for name in PSYCRISIS_DIMENSIONS),
            raw=json.dumps({"crisis_context": label, "dimensions": detail}, ensure_ascii=False, sort_keys=True),
        )
