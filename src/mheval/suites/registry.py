"""Suite names -> readers: built-in suites by name, files as `FORMAT:PATH` (or a bare .jsonl/.csv/.parquet).

Two multi-turn forms are listed here and read elsewhere: `scenarios:PATH` (suites/dialogues.py) and
`transcripts:PATH`, recorded conversations (conversations/imported.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mheval.errors import InputError
from mheval.records import Case, Response
from mheval.suites import papers, readers


@dataclass
class Suite:
    """Cases to evaluate, plus any replies already given (papers' reference answers, a `response` column)."""

    name: str
    description: str
    cases: list[Case]
    responses: list[Response] = field(default_factory=list)


BUILTINS: dict[str, tuple[str, str]] = {
    "crisis-core": (
        "crisis_core.jsonl",
        "mheval's own bilingual crisis triage suite: 7 labels, EN/ZH, direct, indirect and multi-turn cases",
    ),
}
"""name -> (file in suites/builtin, one-line description)."""

Reader = Callable[[Path], readers.Loaded]

_GENERIC: dict[str, Callable[[Path, Mapping[str, str] | None], readers.Loaded]] = {
    "jsonl": readers.read_jsonl,
    "csv": readers.read_csv,
    "parquet": readers.read_parquet,
}
_PAPERS: dict[str, Reader] = {
    "dialogue-safety": papers.read_dialogue_safety,
    "help-harm": papers.read_help_harm,
    "mentalalign": papers.read_mentalalign,
}
FORMATS: dict[str, str] = {
    "jsonl": "JSON Lines, one case per line (id, text or turns/messages, language, crisis_label, ...)",
    "csv": "CSV with a header row, same columns as jsonl (turns as a JSON string)",
    "parquet": "Parquet table, same columns as jsonl",
    "dialogue-safety": "Dialogue Safety (Qiu et al. 2023) jsonl: Chinese contexts + reference reply + safety label",
    "help-harm": "Between Help and Harm inputs/labels (jsonl or JSON array, or the help_harm folder); the "
    "paper's released files load as they are: records without id get <dataset_id>-<position>",
    "mentalalign": "MentalAlign-70k human_scores.xlsx (or its folder): one case per context",
}
SCENARIOS_FORMAT = (
    "multi-turn: your own scenario YAMLs, a folder of them or one file, written like the crisis-dialogues "
    "ones (persona, beats, expectations); a bare folder or .yaml path works too"
)
"""How `scenarios:PATH` is listed (suites/dialogues.py reads it; load_suite never sees it)."""
TRANSCRIPTS_FORMAT = (
    "multi-turn: conversations already recorded with their assistant replies, judged without calling a model: "
    "JSONL chat messages (one conversation a line), a folder of .txt transcripts with role prefixes "
    "(user:/agent: ...), or CSV/Parquet with conversation id, turn, role, content (docs/transcripts.md)"
)
"""How `transcripts:PATH` is listed (conversations/imported.py reads it; load_suite never sees it)."""
_SUFFIXES = {".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}


def list_suites() -> list[tuple[str, str]]:
    """(name, one-line description) for the built-in suites, then the `FORMAT:PATH` forms (scenarios last)."""
    from mheval.suites.dialogues import DIALOGUE_SUITES

    out = [(name, desc) for name, (_, desc) in BUILTINS.items()]
    out += [(name, f"multi-turn: {desc}") for name, (_, desc) in DIALOGUE_SUITES.items()]
    out += [(f"{fmt}:PATH", desc) for fmt, desc in FORMATS.items()]
    out += [("scenarios:PATH", SCENARIOS_FORMAT), ("transcripts:PATH", TRANSCRIPTS_FORMAT)]
    return out


def _unknown(name: str) -> InputError:
    return InputError(
        f"unknown suite '{name}': use a built-in name or FORMAT:PATH",
        field="suite",
        choices=[*BUILTINS, *(f"{fmt}:PATH" for fmt in FORMATS), "scenarios:PATH", "transcripts:PATH"],
    )


def _resolve(name: str) -> tuple[str, Path | None]:
    """(format or 'builtin', path) for a suite name."""
    if name in BUILTINS:
        return "builtin", None
    fmt, sep, rest = name.partition(":")
    if sep and fmt == "transcripts":  # read by conversations/imported.py, through the runner
        raise InputError(
            f"'{name}' names recorded conversations, not cases: judge them with `mheval judge --suite {name}` "
            "(or `mheval run`; docs/transcripts.md)",
            field="suite",
        )
    if sep and fmt in FORMATS:
        if not rest.strip():
            raise InputError(f"'{name}' names no path after '{fmt}:'", field="suite")
        return fmt, _path(rest)
    suffix = Path(name).suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix], _path(name)
    raise _unknown(name)


def _path(text: str) -> Path:
    """The suite's path, or an InputError for one the OS cannot even look up (`~nosuchuser`, a NUL)."""
    try:
        path = Path(text).expanduser()
        path.exists()
    except (RuntimeError, OSError, ValueError) as exc:
        raise InputError(f"cannot use this path: {exc}", path=repr(text)[1:-1], field="suite") from None
    return path


def load_suite(name: str, *, mapping: dict[str, str] | None = None, limit: int | None = None) -> Suite:
    """Load a suite by built-in name or `FORMAT:PATH`; `limit` keeps the first N cases (and their replies)."""
    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}", field="limit")
    fmt, path = _resolve(name.strip())
    if fmt == "builtin":
        filename, description = BUILTINS[name.strip()]
        resource = resources.files("mheval.suites") / "builtin" / filename
        with resources.as_file(resource) as real_path:
            cases, responses = readers.read_jsonl(real_path, mapping)
    else:
        assert path is not None
        description = f"{fmt} file {path}"
        if fmt in _GENERIC:
            cases, responses = _GENERIC[fmt](path, mapping)
        else:
            if mapping:
                raise InputError(
                    f"a column mapping applies only to jsonl, csv and parquet files, not to {fmt}",
                    field="mapping",
                )
            cases, responses = _PAPERS[fmt](path)
        derived = sum(1 for c in cases if c.metadata.get("id_derived") is True)
        if derived:
            description += (
                f"; {derived} of {len(cases)} records had no id: ids derived as <dataset_id>-<position> "
                "(1-based place in the file), stable while the file is unchanged"
            )
    if not cases:
        raise InputError(f"suite {name} has no cases", path=path)
    if limit is not None and limit < len(cases):
        cases = cases[:limit]
        kept = {c.id for c in cases}
        responses = [r for r in responses if r.case_id in kept]
    return Suite(name=name.strip(), description=description, cases=cases, responses=responses)
