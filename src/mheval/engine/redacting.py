"""What a judge or simulator reads when a run masks personal data (`RunConfig.redact`; the masking is redaction.py's).

Every text a judge receives passes through here first: a case's turns and the reply judged (`judge_view`, which
engine/units.py calls for every triage and judgment unit, whatever the judge), a conversation's exchanges (the
whole-conversation judges) and the history a simulated user reads (`exchanges_view`, `history_view`). The texts
of one case or conversation are masked together, so a name said in one turn is masked where it comes back.

When the run ends, `record` counts what was masked in the run's texts (each case's turns once, each reply once,
each conversation's exchanges once) into the store's meta `redaction`, and with `store` writes those masked texts
to `redacted.jsonl` in the run folder. The counts are worked out from the stored texts, so they are the same
whichever executor did the units.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mheval.fileio import REDACTED_FILE, atomic_path
from mheval.records import Case, Exchange, Response
from mheval.redaction import KINDS, Redacted, Redactor
from mheval.runfolder.store import Store

Pair = tuple[str, str | None]  # a user turn and the reply to it (None: the target failed)
META_KEY = "redaction"
# Each kind in words, singular and plural, for the line the run prints.
_WORDS = {
    "NAME": ("name", "names"),
    "EMAIL": ("e-mail address", "e-mail addresses"),
    "PHONE": ("phone number", "phone numbers"),
    "ADDRESS": ("street address", "street addresses"),
    "URL": ("URL", "URLs"),
}


class RunRedaction:
    """The masking of one run: one Redactor (its analyzer is built once) and the run's mode."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.redactor = Redactor()

    def judge_view(self, case: Case, response: Response | None) -> tuple[Case, Response | None]:
        """The case and reply as a judge reads them: turns and reply masked together."""
        reply = response.text if response is not None else None
        texts = [t.content for t in case.turns] + ([reply] if reply is not None else [])
        masked = self.redactor.redact_all(texts, case.locale)
        turns = [
            t.model_copy(update={"content": m.text}) for t, m in zip(case.turns, masked[: len(case.turns)], strict=True)
        ]
        view = case.model_copy(update={"turns": turns})
        if response is None or reply is None:
            return view, response
        return view, response.model_copy(update={"text": masked[-1].text})

    def exchanges_view(self, exchanges: Sequence[Exchange], locale: str | None) -> list[Exchange]:
        """A conversation's exchanges as a whole-conversation judge reads them."""
        return _with_texts(exchanges, self.redactor.redact_all(_exchange_texts(exchanges), locale))

    def history_view(
        self, history: Sequence[tuple[str, str | None]], locale: str | None
    ) -> list[tuple[str, str | None]]:
        """The (user, reply) pairs a simulated user reads, masked."""
        texts = [x for pair in history for x in pair if x is not None]
        masked = iter(m.text for m in self.redactor.redact_all(texts, locale))
        return [(next(masked), next(masked) if reply is not None else None) for _, reply in history]


def _exchange_texts(exchanges: Iterable[Exchange]) -> list[str]:
    return [x for e in exchanges for x in (e.user, e.reply) if x is not None]


def _with_texts(exchanges: Sequence[Exchange], masked: Sequence[Redacted]) -> list[Exchange]:
    """The exchanges with their texts replaced by `masked` (in `_exchange_texts` order)."""
    texts = iter(m.text for m in masked)
    updates = [{"user": next(texts)} | ({"reply": next(texts)} if e.reply is not None else {}) for e in exchanges]
    return [e.model_copy(update=u) for e, u in zip(exchanges, updates, strict=True)]


def record(store: Store, run_dir: Path, redaction: RunRedaction, locales: Mapping[str, str | None]) -> dict[str, Any]:
    """Count what was masked in the run's texts into the meta `redaction` (and, for `store`, write the masked
    texts to redacted.jsonl, line by line: a large import is never held in memory whole). `locales` gives a
    conversation's locale by scenario id. Returns the meta."""
    counts: Counter[str] = Counter()
    texts = masked_texts = 0
    with contextlib.ExitStack() as stack:
        sink = None
        if redaction.mode == "store":
            tmp = stack.enter_context(atomic_path(run_dir / REDACTED_FILE))
            sink = stack.enter_context(tmp.open("x", encoding="utf-8"))
        for rows, results in _masked(store, redaction, locales):
            texts += len(results)
            masked_texts += sum(1 for r in results if r.masked)
            for r in results:
                counts.update(r.counts)
            if sink is not None:
                sink.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    meta = {
        "mode": redaction.mode,
        "counts": {k: counts[k] for k in KINDS},
        "texts": texts,
        "texts_masked": masked_texts,
    }
    store.set_meta(META_KEY, meta)
    return meta


def _masked(
    store: Store, redaction: RunRedaction, locales: Mapping[str, str | None]
) -> Iterator[tuple[list[dict[str, Any]], list[Redacted]]]:
    """The run's texts masked, each once: (rows of redacted.jsonl, the texts' results) for each case's turns, each
    reply (masked with its case's turns, as the judges read it) and each conversation's exchanges."""
    cases = {c.id: c for c in store.cases()}
    for case in cases.values():
        masked = redaction.redactor.redact_all([t.content for t in case.turns], case.locale)
        turns = [{"role": t.role, "content": m.text} for t, m in zip(case.turns, masked, strict=True)]
        yield [{"case_id": case.id, "turns": turns}], masked
    for response in store.responses():
        asked = cases.get(response.case_id)
        if asked is None or response.text is None:
            continue
        reply = redaction.redactor.redact_all([*(t.content for t in asked.turns), response.text], asked.locale)[-1]
        yield [{"case_id": asked.id, "model": response.model, "sample": response.sample, "reply": reply.text}], [reply]
    conversation: list[Exchange] = []
    for e in [*store.exchanges(), None]:  # in conversation order; None closes the last one
        if conversation and (e is None or (e.scenario_id, e.model, e.sample) != _key(conversation[0])):
            locale = locales.get(conversation[0].scenario_id)
            masked = redaction.redactor.redact_all(_exchange_texts(conversation), locale)
            view = _with_texts(conversation, masked)
            rows = [
                {"scenario_id": x.scenario_id, "model": x.model, "sample": x.sample, "turn": x.turn, "user": x.user,
                 "reply": x.reply}
                for x in view
            ]  # fmt: skip
            yield rows, masked
            conversation = []
        if e is not None:
            conversation.append(e)


def _key(e: Exchange) -> tuple[str, str, int]:
    return (e.scenario_id, e.model, e.sample)


def describe(meta: Mapping[str, Any] | None) -> str | None:
    """ "masked in 12 of 40 texts: 3 names, 2 e-mail addresses, 4 phone numbers" from the meta, or None."""
    if not meta:
        return None
    counts = meta.get("counts") or {}
    parts = [f"{n} {_WORDS[k][n != 1]}" for k, n in counts.items() if n and k in _WORDS]
    what = ", ".join(parts) if parts else "nothing found to mask"
    where = f" ({REDACTED_FILE} in the run folder)" if meta.get("mode") == "store" else ""
    return f"personal data masked in {meta.get('texts_masked', 0)} of {meta.get('texts', 0)} texts: {what}{where}"


def read(run_dir: Path) -> dict[str, Any] | None:
    """The run's meta `redaction`, or None (not a redacted run, or no run folder)."""
    store = Store.open_readonly(run_dir)
    if store is None:
        return None
    try:
        value = store.get_meta(META_KEY)
    finally:
        store.close()
    return value if isinstance(value, dict) else None
