"""Panels of judges, self-consistency across repeats, and which judges may judge which models.

`aggregate_panel(judgments, method)` turns several judges' verdicts on one unit into one judgment,
named `panel:<method>`:

- `majority`: the most frequent label, or per dimension the most frequent score;
- `mean` / `median`: per dimension, the mean or median of the members' scores (scale protocols only;
  the median of an even number of scores is the mean of the middle two, so it may fall between levels).

Ties are resolved towards caution, and flagged `panel_tie:<label or dimension>`: for labels, the tied
label listed first in the protocol wins (both built-in label protocols list their no-risk label last,
so a crisis beats `no_crisis` and an unsafe category beats `safe`); for scores, the
lowest tied score wins (a binary tie counts as not met). Unscored members are left out and counted
(`panel_unscored:<n>` beside `panel_members:<n>`); when every member is unscored the panel is unscored
with the most common reason of its members.

`self_consistency(judgments)` measures how much one judge's repeats of the same unit agree, and
`same_family(judge, model)` tells whether a judge belongs to the family of the model it would judge
(self-preference), so a run can leave those units out.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from mheval.records import Judgment, Reason, Usage

if TYPE_CHECKING:
    from mheval.protocols.spec import ProtocolSpec

PanelMethod = Literal["majority", "mean", "median"]
PANEL_METHODS: tuple[str, ...] = ("majority", "mean", "median")
PANEL_PREFIX = "panel:"

UnitKey = tuple[str, str | None, int | None, str]


def unit_key(j: Judgment) -> UnitKey:
    """The unit a judgment is about, whoever judged it: (case, model, sample, protocol)."""
    return (j.case_id, j.model, j.sample, j.protocol)


def _spec(protocol: str) -> ProtocolSpec | None:
    from mheval.errors import InputError
    from mheval.protocols.spec import load_protocol

    try:
        return load_protocol(protocol)
    except InputError:
        return None


def _vote(values: list[float]) -> tuple[float, bool]:
    """The most frequent value; on a tie the lowest (the cautious reading of a higher-is-better scale)."""
    counts = Counter(values)
    top = max(counts.values())
    tied = sorted(v for v, c in counts.items() if c == top)
    return tied[0], len(tied) > 1


def _label_vote(labels: list[str], order: Sequence[str]) -> tuple[str, bool]:
    counts = Counter(labels)
    top = max(counts.values())
    tied = [lb for lb, c in counts.items() if c == top]
    if len(tied) == 1:
        return tied[0], False
    rank = {lb: i for i, lb in enumerate(order)}
    first_seen = {lb: i for i, lb in reversed(list(enumerate(labels)))}
    return min(tied, key=lambda lb: (rank.get(lb, len(rank)), first_seen[lb])), True


def aggregate_panel(
    judgments: Sequence[Judgment], method: PanelMethod | str = "majority", spec: ProtocolSpec | None = None
) -> Judgment:
    """One judgment from several judges' judgments of the same unit (see the module docstring).

    All members must share case, model, sample and protocol; the panel's repeat is theirs when they
    agree on it, else 0. `spec` defaults to the built-in protocol of that id (for the label order and
    the aggregates such as total, css and ars). Raises ValueError for an empty panel, mixed units, an
    unknown method, or mean/median over labels.
    """
    if method not in PANEL_METHODS:
        raise ValueError(f"unknown panel method {method!r}; choose one of {', '.join(PANEL_METHODS)}")
    if not judgments:
        raise ValueError("a panel needs at least one judgment")
    units = {unit_key(j) for j in judgments}
    if len(units) > 1:
        raise ValueError(f"a panel aggregates one unit, got {len(units)} (e.g. {sorted(map(str, units))[:2]})")
    first = judgments[0]
    spec = spec if spec is not None else _spec(first.protocol)
    repeats = {j.repeat for j in judgments}
    ids = {
        "case_id": first.case_id, "protocol": first.protocol, "judge": PANEL_PREFIX + method,
        "model": first.model, "sample": first.sample, "repeat": repeats.pop() if len(repeats) == 1 else 0,
    }  # fmt: skip
    usage = sum((j.usage for j in judgments), Usage())
    latency = max(j.latency_s for j in judgments)
    scored = [j for j in judgments if j.status == "ok"]
    unscored = [j for j in judgments if j.status != "ok"]
    members = ", ".join(f"{j.judge}" + ("" if j.status == "ok" else f" (unscored: {j.reason})")
                        for j in judgments)
    flags = [f"panel_members:{len(judgments)}", f"panel_unscored:{len(unscored)}"]
    if not scored:
        kind = Counter(j.reason or Reason.PARSE_FAILURE for j in unscored).most_common(1)[0][0]
        return Judgment.unscored(kind, f"all {len(judgments)} panel members unscored ({members})",
                                 usage=usage, latency_s=latency, flags=flags, **ids)

    is_label = any(j.label is not None for j in scored)
    rationale = f"{method} of {len(scored)} scored judgment(s) from: {members}"
    if is_label:
        if method != "majority":
            raise ValueError(f"method {method!r} needs scores; labels are aggregated by majority")
        labels = [j.label for j in scored if j.label is not None]
        label, tie = _label_vote(labels, (spec.labels if spec is not None else None) or [])
        if tie:
            flags.append("panel_tie:label")
        votes = Counter(labels)
        rationale += "; votes " + ", ".join(f"{k} {v}" for k, v in votes.most_common())
        return Judgment(label=label, rationale=rationale, flags=flags, usage=usage, latency_s=latency, **ids)

    dims = spec.dimensions if spec is not None else sorted({k for j in scored for k in j.scores})
    aggregate_keys = set(spec.aggregates) if spec is not None else set()
    scores: dict[str, float] = {}
    for dim in dims:
        if dim in aggregate_keys:
            continue
        values = [j.scores[dim] for j in scored if dim in j.scores]
        if not values:
            continue
        if method == "majority":
            scores[dim], tie = _vote(values)
            if tie:
                flags.append(f"panel_tie:{dim}")
        elif method == "mean":
            scores[dim] = float(np.mean(values))
        else:
            scores[dim] = float(statistics.median(values))
    total = None
    if spec is not None:
        aggregates = spec.aggregate(scores)
        total = aggregates.pop("total", None)
        scores.update(aggregates)
    evidence: dict[str, list[str]] = {}
    for j in scored:
        for dim, quotes in j.evidence.items():
            bucket = evidence.setdefault(dim, [])
            bucket.extend(q for q in quotes if q not in bucket)
    return Judgment(scores=scores, total=total, evidence=evidence, rationale=rationale, flags=flags, usage=usage,
                    latency_s=latency, **ids)


def build_panels(
    judgments: Iterable[Judgment], methods: Sequence[str], judges: Sequence[str] | None = None
) -> list[Judgment]:
    """Panel judgments for every unit and repeat judged by two or more of `judges` (default: all but panels)."""
    groups: dict[tuple[UnitKey, int], list[Judgment]] = defaultdict(list)
    wanted = set(judges) if judges is not None else None
    for j in judgments:
        if j.judge.startswith(PANEL_PREFIX) or (wanted is not None and j.judge not in wanted):
            continue
        groups[(unit_key(j), j.repeat)].append(j)
    out = []
    for members in groups.values():
        if len({j.judge for j in members}) < 2:
            continue
        for method in methods:
            if method != "majority" and any(j.label is not None for j in members):
                continue  # mean/median do not apply to labels
            out.append(aggregate_panel(members, method))
    return out


# -- self-consistency -------------------------------------------------------------------------------

_SC_COLUMNS = ["case_id", "model", "sample", "protocol", "judge", "dimension", "n_repeats", "n_scored", "n_unscored",
               "mean", "std", "min", "max", "modal", "agree"]


def self_consistency(judgments: Iterable[Judgment]) -> pd.DataFrame:
    """One row per (unit, judge, dimension) over the judge's repeats of that unit.

    `dimension` is "label" for label protocols, else each score key (and "total"). For numbers: mean,
    sample standard deviation (NaN with fewer than two scored repeats), min, max. For every kind:
    `modal` (the most frequent value) and `agree`, the share of scored repeats that give it (1.0 =
    perfectly consistent). Unscored repeats are counted, not used.
    """
    groups: dict[tuple[UnitKey, str], list[Judgment]] = defaultdict(list)
    for j in judgments:
        groups[(unit_key(j), j.judge)].append(j)
    rows = []
    for ((case_id, model, sample, protocol), judge), items in groups.items():
        scored = [j for j in items if j.status == "ok"]
        base = {"case_id": case_id, "model": model, "sample": sample, "protocol": protocol, "judge": judge,
                "n_repeats": len(items), "n_unscored": len(items) - len(scored)}
        values: dict[str, list[object]] = defaultdict(list)
        for j in scored:
            if j.label is not None:
                values["label"].append(j.label)
            for k, v in j.scores.items():
                values[k].append(v)
            if j.total is not None:
                values["total"].append(j.total)
        if not values:
            rows.append({**base, "dimension": None, "n_scored": len(scored)})
        for dim, vals in values.items():
            counts = Counter(vals)
            modal, top = counts.most_common(1)[0]
            row = {**base, "dimension": dim, "n_scored": len(vals), "modal": modal, "agree": top / len(vals)}
            if dim != "label":
                arr = np.asarray(vals, dtype=float)
                row.update(mean=float(arr.mean()), std=float(arr.std(ddof=1)) if len(arr) > 1 else float("nan"),
                           min=float(arr.min()), max=float(arr.max()))
            rows.append(row)
    return pd.DataFrame(rows, columns=_SC_COLUMNS)


def self_consistency_summary(judgments: Sequence[Judgment], *, n_boot: int = 0) -> pd.DataFrame:
    """Per (protocol, judge, dimension): units with 2+ scored repeats, mean std, mean agreement, share of
    units where every repeat agrees, and Fleiss' kappa over repeats for labels and binary dimensions."""
    from mheval.stats.agreement import fleiss_kappa

    detail = self_consistency(judgments)
    detail = detail[detail["n_scored"] >= 2]
    rows = []
    by_unit: dict[tuple[str, str, str], dict[UnitKey, dict[int, object]]] = defaultdict(lambda: defaultdict(dict))
    for j in judgments:
        if j.status != "ok":
            continue
        if j.label is not None:
            by_unit[(j.protocol, j.judge, "label")][unit_key(j)][j.repeat] = j.label
        for k, v in j.scores.items():
            by_unit[(j.protocol, j.judge, k)][unit_key(j)][j.repeat] = v
    for (protocol, judge, dim), group in detail.groupby(["protocol", "judge", "dimension"], sort=True):
        row = {"protocol": protocol, "judge": judge, "dimension": dim, "units": len(group),
               "mean_std": float(group["std"].mean()) if dim != "label" else float("nan"),
               "mean_agree": float(group["agree"].mean()), "all_agree": float((group["agree"] == 1.0).mean()),
               "fleiss_kappa": float("nan")}
        units = by_unit.get((protocol, judge, dim), {})
        values = {v for reps in units.values() for v in reps.values()}
        categorical = dim == "label" or values <= {0.0, 1.0}
        if categorical and units:
            repeats = sorted({r for reps in units.values() for r in reps})
            matrix = pd.DataFrame([[reps.get(r) for r in repeats] for reps in units.values()], columns=repeats)
            est = fleiss_kappa(matrix.astype(object), n_boot=n_boot)
            if est.value is not None:
                row["fleiss_kappa"] = est.value
        rows.append(row)
    return pd.DataFrame(rows, columns=["protocol", "judge", "dimension", "units", "mean_std", "mean_agree",
                                       "all_agree", "fleiss_kappa"])


