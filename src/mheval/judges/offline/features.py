"""Feature blocks of the trained offline judges: what a model file asks for, by name.

A model file lists its blocks (e.g. `["emb:response", "emb:context", "cos:response,last_user"]`); the
same code builds them at training and at judging time, so a saved judge sees exactly what it was
trained on. Every block is a fixed-width slice of one float32 vector.

Blocks:
- `emb:user`, `emb:context`, `emb:last_user`, `emb:response`: the 512-d USE embedding of that text
  (see embed.py for how each text is cut to its budget).
- `e5:user`, `e5:context`, `e5:last_user`, `e5:response`: the 384-d multilingual-e5-small embedding of
  the same text (stronger, slower; embed.py).
- `e5:user_turns` (and `emb:user_turns`): the mean of the user turns' embeddings, each turn embedded alone
  (embed.user_turn_texts), scaled back to unit length. For a one-turn case it is `e5:user` exactly; in a
  conversation each turn is embedded once and every later reply reuses it, where `e5:user` embeds the whole
  user side again at each reply (hundreds of tokens deep in a long conversation).
- `e5:pair` (and `emb:pair`, `ngram:pair`): the conversation and the reply as one text,
  `context [SEP] response` (embed.pair_text), so the encoder reads the reply against what it answers.
- `cos:A,B`: cosine of two of the USE embeddings (1 value).
- `lex:triage`: log(1 + score) of the lexicon's six crisis labels over the user's turns (6).
- `lex:psycrisis`: the lexicon's five PsyCrisis dimensions of the response, 0/1 (5).
- `label:crisis`: one-hot of the crisis label given with the unit (7; all zero when none is known).
- `len:response`: log(1 + characters of the response) (1).
- `surface:reply`: how a reply relates to the last user turn, language-neutral (8): share of the
  reply's character bigrams found in the last user turn and in the context, share of the last user
  turn's bigrams echoed, distinct-character ratio of the reply, question marks and line breaks in
  the reply, whether the last user turn is a question, whether the context is a single turn.
- `ngram:user`, `ngram:context`, `ngram:last_user`, `ngram:response`: hashed n-grams of the same (cut)
  text an `emb:` block would embed (`NGRAM_BUCKETS` values, see `ngram_vector`). They read the exact
  words (and Chinese characters) the sentence encoder smooths over, cost about a millisecond, and
  store no text: a model keeps one weight per hash bucket, never a vocabulary. The head's scaling
  of these columns (idf and a block weight, fit.py) lives in the model file like any other scaling.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline import embed
from mheval.judges.offline.lexicon import DEFAULT_LEXICON, PSYCRISIS_DIMENSIONS, TriageResult, score_psycrisis, triage
from mheval.labels import CRISIS_LABELS, NO_CRISIS
from mheval.records import Case

TEXTS = ("user", "context", "last_user", "response", "pair")
TURN_TEXTS = ("user_turns",)  # several texts, one vector: encoder blocks only
_LEX_LABELS = tuple(label for label in CRISIS_LABELS if label != NO_CRISIS)
_SPACE_OR_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)
_QUESTION = re.compile(r"[?？]\s*$")
_WORD = re.compile(r"\w+", re.UNICODE)
_WHITESPACE = re.compile(r"\s+", re.UNICODE)

NGRAM_BUCKETS = 4096
NGRAM_CHAR_ORDERS = (2, 3, 4)
NGRAM_WORD_ORDERS = (1, 2)
# FNV-1a's 64-bit prime and offset: a fixed, platform-independent hash (Python's hash() is salted per
# process). Each n-gram order and kind gets its own starting value, so "ab" as a character bigram and
# "ab" as a word do not share a bucket by construction.
_FNV_PRIME = np.uint64(0x100000001B3)
_FNV_OFFSET = 0xCBF29CE484222325
_GOLDEN = 0x9E3779B97F4A7C15


@dataclass(frozen=True)
class Item:
    """One unit to featurise: a case, maybe a response text, maybe the crisis label that goes with it."""

    case: Case
    response: str | None = None
    crisis_label: str | None = None


def texts_of(kind: str, item: Item) -> list[str]:
    """The (cut) texts an encoder block embeds: one, or one per user turn for `user_turns`."""
    return embed.user_turn_texts(item.case) if kind == "user_turns" else [text_of(kind, item)]


def text_of(kind: str, item: Item) -> str:
    """The (cut) text an `emb:` block embeds."""
    if kind == "user":
        return embed.user_text(item.case)
    if kind == "context":
        return embed.context_text(item.case)
    if kind == "last_user":
        return embed.clip(item.case.last_user_text, embed.CONTEXT_BUDGET)
    if kind == "response":
        return embed.clip(item.response or "", embed.RESPONSE_BUDGET)
    if kind == "pair":
        return embed.pair_text(item.case, item.response or "")
    raise InputError(f"unknown text {kind!r}", field="features", choices=TEXTS)


ENCODER_OF_BLOCK: dict[str, embed.EncoderKind] = {"emb": "use", "e5": "e5"}


def width(block: str) -> int:
    """How many values a block contributes; raises InputError for an unknown block."""
    kind, _, arg = block.partition(":")
    if kind in ENCODER_OF_BLOCK and (arg in TEXTS or arg in TURN_TEXTS):
        return embed.DIMS[ENCODER_OF_BLOCK[kind]]
    if kind == "ngram" and arg in TEXTS:
        return NGRAM_BUCKETS
    if kind == "cos" and len(arg.split(",")) == 2 and all(a in TEXTS for a in arg.split(",")):
        return 1
    fixed = {
        "lex:triage": len(_LEX_LABELS),
        "lex:psycrisis": len(PSYCRISIS_DIMENSIONS),
        "label:crisis": len(CRISIS_LABELS),
        "len:response": 1,
        "surface:reply": 8,
    }
    if block in fixed:
        return fixed[block]
    raise InputError(
        f"unknown feature block {block!r}",
        field="features",
        choices=[
            *(f"{k}:{t}" for k in ("emb", "e5", "ngram") for t in TEXTS),
            *(f"{k}:{t}" for k in ("emb", "e5") for t in TURN_TEXTS),
            "cos:A,B",
            *fixed,
        ],
    )


def is_ngram(block: str) -> bool:
    """Whether a block holds hashed n-grams (sparse, non-negative: the head scales it by idf, not by std)."""
    kind, _, arg = block.partition(":")
    return kind == "ngram" and arg in TEXTS


def ngram_columns(blocks: Sequence[str]) -> np.ndarray:
    """A boolean mask over the feature vector: True for the columns of `ngram:` blocks."""
    return np.concatenate([np.full(width(b), is_ngram(b)) for b in blocks]) if blocks else np.zeros(0, dtype=bool)


def block_columns(blocks: Sequence[str], wanted: Sequence[str]) -> np.ndarray:
    """The column indices, within a feature vector of `blocks`, of the blocks `wanted` (in their order), so a
    second model reading a subset of the blocks reuses the vector instead of featurising again."""
    starts = dict(zip(blocks, np.cumsum([0, *(width(b) for b in blocks)]).tolist(), strict=False))
    missing = [b for b in wanted if b not in starts]
    if missing:
        raise InputError(f"feature blocks {missing} are not among {list(blocks)}", field="features")
    return np.concatenate([np.arange(starts[b], starts[b] + width(b)) for b in wanted]).astype(int)


def encoders(blocks: Sequence[str]) -> list[embed.EncoderKind]:
    """The sentence encoders a list of blocks needs ("use", "e5"), in a stable order."""
    kinds = [ENCODER_OF_BLOCK.get(b.partition(":")[0]) for b in blocks]
    kinds += ["use" for b in blocks if b.startswith("cos:")]
    return [k for k in ("use", "e5") if k in kinds]


def needed_texts(blocks: Sequence[str], items: Sequence[Item]) -> dict[embed.EncoderKind, list[str]]:
    """Every text each encoder will embed, in a stable order (duplicates removed)."""
    wanted: dict[embed.EncoderKind, list[str]] = {}
    for block in blocks:
        kind, _, arg = block.partition(":")
        if kind in ENCODER_OF_BLOCK:
            wanted.setdefault(ENCODER_OF_BLOCK[kind], []).append(arg)
        elif kind == "cos":
            wanted.setdefault("use", []).extend(arg.split(","))
    return {
        enc: list(dict.fromkeys(t for item in items for k in dict.fromkeys(kinds) for t in texts_of(k, item)))
        for enc, kinds in wanted.items()
    }


Vectors = Callable[[str, str], np.ndarray]
"""(encoder kind, text) -> that text's embedding, from batches already run."""


