"""Readers for the data released with the papers mheval implements (see ../shared/data/README.md).

`dialogue-safety:PATH` (Qiu et al. 2023; `dialogue_safety/dev.jsonl`)
    Records {id, context, response, label}. `context` is a run of `[seeker]...` / `[supporter]...`
    segments with no separator (the marker simply follows the previous sentence's punctuation), always
    ending on a seeker segment; about 1 in 11 contexts *starts* with a supporter segment, which we keep
    as a leading assistant turn. `response` is one `[supporter]` segment -> one Response
    (model `dialogue-safety/reference`, sample 0). The int label (0..7) is stored by name in
    metadata["gold_safety_label"]. Chinese, locale CN.

`help-harm:PATH` (Arnaiz-Rodriguez et al. 2025; `help_harm/`)
    Records {id, dataset_id, inputs: [sentences]} -> one user turn (sentences joined by spaces).
    Accepts JSONL or a JSON array (the llm_crisis_labels files are arrays). The paper's released files
    (`data/processed/sampled_dataset_n_200_merged_n50-noSeed_156-s42.json`, `..._n_2046_nPerD168_seed0.json`)
    are arrays of the same records without `id`: a record with no id gets `<dataset_id>-<position>`
    (position = its 1-based place in the file, zero-padded to 4 digits; `hh` stands in for a missing
    dataset_id), with metadata `id_derived: true` and `position`. Such ids are stable as long as the
    file is unchanged; `mheval suites show` says when they were derived. Optional fields:
    `human_labels` {H1..H4} -> metadata["human_labels"] and crisis_label = the label with more
    votes than any other (None on a tie); `label` (an LLM's label) -> metadata["llm_label"];
    `answer` (appropriateness_scores.dev.jsonl) -> a Response with model `help-harm/<answering model>`
    parsed from `answer_source`. Other fields (dataset_id, explanation, scores...) go to metadata.
    A directory means validation_inputs.dev.jsonl merged by id with human_crisis_labels.dev.jsonl.

`mentalalign:PATH` (Badawi et al.; `mentalalign/human_scores.xlsx` or the folder)
    What the released files hold (inspected with openpyxl): human_scores.xlsx has one sheet
    ("Sheet1"), 1,000 rows x 12 columns: `ConvID` (int 1..1000), `context` (the user's message; 44 are
    wrapped in literal double quotes, 7 contexts occur twice under different ConvIDs), then ten
    `human_response_<source>` columns (several headers with a leading space) whose cells are JSON
    *scores* of the 7 attributes, not reply texts. The four judge_<judge>.xlsx files have the same
    ConvID/context columns and `judge_response_<source>` cells holding the judges' raw JSON outputs.
    No file in the release holds the reply texts themselves (they live in MentalBench-100k, which is
    not in ../shared/data), so this reader yields 1,000 cases (id `ma-<ConvID>`, English) with
    metadata {conv_id, response_sources} and no responses. If a sheet does carry reply texts (any
    `response_<source>` column whose cells are not score JSON), each becomes a Response with model
    `mentalalign/<source>`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mheval.errors import InputError
from mheval.labels import CRISIS_LABELS
from mheval.records import Case, Response, Turn
from mheval.suites.readers import (
    Loaded,
    check_file,
    clean_json,
    json_records,
    read_text,
    type_name,
    validation_error,
)

SAFETY_LABELS: tuple[str, ...] = (
    "nonsense",
    "humanoid_mimicry",
    "linguistic_neglect",
    "unamiable_judgment",
    "toxic_language",
    "unauthorized_preachment",
    "nonfactual_statement",
    "safe",
)
"""Dialogue-safety labels by index, in the paper's sequential order (7 = safe)."""

MENTALALIGN_ATTRIBUTES: tuple[str, ...] = (
    "Guidance",
    "Informativeness",
    "Relevance",
    "Safety",
    "Empathy",
    "Helpfulness",
    "Understanding",
)

HELP_HARM_INPUTS = "validation_inputs.dev.jsonl"
HELP_HARM_HUMAN = "human_crisis_labels.dev.jsonl"
MENTALALIGN_DEFAULT = "human_scores.xlsx"

_SEGMENT = re.compile(r"\[(seeker|supporter)\]")
_ROLE = {"seeker": "user", "supporter": "assistant"}


