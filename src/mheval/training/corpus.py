"""mheval's own corpus (`corpus/` at the repository root): written (conversation, reply) pairs and user
messages, labelled by corpus/GUIDE.md, split by author batch (corpus/splits.yaml).

`load_replies` / `load_messages` read and validate the rows (an error names file, line and field);
`split_of` gives a batch's split; `python -m mheval.training.corpus check FILE...` validates files and
prints their counts, `python -m mheval.training.corpus near-duplicates` lists rows of different splits
that are nearly the same text.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mheval.errors import InputError
from mheval.labels import CRISIS_LABELS, NO_CRISIS
from mheval.records import Case, Turn

CORPUS_DIR = Path(__file__).resolve().parents[3] / "corpus"
LANGUAGES = ("en", "zh-Hans", "zh-Hant")
LOCALES = ("US", "GB", "AU", "CA", "IE", "NZ", "IN", "SG", "CN", "TW", "HK")
REPLY_KINDS = (
    "good",
    "minimal",
    "offtopic",
    "gibberish",
    "dismissive",
    "hard_negative",
    "harmful_blunt",
    "harmful_warm",
    "published",  # a real model's reply from a paper's data (not written; joined at build time)
)
HARM_CATEGORIES = (
    "method",
    "timing_place_rescue",
    "concealment",
    "encouragement",
    "care_avoidance",
    "violence",
    "mocking",
)
CATEGORY_NAMES = {
    "method": "method or lethality information",
    "timing_place_rescue": "place, timing or avoiding rescue",
    "concealment": "concealing self-harm or keeping risk secret",
    "encouragement": "encouraging or validating the plan",
    "care_avoidance": "steering away from urgent care or abrupt medication change",
    "violence": "facilitating violence to others",
    "mocking": "mocking or shaming",
}
RISK_KINDS = ("explicit", "indirect", "slang", "codemix", "buried", "im_fine", "third_person_self")
ORDINARY_KINDS = (
    "hobby",
    "gaming",
    "cooking",
    "sports",
    "fiction",
    "professional",
    "third_party",
    "media",
    "idiom",
    "ordinary_stress",
    "medical",
)
SPLITS = ("train", "tune", "holdout")


@dataclass(frozen=True)
class ReplyRow:
    id: str
    batch: str
    language: str
    variety: str | None
    locale: str
    crisis_label: str
    context: tuple[tuple[str, str], ...]  # (role, content), ending on a user turn
    reply: str
    kind: str
    harmful: bool
    category: str | None
    evidence: tuple[str, ...]
    appropriateness: int
    pair_of: str | None = None

    @property
    def last_user(self) -> str:
        return self.context[-1][1]


@dataclass(frozen=True)
class MessageRow:
    id: str
    batch: str
    language: str
    variety: str | None
    locale: str
    turns: tuple[str, ...]
    crisis_label: str
    kind: str
    evidence: tuple[str, ...]


SOURCE = "corpus:"
"""The prefix of a corpus case's `source`, before its batch (`corpus:w5-a`)."""


def writer_of(batch: str) -> str:
    """The writer of an author batch (`w5-a` -> `w5`): a writer's batches are held out together."""
    return batch.split("-")[0]


def case_writer(case: Case) -> str | None:
    """The corpus writer of a case made by `reply_case` or `message_case`, else None."""
    source = case.source or ""
    return writer_of(source.removeprefix(SOURCE)) if source.startswith(SOURCE) else None


def reply_case(row: ReplyRow) -> Case:
    """A reply row's conversation as a Case (the reply is judged against it)."""
    return Case(
        id=row.id,
        turns=[Turn(role=role, content=content) for role, content in row.context],
        language="en" if row.language == "en" else "zh",
        crisis_label=row.crisis_label,
        locale=row.locale,
        source=f"{SOURCE}{row.batch}",
    )


def message_case(row: MessageRow) -> Case:
    """A message row as a Case of its user turns."""
    return Case(
        id=row.id,
        turns=[Turn(role="user", content=t) for t in row.turns],
        language="en" if row.language == "en" else "zh",
        crisis_label=row.crisis_label,
        locale=row.locale,
        source=f"{SOURCE}{row.batch}",
    )


def _rows(path: Path) -> Iterator[tuple[int, dict]]:
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{number}: a row must be a JSON object")
            yield number, row


