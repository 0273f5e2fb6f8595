"""The run store: one SQLite database (WAL) per run folder, one transaction per finished unit.

Each record is kept as its JSON form plus the columns that make up its unit key, so a resumed run
can ask "which units are finished?" with one indexed query, and a kill between two units loses
nothing that was committed.

Group commit (`with store.deferred(): ...`, what the engine uses): single puts of judgments, responses
and cache entries wait in memory and are written together, one transaction per `flush()`, which
happens when `max_pending` rows wait, when the engine's timer calls it (every fraction of a second),
before any read, and on leaving the block or closing. At hundreds of units per second this turns
hundreds of commits into a few; a kill loses at most the units finished since the last flush, and
those are simply done again on resume (their keys were never marked finished).

Recorded conversations are stored through the same buffer (`put_imported`): a conversation's exchanges and
its end row wait together and are written in the same transaction or an earlier one than its end row, so a
kill never leaves a conversation marked finished without its exchanges (exchanges without an end row are
not judged, and the next import writes them again).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mheval.records import Case, Conversation, Exchange, Judgment, Reason, Response

if TYPE_CHECKING:
    from mheval.conversations.scenario import Scenario

# Case-level judgments (triage) have no model or sample; SQLite treats NULLs in a primary key as
# distinct, so they are stored under these sentinels to keep "one row per unit" enforceable.
NO_MODEL = ""
NO_SAMPLE = -1

# Unscored results with these reasons are retried when a run resumes (Reason.retryable).
RETRYABLE_REASONS = tuple(r.value for r in Reason if r.retryable)
_RETRYABLE_SQL = "(" + ", ".join(f"'{r}'" for r in RETRYABLE_REASONS) + ")"

# Version of the tables below; a folder written by an older mheval is migrated on open (see _migrate).
SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases (
    id TEXT PRIMARY KEY, ord INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS responses (
    case_id TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL,
    ok INTEGER NOT NULL, data TEXT NOT NULL, inputs TEXT,
    PRIMARY KEY (case_id, model, sample));
CREATE TABLE IF NOT EXISTS judgments (
    case_id TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL,
    protocol TEXT NOT NULL, judge TEXT NOT NULL, repeat INTEGER NOT NULL,
    status TEXT NOT NULL, reason TEXT, data TEXT NOT NULL, inputs TEXT,
    PRIMARY KEY (case_id, model, sample, protocol, judge, repeat));
CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY, model TEXT NOT NULL, endpoint TEXT NOT NULL, requests INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS batch_requests (custom_id TEXT PRIMARY KEY, batch_id TEXT NOT NULL);
-- Multi-turn runs (engine/conversation_stages.py): the scenarios, each exchange of a conversation as it
-- finishes, and how each conversation ended.
CREATE TABLE IF NOT EXISTS scenarios (id TEXT PRIMARY KEY, ord INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS exchanges (
    scenario_id TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL, turn INTEGER NOT NULL,
    data TEXT NOT NULL, inputs TEXT, PRIMARY KEY (scenario_id, model, sample, turn));
CREATE TABLE IF NOT EXISTS conversations (
    scenario_id TEXT NOT NULL, model TEXT NOT NULL, sample INTEGER NOT NULL,
    data TEXT NOT NULL, inputs TEXT, PRIMARY KEY (scenario_id, model, sample));
-- Rows replaced because their inputs changed: kept for the record, never read as current results.
CREATE TABLE IF NOT EXISTS superseded (
    tbl TEXT NOT NULL, data TEXT NOT NULL, inputs TEXT, replaced_at REAL NOT NULL);
"""

_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS keep_old_response AFTER UPDATE ON responses
    WHEN OLD.inputs IS NOT NEW.inputs BEGIN
    INSERT INTO superseded VALUES ('responses', OLD.data, OLD.inputs, julianday('now'));
