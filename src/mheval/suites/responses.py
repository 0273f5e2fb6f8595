"""Reading responses that were made elsewhere (JSONL: case_id, model, sample, text), to be judged.

Lines end at "\n" only (as in the suite readers), and every way a line can be wrong -- not UTF-8, not
JSON, nested too deeply, a missing or mistyped field, the same (case_id, model, sample) twice -- is an
InputError naming the file, the line and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mheval.errors import InputError
from mheval.records import Response
from mheval.suites.readers import json_safe, parse_json, read_bytes, type_name

REQUIRED: tuple[str, ...] = ("case_id", "model", "text")


def read_responses(path: str | Path) -> list[Response]:
    """One Response per JSONL line; errors name the file, the line and the field."""
    path = Path(path)
    raw = read_bytes(path)
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark, as some editors write
        raw = raw[3:]
    responses: list[Response] = []
    seen: dict[tuple[str, str, int], int] = {}
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip(b" \t\r"):
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"not UTF-8 (first bad byte 0x{line[exc.start]:02x} at column {exc.start + 1})", path=path, line=number
            ) from None
        row = json_safe(parse_json(text, path=path, line=number), path=path, line=number, field=None)
        if not isinstance(row, dict):
            raise InputError(f"each line must be a JSON object, got {type_name(row)}", path=path, line=number)
        for required in REQUIRED:
            if required not in row:
                raise InputError("missing required field", path=path, line=number, field=required)
        row.setdefault("sample", 0)
        response = _response(row, path, number)
        key = (response.case_id, response.model, response.sample)
        if key in seen:
            raise InputError(
                f"a second reply for case {response.case_id!r}, model {response.model!r}, sample {response.sample} "
                f"(first on line {seen[key]})",
                path=path,
                line=number,
                field="sample",
            )
        seen[key] = number
        responses.append(response)
    if not responses:
        raise InputError("no responses in file", path=path)
    return responses


def _response(row: dict[str, Any], path: Path, line: int) -> Response:
    for field in ("case_id", "model"):
        value = row[field]
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"must be a non-empty string, got {value!r}", path=path, line=line, field=field)
    # text may be null: a reply that failed elsewhere, judged as "no response"
    if row["text"] is not None and not isinstance(row["text"], str):
        raise InputError(f"must be a string or null, got {type_name(row['text'])}", path=path, line=line, field="text")
    sample = row["sample"]
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise InputError(f"must be a whole number >= 0, got {sample!r}", path=path, line=line, field="sample")
    try:
        return Response(**{k: v for k, v in row.items() if k in Response.model_fields})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err.get("loc", ()))) or None
        message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        raise InputError(message, path=path, line=line, field=where) from None
