"""What every judge looks like to the engine: given a protocol, a case and maybe a response, a Judgment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from mheval.records import Case, Judgment, Response

if TYPE_CHECKING:
    from mheval.protocols.spec import ProtocolSpec


class Judge(Protocol):
    """`name` is stored with every judgment; `supports` lets a run refuse an impossible plan up front."""

    name: str

    def supports(self, protocol: ProtocolSpec) -> bool: ...

    async def judge(
        self,
        protocol: ProtocolSpec,
        case: Case,
        response: Response | None,
        *,
        repeat: int = 0,
        crisis_label: str | None = None,
    ) -> Judgment:
        """Judge `case` (protocols whose target is the case) or `response` (target response).

        `crisis_label` picks the rubric row for category-specific protocols (appropriateness); the
        engine passes the triage label, or the case's gold label when triage did not run.
        Never raises for a bad judge output: returns an unscored Judgment with its reason.
        """
        ...
