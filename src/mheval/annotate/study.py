"""Studies: units of a run assigned to human raters, blind to model, sample and judge, and their answers.

A study lives in `<run>/studies.db` (SQLite, WAL), beside the run's own store, so `mheval run` can extend the
run while a study is served. A unit is what a judge judged under the study's protocol: a case (triage), a
reply in its context (response protocols) or a whole conversation (conversation-flow). In a multi-turn run,
played or imported, the per-turn protocols judged each turn: a unit is then one turn (`<id>#t<turn>`, model,
sample), the conversation up to that user turn as its context and, for response protocols, the reply to it.
Raters see units under opaque ids (u0001, ...); which case, model and sample a unit is stays in this file.

The plan is deterministic for a seed: the units are shuffled once; the first `calibration` go to every rater,
first; each other unit goes to exactly `overlap` raters, always to the least loaded (so loads differ by at most
one); each rater's own units are shuffled by the seed and the rater's name, and two replies to the same case are
never next to each other. Units that appear later (the run was extended) are appended the same way, without
moving anything already planned. Every answer is one transaction: an upsert on (unit, rater, question) and a
row in an append-only history.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mheval.annotate.answers import Answer, labels_frame
from mheval.annotate.form import Form, build_flow_form, build_form
from mheval.conversations.scenario import split_turn_case_id, turn_case_id
from mheval.errors import InputError
from mheval.labels import CONVERSATION_FLOW, CRISIS_TRIAGE, case_label
from mheval.protocols import load_protocol
from mheval.runfolder.conversation_views import views
from mheval.runfolder.store import Store

FILENAME = "studies.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS studies (
    id TEXT PRIMARY KEY, protocol TEXT NOT NULL, seed INTEGER NOT NULL, overlap INTEGER NOT NULL,
    calibration INTEGER NOT NULL, raters TEXT NOT NULL, created REAL NOT NULL, rate REAL NOT NULL);
-- Every unit of the run the study has considered (planned or left out of its sample).
CREATE TABLE IF NOT EXISTS seen (study TEXT NOT NULL, unit_key TEXT NOT NULL, PRIMARY KEY (study, unit_key));
CREATE TABLE IF NOT EXISTS units (
    study TEXT NOT NULL, unit_id TEXT NOT NULL, ord INTEGER NOT NULL, unit_key TEXT NOT NULL, data TEXT NOT NULL,
    calibration INTEGER NOT NULL, PRIMARY KEY (study, unit_id), UNIQUE (study, unit_key));
CREATE TABLE IF NOT EXISTS assignments (
    study TEXT NOT NULL, rater TEXT NOT NULL, unit_id TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (study, rater, unit_id));
CREATE TABLE IF NOT EXISTS tokens (study TEXT NOT NULL, rater TEXT NOT NULL, hash TEXT NOT NULL,
    PRIMARY KEY (study, rater));
CREATE TABLE IF NOT EXISTS answers (
    study TEXT NOT NULL, unit_id TEXT NOT NULL, rater TEXT NOT NULL, question TEXT NOT NULL, value TEXT,
    unsure INTEGER NOT NULL, comment TEXT, seconds REAL NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (study, unit_id, rater, question));
-- A stratified study: its design (the judge it stratified by, each stratum's inclusion probability) and, for
-- every unit of the run it considered, the unit's stratum and inclusion probability.
CREATE TABLE IF NOT EXISTS designs (study TEXT PRIMARY KEY, kind TEXT NOT NULL, judge TEXT, rates TEXT NOT NULL,
    notes TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS design (study TEXT NOT NULL, unit_key TEXT NOT NULL, stratum TEXT NOT NULL,
    inclusion REAL NOT NULL, PRIMARY KEY (study, unit_key));
CREATE TABLE IF NOT EXISTS history (
    study TEXT NOT NULL, unit_id TEXT NOT NULL, rater TEXT NOT NULL, question TEXT NOT NULL, value TEXT,
    unsure INTEGER NOT NULL, comment TEXT, seconds REAL NOT NULL, at REAL NOT NULL);
"""