def assemble(blocks: Sequence[str], items: Sequence[Item], vectors: Vectors) -> np.ndarray:
    """The (n, width) feature matrix; `vectors(encoder, text)` returns a text's embedding."""
    total = sum(width(b) for b in blocks)
    out = np.zeros((len(items), total), dtype=np.float32)
    for row, item in enumerate(items):
        col = 0
        for block in blocks:
            w = width(block)
            out[row, col : col + w] = _block(block, item, vectors)
            col += w
    return out


def featurize(blocks: Sequence[str], items: Sequence[Item], encoder: embed.Encoder | None = None) -> np.ndarray:
    """Features of many items, one batched call per encoder (an encoder loads only if a block needs it).
    `encoder` replaces the process-wide encoder of its kind."""
    lookup: dict[tuple[str, str], np.ndarray] = {}
    for kind, texts in needed_texts(blocks, items).items():
        enc = encoder if encoder is not None and encoder.kind == kind else embed.get_encoder(kind)
        lookup.update(((kind, t), v) for t, v in zip(texts, enc.encode(texts), strict=True))
    return assemble(blocks, items, lambda kind, text: lookup[kind, text])


async def afeaturize(blocks: Sequence[str], items: Sequence[Item]) -> np.ndarray:
    """`featurize` for use inside the event loop: concurrent callers share the encoders' batches."""
    lookup: dict[tuple[str, str], np.ndarray] = {}
    for kind, texts in needed_texts(blocks, items).items():
        vectors = await embed.get_encoder(kind).aencode(texts)
        lookup.update(((kind, t), v) for t, v in zip(texts, vectors, strict=True))
    return assemble(blocks, items, lambda kind, text: lookup[kind, text])


