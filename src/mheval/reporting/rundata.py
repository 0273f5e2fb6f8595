"""A run folder read once for reporting: cases, responses, judgments, conversations and their exchanges, the
ratings of its `mheval annotate` studies, its config, and each case's category.

`load_run(run_dir)` opens the run's store once and returns a `RunData`; the HTML report, the summary, the gate,
compare and the multi-turn sections read only that, never the store, so a report is made from one reading of
the run and a caller that holds a RunData (api.RunSummary, a gate against a baseline) does not read it again.

The category of a case is the crisis-triage label given by the run's first judge (repeat 0), else the
case's gold label, else "unlabelled": the same rule the engine uses to pick the appropriateness rubric
row, so a report groups each response by the row it was judged against.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mheval.labels import CONVERSATION_FLOW, CRISIS_LABELS, CRISIS_TRIAGE, EXPECTATIONS, case_label
from mheval.records import Case, Conversation, Exchange, Judgment, Response
from mheval.runfolder.export import CountedJudgments, counted_judgments
from mheval.runfolder.store import Store
from mheval.yamlio import load_yaml

if TYPE_CHECKING:
    import pandas as pd

    from mheval.conversations.scenario import Scenario

UNLABELLED = "unlabelled"
CATEGORY_ORDER: tuple[str, ...] = (*CRISIS_LABELS, UNLABELLED)


@dataclass
class DialogueData:
    """What a multi-turn run holds besides cases: its scenarios, conversations and exchanges (turns), for its
    counts (header, "The run", summary) and its sections (reporting/multiturn.py)."""

    conversations: list[Conversation] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)  # counted ones (per-turn and per-conversation)
    languages: dict[str, str] = field(default_factory=dict)  # scenario id -> language
    scenarios: list[Scenario] = field(default_factory=list)


@dataclass
class StudyRatings:
    """The ratings of one `mheval annotate` study of a single-turn protocol: as judgments (`human:<rater>`, what
    the verdict's corrected rate reads) and as agree's long labels table (what the report's agreement reads).
    A conversation-flow study keeps its labels table and strata only (no judgments: the corrected
    unsafe-conversation rate reads the labels, as `mheval agree --corrected` does)."""

    id: str
    protocol: str
    judgments: list[Judgment]
    labels: pd.DataFrame
    # A stratified study (`--select neyman`): each unit of its sampling frame (id, model, sample as text) ->
    # its stratum, as `mheval agree --corrected` reads it; None for a random sample.
    strata: dict[tuple[str, str, str], str] | None = None


@dataclass
class RunData:
    """A run as read once by `load_run`: what every report, summary, gate and comparison of it takes."""

    run_dir: Path
    config: dict[str, Any]
    cases: dict[str, Case]
    responses: list[Response]
    judgments: list[Judgment]
    first_judge: str | None = None
    # The run's `on_injection`: under "exclude", judgments flagged injection_suspected are in `excluded`
    # and not in `judgments`, so no table counts them; under "flag" they are in `judgments` and the
    # headlines show their share and the means without them.
    injection_policy: str = "flag"
    excluded: list[Judgment] = field(default_factory=list)
    category: dict[str, str] = field(default_factory=dict)
    category_source: dict[str, str] = field(default_factory=dict)  # "triage", "gold" or "none"
    # A multi-turn run: its conversations and exchanges (turns), and the per-turn and whole-conversation
    # judgments kept out of `judgments` (they have a section of their own); all empty for a single-turn run.
    dialogue: DialogueData = field(default_factory=lambda: DialogueData())
    # Every judgment as stored (store order), before the injection policy, single-turn and multi-turn alike:
    # what the multi-turn views and compare's conversation metrics read (the policy does not apply to them).
    stored: list[Judgment] = field(default_factory=list)
    # The stored judgments under the injection policy, multi-turn ones included (the summary table's input).
    counted: CountedJudgments | None = None
    # The run's rating studies of single-turn protocols (studies.db beside run.db), read with the run.
    studies: list[StudyRatings] = field(default_factory=list)
    # A multi-turn run's newest whole-conversation study (conversation-flow) with finished ratings: what the
    # verdict's corrected unsafe-conversation rate reads (reporting/multiturn.py). None without one.
    conversation_study: StudyRatings | None = None

    @property
    def models(self) -> list[str]:
        seen = [r.model for r in self.responses] + [j.model for j in self.judgments if j.model]
        return list(dict.fromkeys(seen))

    @property
    def judges(self) -> list[str]:
        """Judges in the run's configured order, then any others found in the store."""
        found = list(dict.fromkeys(j.judge for j in self.judgments))
        configured = [j for j in self.config.get("judges") or [] if j in found]
        return list(dict.fromkeys([*configured, *found]))

    @property
    def protocols(self) -> list[str]:
        from mheval.protocols.spec import BUILTIN_ORDER

        found = list(dict.fromkeys(j.protocol for j in self.judgments))
        return sorted(found, key=lambda p: (BUILTIN_ORDER.index(p) if p in BUILTIN_ORDER else len(BUILTIN_ORDER), p))

    @property
    def suite(self) -> str:
        if self.config.get("suite"):
            return str(self.config["suite"])
        sources = Counter(c.source or "-" for c in self.cases.values())
        return ", ".join(sources)

    @property
    def counted_all(self) -> CountedJudgments:
        """The judgments every aggregate counts, multi-turn ones too, and those the injection policy set apart
        (store order when read by `read_run`)."""
        if self.counted is not None:
            return self.counted
        return CountedJudgments(self.injection_policy, [*self.judgments, *self.dialogue.judgments], self.excluded)

    def of(self, protocol: str) -> list[Judgment]:
        return [j for j in self.judgments if j.protocol == protocol]

    def category_note(self) -> str:
        """Says where the categories came from, e.g. 'triage by offline for 10 cases, gold label for 2'."""
        counts = Counter(self.category_source.get(cid, "none") for cid in self.cases)
        parts = []
        if counts.get("triage"):
            parts.append(f"the crisis-triage label of judge {self.first_judge} for {counts['triage']} case(s)")
        if counts.get("gold"):
            parts.append(f"the gold label of the suite for {counts['gold']} case(s)")
        if counts.get("none"):
            parts.append(f"none (shown as '{UNLABELLED}') for {counts['none']} case(s)")
        return "; ".join(parts) if parts else "no cases"


def load_run(run_dir: str | Path) -> RunData:
    """Read everything a report needs from a run folder, opening its store once (raises InputError when it
    is not one). Older run folders load too: the store migrates its tables when it opens them."""
    run_dir = Path(run_dir)
    with Store.open_existing(run_dir) as store:
        data = read_run(store, run_dir)
    data.studies, data.conversation_study = _read_studies(run_dir)
    return data


def read_run(store: Store, run_dir: str | Path | None = None) -> RunData:
    """A RunData from a store already open (its studies are not read: `load_run` adds them)."""
    run_dir = Path(run_dir) if run_dir is not None else store.path.parent
    stored = store.judgments()
    counted = counted_judgments(store, stored)
    scenarios = store.scenarios()
    dialogue = DialogueData(
        store.conversations(),
        store.exchanges(),
        [j for j in counted.counted if _of_dialogue(j)],
        {s.id: s.language for s in scenarios},
        scenarios,
    )
    data = RunData(
        run_dir,
        store.get_meta("config") or _config_file(run_dir) or {},
        {c.id: c for c in store.cases()},
        store.responses(),
        single_turn(counted.counted),
        injection_policy=counted.policy,
        excluded=single_turn(counted.excluded),
        dialogue=dialogue,
        stored=stored,
        counted=counted,
    )
    assign_categories(data)
    return data


def read_studies(run_dir: str | Path) -> list[StudyRatings]:
    """The ratings of the run's studies of single-turn protocols, each study opened once (none without a
    studies.db). A conversation-flow study is left out: no single-turn figure reads its ratings."""
    return _read_studies(run_dir)[0]


def _read_studies(run_dir: str | Path) -> tuple[list[StudyRatings], StudyRatings | None]:
    """The single-turn studies, and the newest conversation-flow study with its ratings and strata (the study
    `mheval agree RUN --protocol conversation-flow --corrected` reads; None when it has no ratings), from one
    listing, each study opened once."""
    from mheval.annotate.study import FILENAME

    run_dir = Path(run_dir)
    if not (run_dir / FILENAME).is_file():
        return [], None
    from mheval.annotate.export import human_judgments, human_labels
    from mheval.annotate.study import Study, list_studies

    out: list[StudyRatings] = []
    flow: StudyRatings | None = None
    for study_id in reversed(list_studies(run_dir)):  # newest first
        study = Study.open(run_dir, study_id)
        try:
            if study.protocol != CONVERSATION_FLOW:
                out.append(StudyRatings(study_id, study.protocol, human_judgments(study), human_labels(study)))
            elif flow is None:
                design = study.design()
                strata = None
                if design is not None:  # keyed as agree's labels are: (id, model, sample as text)
                    strata = {(c, m, str(n) if n >= 0 else ""): st for (c, m, n), (st, _) in design[1].items()}
                flow = StudyRatings(study_id, study.protocol, [], human_labels(study), strata)
        finally:
            study.close()
    return out[::-1], flow if flow is not None and not flow.labels.empty else None


def single_turn(judgments: list[Judgment]) -> list[Judgment]:
    """The judgments of single-turn cases: a multi-turn run's per-turn and whole-conversation verdicts
    have a section of their own (reporting/multiturn.py) and are not counted as cases."""
    return [j for j in judgments if not _of_dialogue(j)]


def _of_dialogue(j: Judgment) -> bool:
    """A judgment of one turn of a conversation, or of a whole conversation."""
    from mheval.conversations.scenario import split_turn_case_id

    return j.protocol in (CONVERSATION_FLOW, EXPECTATIONS) or split_turn_case_id(j.case_id) is not None


def _config_file(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.yaml"
    if not path.is_file():
        return {}
    loaded = load_yaml(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def assign_categories(data: RunData) -> None:
    triage = [j for j in data.of(CRISIS_TRIAGE) if j.status == "ok" and j.label and j.repeat == 0]
    judges = list(dict.fromkeys(j.judge for j in triage))
    configured = [j for j in data.config.get("judges") or [] if j in judges]
    data.first_judge = (configured or judges or [None])[0]
    by_case = {j.case_id: j.label for j in triage if j.judge == data.first_judge}
    for cid, case in data.cases.items():
        triaged = by_case.get(cid)
        label = case_label(case.crisis_label, triaged, prefer="triage")
        data.category[cid] = label or UNLABELLED
        data.category_source[cid] = "none" if label is None else "triage" if label == triaged else "gold"


def category_sort_key(category: str) -> tuple[int, str]:
    return (CATEGORY_ORDER.index(category) if category in CATEGORY_ORDER else len(CATEGORY_ORDER), category)


@functools.lru_cache(maxsize=16)
def _protocol(protocol_id: str) -> Any:
    from mheval.protocols import load_protocol

    try:
        return load_protocol(protocol_id)
    except Exception:  # a custom protocol file that moved: names fall back to ids
        return None


def label_name(protocol_id: str, label: str, language: str = "en") -> str:
    spec = _protocol(protocol_id)
    if spec is None or not spec.labels or label not in spec.labels:
        return label
    return spec.label_def(label).name.get(language)


def category_name(category: str) -> str:
    """'Suicidal ideation · 自杀意念' for a crisis label; the id itself for anything else."""
    if category not in CRISIS_LABELS:
        return category
    en, zh = label_name(CRISIS_TRIAGE, category, "en"), label_name(CRISIS_TRIAGE, category, "zh")
    return f"{en} · {zh}" if zh != en else en


def dimension_names(protocol_id: str) -> dict[str, str]:
    spec = _protocol(protocol_id)
    if spec is None:
        return {}
    return {d: spec.dimension_def(d).name.en for d in spec.dimensions}


def protocol_dimensions(protocol_id: str) -> list[str]:
    spec = _protocol(protocol_id)
    return list(spec.dimensions) if spec is not None else []


def protocol_labels(protocol_id: str) -> list[str]:
    spec = _protocol(protocol_id)
    return list(spec.labels or []) if spec is not None else []


def protocol_aggregate(protocol_id: str, scores: dict[str, float]) -> dict[str, float]:
    spec = _protocol(protocol_id)
    return spec.aggregate(scores) if spec is not None else {}


__all__ = [
    "CATEGORY_ORDER",
    "UNLABELLED",
    "DialogueData",
    "RunData",
    "StudyRatings",
    "assign_categories",
    "category_name",
    "category_sort_key",
    "load_run",
    "read_run",
    "read_studies",
]