def _case(path: Path, line: int, **fields: Any) -> Case:
    try:
        return Case(**fields)
    except ValidationError as exc:
        raise validation_error(exc, path, line) from None


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line or array position, record) from a JSONL file or a JSON array file."""
    return json_records(read_text(path), path)


def _require_str(record: dict[str, Any], field: str, path: Path, line: int) -> str:
    value = record.get(field)
    if value is None:
        raise InputError("missing required field", path=path, line=line, field=field)
    if not isinstance(value, str):
        raise InputError(f"must be a string, got {type_name(value)}", path=path, line=line, field=field)
    return value


def _record_id(rec: dict[str, Any], path: Path, line: int) -> str | None:
    """The record's own id as a string (strings and integers are accepted), or None when it has none."""
    value = rec.get("id")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"must be a string or integer, got {type_name(value)}", path=path, line=line, field="id")
    return str(value).strip()


def _check_unique(cases: list[Case], lines: list[int], path: Path) -> None:
    seen: dict[str, int] = {}
    for case, line in zip(cases, lines, strict=True):
        if case.id in seen:
            raise InputError(
                f"duplicate id '{case.id}' (first seen on line {seen[case.id]})", path=path, line=line, field="id"
            )
        seen[case.id] = line


# -- dialogue safety ------------------------------------------------------------------------------


def split_segments(text: str) -> list[tuple[str, str]]:
    """`[seeker]a[supporter]b` -> [("user", "a"), ("assistant", "b")]."""
    parts = _SEGMENT.split(text)
    if parts[0].strip():
        raise ValueError("text before the first [seeker]/[supporter] marker")
    return [(_ROLE[role], body.strip()) for role, body in zip(parts[1::2], parts[2::2], strict=True)]


def _field_segments(rec: dict[str, Any], name: str, path: Path, line: int) -> list[tuple[str, str]]:
    """The speaker segments of a record's string field; an InputError naming file, line and field otherwise."""
    text = _require_str(rec, name, path, line)
    try:
        return split_segments(text)
    except ValueError as exc:
        raise InputError(str(exc), path=path, line=line, field=name) from None


def read_dialogue_safety(path: Path) -> Loaded:
    cases: list[Case] = []
    lines: list[int] = []
    responses: list[Response] = []
    for line, rec in _records(path):
        case_id = _record_id(rec, path, line) or f"row-{len(cases) + 1}"
        segments = _field_segments(rec, "context", path, line)
        if not segments:
            raise InputError("no [seeker] segment", path=path, line=line, field="context")
        label = rec.get("label")
        metadata: dict[str, Any] = {}
        if label is not None:
            if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(SAFETY_LABELS):
                raise InputError(
                    f"label must be an integer 0..{len(SAFETY_LABELS) - 1}, got {label!r}",
                    path=path,
                    line=line,
                    field="label",
                    choices=[f"{i}={name}" for i, name in enumerate(SAFETY_LABELS)],
                )
            metadata["gold_safety_label"] = SAFETY_LABELS[label]
        turns = [Turn(role=role, content=body) for role, body in segments]
        cases.append(
            _case(
                path,
                line,
                id=case_id,
                turns=turns,
                language="zh",
                locale="CN",
                source="dialogue-safety",
                metadata=metadata,
            )
        )
        lines.append(line)
        if rec.get("response") is not None:
            reply_segments = _field_segments(rec, "response", path, line)
            if [r for r, _ in reply_segments] != ["assistant"]:
                raise InputError("must be one [supporter] segment", path=path, line=line, field="response")
            responses.append(
                Response(case_id=case_id, model="dialogue-safety/reference", sample=0, text=reply_segments[0][1])
            )
    _check_unique(cases, lines, path)
    return cases, responses


# -- between help and harm ------------------------------------------------------------------------


def majority_label(votes: dict[str, Any]) -> str | None:
    """The label with more votes than any other; None on a tie or with no votes."""
    counts = Counter(v for v in votes.values() if isinstance(v, str) and v)
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def _answer_model(source: Any) -> str:
    """`...evaluation_<model>-answers-...` -> `help-harm/<model>`."""
    match = re.search(r"evaluation_(.+?)-answers", str(source or ""))
    return f"help-harm/{match.group(1) if match else 'answer'}"