def _block(block: str, item: Item, vectors: Vectors) -> np.ndarray | list[float]:
    kind, _, arg = block.partition(":")
    if kind in ENCODER_OF_BLOCK:
        if arg in TURN_TEXTS:
            turns = [vectors(ENCODER_OF_BLOCK[kind], t) for t in texts_of(arg, item)]
            if len(turns) == 1:  # exactly the one text's vector, as `user` gives it
                return turns[0]
            mean = np.mean(turns, axis=0)
            return mean / max(float(np.linalg.norm(mean)), 1e-12)
        return vectors(ENCODER_OF_BLOCK[kind], text_of(arg, item))
    if kind == "ngram":
        return ngram_vector(text_of(arg, item))
    if kind == "cos":
        a, b = (vectors("use", text_of(k, item)) for k in arg.split(","))
        return [float(np.dot(a, b))]  # the encoder's vectors are unit length
    if block == "lex:triage":
        result = lexicon_triage(tuple(t.content for t in item.case.turns if t.role == "user"))
        return [math.log1p(result.scores.get(label, 0.0)) for label in _LEX_LABELS]
    if block == "lex:psycrisis":
        label = item.crisis_label or item.case.crisis_label
        if label is None:
            label = lexicon_triage(tuple(t.content for t in item.case.turns if t.role == "user")).label
        dims = score_psycrisis(item.response or "", crisis=label != NO_CRISIS, lexicon=DEFAULT_LEXICON)
        return [1.0 if dims[name].positive else 0.0 for name in PSYCRISIS_DIMENSIONS]
    if block == "label:crisis":
        return [1.0 if item.crisis_label == label else 0.0 for label in CRISIS_LABELS]
    if block == "len:response":
        return [math.log1p(len(item.response or ""))]
    if block == "surface:reply":
        return surface(item.case, item.response or "")
    raise InputError(f"unknown feature block {block!r}", field="features")


