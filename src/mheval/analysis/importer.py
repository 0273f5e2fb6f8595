"""`mheval import`: the papers' published judge outputs as judgments in a new run folder.

Then `mheval summary`, `export`, `agree` and the reliability statistics run on them as on any run.

`mentalalign` (PATH: the `mentalalign/` folder or one `judge_<judge>.xlsx`)
    Each judge file has `ConvID`, `context` and ten `judge_response_<source>` columns holding the judge's
    raw output. Cases are read with the `mentalalign:` suite reader (ids `ma-<ConvID>`, so they match
    `mheval suites show mentalalign:...`); one judgment per cell: model `mentalalign/<source>`, sample 0,
    judge `<judge>` (from the file name), repeat 0, protocol `mentalalign`. Each cell goes through
    `parse_verdict`, so an output that cannot be read is stored unscored with its reason and raw text.
    The reply texts themselves are not in the release, so no responses are stored.

`help-harm` (PATH: `help_harm/`, its `llm_crisis_labels/` folder, or one label file)
    Each `<model>-labeled-<series>-<timestamp>[.dev].json` file is one run of one model over the dev
    validation cases (`hh-val-...`) or the test cases (`hh-test-...`): judge `<model>`, repeat = the
    run's index in time order within its series, protocol `crisis-triage`. The `...merged[-_]labels`
    files (the published majority of the three runs) become judge `<model>:merged`, repeat 0. Cases come
    from the records' `inputs` (sentences joined by spaces, as the `help-harm:` reader does); when
    `human_crisis_labels.dev.jsonl` is beside them, each dev case gets its four human labels in metadata
    and their majority as `crisis_label`. Empty or missing labels are unscored with their reason.

Everything is read, parsed and validated first; only then is the run folder written, into a temporary
folder beside it that is renamed into place, so a failure leaves no partial run behind. The target
must not already hold a run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mheval.errors import InputError
from mheval.judges.llm import judgment_from_verdict
from mheval.labels import CRISIS_TRIAGE, MENTALALIGN
from mheval.protocols import ProtocolSpec, load_protocol, parse_verdict
from mheval.records import Case, Judgment, Turn

SOURCES: tuple[str, ...] = ("mentalalign", "help-harm")

_MA_JUDGE_RE = re.compile(r"^judge_(.+)\.xlsx$", re.IGNORECASE)
_HH_FILE_RE = re.compile(
    r"^(?P<model>.+?)-labeled-(?P<series>.+?)(?:-(?P<stamp>\d{8}-\d{6})|[-_](?P<merged>merged[-_]labels))?"
    r"(?:\.dev)?\.json$"
)
_HH_HUMAN = "human_crisis_labels.dev.jsonl"


@dataclass
class ImportResult:
    run_dir: Path
    source: str
    files: list[str]
    cases: int
    judgments: int
    unscored: int
    by_judge: dict[str, int] = field(default_factory=dict)
    unscored_reasons: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        reasons = ", ".join(f"{k} {v}" for k, v in self.unscored_reasons.items()) or "none"
        return (
            f"imported {self.judgments} judgments ({self.unscored} unscored: {reasons}) on {self.cases} cases "
            f"from {len(self.files)} file(s) into {self.run_dir}"
        )


def import_published(source: str, path: str | Path, run_dir: str | Path) -> ImportResult:
    """Read `source`'s published judge outputs under `path` and write them as judgments into the new `run_dir`."""
    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}", field="source", choices=SOURCES)
    path, run_dir = Path(path), Path(run_dir)
    if not path.exists():
        raise InputError("not found", path=path)
    if (run_dir / "run.db").exists() or (run_dir.is_dir() and any(run_dir.iterdir())):
        raise InputError("the run folder already exists and is not empty; import into a new folder", path=run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError("not a folder", path=run_dir)
    if source == "mentalalign":
        files, cases, judgments = _read_mentalalign(path)
    else:
        files, cases, judgments = _read_help_harm(path)
    _check_unique(judgments)
    _write(run_dir, source, files, cases, judgments)
    unscored = [j for j in judgments if j.status != "ok"]
    return ImportResult(
        run_dir=run_dir,
        source=source,
        files=[str(f) for f in files],
        cases=len(cases),
        judgments=len(judgments),
        unscored=len(unscored),
        by_judge=dict(Counter(j.judge for j in judgments)),
        unscored_reasons=dict(Counter(str(j.reason) for j in unscored).most_common()),
    )


# -- mentalalign ------------------------------------------------------------------------------------


def _read_mentalalign(path: Path) -> tuple[list[Path], list[Case], list[Judgment]]:
    from mheval.suites.papers import read_mentalalign, workbook_rows

    files = sorted(p for p in path.iterdir() if _MA_JUDGE_RE.match(p.name)) if path.is_dir() else [path]
    if not files:
        raise InputError("no judge_<judge>.xlsx files here", path=path)
    spec = load_protocol(MENTALALIGN)
    cases: dict[str, Case] = {}
    contexts: dict[str, object] = {}  # the raw context cell per case, to check that every file agrees
    judgments: list[Judgment] = []
    for file in files:
        match = _MA_JUDGE_RE.match(file.name)
        if match is None:
            raise InputError("expected a file named judge_<judge>.xlsx", path=file)
        judge = match.group(1)
        rows = workbook_rows(file)
        header = [str(h).strip() if h is not None else "" for h in rows[0]]
        columns = {i: m.group(1).strip() for i, h in enumerate(header) if (m := re.search(r"response_(.+)$", h))}
        if not columns:
            raise InputError("no judge_response_<source> columns in the header", path=file, line=1)
        for needed in ("ConvID", "context"):
            if needed not in header:
                raise InputError("missing column in the header", path=file, line=1, field=needed)
        id_col, ctx_col = header.index("ConvID"), header.index("context")
        body = [row for row in rows[1:] if any(v is not None for v in row)]
        ids = [f"ma-{_conv_id(row[id_col])}" for row in body]
        for case_id, row in zip(ids, body, strict=True):
            if contexts.setdefault(case_id, row[ctx_col]) != row[ctx_col]:
                raise InputError(f"case {case_id!r} has a different text here than in an earlier file", path=file)
        if any(i not in cases for i in ids):
            # The suite reader makes the cases (same ids and texts as `mentalalign:` suites); the judge files
            # share their ConvIDs, so this reads the contexts once rather than once per file.
            for case in read_mentalalign(file)[0]:
                _merge_case(cases, case, file)
        for row, case_id in zip(body, ids, strict=True):
            for col, source in columns.items():
                cell = row[col] if col < len(row) else None
                raw = None if cell is None else str(cell)
                verdict = parse_verdict(spec, raw)
                judgments.append(
                    judgment_from_verdict(
                        verdict,
                        raw=raw,
                        case_id=case_id,
                        protocol=spec.id,
                        judge=judge,
                        model=f"mentalalign/{source}",
                        sample=0,
                        repeat=0,
                    )
                )
    return files, list(cases.values()), judgments


def _conv_id(value: Any) -> int | str:
    """The ConvID as the suite reader writes it into case ids (ints stay ints, 12.0 -> 12)."""
    return int(value) if isinstance(value, int | float) else str(value).strip()


# -- between help and harm ----------------------------------------------------------------------------


def _help_harm_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    folder = path / "llm_crisis_labels" if (path / "llm_crisis_labels").is_dir() else path
    files = sorted(p for p in folder.iterdir() if p.suffix == ".json" and _HH_FILE_RE.match(p.name))
    if not files:
        raise InputError("no <model>-labeled-<series>.json label files here", path=folder)
    return files


def _human_labels(files: list[Path]) -> dict[str, dict[str, Any]]:
    for folder in dict.fromkeys(p for f in files for p in (f.parent, f.parent.parent)):
        human = folder / _HH_HUMAN
        if human.is_file():
            out = {}
            for n, line in enumerate(human.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"malformed JSON ({exc.msg})", path=human, line=n) from None
                if isinstance(rec, dict) and isinstance(rec.get("human_labels"), dict):
                    out[str(rec.get("id"))] = rec["human_labels"]
            return out
    return {}


def _read_help_harm(path: Path) -> tuple[list[Path], list[Case], list[Judgment]]:
    from mheval.suites.papers import majority_label

    files = _help_harm_files(path)
    human = _human_labels(files)
    spec = load_protocol(CRISIS_TRIAGE)
    # Runs of one model over one series, in time order, are its repeats 0, 1, 2 ...
    runs: dict[tuple[str, str], list[tuple[str, Path]]] = {}
    for file in files:
        m = _HH_FILE_RE.match(file.name)
        if m is None:  # a single file given by path with another name: one run of a model named after it
            runs.setdefault((file.stem, file.stem), []).append(("", file))
            continue
        model = m.group("model") + (":merged" if m.group("merged") else "")
        runs.setdefault((model, m.group("series")), []).append((m.group("stamp") or "", file))
    cases: dict[str, Case] = {}
    judgments: list[Judgment] = []
    for (judge, _series), items in sorted(runs.items()):
        for repeat, (_stamp, file) in enumerate(sorted(items)):
            for n, rec in enumerate(_json_array(file), start=1):
                case_id = rec.get("id")
                if not isinstance(case_id, str) or not case_id.strip():
                    raise InputError("missing or empty id", path=file, line=n, field="id")
                inputs = rec.get("inputs")
                if not isinstance(inputs, list) or not all(isinstance(s, str) for s in inputs):
                    raise InputError("must be a list of sentences", path=file, line=n, field="inputs")
                text = " ".join(s.strip() for s in inputs if s.strip())
                metadata: dict[str, Any] = {"dataset_id": rec.get("dataset_id")}
                votes = human.get(case_id)
                if votes:
                    metadata["human_labels"] = dict(votes)
                try:
                    case = Case(
                        id=case_id,
                        turns=[Turn(role="user", content=text)],
                        language="en",
                        crisis_label=majority_label(votes) if votes else None,
                        source="help-harm",
                        metadata=metadata,
                    )
                except ValueError as exc:
                    raise InputError(f"not a valid case: {exc}", path=file, line=n) from None
                _merge_case(cases, case, file)
                judgments.append(_label_judgment(spec, rec, judge=judge, repeat=repeat, case_id=case_id))
    return files, list(cases.values()), judgments


def _label_judgment(spec: ProtocolSpec, rec: dict[str, Any], *, judge: str, repeat: int, case_id: str) -> Judgment:
    """The published label as a judge answer, read by the same parser as a live judge's."""
    answer: dict[str, Any] = {"label": rec.get("label"), "rationale": rec.get("explanation")}
    if "all_labels" in rec:
        answer["all_labels"] = rec["all_labels"]
    raw = json.dumps(answer, ensure_ascii=False)
    verdict = parse_verdict(spec, raw)
    if not verdict.ok and rec.get("label") in (None, ""):
        published = f"the published label is {json.dumps(rec.get('label'))}"
        verdict.detail = f"{verdict.detail} ({published})" if verdict.detail else published
    extra = {"flags": ["published_majority_of_runs"]} if "all_labels" in rec else {}
    judgment = judgment_from_verdict(verdict, raw=raw, case_id=case_id, protocol=spec.id, judge=judge, repeat=repeat)
    return judgment.model_copy(update=extra) if extra else judgment


def _json_array(file: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", path=file) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg})", path=file, line=exc.lineno) from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InputError("expected a JSON array of records", path=file)
    return data


# -- shared -----------------------------------------------------------------------------------------


def _merge_case(cases: dict[str, Case], case: Case, file: Path) -> None:
    """Keep one case per id; the same id must mean the same conversation in every file."""
    known = cases.get(case.id)
    if known is None:
        cases[case.id] = case
    elif known.turns != case.turns:
        raise InputError(f"case {case.id!r} has a different text here than in an earlier file", path=file)


def _check_unique(judgments: list[Judgment]) -> None:
    from mheval.runfolder.store import judgment_key

    seen: set[tuple[Any, ...]] = set()
    for j in judgments:
        key = judgment_key(j)
        if key in seen:
            raise InputError(f"two published judgments for the same unit {key}")
        seen.add(key)


def _write(run_dir: Path, source: str, files: list[Path], cases: list[Case], judgments: list[Judgment]) -> None:
    """Write into a temporary folder beside `run_dir`, then rename it into place: all or nothing."""
    from mheval.runfolder.store import Store

    run_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = run_dir.parent / f".{run_dir.name}.import-{uuid.uuid4().hex[:8]}"
    try:
        with Store.open(staging) as store:
            store.set_meta("import", {"source": source, "files": [str(f) for f in files]})
            store.put_cases(cases)
            bulk = getattr(store, "put_judgments", None)  # one transaction when the store offers it
            if bulk is not None:
                bulk(judgments)
            else:
                for j in judgments:
                    store.put_judgment(j)
        if run_dir.is_dir():
            run_dir.rmdir()  # empty (checked before); rename needs the name free on every platform
        os.replace(staging, run_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


__all__ = ["SOURCES", "ImportResult", "import_published"]