def help_harm_id(rec: dict[str, Any], position: int, path: Path, line: int) -> tuple[str, bool]:
    """(id, derived): the record's own id, else `<dataset_id>-<position>` (the released files carry none)."""
    own = _record_id(rec, path, line)
    if own is not None:
        return own, False
    source = rec.get("dataset_id")
    if source is not None and not isinstance(source, str | int):
        raise InputError(
            f"must be a string, got {type_name(source)} (it names the derived id)",
            path=path,
            line=line,
            field="dataset_id",
        )
    prefix = str(source).strip() if source is not None and str(source).strip() else "hh"
    return f"{prefix}-{position:04d}", True


def _help_harm_record(rec: dict[str, Any], path: Path, line: int, position: int) -> tuple[Case, Response | None]:
    case_id, derived = help_harm_id(rec, position, path, line)
    inputs = rec.get("inputs")
    if not isinstance(inputs, list) or not all(isinstance(s, str) for s in inputs):
        raise InputError(f"must be a list of sentences, got {type_name(inputs)}", path=path, line=line, field="inputs")
    text = " ".join(s.strip() for s in inputs if s.strip())
    if not text:
        raise InputError("holds no sentence with text", path=path, line=line, field="inputs")
    metadata: dict[str, Any] = {}
    crisis_label = None
    human = rec.get("human_labels")
    if human is not None:
        if not isinstance(human, dict):
            raise InputError(
                f"must be an object {{H1..H4}}, got {type_name(human)}", path=path, line=line, field="human_labels"
            )
        for rater, value in human.items():
            if value is not None and (not isinstance(value, str) or value not in CRISIS_LABELS):
                raise InputError(
                    f"unknown label {value!r} from {rater}",
                    path=path,
                    line=line,
                    field="human_labels",
                    choices=CRISIS_LABELS,
                )
        metadata["human_labels"] = dict(human)
        crisis_label = majority_label(human)
    if rec.get("label") is not None:
        metadata["llm_label"] = rec["label"]
    skip = {"id", "inputs", "human_labels", "label", "answer", "answer_source"}
    for key, value in rec.items():
        if key not in skip:
            metadata[key] = clean_json(value)
    if derived:  # said last, so that a field of the record cannot hide it
        metadata.update(id_derived=True, position=position)
    case = _case(
        path,
        line,
        id=case_id,
        turns=[Turn(role="user", content=text)],
        language="en",
        crisis_label=crisis_label,
        source="help-harm",
        metadata=metadata,
    )
    response = None
    if isinstance(rec.get("answer"), str) and rec["answer"].strip():
        response = Response(case_id=case_id, model=_answer_model(rec.get("answer_source")), text=rec["answer"])
    return case, response


def read_help_harm(path: Path) -> Loaded:
    if path.is_dir():
        return _read_help_harm_dir(path)
    cases: list[Case] = []
    lines: list[int] = []
    responses: list[Response] = []
    for position, (line, rec) in enumerate(_records(path), start=1):
        case, response = _help_harm_record(rec, path, line, position)
        cases.append(case)
        lines.append(line)
        if response is not None:
            responses.append(response)
    _check_unique(cases, lines, path)
    return cases, responses


def _read_help_harm_dir(folder: Path) -> Loaded:
    inputs_path, human_path = folder / HELP_HARM_INPUTS, folder / HELP_HARM_HUMAN
    for needed in (inputs_path, human_path):
        if not needed.is_file():
            raise InputError(f"a help-harm folder must hold {HELP_HARM_INPUTS} and {HELP_HARM_HUMAN}", path=needed)
    # Both files are keyed the same way, by their own ids or by the derived ones, so they line up either way.
    human = {
        help_harm_id(rec, n, human_path, line)[0]: rec.get("human_labels")
        for n, (line, rec) in enumerate(_records(human_path), start=1)
    }
    cases: list[Case] = []
    lines: list[int] = []
    for position, (line, rec) in enumerate(_records(inputs_path), start=1):
        merged = dict(rec)
        key = help_harm_id(rec, position, inputs_path, line)[0]
        if key in human:
            merged["human_labels"] = human[key]
        case, _ = _help_harm_record(merged, inputs_path, line, position)
        cases.append(case)
        lines.append(line)
    _check_unique(cases, lines, inputs_path)
    return cases, []


# -- mentalalign ----------------------------------------------------------------------------------


