"""The crisis gate: how likely it is that the user speaks of a crisis of their own.

Triage's label classifier (a linear head, weights/crisis-triage.npz) reads words and topics: a question
about helping a friend, a burn from cooking oil or a gaming loss that "killed" someone shares them with
risk, and it gives such messages crisis labels. The gate is a second reading of the same message: a
small neural network (one hidden layer over the e5 and USE embeddings and the lexicon's label scores)
trained on mheval's corpus of risk and ordinary messages, the help_harm messages and crisis-core, that
answers one question: is this person in a crisis? Below the gate's `veto` probability triage says
no crisis, unless the user states explicit risk (risk.py's findings: a plan, means, an attempt, a
farewell, a self-harm act), which the gate overrules only when it is very sure: below `floor_veto`.
Those findings are cue lists, and a cue list may not decide alone: "I burned my hand on the pan while
cooking" holds a self-harm cue and no crisis.

`veto` is chosen out of fold (each corpus writer and each help_harm dataset held out in turn): the
probability that keeps `keep_risk` of the corpus's risk messages; `floor_veto` the probability that
keeps `keep_explicit` of those of them with an explicit finding (training/crisis_gate.py). The model
file is `weights/crisis-gate.npz` (`crisis-gate.fast.npz`, without e5, for `offline:fast`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mheval.errors import InputError
from mheval.judges.offline.risk import GateReading
from mheval.judges.offline.trained import MlpHead, read_arrays, write_arrays

FORMAT = "mheval-crisis-gate"
FORMAT_VERSION = 2
_ARRAYS = ("mean", "scale", "hidden_coef", "hidden_intercept", "coef", "intercept")


@dataclass(frozen=True)
class CrisisGate:
    """Standardise, one ReLU layer, a logistic output: p(the user is in a crisis of their own)."""

    mean: np.ndarray
    scale: np.ndarray
    hidden_coef: np.ndarray  # (d, hidden)
    hidden_intercept: np.ndarray  # (hidden,)
    coef: np.ndarray  # (hidden,)
    intercept: float
    blocks: tuple[str, ...]
    veto: float
    floor_veto: float
    meta: dict[str, Any] = field(default_factory=dict)

    def probability(self, x: np.ndarray) -> np.ndarray:
        # The same network as the reply-harm detector's hidden-layer head, with one output; its file keeps the
        # gate's own array names and orientation.
        net = MlpHead(self.mean, self.scale, self.hidden_coef.T, self.hidden_intercept, self.coef[None, :],
                      np.array([self.intercept]))  # fmt: skip
        logit = net.logits(x)[:, 0]
        return 1.0 / (1.0 + np.exp(-np.clip(logit, -60.0, 60.0)))

    def read(self, x: np.ndarray) -> list[GateReading]:
        return [GateReading(float(p), self.veto, self.floor_veto) for p in self.probability(x)]

    def save(self, path: Path) -> Path:
        arrays = {name: np.asarray(getattr(self, name), dtype=np.float32) for name in _ARRAYS}
        meta = {**self.meta, "format": FORMAT, "format_version": FORMAT_VERSION, "features": list(self.blocks),
                "veto": self.veto, "floor_veto": self.floor_veto}  # fmt: skip
        return write_arrays(path, arrays, meta)


def gate_path(folder: Path, fast: bool = False) -> Path:
    return folder / f"crisis-gate{'.fast' if fast else ''}.npz"


@functools.lru_cache(maxsize=8)
def gate_beside(triage_file: Path) -> CrisisGate | None:
    """The crisis gate built with a triage model file (the fast one beside a fast file), or None: looked up
    once per file, not at every judgment."""
    found = gate_path(triage_file.parent, triage_file.name.endswith(".fast.npz"))
    return load_gate(found) if found.is_file() else None


@functools.lru_cache(maxsize=4)
def load_gate(path: Path) -> CrisisGate:
    arrays, meta = read_arrays(path, "crisis-gate model file")
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise InputError(f"unsupported model format {meta.get('format')!r}", path=path)
    missing = [k for k in _ARRAYS if k not in arrays]
    if missing:
        raise InputError(f"not an mheval crisis-gate model file (no {', '.join(missing)})", path=path)
    a = {k: np.asarray(arrays[k], dtype=np.float64) for k in _ARRAYS}
    return CrisisGate(
        a["mean"], a["scale"], a["hidden_coef"], a["hidden_intercept"], a["coef"].reshape(-1),
        float(a["intercept"].reshape(-1)[0]), tuple(meta["features"]), float(meta["veto"]),
        float(meta["floor_veto"]), meta,
    )  # fmt: skip