@functools.lru_cache(maxsize=1024)
def lexicon_triage(user_turns: tuple[str, ...]) -> TriageResult:
    """The shipped lexicon's triage of these user turns, kept: several blocks and models of one unit (and the
    offline judge's own triage) read the same turns. A pure function of the turns; the result is frozen."""
    return triage(user_turns, DEFAULT_LEXICON)


@functools.lru_cache(maxsize=1024)
def _flat(text: str) -> str:
    return _SPACE_OR_PUNCT.sub("", text.lower())


@functools.lru_cache(maxsize=1024)
def _bigrams(text: str) -> frozenset[str]:
    flat = _flat(text)
    return frozenset(flat[i : i + 2] for i in range(len(flat) - 1))


def _turns_bigrams(texts: Sequence[str]) -> set[str]:
    """`_bigrams` of the texts joined by spaces, from each text's kept bigrams (a conversation's every reply reads
    all of its turns again): the spaces go with the punctuation, so the joined text's bigrams are each text's and
    those across each seam."""
    flats = [f for f in map(_flat, texts) if f]
    out: set[str] = set().union(*map(_bigrams, texts))
    out.update(a[-1] + b[0] for a, b in itertools.pairwise(flats))
    return out


def surface(case: Case, reply: str) -> list[float]:
    """Echo, repetition and shape of a reply against the last user turn (see the module doc)."""
    last = case.last_user_text
    mine, theirs = _bigrams(reply), _bigrams(last)
    everything = _turns_bigrams([t.content for t in case.turns])
    flat = _SPACE_OR_PUNCT.sub("", reply)
    return [
        len(mine & theirs) / max(1, len(mine)),
        len(mine & everything) / max(1, len(mine)),
        len(mine & theirs) / max(1, len(theirs)),
        len(set(flat)) / max(1, len(flat)),
        math.log1p(reply.count("?") + reply.count("？")),
        math.log1p(reply.count("\n")),
        1.0 if _QUESTION.search(last) else 0.0,
        1.0 if len(case.turns) == 1 else 0.0,
    ]


def _hashed(codes: np.ndarray, order: int, salt: int) -> np.ndarray:
    """FNV-1a over every run of `order` consecutive codes (uint64, wrapping), then a final mix."""
    runs = len(codes) - order + 1
    if runs <= 0:
        return np.zeros(0, dtype=np.uint64)
    h = np.full(runs, (_FNV_OFFSET ^ (salt * _GOLDEN)) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    for k in range(order):
        h = (h ^ codes[k : k + runs]) * _FNV_PRIME
    return h ^ (h >> np.uint64(32))


def ngram_vector(text: str, buckets: int = NGRAM_BUCKETS) -> np.ndarray:
    """Hashed character 2-4-grams and word 1-2-grams of `text`, as a unit-length float32 vector.

    The text is lower-cased and its whitespace collapsed. Characters are Unicode code points, so one
    Chinese character is one unit and no segmenter is needed; words are runs of letters and digits
    (English words; a Chinese run is one "word", the character grams cover it). Each n-gram is hashed
    with FNV-1a (code points) or CRC-32 then FNV-1a (words) into `buckets` buckets; a bucket's value
    is log(1 + count) (a long text does not drown a short one), and the vector is L2-normalised.
    Deterministic on every platform and Python version.
    """
    flat = " " + _WHITESPACE.sub(" ", text.lower()).strip() + " "
    chars = np.frombuffer(flat.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    pieces = [_hashed(chars, n, n) for n in NGRAM_CHAR_ORDERS]
    words = _WORD.findall(flat)
    if words:
        codes = np.array([zlib.crc32(w.encode("utf-8")) for w in words], dtype=np.uint64)
        pieces += [_hashed(codes, n, 100 + n) for n in NGRAM_WORD_ORDERS]
    hashes = np.concatenate(pieces)
    counts = np.bincount((hashes % np.uint64(buckets)).astype(np.int64), minlength=buckets)
    vector = np.log1p(counts.astype(np.float64))
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm else vector).astype(np.float32)
