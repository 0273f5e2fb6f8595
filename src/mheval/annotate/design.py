"""Which units a study rates: a simple random sample, or a Neyman design stratified by the judge's verdict.

`neyman`: each unit of the run gets a stratum from one judge's output under the study's protocol: a label
protocol by the judge's binary verdict (flagged or not, the headline measure of `mheval.analysis.corrected`);
a whole-conversation study (conversation-flow) by the judge's verdict on the conversation (flagged: unsafe,
`verdict.conversation_verdict` from its turns, expectations and flow: analysis/conversation_verdicts.py)
and, when the judge reports a confidence, its band (low < 0.6 <= mid < 0.85 <= high); a scale protocol by
the judge's score rounded (PsyCrisis: the total 0-5); a unit the judge did not score is "unjudged". The
budget (`sample`) is shared by Neyman allocation (`mheval.stats.design.neyman_allocation`), n_h
proportional to N_h S_h with at least 2 per stratum. S_h, the spread of what the humans will correct, comes
from a pilot: the ratings of an earlier study of the same protocol in this run (the spread of human minus
judge in the stratum), else the judge's confidence (sqrt(c(1-c))); with neither, every stratum gets the same
S_h and the allocation is proportional (the note says so). Each unit's stratum and inclusion probability
n_h / N_h are stored, so the corrected estimate is stratified and stays unbiased.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mheval.errors import InputError
from mheval.labels import CONVERSATION_FLOW
from mheval.runfolder.store import Store
from mheval.stats.design import binary_spread, neyman_allocation

SELECTIONS = ("random", "neyman")
UNJUDGED = "unjudged"
_BANDS = ((0.6, "low"), (0.85, "mid"))

Key = tuple[str, str, int]


@dataclass
class Plan:
    """The units picked, and per unit of the run its stratum and inclusion probability."""

    chosen: list[int]  # indexes into the units given
    strata: list[str]
    inclusion: list[float]
    judge: str | None
    rates: dict[str, float] = field(default_factory=dict)  # stratum -> n_h / N_h (for units added later)
    notes: list[str] = field(default_factory=list)


def _band(confidence: float) -> str:
    for edge, name in _BANDS:
        if confidence < edge:
            return name
    return "high"


Outputs = dict[Key, tuple[float, float | None]]  # unit -> (the judge's value, its confidence if it gives one)


def judge_outputs(run_dir: Path, protocol: str, judge: str | None) -> tuple[str | None, Outputs]:
    """One judge's (value, confidence) per unit key, repeat 0, ok judgments only; the judge picked."""
    from mheval.analysis.corrected import headline_measure

    found: dict[str, Outputs] = {}
    measure = headline_measure(protocol)
    if measure is None:
        return None, {}
    with Store.open_existing(run_dir) as store:
        if protocol == CONVERSATION_FLOW:
            found = _verdict_outputs(store)
        else:
            for j in store.iter_judgments(protocol):
                if j.status != "ok" or j.repeat != 0 or j.judge.startswith("human:"):
                    continue
                value = measure.value(j.scores, j.label)
                if value is None:
                    continue
                conf = j.scores.get("confidence") if j.scores else None
                key = (j.case_id, j.model or "", j.sample if j.sample is not None else -1)
                found.setdefault(j.judge, {})[key] = (value, float(conf) if conf is not None else None)
    if judge is not None:
        if judge not in found:
            raise InputError(f"no ok judgment of {protocol} by judge {judge!r}", field="judge", choices=sorted(found))
        return judge, found[judge]
    if not found:
        return None, {}
    if len(found) > 1:
        raise InputError(f"several judges judged {protocol}: pick the one to stratify by with --judge", field="judge",
                         choices=sorted(found))  # fmt: skip
    name = next(iter(found))
    return name, found[name]


def _verdict_outputs(store: Store) -> dict[str, Outputs]:
    """Per judge, each conversation's verdict as a value (1 unsafe, 0 not; undecided ones left out): a study of
    whole conversations is stratified by it, whichever protocols made it."""
    from mheval.analysis.conversation_verdicts import conversation_verdicts

    found: dict[str, Outputs] = {}
    for judge, verdicts in conversation_verdicts(store).items():
        values: Outputs = {k: (float(v), None) for k, v in verdicts.items() if v is not None}
        if values:
            found[judge] = values
    return found


def stratum_of(output: tuple[float, float | None] | None, binary: bool) -> str:
    if output is None:
        return UNJUDGED
    value, conf = output
    base = ("flagged" if value >= 0.5 else "not-flagged") if binary else f"score={round(value):g}"
    return base if conf is None else f"{base}/{_band(conf)}"


def neyman_plan(
    keys: Sequence[Key],
    outputs: Outputs,
    *,
    binary: bool,
    budget: int,
    seed: int,
    pilot: dict[Key, float] | None = None,
) -> Plan:
    """Strata, Neyman allocation of ``budget`` and a seeded draw within each stratum."""
    strata = [stratum_of(outputs.get(k), binary) for k in keys]
    names = sorted(set(strata))
    members = {s: [i for i, x in enumerate(strata) if x == s] for s in names}
    sizes = np.array([len(members[s]) for s in names])
    spreads, source = _spreads(names, members, keys, outputs, pilot)
    alloc = neyman_allocation(sizes, spreads, budget)
    rng = random.Random(seed)
    chosen: list[int] = []
    rates: dict[str, float] = {}
    for name, n in zip(names, alloc, strict=True):
        chosen += rng.sample(members[name], int(n))
        rates[name] = int(n) / len(members[name])
    notes = [f"Neyman allocation over {len(names)} strata, spreads from {source}: "
             + ", ".join(f"{s} {int(n)}/{len(members[s])}" for s, n in zip(names, alloc, strict=True))]  # fmt: skip
    return Plan(sorted(chosen), strata, [rates[s] for s in strata], None, rates, notes)


def _spreads(
    names: list[str],
    members: dict[str, list[int]],
    keys: Sequence[Key],
    outputs: Outputs,
    pilot: dict[Key, float] | None,
) -> tuple[np.ndarray, str]:
    if pilot:
        out = []
        for s in names:
            both = [keys[i] for i in members[s] if keys[i] in pilot and keys[i] in outputs]
            diffs = [pilot[k] - outputs[k][0] for k in both]
            out.append(float(np.std(diffs, ddof=1)) if len(diffs) >= 2 else np.nan)
        arr = np.array(out)
        if np.isfinite(arr).any():
            # A stratum the pilot did not reach gets the largest spread seen (rate it rather than guess it is easy).
            arr = np.where(np.isfinite(arr), np.maximum(arr, 0.05), np.nanmax(arr))
            return arr, "an earlier study's ratings"
    confs = [[outputs[keys[i]][1] for i in members[s] if keys[i] in outputs and outputs[keys[i]][1] is not None]
             for s in names]  # fmt: skip
    if any(confs):
        arr = np.array([float(np.sqrt(np.mean(binary_spread(c) ** 2))) if c else 0.5 for c in confs])
        return np.maximum(arr, 0.05), "the judge's confidence"
    return np.ones(len(names)), "nothing (no pilot ratings, no judge confidence: proportional allocation)"