def _need(row: dict, key: str, where: str, choices: Sequence[str] | None = None) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: field {key!r} must be non-empty text")
    if choices is not None and value not in choices:
        raise InputError(f"{where}: field {key!r} is {value!r}; choose one of {', '.join(choices)}")
    return value


def _common(row: dict, where: str, path: Path) -> tuple[str, str, str, str | None, str]:
    row_id = _need(row, "id", where)
    batch = _need(row, "batch", where)
    if not row_id.startswith(batch + "-"):
        raise InputError(f"{where}: field 'id' {row_id!r} must start with its batch {batch!r} and '-'")
    if path.stem != batch:
        raise InputError(f"{where}: field 'batch' {batch!r} differs from the file name {path.stem!r}")
    language = _need(row, "language", where, LANGUAGES)
    variety = row.get("variety")
    if variety not in (None, "yue"):
        raise InputError(f"{where}: field 'variety' must be null or 'yue'")
    locale = _need(row, "locale", where, LOCALES)
    return row_id, batch, language, variety, locale


def read_reply_file(path: Path) -> list[ReplyRow]:
    out = []
    for number, row in _rows(path):
        where = f"{path}:{number}"
        row_id, batch, language, variety, locale = _common(row, where, path)
        label = _need(row, "crisis_label", where, CRISIS_LABELS)
        context = row.get("context")
        if not isinstance(context, list) or not context:
            raise InputError(f"{where}: field 'context' must be a non-empty list of turns")
        turns = []
        for i, turn in enumerate(context):
            if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
                raise InputError(f"{where}: context[{i}] must be {{role: user|assistant, content}}")
            content = turn.get("content")
            if not isinstance(content, str) or not content.strip():
                raise InputError(f"{where}: context[{i}].content must be non-empty text")
            turns.append((turn["role"], content))
        if turns[-1][0] != "user":
            raise InputError(f"{where}: field 'context' must end on a user turn")
        reply = _need(row, "reply", where)
        kind = _need(row, "kind", where, REPLY_KINDS[:-1])
        harmful = row.get("harmful")
        if not isinstance(harmful, bool) or harmful != kind.startswith("harmful_"):
            raise InputError(f"{where}: field 'harmful' must be true exactly for harmful_* kinds")
        category = row.get("category")
        evidence = row.get("evidence", [])
        if harmful:
            _need(row, "category", where, HARM_CATEGORIES)
            if not isinstance(evidence, list) or not evidence:
                raise InputError(f"{where}: field 'evidence' must list the harmful sentence(s) of the reply")
        elif category is not None or evidence:
            raise InputError(
                f"{where}: fields 'category' and 'evidence' must be null and [] for a reply that is not harmful"
            )
        for span in evidence:
            if not isinstance(span, str) or not span.strip() or span not in reply:
                raise InputError(f"{where}: field 'evidence' holds {span!r}, which is not a substring of the reply")
        level = row.get("appropriateness")
        if not isinstance(level, int) or not 1 <= level <= 5 or (level == 1) != harmful:
            raise InputError(f"{where}: field 'appropriateness' must be 1-5, and 1 exactly for harmful replies")
        pair = row.get("pair_of")
        if pair is not None and not isinstance(pair, str):
            raise InputError(f"{where}: field 'pair_of' must be an id or null")
        out.append(
            ReplyRow(
                row_id,
                batch,
                language,
                variety,
                locale,
                label,
                tuple(turns),
                reply,
                kind,
                harmful,
                category,
                tuple(evidence),
                level,
                pair,
            )
        )
    _unique(out, path)
    return out


def read_message_file(path: Path) -> list[MessageRow]:
    out = []
    for number, row in _rows(path):
        where = f"{path}:{number}"
        row_id, batch, language, variety, locale = _common(row, where, path)
        turns = row.get("turns")
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise InputError(f"{where}: field 'turns' must be a non-empty list of non-empty texts")
        label = _need(row, "crisis_label", where, CRISIS_LABELS)
        kinds = ORDINARY_KINDS if label == NO_CRISIS else RISK_KINDS
        kind = _need(row, "kind", where, kinds)
        evidence = row.get("evidence", [])
        if not isinstance(evidence, list) or any(not any(e in t for t in turns) for e in evidence):
            raise InputError(f"{where}: field 'evidence' must list substrings of the turns")
        if label != NO_CRISIS and not evidence:
            raise InputError(f"{where}: field 'evidence' must name the risk in a risk message")
        out.append(MessageRow(row_id, batch, language, variety, locale, tuple(turns), label, kind, tuple(evidence)))
    _unique(out, path)
    return out


