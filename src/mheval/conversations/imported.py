"""Recorded conversations as a run's conversations: the `transcripts:PATH` suite.

A conversation someone already had with an assistant (read by conversations/transcripts.py) becomes what a
played conversation leaves in the run folder, so the same stages judge it and every view reads it:

- an `ImportedScenario`, the scenario-like record of the conversation id: its language, locale and
  expectations, and nothing a scenario author would have written (no persona, no beats, no risk level, no
  crisis label). With no scenario to say where risk was disclosed, the truth of an imported conversation
  is the judge's triage of its user turns (conversations/truth.py, `risk_source: triage`);
- its exchanges: each user turn with the assistant's reply to it (mode `imported`: no model is called);
- a conversation row, keyed by content (`content_inputs`: the turns, the model name and the role mapping),
  so importing the same file again reuses everything and a changed conversation is judged again.

How turns become exchanges: turns of one side in a row are one turn (joined by a blank line); an assistant
turn before the person's first turn (a greeting) answers nothing and is not judged; a last user turn
without a reply is not judged either (`Prepared.unanswered` counts it).

Everything is read and checked before anything is stored: a bad conversation stops the import (an
InputError naming the file, the line or row, and the field), or, with `skip_bad`, is skipped and counted
with its reason; a conversation is never stored in part. The first reading keeps only each good
conversation's identity and content key; storing reads the input again, one conversation at a time, so a
large log does not have to fit in memory. The storing itself is engine/conversation_stages.py's
`store_imported`, beside the other stages that write the run store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from mheval.conversations.scenario import _ID, Beat, Expectations, Persona, Scenario
from mheval.conversations.transcripts import RecordedConversation, parse_roles, read_transcripts, role_table
from mheval.digest import digest
from mheval.errors import InputError
from mheval.records import Conversation, Exchange
from mheval.textscan import detect_language

SUITE_PREFIX = "transcripts:"
FAMILY = "imported"
"""The family every imported conversation is reported under (a scenario suite's families say how a
conversation was written; a recorded one was not written to test anything)."""
MODE = "imported"
STOP_REASON = "transcript_end"
"""Why an imported conversation stops: the recording ends there."""
KIND: Literal["imported"] = "imported"

SIDES = ("must", "must_not")


class ImportedScenario(Scenario):
    """The scenario-like record of one recorded conversation id (stored in the run's scenarios table).

    `id` is safe for per-turn case ids (`<id>#t<turn>`); `title` is the id as the record gives it. Fields a
    scenario author writes (persona, beats, risk level, crisis label) are empty: a recording has none, so
    every measure that needs them reads the judge's triage instead (`risk_source: triage`).
    """

    kind: Literal["imported"] = KIND
    title: str = Field(min_length=1)
    locale: str | None = None  # type: ignore[assignment]
    risk_level: Literal["none", "low", "high", "imminent"] | None = None  # type: ignore[assignment]
    crisis_label: str | None = None  # type: ignore[assignment]
    family: str = FAMILY
    persona: Persona | None = None  # type: ignore[assignment]
    beats: list[Beat] = Field(default_factory=list)
    source: str = ""  # where the first recording of this id was read (file:line)

    # The checks of a written scenario do not apply to a recording: its label is None, its family is
    # FAMILY, and a person may well write Chinese in the other script than their locale's. The validator
    # replaces Scenario's of the same name (pydantic overrides a validator by its name).
    @field_validator("crisis_label", "family")
    @classmethod
    def _one_of(cls, value: str, info: ValidationInfo) -> str:
        if info.field_name == "family" and value != FAMILY:
            raise ValueError(f"an imported conversation's family is {FAMILY!r}")
        return value  # None is the only crisis label a recording has

    @model_validator(mode="after")
    def _script_fits_locale(self) -> ImportedScenario:
        return self

    @property
    def replayable(self) -> bool:
        return False


def is_imported(scenario: Scenario | None) -> bool:
    """A recorded conversation's record, not a written scenario."""
    return isinstance(scenario, ImportedScenario)


def stored_scenario(data: str) -> Scenario:
    """A scenarios-table row (its JSON) as the record it was stored from (the store reads both kinds).
    The key is looked for in the text: inside a JSON string its quotes would be escaped, so only the
    record's own `kind` matches, and a written scenario's row is parsed once, as before."""
    if '"kind":"imported"' in data or '"kind": "imported"' in data:
        return ImportedScenario.model_validate_json(data)
    return Scenario.model_validate_json(data)


# --------------------------------------------------------------------------------------------- the suite


def is_transcript_suite(name: str) -> bool:
    return name.strip().startswith(SUITE_PREFIX)


def transcript_path(name: str) -> Path:
    rest = name.strip()[len(SUITE_PREFIX) :].strip()
    if not rest:
        raise InputError(f"'{name}' names no path after '{SUITE_PREFIX}'", field="suite")
    path = Path(rest).expanduser()
    if not path.exists():
        raise InputError("no such transcript file or folder", path=path, field="suite")
    return path


@dataclass(frozen=True)
class Options:
    """How a recording is read: the role names (side -> names), the model name when a record has none, the
    expectations of every conversation (a record's own `metadata.expect` wins) and whether a bad
    conversation is skipped (and counted) instead of stopping the import."""

    roles: Mapping[str, Sequence[str]] | None = None
    model_name: str | None = None
    expect: Expectations = field(default_factory=Expectations)
    skip_bad: bool = False

    @property
    def roles_digest(self) -> str:
        """The role mapping as read (name -> side), part of each conversation's content key."""
        return digest(sorted(role_table(self.roles).items()))


def parse_expect(given: Iterable[str] | Mapping[str, Sequence[str]] | None) -> Expectations:
    """Expectations from the command line's `must=probe_risk,crisis_line` items (repeatable) or a mapping
    `{"must": [...], "must_not": [...]}`; an unknown id or side is an InputError naming the choices."""
    if given is None:
        return Expectations()
    lists: dict[str, list[str]] = {"must": [], "must_not": []}
    if isinstance(given, Mapping):
        for side, ids in given.items():
            if side not in SIDES:
                raise InputError(f"unknown side {side!r}", field="expect", choices=SIDES)
            listed = [ids] if isinstance(ids, str) else list(ids)
            lists[side] += [str(i).strip() for i in listed if str(i).strip()]
    else:
        for item in given:
            side, sep, ids = str(item).partition("=")
            side = side.strip().lower().replace("-", "_")
            if not sep or side not in SIDES:
                raise InputError(f"expected must=ID,... or must_not=ID,..., got {item!r}", field="expect",
                                 choices=SIDES)  # fmt: skip
            lists[side] += [i.strip() for i in ids.split(",") if i.strip()]
    return _expectations({k: list(dict.fromkeys(v)) for k, v in lists.items()}, field_name="expect")


def _expectations(
    data: Any, *, field_name: str, path: str | Path | None = None, line: int | None = None
) -> Expectations:
    from mheval.conversations.scenario import MUST, MUST_NOT

    if not isinstance(data, Mapping):
        raise InputError("must be an object with must and must_not lists", path=path, line=line, field=field_name)
    try:
        return Expectations.model_validate(dict(data))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"][:1])
        choices = list(MUST) if where == "must" else list(MUST_NOT) if where == "must_not" else list(SIDES)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown side {where!r}"
        raise InputError(message, path=path, line=line, field=f"{field_name}.{where}" if where else field_name,
                         choices=choices) from None  # fmt: skip


def options_from(config: Any) -> Options:
    """The import options of a run config (its `roles`, `model_name`, `expect`, `skip_bad` fields)."""
    roles = config.roles
    if isinstance(roles, str):
        roles = parse_roles(roles)
    role_table(roles)  # a bad mapping is refused before anything is read
    return Options(
        roles=roles or None, model_name=config.model_name, expect=parse_expect(config.expect or None),
        skip_bad=config.skip_bad,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------- preparing


@dataclass(frozen=True)
class Prepared:
    """One recorded conversation as it will be stored: its record, exchanges, end and content key."""

    scenario: ImportedScenario
    model: str
    sample: int
    exchanges: tuple[Exchange, ...]
    conversation: Conversation
    inputs: dict[str, str]
    source: str
    unanswered: bool = False  # the recording ends on a user turn that got no reply (not judged)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.scenario.id, self.model, self.sample)


@dataclass(frozen=True)
class Skipped:
    """A conversation left out under `skip_bad`: where it was read and why."""

    where: str
    reason: str

    def line(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True)
class Accepted:
    """What the first reading keeps of a good conversation: enough to find it again and know it unchanged."""

    key: tuple[str, str, int]
    inputs: dict[str, str]
    unanswered: bool


@dataclass
class ImportedSuite:
    """The conversations of one `transcripts:PATH`, read and checked whole. Only what identifies each good one
    is kept (`accepted`, by where it was read); `conversations()` reads the input again to hand them on one
    at a time, so memory holds one conversation, not the file."""

    path: Path
    options: Options
    scenarios: list[ImportedScenario]
    accepted: dict[str, Accepted]  # source (file:line) -> what was accepted there, in reading order
    skipped: list[Skipped] = field(default_factory=list)

    def conversations(self) -> Iterator[Prepared]:
        """Each accepted conversation, read again; an InputError if the input changed since it was checked."""
        ignore = (lambda exc, retract: None) if self.options.skip_bad else None
        handed = 0
        for record in read_transcripts(self.path, roles=self.options.roles, model_name=self.options.model_name,
                                       on_bad=ignore):  # fmt: skip
            if handed == len(self.accepted):
                break
            want = self.accepted.get(record.source)
            if want is None:
                continue
            item = prepare(record, self.options)
            if (item.key, item.inputs) != (want.key, want.inputs):
                raise InputError("the file changed while it was imported: import it again", path=record.source)
            handed += 1
            yield item
        if handed != len(self.accepted):
            raise InputError("the file changed while it was imported: import it again", path=self.path)

    def meta(self) -> dict[str, Any]:
        """What the run keeps about the import (store meta `import`)."""
        return {
            "path": str(self.path),
            "conversations": len(self.accepted),
            "unanswered_last_turns": sum(a.unanswered for a in self.accepted.values()),
            "skipped": [{"where": s.where, "reason": s.reason} for s in self.skipped],
        }


def load_transcript_suite(name: str, options: Options, limit: int | None = None) -> ImportedSuite:
    """Read and check every conversation of `transcripts:PATH` (`limit`: the first N conversations).

    Bad input is an InputError naming the place, unless `options.skip_bad`: then the bad conversation is
    skipped and listed in `skipped` (a malformed file as a whole still stops the import). Nothing is kept
    of a conversation but its identity and content key (`ImportedSuite.conversations` reads it again)."""
    path = transcript_path(name)
    skipped: list[Skipped] = []
    retracted: set[str] = set()  # ids whose rows reappear later: the part read first is not the whole

    def bad(exc: InputError, retract: str | None = None) -> None:
        skipped.append(Skipped(_where(exc), (f"field '{exc.field}': " if exc.field else "") + exc.message))
        if retract is not None:
            retracted.add(retract)

    records = read_transcripts(
        path, roles=options.roles, model_name=options.model_name, on_bad=bad if options.skip_bad else None
    )
    scenarios: dict[str, ImportedScenario] = {}
    ids: dict[str, str] = {}  # safe id -> the record's own id (two ids must not become one)
    accepted: dict[str, Accepted] = {}
    titles: dict[str, str] = {}  # source -> the record's own id (to leave out the retracted)
    seen: dict[tuple[str, str, int], str] = {}
    for record in records:
        if limit is not None and len(accepted) >= limit:
            break
        try:
            item = prepare(record, options)
            _check_same(item, scenarios, ids, seen)
        except InputError as exc:
            if not options.skip_bad:
                raise
            bad(exc)
            continue
        scenarios.setdefault(item.scenario.id, item.scenario)
        ids.setdefault(item.scenario.id, record.id)
        seen[item.key] = item.source
        accepted[item.source] = Accepted(item.key, item.inputs, item.unanswered)
        titles[item.source] = record.id
    if retracted:
        accepted = {src: a for src, a in accepted.items() if titles[src] not in retracted}
        scenarios = {sid: s for sid, s in scenarios.items() if s.title not in retracted}
    if not accepted:
        why = f"; {len(skipped)} skipped as bad, the first: {skipped[0].line()}" if skipped else ""
        raise InputError(f"no conversation to import{why}", path=path, field="suite")
    return ImportedSuite(path, options, list(scenarios.values()), accepted, skipped)


def _where(exc: InputError) -> str:
    parts = [str(p) for p in (getattr(exc, "path", None), getattr(exc, "line", None)) if p is not None]
    return ":".join(parts) or "input"


def _check_same(
    item: Prepared, scenarios: Mapping[str, ImportedScenario], ids: Mapping[str, str],
    seen: Mapping[tuple[str, str, int], str],
) -> None:  # fmt: skip
    """One import holds each (id, model, sample) once, and every recording of an id agrees on what the id
    stands for (language, locale, expectations)."""
    path, _, line = item.source.rpartition(":")
    if item.key in seen:
        raise InputError(
            f"duplicate conversation id {item.scenario.title!r} (model {item.model}, sample {item.sample}): "
            f"already read at {seen[item.key]}",
            path=path or None, line=int(line) if line.isdigit() else None, field="id",
        )  # fmt: skip
    first = scenarios.get(item.scenario.id)
    if first is not None and ids.get(item.scenario.id) != item.scenario.title:
        raise InputError(
            f"conversation ids {ids[item.scenario.id]!r} and {item.scenario.title!r} map to the same stored id "
            f"{item.scenario.id!r}: rename one (letters, digits, '.', '_' and '-' are kept as they are)",
            path=path or None, line=int(line) if line.isdigit() else None, field="id",
        )  # fmt: skip
    if first is not None and first.model_dump(exclude={"source"}) != item.scenario.model_dump(exclude={"source"}):
        raise InputError(
            f"conversation {item.scenario.title!r} was read before at {first.source} with another language, "
            "locale or expectations: recordings of one id must agree on them",
            path=path or None, line=int(line) if line.isdigit() else None, field="id",
        )  # fmt: skip


def safe_id(given: str) -> str:
    """An id usable in per-turn case ids: the record's own when it is one, else a readable form of it with a
    short hash of the original (so two different ids never meet)."""
    if _ID.match(given):
        return given
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", given).strip("-._")[:100]
    tag = hashlib.sha256(given.encode("utf-8")).hexdigest()[:8]
    return f"{slug}-{tag}" if slug and slug[0].isalnum() else f"conv-{tag}"


def prepare(record: RecordedConversation, options: Options) -> Prepared:
    """A recorded conversation as it will be stored (see the module docstring for how turns pair up)."""
    path, _, line = record.source.rpartition(":")
    where: dict[str, Any] = {"path": path or None, "line": int(line) if line.isdigit() else None}
    language = _language(record, where)
    expect = options.expect
    if isinstance(record.metadata, dict) and record.metadata.get("expect") is not None:
        expect = _expectations(record.metadata["expect"], field_name="metadata.expect", **where)
    scenario = ImportedScenario(
        id=safe_id(record.id), title=record.id, language=language, locale=_locale(record), expectations=expect,
        source=record.source,
    )  # fmt: skip
    model = record.model or options.model_name or Path(path).stem
    # Every text a judge of this conversation reads comes from these pairs (the per-turn cases, the flow's
    # and the expectations' transcripts). They are stored as recorded; `--redact` masks them where the judges
    # read them (engine/redacting.py), so a masked judgment is never keyed as an unmasked one.
    pairs, unanswered = _pairs(record)
    if not pairs:
        raise InputError("no user turn is followed by an assistant reply: nothing to judge", field="messages",
                         **where)  # fmt: skip
    exchanges = tuple(
        Exchange(scenario_id=scenario.id, model=model, sample=record.sample, turn=i, beat=0, user=u, reply=r)
        for i, (u, r) in enumerate(pairs, start=1)
    )
    inputs = content_inputs(scenario, model, pairs, options)
    conversation = Conversation(
        scenario_id=scenario.id, model=model, sample=record.sample, mode=MODE, turns=len(exchanges),
        stop_reason=STOP_REASON,
    )  # fmt: skip
    return Prepared(scenario, model, record.sample, exchanges, conversation, inputs, record.source, unanswered)


def content_inputs(
    scenario: ImportedScenario, model: str, pairs: Sequence[tuple[str, str]], options: Options
) -> dict[str, str]:
    """What decides a stored imported conversation: its record (language, locale, expectations) and turns,
    the model name and the role mapping it was read with."""
    return {
        "case": digest([scenario.model_dump(mode="json", exclude={"source"}), [list(p) for p in pairs]]),
        "model": digest({"imported": model}),
        "roles": options.roles_digest,
    }


def _pairs(record: RecordedConversation) -> tuple[list[tuple[str, str]], bool]:
    """(user turn, reply) pairs: a side's turns in a row are one turn; an opening assistant turn and a last
    unanswered user turn are left out (the bool says whether there was such a last turn)."""
    merged: list[tuple[str, str]] = []
    for turn in record.turns:
        if merged and merged[-1][0] == turn.role:
            merged[-1] = (turn.role, f"{merged[-1][1]}\n\n{turn.content}")
        else:
            merged.append((turn.role, turn.content))
    while merged and merged[0][0] == "assistant":
        merged.pop(0)
    unanswered = bool(merged) and merged[-1][0] == "user"
    if unanswered:
        merged.pop()
    return [(merged[i][1], merged[i + 1][1]) for i in range(0, len(merged) - 1, 2)], unanswered


_LANGUAGE = re.compile(r"^(en|zh)(?:[-_].*)?$", re.IGNORECASE)
_ZH_REGIONS = {"hant": "TW", "hans": "CN"}


def _language(record: RecordedConversation, where: Mapping[str, Any]) -> Literal["en", "zh"]:
    """The record's language (`en`, `zh`, or a tag such as `zh-TW`), else the one its user turns are in."""
    if record.language is not None:
        match = _LANGUAGE.match(record.language.strip())
        if match is None:
            raise InputError(f"mheval judges English and Chinese, not {record.language!r}", field="language",
                             choices=("en", "zh"), **where)  # fmt: skip
        return "zh" if match.group(1).lower() == "zh" else "en"
    return detect_language("\n".join(t.content for t in record.turns if t.role == "user"))


def _locale(record: RecordedConversation) -> str | None:
    """The record's locale, else the region of its language tag (`en-GB` -> GB), else unknown."""
    if record.locale is not None:
        return record.locale.strip()
    if record.language is None:
        return None
    parts = re.split(r"[-_]", record.language.strip())
    for part in reversed(parts[1:]):
        if len(part) == 2 and part.isalpha():
            return part.upper()
        if part.lower() in _ZH_REGIONS:
            return _ZH_REGIONS[part.lower()]
    return None