@dataclass(frozen=True)
class UnitView:
    """What a rater sees of a unit: the conversation, the reply, the form. Nothing else."""

    unit_id: str
    language: str
    turns: tuple[tuple[str, str], ...]
    reply: str | None
    form: Form
    whole: bool = False  # a whole conversation to rate (conversation-flow), not one reply or one turn

    def transcript(self) -> list[tuple[int, str, str]]:
        """(turn number, role, text) of each turn shown: a person's message opens a turn, the assistant's reply
        to it has the same number (as in `mheval transcript`)."""
        out, number = [], 0
        for role, content in self.turns:
            number += role == "user"
            out.append((max(number, 1), role, content))
        return out

    @property
    def reply_turn(self) -> int:
        """The number of the turn whose reply is rated: the context's last person's message."""
        return max(1, sum(role == "user" for role, _ in self.turns))


@dataclass(frozen=True)
class Unit:
    key: tuple[str, str, int]  # (case, turn or scenario id, model or "", sample or -1): never shown to a rater
    language: str
    turns: tuple[tuple[str, str], ...]
    reply: str | None
    crisis_label: str | None  # picks appropriateness's rubric row; not shown as such


def _connect(run_dir: Path) -> sqlite3.Connection:
    db = sqlite3.connect(run_dir / FILENAME, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA busy_timeout=10000")
    db.executescript(_SCHEMA)
    return db


def run_units(run_dir: Path, protocol: str) -> list[Unit]:
    """Every unit of the run that `protocol` judges, in a stable order."""
    with Store.open_existing(run_dir) as store:
        if protocol == CONVERSATION_FLOW:
            langs = {s.id: s.language for s in store.scenarios()}
            done = {(c.scenario_id, c.model, c.sample) for c in store.conversations() if c.status == "ok"}
            turns: dict[tuple[str, str, int], list[tuple[str, str]]] = {}
            for e in store.exchanges():
                key = (e.scenario_id, e.model, e.sample)
                if key in done:
                    turns.setdefault(key, []).extend([("user", e.user), ("assistant", e.reply or "")])
            return [Unit(k, langs.get(k[0], "en"), tuple(t), None, None) for k, t in sorted(turns.items())]
        spec = load_protocol(protocol)
        cases = {c.id: c for c in store.cases()}
        per_turn = _turn_units(store, with_reply=spec.target != "case")
        if spec.target == "case":
            return [
                Unit((c.id, "", -1), c.language, tuple((t.role, t.content) for t in c.turns), None, None)
                for c in cases.values()
            ] + per_turn
        triage = {j.case_id: j.label for j in store.iter_judgments(CRISIS_TRIAGE) if j.status == "ok" and j.repeat == 0}
        out = []
        for r in store.responses():
            case = cases.get(r.case_id)
            if case is None or r.text is None:
                continue
            # The rubric row the reply was judged under: the run's triage first, as the runner chose it.
            label = case_label(case.crisis_label, triage.get(case.id), prefer="triage")
            out.append(Unit((case.id, r.model, r.sample), case.language,
                            tuple((t.role, t.content) for t in case.turns), r.text, label))  # fmt: skip
        return out + per_turn


def _turn_units(store: Store, *, with_reply: bool) -> list[Unit]:
    """One unit per turn of a multi-turn run's conversations (none for a single-turn run): the conversation up
    to that person's message, what the per-turn judges read, and the reply to it when `with_reply`. Its crisis
    label is the one the run's primary judge judged that turn under (the scenario's truth, or for an imported
    conversation that judge's triage: runfolder/conversation_views.py)."""
    exchanges = store.exchanges()
    if not exchanges:
        return []
    langs = {s.id: s.language for s in store.scenarios()}
    labels = {
        (turn_case_id(v.key[0], e.turn), v.key[1], v.key[2]): v.truth.label_at(e.turn)
        for v in views(store.scenarios(), exchanges, store.conversations(), store.judgments())
        for e in v.exchanges
    }
    out: list[Unit] = []
    context: list[tuple[str, str]] = []
    last: tuple[str, str, int] | None = None
    for e in sorted(exchanges, key=lambda e: (e.scenario_id, e.model, e.sample, e.turn)):
        conversation = (e.scenario_id, e.model, e.sample)
        if conversation != last:
            context, last = [], conversation
        context.append(("user", e.user))
        if e.reply is None:
            continue  # the target failed at this turn: nothing was judged here
        key = (turn_case_id(e.scenario_id, e.turn), e.model, e.sample)
        out.append(Unit(key, langs.get(e.scenario_id, "en"), tuple(context), e.reply if with_reply else None,
                        labels.get(key)))  # fmt: skip
        context.append(("assistant", e.reply))
    return out


class Study:
    """One study of a run folder; see the module docstring."""

    def __init__(self, run_dir: Path, study_id: str, db: sqlite3.Connection) -> None:
        self.run_dir, self.id, self._db = run_dir, study_id, db
        row = db.execute(
            "SELECT protocol, seed, overlap, calibration, raters, rate FROM studies WHERE id=?", (study_id,)
        )
        self.protocol, self.seed, self.overlap, self.calibration, raters, self.rate = row.fetchone()
        self._raters: list[str] = json.loads(raters)
        self._forms: dict[tuple[str, str | None], Form] = {}

    # -- opening ----------------------------------------------------------------------------------
    @classmethod
    def open(cls, run_dir: str | Path, study_id: str | None = None) -> Study:
        run_dir = Path(run_dir)
        if not (run_dir / FILENAME).is_file():
            raise InputError("this run has no study: start one with `mheval annotate init`", path=run_dir)
        db = _connect(run_dir)
        ids = [r[0] for r in db.execute("SELECT id FROM studies ORDER BY created")]
        if study_id is None:
            if not ids:
                raise InputError("this run has no study: start one with `mheval annotate init`", path=run_dir)
            study_id = ids[-1]
        elif study_id not in ids:
            raise InputError(f"no study {study_id!r} in this run", path=run_dir, field="study", choices=ids)
        return cls(run_dir, study_id, db)

    @classmethod
    def create(
        cls, run_dir: str | Path, protocol: str, raters: list[str], *, overlap: int = 2, calibration: int = 0,
        sample: int | None = None, seed: int = 0, study_id: str | None = None, select: str = "random",
        judge: str | None = None,
    ) -> Study:  # fmt: skip
        """``select="neyman"`` rates ``sample`` units stratified by ``judge``'s verdict (annotate/design.py)."""
        from mheval.annotate.design import SELECTIONS

        run_dir = Path(run_dir)
        if select not in SELECTIONS:
            raise InputError(f"unknown selection {select!r}", field="select", choices=SELECTIONS)
        if select == "neyman" and sample is None:
            raise InputError("--select neyman needs --sample N: how many units to rate", field="sample")
        raters = [r.strip() for r in raters if r.strip()]
        if len(set(raters)) != len(raters) or not raters:
            raise InputError("give one or more distinct rater names", field="raters")
        bad = [r for r in raters if not r.replace("-", "").replace("_", "").replace(".", "").isalnum()]
        if bad:
            raise InputError(f"rater name {bad[0]!r}: use letters, digits, '-', '_' and '.'", field="raters")
        if not 1 <= overlap <= len(raters):
            raise InputError(f"--overlap must be between 1 and the number of raters ({len(raters)})", field="overlap")
        if protocol != CONVERSATION_FLOW:
            from mheval.protocols.spec import builtin_ids

            if protocol not in builtin_ids():
                raise InputError(
                    f"unknown protocol {protocol!r}", field="protocol", choices=[*builtin_ids(), CONVERSATION_FLOW]
                )
        units = run_units(run_dir, protocol)  # InputError when run_dir is not a run
        if not units:
            raise InputError(f"the run has nothing that {protocol} judges (run it first)", path=run_dir)
        db = _connect(run_dir)
        study_id = study_id or protocol
        if db.execute("SELECT 1 FROM studies WHERE id=?", (study_id,)).fetchone():
            raise InputError(f"a study {study_id!r} exists in this run: give --study NAME for another", field="study")
        rng = random.Random(seed)
        everything = list(units)
        rate = 1.0
        plan = None
        if select == "neyman":
            assert sample is not None
            plan = _neyman(run_dir, db, protocol, everything, sample, seed, judge)
            units = [everything[i] for i in plan.chosen]
            rate = len(units) / len(everything)
        elif sample is not None and sample < len(units):
            rate = sample / len(units)
            units = rng.sample(units, sample)
        rng.shuffle(units)
        with _tx(db):
            db.execute(
                "INSERT INTO studies VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    study_id,
                    protocol,
                    seed,
                    overlap,
                    min(calibration, len(units)),
                    json.dumps(raters),
                    time.time(),
                    rate,
                ),
            )
            db.executemany("INSERT INTO seen VALUES (?, ?)", [(study_id, json.dumps(u.key)) for u in everything])
            if plan is not None:
                db.execute("INSERT INTO designs VALUES (?, ?, ?, ?, ?)",
                           (study_id, select, plan.judge, json.dumps(plan.rates), json.dumps(plan.notes)))  # fmt: skip
                rows = zip(everything, plan.strata, plan.inclusion, strict=True)
                db.executemany("INSERT INTO design VALUES (?, ?, ?, ?)",
                               [(study_id, json.dumps(u.key), st, p) for u, st, p in rows])  # fmt: skip
        study = cls(run_dir, study_id, db)
        study._plan(units, first=True)
        return study

    # -- the plan ---------------------------------------------------------------------------------
    def _plan(self, units: list[Unit], first: bool = False) -> int:
        """Give new units ids and raters; returns how many were added."""
        known = {r[0] for r in self._db.execute("SELECT unit_key FROM units WHERE study=?", (self.id,))}
        fresh = [u for u in units if json.dumps(u.key) not in known]
        if not fresh:
            return 0
        start = int(self._db.execute("SELECT COUNT(*) FROM units WHERE study=?", (self.id,)).fetchone()[0])
        calib = self.calibration if first else 0
        load = dict.fromkeys(self._raters, 0)
        for rater, n in self._db.execute(
            "SELECT rater, COUNT(*) FROM assignments a JOIN units u USING (study, unit_id) "
            "WHERE study=? AND u.calibration=0 GROUP BY rater",
            (self.id,),
        ):
            load[rater] = n
        own: dict[str, list[tuple[str, Unit]]] = {r: [] for r in self._raters}
        rows, shared = [], []
        for i, unit in enumerate(fresh):
            uid = f"u{start + i + 1:04d}"
            rows.append((self.id, uid, start + i, json.dumps(unit.key), _unit_json(unit), int(i < calib)))
            if i < calib:
                shared.append(uid)
                continue
            order = sorted(self._raters, key=lambda r: (load[r], (self._raters.index(r) - i) % len(self._raters)))
            for rater in order[: self.overlap]:
                load[rater] += 1
                own[rater].append((uid, unit))
        assignments = []
        for rater in self._raters:
            position = self._next_position(rater)
            rng = random.Random(f"{self.seed}:{rater}:{start}")
            mine = own[rater]
            rng.shuffle(mine)
            ordered = shared + [uid for uid, _ in _spread(mine)]
            assignments += [(self.id, rater, uid, position + k) for k, uid in enumerate(ordered)]
        with _tx(self._db):
            self._db.executemany("INSERT INTO units VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._db.executemany("INSERT INTO assignments VALUES (?, ?, ?, ?)", assignments)
        return len(fresh)

    def _next_position(self, rater: str) -> int:
        row = self._db.execute("SELECT MAX(position) FROM assignments WHERE study=? AND rater=?", (self.id, rater))
        top = row.fetchone()[0]
        return 0 if top is None else int(top) + 1

    def add_units(self) -> int:
        """Plan the run's units that appeared since (more replies, more conversations); nothing moves. A
        sampled study takes the same share of the new units, picked by a hash of the seed and the unit."""
        seen = {r[0] for r in self._db.execute("SELECT unit_key FROM seen WHERE study=?", (self.id,))}
        new = [u for u in run_units(self.run_dir, self.protocol) if json.dumps(u.key) not in seen]
        if not new:
            return 0
        design = self._db.execute("SELECT judge, rates FROM designs WHERE study=?", (self.id,)).fetchone()
        rates = [self.rate] * len(new)
        strata: list[str] = []
        if design is not None:
            from mheval.analysis.corrected import headline_measure
            from mheval.annotate.design import judge_outputs, stratum_of

            _, outputs = judge_outputs(self.run_dir, self.protocol, design[0])
            measure = headline_measure(self.protocol)
            binary = measure is not None and measure.binary
            strata = [stratum_of(outputs.get(u.key), binary) for u in new]
            known = json.loads(design[1])
            rates = [float(known.get(st, self.rate)) for st in strata]
        with _tx(self._db):
            self._db.executemany("INSERT INTO seen VALUES (?, ?)", [(self.id, json.dumps(u.key)) for u in new])
            if design is not None:
                rows = zip(new, strata, rates, strict=True)
                self._db.executemany(
                    "INSERT INTO design VALUES (?, ?, ?, ?)", [(self.id, json.dumps(u.key), st, p) for u, st, p in rows]
                )
        return self._plan([u for u, p in zip(new, rates, strict=True) if _fraction(self.seed, u.key) < p])

    def design(self) -> tuple[str, dict[tuple[str, str, int], tuple[str, float]], list[str]] | None:
        """A stratified study's kind, each considered unit's (stratum, inclusion probability) and the plan's
        notes; None for a random sample."""
        row = self._db.execute("SELECT kind, notes FROM designs WHERE study=?", (self.id,)).fetchone()
        if row is None:
            return None
        cur = self._db.execute("SELECT unit_key, stratum, inclusion FROM design WHERE study=?", (self.id,))
        units = {tuple(json.loads(k)): (str(st), float(p)) for k, st, p in cur}
        return str(row[0]), units, list(json.loads(row[1]))

    # -- raters and links -------------------------------------------------------------------------
    def raters(self) -> list[str]:
        return list(self._raters)

    def new_links(self) -> dict[str, str]:
        """A fresh random token per rater; only its hash is kept, and earlier tokens stop working."""
        tokens = {r: secrets.token_urlsafe(18) for r in self._raters}
        with _tx(self._db):
            self._db.executemany(
                "INSERT OR REPLACE INTO tokens VALUES (?, ?, ?)", [(self.id, r, _hash(t)) for r, t in tokens.items()]
            )
        return tokens

    def rater_for(self, token: str) -> str | None:
        given = _hash(token)
        for rater, stored in self._db.execute("SELECT rater, hash FROM tokens WHERE study=?", (self.id,)):
            if hmac.compare_digest(given, stored):
                return str(rater)
        return None

    # -- units ------------------------------------------------------------------------------------
    def queue(self, rater: str) -> list[str]:
        cur = self._db.execute(
            "SELECT unit_id FROM assignments WHERE study=? AND rater=? ORDER BY position", (self.id, rater)
        )
        return [r[0] for r in cur]

    def _unit(self, unit_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT data FROM units WHERE study=? AND unit_id=?", (self.id, unit_id)).fetchone()
        return json.loads(row[0]) if row else None

    def form_for(self, language: str, crisis_label: str | None) -> Form:
        key = (language, crisis_label)
        if key not in self._forms:
            self._forms[key] = (
                build_flow_form(language) if self.protocol == CONVERSATION_FLOW
                else build_form(load_protocol(self.protocol), language, crisis_label)
            )  # fmt: skip
        return self._forms[key]

    def view(self, rater: str, unit_id: str) -> UnitView | None:
        assigned = self._db.execute(
            "SELECT 1 FROM assignments WHERE study=? AND rater=? AND unit_id=?", (self.id, rater, unit_id)
        ).fetchone()
        data = self._unit(unit_id) if assigned else None
        if data is None:
            return None
        turns = tuple((str(r), str(c)) for r, c in data["turns"])
        form = self.form_for(data["language"], data.get("crisis_label"))
        return UnitView(unit_id, data["language"], turns, data.get("reply"), form, self.protocol == CONVERSATION_FLOW)

    # -- answers ----------------------------------------------------------------------------------
    def answers(self, rater: str, unit_id: str) -> dict[str, Answer]:
        cur = self._db.execute(
            "SELECT question, value, unsure, comment, seconds FROM answers WHERE study=? AND rater=? AND unit_id=?",
            (self.id, rater, unit_id),
        )
        return {q: Answer(q, v, bool(u), c, float(s)) for q, v, u, c, s in cur}

    def save_answer(
        self, rater: str, unit_id: str, question: str, value: str | None, *, unsure: bool = False,
        comment: str | None = None, seconds: float = 0.0,
    ) -> None:  # fmt: skip
        view = self.view(rater, unit_id)
        if view is None:
            raise InputError(f"unit {unit_id!r} is not assigned to this rater", field="unit")
        q = view.form.question(question)
        if q is None:
            raise InputError(
                f"unknown question {question!r}", field="question", choices=[x.id for x in view.form.questions]
            )
        if value is not None and q.option(value) is None:
            raise InputError(
                f"{value!r} is not an answer to {question!r}", field="value", choices=[o.value for o in q.options]
            )
        comment = (comment or "").strip()[:2000] or None
        seconds = max(0.0, min(float(seconds), 3600.0))
        row = (self.id, unit_id, rater, question, value, int(unsure), comment, seconds)
        now = time.time()
        with _tx(self._db):
            self._db.execute(
                "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study, unit_id, rater, question) "
                "DO UPDATE SET value=excluded.value, unsure=excluded.unsure, comment=excluded.comment, "
                "seconds=excluded.seconds, updated=excluded.updated",
                (*row, now),
            )
            self._db.execute("INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (*row, now))

    def complete(self, rater: str, unit_id: str) -> bool:
        view = self.view(rater, unit_id)
        if view is None:
            return False
        given = self.answers(rater, unit_id)
        return all(q.id in given and (given[q.id].value is not None or given[q.id].unsure)
                   for q in view.form.questions if q.required)  # fmt: skip

    def progress(self, rater: str) -> tuple[int, int]:
        queue = self.queue(rater)
        return sum(self.complete(rater, u) for u in queue), len(queue)

    # -- for status and export --------------------------------------------------------------------
    def rated(self) -> Iterator[tuple[str, tuple[str, str, int], str, str | None, dict[str, Answer]]]:
        """(rater, unit key, language, crisis label, answers) of every unit a rater fully answered."""
        units = {uid: json.loads(d) for uid, d in self._db.execute("SELECT unit_id, data FROM units WHERE study=?",
                                                                   (self.id,))}  # fmt: skip
        for rater in self._raters:
            for uid in self.queue(rater):
                if self.complete(rater, uid):
                    d = units[uid]
                    yield rater, tuple(d["key"]), d["language"], d.get("crisis_label"), self.answers(rater, uid)

    def seconds_per_unit(self, rater: str) -> list[float]:
        """Seconds from opening each fully answered unit to its last answer (the page sends it)."""
        cur = self._db.execute(
            "SELECT unit_id, MAX(seconds) FROM answers WHERE study=? AND rater=? GROUP BY unit_id", (self.id, rater)
        )
        return [float(s) for uid, s in cur if self.complete(rater, uid)]

    def history_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM history WHERE study=?", (self.id,)).fetchone()[0])

    def close(self) -> None:
        self._db.close()


def _neyman(run_dir: Path, db: sqlite3.Connection, protocol: str, units: list[Unit], sample: int, seed: int,
            judge: str | None) -> Any:  # fmt: skip
    """The Neyman plan over the run's units, with an earlier study's ratings of this protocol as the pilot."""
    from mheval.analysis.corrected import headline_measure, human_values
    from mheval.annotate.design import judge_outputs, neyman_plan

    name, outputs = judge_outputs(run_dir, protocol, judge)
    if not outputs:
        what = "conversation verdict" if protocol == CONVERSATION_FLOW else f"ok judgment of {protocol}"
        raise InputError(f"no {what} in this run to stratify by: judge it first", path=run_dir)
    measure = headline_measure(protocol)
    assert measure is not None  # judge_outputs found values of it
    pilot: dict[tuple[str, str, int], float] = {}
    for (earlier,) in db.execute("SELECT id FROM studies WHERE protocol=? ORDER BY created", (protocol,)).fetchall():
        labels = labels_frame(protocol, Study(run_dir, earlier, db).rated())
        if not labels.empty:
            for (case, model, number), v in human_values(labels, measure).items():
                pilot[(case, model, int(number) if number else -1)] = v
    plan = neyman_plan([u.key for u in units], outputs, binary=measure.binary, budget=sample, seed=seed, pilot=pilot)
    plan.judge = name
    return plan


def list_studies(run_dir: str | Path) -> list[str]:
    path = Path(run_dir) / FILENAME
    if not path.is_file():
        return []
    db = _connect(Path(run_dir))
    try:
        return [r[0] for r in db.execute("SELECT id FROM studies ORDER BY created")]
    finally:
        db.close()


def _unit_json(unit: Unit) -> str:
    return json.dumps({"key": list(unit.key), "language": unit.language, "turns": [list(t) for t in unit.turns],
                       "reply": unit.reply, "crisis_label": unit.crisis_label}, ensure_ascii=False)  # fmt: skip


def _spread(units: list[tuple[str, Unit]]) -> list[tuple[str, Unit]]:
    """The same units, reordered so that two replies to the same case (or two turns of one conversation) are
    never next to each other (when that is possible): a rater never compares two models' replies side by side."""
    out: list[tuple[str, Unit]] = []
    pending = list(units)
    while pending:
        last = _conversation_of(out[-1][1]) if out else None
        pick = next((i for i, (_, u) in enumerate(pending) if _conversation_of(u) != last), 0)
        out.append(pending.pop(pick))
    return out


def _conversation_of(unit: Unit) -> str:
    parts = split_turn_case_id(unit.key[0])
    return parts[0] if parts is not None else unit.key[0]


def _fraction(seed: int, key: tuple[str, str, int]) -> float:
    """A stable number in [0, 1) for a unit: which new units a sampled study takes."""
    digest = hashlib.sha256(json.dumps([seed, list(key)]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@contextmanager
def _tx(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