# -- model families (leave-own-model-out) -------------------------------------------------------------

# Hosting providers and data sources: the first segment of a name that says where a model runs or which
# dataset a reply came from, not who made the model.
_HOSTS = frozenset({
    "openrouter", "together", "groq", "vllm", "ollama", "llamacpp", "lmstudio", "sglang", "local", "fireworks",
    "hf", "huggingface", "azure", "bedrock", "vertex", "test", "mentalalign", "help-harm", "dialogue-safety",
    "deepinfra", "perplexity", "anyscale", "replicate", "cloudflare", "nvidia-nim", "sambanova", "cerebras",
})  # fmt: skip

# Developer families: a name belongs to every family whose pattern it matches (a distilled model belongs to
# both its teacher's and its base model's family, e.g. DeepSeek-R1-Distill-Qwen). First-party provider
# prefixes (openai/, anthropic/, google/ ...) also name the family.
FAMILIES: dict[str, str] = {
    "openai": r"gpt|chatgpt|davinci|(?:^|[/_\-\s])o[1-9](?:$|[/_\-\s])|openai",
    "anthropic": r"claude|anthropic",
    "google": r"gemini|gemma|palm|bard|google",
    "meta": r"llama|meta-llama|(?:^|[/_\-])meta(?:$|[/_\-])",
    "alibaba-qwen": r"qwen|qwq|alibaba",
    "deepseek": r"deepseek|(?:^|[/_\-])ds[_\-]",
    "mistral": r"mistral|mixtral|codestral|ministral|pixtral|magistral|devstral",
    "microsoft": r"(?:^|[/_\-])phi[_\-]?\d|wizardlm|orca|microsoft",
    "xai": r"grok|x-ai|xai",
    "cohere": r"command-r|command-a|(?:^|[/_\-])aya|cohere",
    "zhipu": r"glm|zhipu",
    "moonshot": r"kimi|moonshot",
    "01-ai": r"(?:^|[/_\-])yi[_\-]|01-ai",
    "minimax": r"minimax|abab",
    "baidu": r"ernie|baidu",
    "bytedance": r"doubao|bytedance",
    "tencent": r"hunyuan|tencent",
    "internlm": r"internlm|intern-",
    "baichuan": r"baichuan",
    "huggingface": r"smollm|zephyr|huggingfaceh4",
    "nvidia": r"nemotron|nvidia",
    "ibm": r"granite|ibm",
    "amazon": r"(?:^|[/_\-])nova[_\-]|titan|amazon",
    "ai21": r"jamba|ai21",
    "allenai": r"olmo|tulu|allenai",
}
_FAMILY_RES = {family: re.compile(pattern, re.IGNORECASE) for family, pattern in FAMILIES.items()}


