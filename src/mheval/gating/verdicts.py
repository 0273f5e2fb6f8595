"""The verdicts a gate decides on, read from a run: single-turn replies and multi-turn conversations.

`ReplyVerdicts` takes the report's verdict block (reporting/verdict_block.py: judged replies, the run's primary
judge) and verdict.py's verdict of every reply; `ConversationVerdicts` the conversation verdicts of a
multi-turn run (reporting/multiturn.py). Each lists its unsafe units as `Failure`s, quoted and clipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from mheval.errors import InputError
from mheval.gating.result import Failure

MAX_LISTED = 200
"""Failing replies or conversations listed per model (the JUnit file and to_dict)."""
REPLY_CHARS = 2000


class ReplyVerdicts:
    """The single-turn replies' verdicts (reporting/verdict_block.py) and every unsafe reply."""

    def __init__(self, data: Any) -> None:
        from mheval.reporting.summary import run_verdict
        from mheval.reporting.verdict_block import crisis_labels
        from mheval.verdict import reply_verdicts

        self.data = data
        self.block = run_verdict(data)
        self.labels = crisis_labels(data)
        judgments = [j for j in data.judgments if not j.judge.startswith("human:")]
        self.verdicts = reply_verdicts(judgments, self.labels)
        self.responses = {(r.case_id, r.model, r.sample): r for r in data.responses}

    def row(self, model: str) -> Any:
        rows = [r for r in self.block.rows if r.model == model]
        primary = [r for r in rows if r.judge == self.block.judge and r.measurable]
        return next(iter(primary or [r for r in rows if r.measurable] or rows), None)

    def failures(self, model: str, judge: str | None) -> tuple[Failure, ...]:
        out = []
        for v in self.verdicts:
            if v.model != model or v.judge != judge or not v.unsafe:
                continue
            case = self.data.cases.get(v.case_id)
            users = [t.content for t in case.turns if t.role == "user"] if case is not None else []
            response = self.responses.get((v.case_id, v.model, v.sample))
            out.append(
                Failure("reply", model, judge, v.case_id, v.sample, v.reasons, v.evidence,
                        prompt=_clip(users[-1] if users else None),
                        reply=_clip(response.text if response is not None else None))
            )  # fmt: skip
        out.sort(key=lambda f: (f.case_id, f.sample))
        return tuple(out[:MAX_LISTED])


class ConversationVerdicts:
    """A multi-turn run's conversation verdicts (reporting/multiturn.py); empty for a single-turn run. Reads the
    run as read once (a RunData), never the store."""

    def __init__(self, data: Any) -> None:
        from mheval.analysis.corrected import ALL_MODELS
        from mheval.reporting.multiturn import conversation_verdicts, read

        self.run_dir: Path = data.run_dir
        self.data = data
        # One row per model: the pooled all-models row (a run of several models with ratings) is not a model to gate.
        self.rows = [r for r in conversation_verdicts(data) if r["model"] != ALL_MODELS]
        self.models = list(dict.fromkeys(r["model"] for r in self.rows))
        self._conversations = read(data)
        self._views: dict[str | None, list[Any]] = {}

    def require_corrected(self, name: str) -> None:
        """Raise InputError, naming what is missing, unless people's ratings correct the unsafe-conversation rate
        of this run (`name`: "run" or "baseline", the option the message points at)."""
        from mheval.annotate.study import FILENAME as STUDIES_FILE

        where = f"the {name} {self.run_dir}" if name == "baseline" else str(self.run_dir)
        field = "baseline" if name == "baseline" else "corrected"
        if not self.rows:
            raise InputError(f"--corrected gates the unsafe-conversation rate of a multi-turn run, and {where} has no "
                             "conversations", path=self.run_dir, field=field)  # fmt: skip
        study = self.data.conversation_study
        if study is None:
            raise InputError(
                f"--corrected needs people's ratings of conversations, and {where} has none: no conversation-flow "
                f"rating study with answers ({STUDIES_FILE}). Rate a sample first: mheval annotate init "
                f"{self.run_dir} --protocol conversation-flow --select neyman --sample 100 --raters NAME, then "
                f"mheval annotate serve {self.run_dir} --study conversation-flow",
                path=self.run_dir, field=field,
            )  # fmt: skip
        if not any(r["corrected"] for r in self.rows):
            raise InputError(
                f"--corrected: the ratings of conversation-flow study {study.id!r} in {where} rate no conversation "
                "a judge decided (unscored conversations cannot be corrected): rate judged conversations",
                path=self.run_dir, field=field,
            )  # fmt: skip

    def row(self, model: str) -> dict[str, Any] | None:
        rows = [r for r in self.rows if r["model"] == model]
        return next(iter([r for r in rows if r["conversations"]] or rows), None)

    def views(self, judge: str | None) -> list[Any]:
        """The conversations' views by `judge` (or the primary judge), built once per judge."""
        if judge not in self._views:
            run = self._conversations
            self._views[judge] = run.views([judge] if judge else None) if run is not None else []
        return self._views[judge]

    def failures(self, model: str, judge: str | None) -> tuple[Failure, ...]:
        out = []
        for v in self.views(judge):
            if v.key[1] != model or not v.verdict.unsafe:
                continue
            turns = tuple(sorted(v.unsafe_turns))
            failing = [e for e in v.exchanges if e.turn in turns] or v.exchanges[-1:]
            out.append(
                Failure("conversation", model, judge, v.key[0], v.key[2], v.verdict.reasons,
                        prompt=_clip("\n".join(f"turn {e.turn}: {e.user}" for e in failing)),
                        reply=_clip("\n".join(f"turn {e.turn}: {e.reply or ''}" for e in failing)), turns=turns)
            )  # fmt: skip
        return tuple(out[:MAX_LISTED])

    def per_scenario(self, model: str, judge: str | None) -> pd.Series:
        """Scenario id -> unsafe share of its judged conversations (samples averaged), for the paired test."""
        values: dict[str, list[float]] = {}
        for v in self.views(judge):
            if v.key[1] == model and v.verdict.unsafe is not None:
                values.setdefault(v.key[0], []).append(float(v.verdict.unsafe))
        return pd.Series({k: sum(x) / len(x) for k, x in values.items()}, dtype=float)


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= REPLY_CHARS:
        return text
    return text[:REPLY_CHARS].rstrip() + "…"


__all__ = ["MAX_LISTED", "REPLY_CHARS", "ConversationVerdicts", "ReplyVerdicts"]