def _unquote(text: str) -> str:
    """Some contexts are stored as a JSON string literal ("..."); undo that, else just strip."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            value = json.loads(text)
            if isinstance(value, str):
                return value.strip()
        except json.JSONDecodeError:
            pass
        return text[1:-1].strip()
    return text


def _looks_like_scores(cells: list[Any]) -> bool:
    """True if the column holds attribute scores or judge outputs rather than reply texts."""
    filled = [c for c in cells if isinstance(c, str) and c.strip()]
    if not filled:
        return True
    hits = sum(1 for c in filled[:50] if any(f'"{a}"' in c for a in MENTALALIGN_ATTRIBUTES))
    return hits >= len(filled[:50]) / 2


def _conv_id(value: Any, path: Path, line: int) -> int | str:
    """ConvID as the sheet holds it: a whole number (an int, or a float such as 3.0), else its text."""
    if isinstance(value, bool):
        raise InputError(f"must be a number or text, got {value!r}", path=path, line=line, field="ConvID")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():  # NaN, infinities and fractions name no conversation
            raise InputError(f"must be a whole number, got {value!r}", path=path, line=line, field="ConvID")
        return int(value)
    text = str(value).strip()
    if not text:
        raise InputError("missing required field", path=path, line=line, field="ConvID")
    return text


def workbook_rows(path: Path) -> list[tuple[Any, ...]]:
    """The cell values of an .xlsx workbook's first sheet, row by row (MentalAlign's files: the suite and the
    judges' files); an InputError for a file that is not a readable workbook, one with no sheet, or an empty
    first sheet."""
    check_file(path)
    import openpyxl

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises several unrelated types for a bad file
        raise InputError(f"not a readable .xlsx workbook ({exc})", path=path) from None
    try:
        if not workbook.worksheets:
            raise InputError("the workbook has no sheet", path=path)
        rows = list(workbook.worksheets[0].iter_rows(values_only=True))
    except InputError:
        raise
    except Exception as exc:  # read_only mode parses lazily: a damaged sheet fails here, not on load
        raise InputError(f"not a readable .xlsx workbook ({type(exc).__name__}: {exc})", path=path) from None
    finally:
        workbook.close()
    if not rows:
        raise InputError("the first sheet is empty", path=path)
    return rows


def read_mentalalign(path: Path) -> Loaded:
    if path.is_dir():
        path = path / MENTALALIGN_DEFAULT
    rows = workbook_rows(path)
    header = [str(h).strip() if h is not None else "" for h in rows[0]]
    for needed in ("ConvID", "context"):
        if needed not in header:
            raise InputError("missing column in the header", path=path, line=1, field=needed)
    id_col, ctx_col = header.index("ConvID"), header.index("context")
    sources: dict[int, str] = {}
    for col, name in enumerate(header):
        match = re.search(r"response_(.+)$", name)
        if match:
            sources[col] = match.group(1).strip()
    # read-only sheets may end a row early: pad every row to the header's width
    body = [tuple(r) + (None,) * (len(header) - len(r)) for r in rows[1:]]
    text_cols = {c: s for c, s in sources.items() if not _looks_like_scores([r[c] for r in body])}

    cases: list[Case] = []
    lines: list[int] = []
    responses: list[Response] = []
    for line, row in enumerate(body, start=2):
        if all(v is None for v in row):
            continue
        conv = row[id_col]
        context = row[ctx_col]
        if conv is None:
            raise InputError("missing required field", path=path, line=line, field="ConvID")
        if not isinstance(context, str) or not context.strip():
            raise InputError("missing or empty context", path=path, line=line, field="context")
        conv_id = _conv_id(conv, path, line)
        case_id = f"ma-{conv_id}"
        metadata = {"conv_id": conv_id, "response_sources": list(sources.values())}
        cases.append(
            _case(
                path,
                line,
                id=case_id,
                turns=[Turn(role="user", content=_unquote(context))],
                language="en",
                source="mentalalign",
                metadata=metadata,
            )
        )
        lines.append(line)
        for col, source in text_cols.items():
            reply = row[col]
            if isinstance(reply, str) and reply.strip():
                responses.append(Response(case_id=case_id, model=f"mentalalign/{source}", text=reply.strip()))
    _check_unique(cases, lines, path)
    return cases, responses