def _model_part(name: str) -> str:
    """`openrouter/anthropic/claude-3.5@https://...` -> `anthropic/claude-3.5`."""
    text = name.split("@", 1)[0].strip().lower()
    parts = [p for p in text.split("/") if p]
    while len(parts) > 1 and parts[0] in _HOSTS:
        parts = parts[1:]
    return "/".join(parts)


def model_families(name: str) -> frozenset[str]:
    """The developer families of a model or judge name (empty when unknown; see FAMILIES)."""
    part = _model_part(name)
    return frozenset(f for f, regex in _FAMILY_RES.items() if regex.search(part))


def same_family(judge_name: str, model_name: str) -> bool:
    """True when the judge shares a developer family with the judged model (or is the same model).

    Examples: openai/gpt-4o judging openai/gpt-4o-mini, o4-mini judging mentalalign/gpt4omini,
    openrouter/anthropic/claude-3.7-sonnet judging anthropic/claude-3-haiku, a deepseek judge
    judging DeepSeek-R1-Distill-Qwen. Unknown families never match unless the names are the same.
    """
    if _model_part(judge_name) == _model_part(model_name):
        return True
    return bool(model_families(judge_name) & model_families(model_name))


__all__ = [
    "FAMILIES",
    "PANEL_METHODS",
    "PANEL_PREFIX",
    "PanelMethod",
    "aggregate_panel",
    "build_panels",
    "model_families",
    "same_family",
    "self_consistency",
    "self_consistency_summary",
    "unit_key",
]
