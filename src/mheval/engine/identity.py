"""What decides a unit's output, as hashes: a stored unit is reused only while all of them are unchanged.

Each unit (a response, a triage verdict, a judgment of a reply) is stored with its *inputs*: a small
mapping of component -> digest (the case's content, the model and its sampling parameters, the
protocol file, the judge and its parameters, the reply judged). On resume a unit whose stored inputs
differ from the ones it would be made from now is done again, and the components that differ say why.
Ids alone never decide reuse: a case edited under the same id is judged anew.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from mheval.config import RunConfig
from mheval.digest import digest
from mheval.models.targets import target_identity
from mheval.records import Case, Response
from mheval.version import __version__

Inputs = dict[str, str]

# Human words for each component, for the "redone because ..." line.
COMPONENTS = {
    "case": "case content",
    "model": "model or sampling parameters",
    "protocol": "protocol file",
    "judge": "judge or its parameters",
    "reply": "reply judged",
    "label": "crisis label used",
    "version": "mheval version",
}


@lru_cache(maxsize=1 << 16)
def _digest_once(value: Hashable) -> str:
    """digest() of a hashable value (tuples for JSON lists: the same digest), computed once per value. The
    stages ask for the same case's digest several times; a resumed 10,000-case run asks 50,000 times."""
    return digest(value)


def inputs_hash(inputs: Mapping[str, str]) -> str:
    return digest(dict(inputs))


def _turns(case: Case) -> tuple[tuple[str, str], ...]:
    return tuple((t.role, t.content) for t in case.turns)


def case_for_generation(case: Case) -> str:
    """A target model sees the turns only: relabelling a case never pays for its replies again."""
    return _digest_once(_turns(case))


def case_for_judging(case: Case) -> str:
    """A judge also sees the language, the locale (crisis lines) and the gold label (rubric row)."""
    return _digest_once((_turns(case), case.language, case.locale, case.crisis_label))


def target_params(model: str, sample: int, config: RunConfig) -> dict[str, Any]:
    """What decides a target model's reply besides the conversation it is given; for an application target
    also its identity (a Python target's version, an HTTP target's file content: models/targets.py)."""
    params = {
        "model": model,
        "sample": sample,
        "seed": config.seed + sample,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens_for(model),
        "system_prompt": config.system_prompt,
        "max_reply_chars": config.max_reply_chars,
    }
    app = target_identity(model)
    if app is not None:
        params["target"] = app
    return params


def generation_inputs(case: Case, model: str, sample: int, config: RunConfig) -> Inputs:
    return {"case": case_for_generation(case), "model": digest(target_params(model, sample, config))}


def given_response_inputs(case: Case, response: Response) -> Inputs:
    """A reply made elsewhere (`--responses`, a suite with replies): decided by its text alone."""
    return {"case": case_for_generation(case), "model": digest({"given": response.model, "text": response.text})}


def judging_inputs(
    case: Case, protocol_digest: str, judge_digest: str, repeat: int,
    reply: str | None = None, crisis_label: str | None = None,
) -> Inputs:  # fmt: skip
    inputs = {
        "case": case_for_judging(case),
        "protocol": protocol_digest,
        "judge": _digest_once((judge_digest, repeat)),
        "version": __version__,
    }
    if reply is not None:
        inputs["reply"] = digest(reply)
        inputs["label"] = _digest_once(crisis_label)
    return inputs


OFFLINE_READS = ("judges/offline", "resources", "textscan.py")
"""What decides an offline judgment, under src/mheval: its models, cue lists and code, the crisis-line table
(a line of the person's country raises the level) and the text tables the cue lists are matched through
(traditional-to-simplified folding, CJK ranges)."""


def judge_digest(name: str, config: RunConfig) -> str:
    """A judge's identity: its files for the offline and trained judges (a rebuilt model judges anew),
    its model spec and judging parameters for an LLM judge; with --redact, also the masking's code, since
    the judge then reads masked texts (a judgment of the unmasked text is never reused, nor the reverse)."""
    own = _judge_digest(name, config)
    if config.redact == "off":
        return own  # unchanged, so the judgments of runs made before masking existed stay reusable
    from mheval import redaction
    from mheval.resources import DATA_FILE

    # What decides the masked text: the rules, the crisis lines kept, and the detecting libraries' versions.
    masking = [_file_digest(Path(redaction.__file__)), _file_digest(DATA_FILE), *redaction.library_versions()]
    return digest([own, {"redact": masking}])


def _judge_digest(name: str, config: RunConfig) -> str:
    from mheval.judges import OFFLINE, is_finetuned_folder, is_model_file

    if name == OFFLINE or name.startswith(OFFLINE + ":"):
        package = Path(__file__).resolve().parent.parent
        return digest([name, *(_tree_digest(package / part) for part in OFFLINE_READS)])
    if is_model_file(name) or is_finetuned_folder(name):
        path = Path(name)
        return digest([name, _tree_digest(path) if path.is_dir() else _file_digest(path)])
    params = {
        "temperature": config.judge_temperature,
        "max_tokens": config.judge_max_tokens,
        "parse_retries": config.parse_retries,
        "few_shot": config.few_shot,
        "seed": config.seed,
        "grounding": config.grounding,
    }
    return digest([name, params])


def changed_components(old: Mapping[str, str] | None, new: Mapping[str, str]) -> list[str]:
    """Which inputs differ, the most basic first (the order of COMPONENTS); a unit stored without inputs
    (an older run folder) counts as "version"."""
    if not old:
        return ["version"]
    changed = [k for k in COMPONENTS if k in new and old.get(k) != new[k]]
    return changed or ["version"]


def describe_redone(counts: Mapping[str, int]) -> str:
    """ "3 (case content), 1 (protocol file)" from {"case": 3, "protocol": 1}."""
    return ", ".join(f"{n} ({COMPONENTS.get(k, k)})" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _file_digest(path: Path) -> str:
    stat = path.stat()
    return _content_digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def _tree_digest(root: Path) -> str:
    """The digest of a folder's files (or of one file), by their paths under it and their contents."""
    if root.is_file():
        return digest([[root.name, _file_digest(root)]])
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return digest([[str(p.relative_to(root)), _file_digest(p)] for p in files])


@cache
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    """The file's bytes hashed once per (size, mtime) in this process: large model files are read once."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]