def _unique(rows: list, path: Path) -> None:
    seen = Counter(r.id for r in rows)
    dupes = [i for i, n in seen.items() if n > 1]
    if dupes:
        raise InputError(f"{path}: field 'id' repeats: {', '.join(dupes[:5])}")


def splits(folder: Path = CORPUS_DIR) -> dict[str, str]:
    """batch -> split, from corpus/splits.yaml."""
    from mheval.yamlio import load_yaml

    data = load_yaml((folder / "splits.yaml").read_text(encoding="utf-8"))
    out = {}
    for split, batches in (data or {}).items():
        if split not in SPLITS:
            raise InputError(f"{folder / 'splits.yaml'}: unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        for batch in batches:
            out[str(batch)] = split
    return out


def load_replies(folder: Path = CORPUS_DIR) -> list[ReplyRow]:
    return [row for path in sorted((folder / "replies").glob("*.jsonl")) for row in read_reply_file(path)]


def load_messages(folder: Path = CORPUS_DIR) -> list[MessageRow]:
    return [row for path in sorted((folder / "messages").glob("*.jsonl")) for row in read_message_file(path)]


NEAR_DUPLICATE = 0.8
"""Cosine of character 4-gram counts at or above which two texts count as near-duplicates."""


def _text_of(row: ReplyRow | MessageRow) -> str:
    return row.reply if isinstance(row, ReplyRow) else "\n".join(row.turns)


def near_duplicates(folder: Path = CORPUS_DIR, threshold: float = NEAR_DUPLICATE) -> list[tuple[str, str, float]]:
    """(id, id, similarity) of rows in different splits whose texts (the reply; the message's turns) are
    nearly the same, replies and messages checked separately."""
    from sklearn.feature_extraction.text import HashingVectorizer

    split_of = splits(folder)
    found = []
    for rows in (load_replies(folder), load_messages(folder)):
        texts = [_text_of(r) for r in rows]
        vec = HashingVectorizer(analyzer="char", ngram_range=(4, 4), n_features=2**20, norm="l2", alternate_sign=False)
        x = vec.transform(texts)
        sims = (x @ x.T).tocoo()
        for i, j, v in zip(sims.row, sims.col, sims.data, strict=True):
            if i < j and v >= threshold and split_of.get(rows[i].batch) != split_of.get(rows[j].batch):
                found.append((rows[i].id, rows[j].id, round(float(v), 3)))
    return sorted(found, key=lambda t: -t[2])


def _describe(path: Path) -> str:
    if path.parent.name == "messages":
        msgs = read_message_file(path)
        labels = Counter(m.crisis_label for m in msgs)
        kinds = Counter(m.kind for m in msgs)
        return f"{path}: {len(msgs)} messages; labels {dict(labels)}; kinds {dict(kinds)}"
    rows = read_reply_file(path)
    kinds = Counter(r.kind for r in rows)
    cats = Counter(r.category for r in rows if r.harmful)
    langs = Counter(r.language for r in rows)
    multi = sum(len(r.context) > 1 for r in rows)
    return (
        f"{path}: {len(rows)} replies ({multi} multi-turn); kinds {dict(kinds)}; categories {dict(cats)}; "
        f"languages {dict(langs)}"
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("check", "near-duplicates"):
        print("usage: python -m mheval.training.corpus check FILE... | near-duplicates", file=sys.stderr)
        return 2
    if args[0] == "near-duplicates":
        pairs = near_duplicates()
        for a, b, sim in pairs:
            print(f"{sim:.2f}  {a} ({splits().get(a.rsplit('-', 1)[0])})  {b} ({splits().get(b.rsplit('-', 1)[0])})")
        print(f"{len(pairs)} pairs of rows in different splits at similarity >= {NEAR_DUPLICATE}")
        return 1 if pairs else 0
    status = 0
    for name in args[1:]:
        try:
            print(_describe(Path(name)))
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
    return status


if __name__ == "__main__":
    raise SystemExit(main())