END;
CREATE TRIGGER IF NOT EXISTS keep_old_judgment AFTER UPDATE ON judgments
    WHEN OLD.inputs IS NOT NEW.inputs BEGIN
    INSERT INTO superseded VALUES ('judgments', OLD.data, OLD.inputs, julianday('now'));
END;
"""

# Upserts (not INSERT OR REPLACE) so that the triggers above see the row being replaced.
_PUT_RESPONSE = (
    "INSERT INTO responses(case_id, model, sample, ok, data, inputs) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(case_id, model, sample) DO UPDATE SET ok=excluded.ok, data=excluded.data, inputs=excluded.inputs"
)
_PUT_JUDGMENT = (
    "INSERT INTO judgments(case_id, model, sample, protocol, judge, repeat, status, reason, data, inputs) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(case_id, model, sample, protocol, judge, repeat) "
    "DO UPDATE SET status=excluded.status, reason=excluded.reason, data=excluded.data, inputs=excluded.inputs"
)
_PUT_EXCHANGE = (
    "INSERT OR REPLACE INTO exchanges(scenario_id, model, sample, turn, data, inputs) VALUES (?, ?, ?, ?, ?, ?)"
)
_PUT_CONVERSATION = (
    "INSERT OR REPLACE INTO conversations(scenario_id, model, sample, data, inputs) VALUES (?, ?, ?, ?, ?)"
)
_PUT_CACHE = "INSERT OR REPLACE INTO cache(key, data) VALUES (?, ?)"
_GET_CACHE = "SELECT data FROM cache WHERE key=?"

ResponseKey = tuple[str, str, int]
JudgmentKey = tuple[str, str, int, str, str, int]


def judgment_key(j: Judgment) -> JudgmentKey:
    model = j.model if j.model is not None else NO_MODEL
    sample = j.sample if j.sample is not None else NO_SAMPLE
    return (j.case_id, model, sample, j.protocol, j.judge, j.repeat)


Inputs = dict[str, str]


def _inputs_json(inputs: Inputs | None) -> str | None:
    return json.dumps(inputs, sort_keys=True) if inputs is not None else None


def _response_row(r: Response, inputs: Inputs | None = None) -> tuple[Any, ...]:
    return (r.case_id, r.model, r.sample, int(r.text is not None), r.model_dump_json(), _inputs_json(inputs))


def _judgment_row(j: Judgment, inputs: Inputs | None = None) -> tuple[Any, ...]:
    return (*judgment_key(j), j.status, j.reason, j.model_dump_json(), _inputs_json(inputs))


def _exchange_row(e: Exchange, inputs: Inputs | None) -> tuple[Any, ...]:
    return (e.scenario_id, e.model, e.sample, e.turn, e.model_dump_json(), _inputs_json(inputs))


def _conversation_row(c: Conversation, inputs: Inputs | None) -> tuple[Any, ...]:
    return (c.scenario_id, c.model, c.sample, c.model_dump_json(), _inputs_json(inputs))


def _conversation_filter(scenario_id: str | None, model: str | None, sample: int | None) -> tuple[str, list[Any]]:
    parts = [
        (c, v) for c, v in (("e.scenario_id", scenario_id), ("e.model", model), ("e.sample", sample)) if v is not None
    ]
    return (" WHERE " + " AND ".join(f"{c}=?" for c, _ in parts) if parts else ""), [v for _, v in parts]


_SLICE = 500  # ids bound in one query (under SQLite's oldest limit of 999 parameters)


def _slices(ids: Iterable[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for i in dict.fromkeys(ids):
        batch.append(i)
        if len(batch) == _SLICE:
            yield batch
            batch = []
    if batch:
        yield batch


def _inputs_of(text: str | None) -> Inputs | None:
    return json.loads(text) if text else None


class Store:
    """A run's SQLite database. Not thread-safe: the engine writes from its event loop thread only."""

    FILENAME = "run.db"

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        if readonly:  # another process's reader (a Ray worker): it never takes a write lock
            self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout=10000")
        else:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA busy_timeout=10000")
            self._db.executescript(_SCHEMA)
            self._migrate()
            self._db.executescript(_TRIGGERS)
        # Group commit (see the module docstring); off unless inside `deferred()`.
        self._defer = 0
        self._max_pending = 256
        self._pending_judgments: list[tuple[Any, ...]] = []
        self._pending_responses: list[tuple[Any, ...]] = []
        self._pending_cache: dict[str, str] = {}
        self._pending_exchanges: list[tuple[Any, ...]] = []
        self._pending_conversations: list[tuple[Any, ...]] = []

    @classmethod
    def open(cls, run_dir: str | Path) -> Store:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        return cls(run_dir / cls.FILENAME)

    @classmethod
    def open_existing(cls, run_dir: str | Path) -> Store:
        """A run folder's store, after checking it is one (runfolder/check.py): a damaged or foreign run.db is an
        InputError ("not an mheval run folder (...)") and is never written to."""
        from mheval.runfolder.check import check_run_db

        path = Path(run_dir) / cls.FILENAME
        check_run_db(path, run_dir)
        return cls(path)

    @classmethod
    def open_readonly(cls, run_dir: str | Path) -> Store | None:
        """The run's store for reading only, or None when this machine cannot see it."""
        path = Path(run_dir) / cls.FILENAME
        try:
            return cls(path, readonly=True) if path.is_file() else None
        except sqlite3.Error:
            return None

    def close(self) -> None:
        self.flush()
        self._db.close()

    # -- group commit -------------------------------------------------------------------------
    @contextmanager
    def deferred(self, max_pending: int = 256) -> Iterator[Store]:
        """Buffer single puts and write them in one transaction per flush (see the module docstring)."""
        self._defer += 1
        previous, self._max_pending = self._max_pending, max(1, max_pending)
        try:
            yield self
        finally:
            self._defer -= 1
            self._max_pending = previous
            self.flush()

    @property
    def pending(self) -> int:
        """Rows waiting for the next flush."""
        return (
            len(self._pending_judgments) + len(self._pending_responses) + len(self._pending_cache)
            + len(self._pending_exchanges) + len(self._pending_conversations)
        )  # fmt: skip

    def flush(self) -> None:
        """Write every buffered row in one transaction."""
        if not self.pending:
            return
        judgments, self._pending_judgments = self._pending_judgments, []
        responses, self._pending_responses = self._pending_responses, []
        cache, self._pending_cache = self._pending_cache, {}
        exchanges, self._pending_exchanges = self._pending_exchanges, []
        conversations, self._pending_conversations = self._pending_conversations, []
        with self._transaction():
            if exchanges:  # before the conversations' end rows (see the module docstring)
                self._db.executemany(_PUT_EXCHANGE, exchanges)
            if conversations:
                self._db.executemany(_PUT_CONVERSATION, conversations)
            if responses:
                self._db.executemany(_PUT_RESPONSE, responses)
            if judgments:
                self._db.executemany(_PUT_JUDGMENT, judgments)
            if cache:
                self._db.executemany(_PUT_CACHE, cache.items())

    def _buffered(self) -> None:
        if self.pending >= self._max_pending:
            self.flush()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- meta -------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, json.dumps(value)),
        )

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    # -- cases ------------------------------------------------------------------------------
    def put_cases(self, cases: Iterable[Case]) -> None:
        self._put_in_order("cases", cases)

    def cases(self) -> list[Case]:
        cur = self._db.execute("SELECT data FROM cases ORDER BY ord")
        return [Case.model_validate_json(r[0]) for r in cur]

    # -- responses --------------------------------------------------------------------------
    def put_response(self, response: Response, inputs: Inputs | None = None) -> None:
        """Store a response; `inputs` (engine/identity.py) is what decided it, for resume to check."""
        if self._defer:
            self._pending_responses.append(_response_row(response, inputs))
            self._buffered()
            return
        self.put_responses([response], [inputs])

    def put_responses(self, responses: Iterable[Response], inputs: Iterable[Inputs | None] | None = None) -> None:
        responses = list(responses)
        given = list(inputs) if inputs is not None else [None] * len(responses)
        rows = [_response_row(r, i) for r, i in zip(responses, given, strict=True)]
        self.flush()  # keep write order: a buffered older row must not overwrite this one later
        with self._transaction():
            self._db.executemany(_PUT_RESPONSE, rows)

    def responses(self, model: str | None = None) -> list[Response]:
        self.flush()
        if model is None:
            cur = self._db.execute("SELECT data FROM responses ORDER BY rowid")
        else:
            cur = self._db.execute("SELECT data FROM responses WHERE model=? ORDER BY rowid", (model,))
        return [Response.model_validate_json(r[0]) for r in cur]

    def reply_texts(self) -> dict[ResponseKey, str | None]:
        """Each stored reply's text (None for a failed call), in the order stored, read without building
        Response records: a resumed run checks every reply's digest, and parses only those it redoes."""
        self.flush()
        cur = self._db.execute(
            "SELECT case_id, model, sample, json_extract(data, '$.text') FROM responses ORDER BY rowid"
        )
        return {(r[0], r[1], r[2]): r[3] for r in cur}

    def response_inputs(self, *, finished: bool = False) -> dict[ResponseKey, Inputs | None]:
        """The inputs that decided each stored response (engine/identity.py); with `finished`, only the
        responses with text (a failed call is retried on resume)."""
        self.flush()
        where = " WHERE ok=1" if finished else ""
        cur = self._db.execute("SELECT case_id, model, sample, inputs FROM responses" + where)
        return {(r[0], r[1], r[2]): _inputs_of(r[3]) for r in cur}

    # -- judgments --------------------------------------------------------------------------
    def put_judgment(self, judgment: Judgment, inputs: Inputs | None = None) -> None:
        row = _judgment_row(judgment, inputs)
        if self._defer:
            self._pending_judgments.append(row)
            self._buffered()
            return
        with self._transaction():
            self._db.execute(_PUT_JUDGMENT, row)

    def put_judgments(self, judgments: Iterable[Judgment]) -> None:
        """Many judgments in one transaction (imports, panels): all of them or none."""
        rows = [_judgment_row(j) for j in judgments]
        self.flush()  # keep write order: a buffered older row must not overwrite these later
        with self._transaction():
            self._db.executemany(_PUT_JUDGMENT, rows)

    def judgments(self, protocol: str | None = None) -> list[Judgment]:
        return list(self.iter_judgments(protocol))

    def iter_judgments(self, protocol: str | None = None) -> Iterator[Judgment]:
        self.flush()
        sql = "SELECT data FROM judgments"
        args: tuple[str, ...] = ()
        if protocol is not None:
            sql += " WHERE protocol=?"
            args = (protocol,)
        for row in self._db.execute(sql + " ORDER BY rowid", args):
            yield Judgment.model_validate_json(row[0])

    def judgment_inputs(self, *, finished: bool = False) -> dict[JudgmentKey, Inputs | None]:
        """The inputs that decided each stored judgment; with `finished`, only the final ones (ok, or
        unscored for a reason another call would not change)."""
        self.flush()
        where = f" WHERE status='ok' OR reason NOT IN {_RETRYABLE_SQL}" if finished else ""
        cur = self._db.execute("SELECT case_id, model, sample, protocol, judge, repeat, inputs FROM judgments" + where)
        return {(r[0], r[1], r[2], r[3], r[4], r[5]): _inputs_of(r[6]) for r in cur}

    def judgments_by_prefix(self, prefixes: Iterable[str], protocol: str | None = None) -> Iterator[Judgment]:
        """The stored judgments whose case id starts with one of `prefixes` (each read by a range of the key's
        index, in the order stored): the per-turn judgments of a few conversations, without reading the run's."""
        self.flush()
        extra, args = (" AND protocol=?", (protocol,)) if protocol is not None else ("", ())
        for prefix in dict.fromkeys(prefixes):
            if not prefix:
                continue
            upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)  # UTF-8 keeps code point order
            sql = f"SELECT data FROM judgments WHERE case_id >= ? AND case_id < ?{extra} ORDER BY rowid"
            for row in self._db.execute(sql, (prefix, upper, *args)):
                yield Judgment.model_validate_json(row[0])

    def judgment_inputs_of(
        self, case_ids: Iterable[str], *, finished: bool = False
    ) -> dict[JudgmentKey, Inputs | None]:
        """`judgment_inputs` of these case ids only, read a slice of ids at a time: a stage that walks a large
        run in chunks reads only the chunk's."""
        self.flush()
        extra = f" AND (status='ok' OR reason NOT IN {_RETRYABLE_SQL})" if finished else ""
        out: dict[JudgmentKey, Inputs | None] = {}
        for ids in _slices(case_ids):
            cur = self._db.execute(
                "SELECT case_id, model, sample, protocol, judge, repeat, inputs FROM judgments "
                f"WHERE case_id IN ({','.join('?' * len(ids))}){extra}",
                ids,
            )
            out.update({(r[0], r[1], r[2], r[3], r[4], r[5]): _inputs_of(r[6]) for r in cur})
        return out

    def supersede(self, responses: Iterable[ResponseKey] = (), judgments: Iterable[JudgmentKey] = ()) -> int:
        """Move rows whose inputs no longer hold (a case edited, a reply made anew) out of the current
        results into `superseded`, in one transaction. Returns how many rows moved."""
        self.flush()
        moved = 0
        with self._transaction():
            for table, keys, columns in (
                ("responses", list(responses), "case_id=? AND model=? AND sample=?"),
                ("judgments", list(judgments),
                 "case_id=? AND model=? AND sample=? AND protocol=? AND judge=? AND repeat=?"),
            ):  # fmt: skip
                for key in keys:
                    self._db.execute(
                        f"INSERT INTO superseded SELECT ?, data, inputs, julianday('now') FROM {table} WHERE {columns}",
                        (table, *key),
                    )
                    moved += self._db.execute(f"DELETE FROM {table} WHERE {columns}", key).rowcount
        return moved

    def provider_errors(self) -> int:
        """Failed calls that running again retries: responses without text, judgments unscored for a
        provider's reason, and conversations stopped by a provider failure."""
        self.flush()
        failed = self._db.execute("SELECT COUNT(*) FROM responses WHERE ok=0").fetchone()[0]
        unscored = self._db.execute(
            f"SELECT COUNT(*) FROM judgments WHERE status='unscored' AND reason IN {_RETRYABLE_SQL}"
        ).fetchone()[0]
        stopped = self._db.execute(  # conversations cut short by a failing target or simulator endpoint
            f"SELECT COUNT(*) FROM conversations WHERE json_extract(data, '$.reason') IN {_RETRYABLE_SQL}"
        ).fetchone()[0]
        return int(failed) + int(unscored) + int(stopped)

    def count(self, table: str) -> int:
        if table not in (
            "cases",
            "responses",
            "judgments",
            "cache",
            "superseded",
            "scenarios",
            "exchanges",
            "conversations",
        ):
            raise ValueError(f"unknown table {table}")
        self.flush()
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    # -- multi-turn conversations -----------------------------------------------------------
    def put_scenarios(self, scenarios: Iterable[Scenario]) -> None:
        self._put_in_order("scenarios", scenarios)

    def _put_in_order(self, table: Literal["cases", "scenarios"], records: Iterable[Case | Scenario]) -> None:
        """Store records by id as JSON in the order given (a record stored before takes its new place and
        content), in one transaction."""
        rows = [(r.id, i, r.model_dump_json()) for i, r in enumerate(records)]
        with self._transaction():
            self._db.executemany(
                f"INSERT INTO {table}(id, ord, data) VALUES (?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET ord=excluded.ord, data=excluded.data",
                rows,
            )

    def scenarios(self) -> list[Scenario]:
        """The run's scenarios, and the records of its imported conversations (a Scenario kind of their own)."""
        from mheval.conversations.imported import stored_scenario

        cur = self._db.execute("SELECT data FROM scenarios ORDER BY ord")
        return [stored_scenario(r[0]) for r in cur]

    def put_exchange(self, exchange: Exchange, inputs: Inputs | None = None) -> None:
        """One finished exchange, in its own transaction: a kill loses at most the exchange in progress."""
        self.flush()
        with self._transaction():
            self._db.execute(_PUT_EXCHANGE, _exchange_row(exchange, inputs))

    def put_imported(self, exchanges: Iterable[Exchange], conversation: Conversation, inputs: Inputs | None) -> None:
        """A recorded conversation's exchanges and its end row. Inside `deferred()` they wait in the buffer and
        are written with other conversations in one transaction (the end row never before its exchanges);
        outside it, in one transaction of their own."""
        rows = [_exchange_row(e, inputs) for e in exchanges]
        end = _conversation_row(conversation, inputs)
        if self._defer:
            self._pending_exchanges += rows
            self._pending_conversations.append(end)
            self._buffered()
            return
        self.flush()
        with self._transaction():
            self._db.executemany(_PUT_EXCHANGE, rows)
            self._db.execute(_PUT_CONVERSATION, end)

    def exchanges(
        self, scenario_id: str | None = None, model: str | None = None, sample: int | None = None
    ) -> list[Exchange]:
        """Stored exchanges in conversation order (scenario, model, sample, turn), optionally of one."""
        self.flush()
        where, args = _conversation_filter(scenario_id, model, sample)
        cur = self._db.execute(
            "SELECT e.data FROM exchanges e LEFT JOIN scenarios s ON s.id = e.scenario_id"
            f"{where} ORDER BY s.ord, e.scenario_id, e.model, e.sample, e.turn",
            args,
        )
        return [Exchange.model_validate_json(r[0]) for r in cur]

    def exchanges_of(self, keys: Iterable[tuple[str, str, int]]) -> dict[tuple[str, str, int], list[Exchange]]:
        """The stored exchanges of these conversations (scenario, model, sample), each in turn order: a stage
        that walks a large run in chunks holds one chunk's exchanges, not the run's."""
        self.flush()
        out: dict[tuple[str, str, int], list[Exchange]] = {}
        for key in keys:
            cur = self._db.execute(
                "SELECT data FROM exchanges WHERE scenario_id=? AND model=? AND sample=? ORDER BY turn", key
            )
            out[key] = [Exchange.model_validate_json(r[0]) for r in cur]
        return out

    def exchange_inputs(self) -> dict[tuple[str, str, int, int], Inputs | None]:
        self.flush()
        cur = self._db.execute("SELECT scenario_id, model, sample, turn, inputs FROM exchanges")
        return {(r[0], r[1], r[2], r[3]): _inputs_of(r[4]) for r in cur}

    def put_conversation(self, conversation: Conversation, inputs: Inputs | None = None) -> None:
        self.flush()
        with self._transaction():
            self._db.execute(_PUT_CONVERSATION, _conversation_row(conversation, inputs))

    def conversations(self) -> list[Conversation]:
        self.flush()
        cur = self._db.execute(
            "SELECT c.data FROM conversations c LEFT JOIN scenarios s ON s.id = c.scenario_id "
            "ORDER BY s.ord, c.scenario_id, c.model, c.sample"
        )
        return [Conversation.model_validate_json(r[0]) for r in cur]

    def conversation_inputs(self) -> dict[tuple[str, str, int], Inputs | None]:
        self.flush()
        cur = self._db.execute("SELECT scenario_id, model, sample, inputs FROM conversations")
        return {(r[0], r[1], r[2]): _inputs_of(r[3]) for r in cur}

    def restart_conversation(self, scenario_id: str, model: str, sample: int, from_turn: int = 1) -> int:
        """Move a conversation's exchanges from `from_turn` on (and its end) to `superseded`: what decided
        them changed, so the conversation is played again from there."""
        self.flush()
        key = (scenario_id, model, sample)
        with self._transaction():
            for table, extra, args in (
                ("exchanges", " AND turn >= ?", (*key, from_turn)),
                ("conversations", "", key),
            ):
                where = f"scenario_id=? AND model=? AND sample=?{extra}"
                self._db.execute(
                    f"INSERT INTO superseded SELECT ?, data, inputs, julianday('now') FROM {table} WHERE {where}",
                    (table, *args),
                )
                moved = self._db.execute(f"DELETE FROM {table} WHERE {where}", args).rowcount
        return int(moved)

    # -- cache of model calls ---------------------------------------------------------------
    def cache_get(self, key: str) -> dict[str, Any] | None:
        """One primary-key lookup (after a look in the rows waiting for the next flush)."""
        data = self._pending_cache.get(key) if self._pending_cache else None
        if data is None:
            row = self._db.execute(_GET_CACHE, (key,)).fetchone()
            data = row[0] if row else None
        return json.loads(data) if data is not None else None

    def cache_put(self, key: str, value: dict[str, Any]) -> None:
        data = json.dumps(value)
        if self._defer:
            self._pending_cache[key] = data
            self._buffered()
            return
        with self._transaction():
            self._db.execute(_PUT_CACHE, (key, data))

    # -- Batch API jobs (engine/batch.py) ---------------------------------------------------
    def put_batch(self, batch_id: str, model: str, endpoint: str, custom_ids: list[str]) -> None:
        """Note a submitted batch and the calls (by cache key) it holds, committed at once even under
        group commit: a restarted run must find the job it already paid for, not submit it again."""
        self.flush()
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO batches(id, model, endpoint, requests) VALUES (?, ?, ?, ?)",
                (batch_id, model, endpoint, len(custom_ids)),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO batch_requests(custom_id, batch_id) VALUES (?, ?)",
                ((c, batch_id) for c in custom_ids),
            )

    def batch_of(self, custom_id: str) -> str | None:
        """The batch that holds this call, if one was submitted and the call not given up since."""
        row = self._db.execute("SELECT batch_id FROM batch_requests WHERE custom_id=?", (custom_id,)).fetchone()
        return row[0] if row else None

    def forget_batch_request(self, custom_id: str) -> None:
        """The batch could not answer this call: the next attempt submits it anew."""
        with self._transaction():
            self._db.execute("DELETE FROM batch_requests WHERE custom_id=?", (custom_id,))

    def batches(self) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT id, model, endpoint, requests FROM batches ORDER BY rowid").fetchall()
        return [dict(zip(("id", "model", "endpoint", "requests"), r, strict=True)) for r in rows]

    # -- internals --------------------------------------------------------------------------
    def _migrate(self) -> None:
        """Bring a folder of an older schema up to SCHEMA_VERSION. Version 1 kept no unit inputs: its
        rows get none, so each unit is done again when its stage next runs (model calls answered from
        the call cache), never reused on trust."""
        version = self.get_meta("schema_version", None)
        if version is not None and version > SCHEMA_VERSION:
            from mheval.errors import InputError

            raise InputError(
                f"this run folder was written by a newer mheval (schema {version}; this one reads up to "
                f"{SCHEMA_VERSION}): upgrade mheval to use it",
                path=self.path,
            )
        for table in ("responses", "judgments"):
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if "inputs" not in columns:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN inputs TEXT")
        # Version 1 kept "kind: detail" in the reason column; the column now holds the kind (Reason).
        self._db.execute(
            "UPDATE judgments SET reason = rtrim(substr(reason, 1, instr(reason, ':') - 1)) "
            "WHERE instr(reason, ':') > 0"
        )
        if version != SCHEMA_VERSION:
            self.set_meta("schema_version", SCHEMA_VERSION)

    class _Tx:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> None:
            self.db.execute("BEGIN IMMEDIATE")

        def __exit__(self, exc_type: object, *rest: object) -> None:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")

    def _transaction(self) -> Store._Tx:
        return Store._Tx(self._db)
