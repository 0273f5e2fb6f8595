"""Reading responses that were made elsewhere (JSONL: case_id, model, sample, text), to be judged."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from mheval.errors import InputError
from mheval.records import Response


def read_responses(path: str | Path) -> list[Response]:
    """One Response per JSONL line; errors name the file, the line and the field."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    responses: list[Response] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("not UTF-8", path=path, line=number) from None
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON ({exc.msg})", path=path, line=number) from None
        if not isinstance(row, dict):
            raise InputError("each line must be a JSON object", path=path, line=number)
        for required in ("case_id", "model", "text"):
            if required not in row:
                raise InputError("missing required field", path=path, line=number, field=required)
        row.setdefault("sample", 0)
        try:
            responses.append(Response(**{k: v for k, v in row.items() if k in Response.model_fields}))
        except ValidationError as exc:
            e = exc.errors()[0]
            raise InputError(e["msg"], path=path, line=number, field=".".join(map(str, e["loc"]))) from None
    if not responses:
        raise InputError("no responses in file", path=path)
    return responses
