"""Human ratings that arrive as judgments (`mheval annotate export --format judgments`, judge "human:<rater>"):
told apart from the judges' judgments, and turned into the long labels table `agree` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mheval.analysis.agree.inputs import key_text
from mheval.errors import InputError

HUMAN_PREFIX = "human:"


def human_mask(frame: pd.DataFrame) -> np.ndarray:
    """Rows of a judgments table written by humans: judge "human:<rater>" or the `human` flag."""
    if frame.empty or "judge" not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    named = frame["judge"].astype(str).str.startswith(HUMAN_PREFIX).to_numpy()
    if "flags" in frame.columns:
        flagged = np.array([isinstance(f, list | tuple | np.ndarray) and "human" in list(f) for f in frame["flags"]])
        named = named | flagged
    return np.asarray(named, dtype=bool)


def without_humans(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """The judges' rows only: a rater's exported ratings stored in a run are not a judge to grade."""
    if frame is None:
        return None
    return frame[~human_mask(frame)].reset_index(drop=True)


def labels_from_judgments(frame: pd.DataFrame) -> pd.DataFrame:
    """The human rows of a judgments table as labels: id, rater, value (dimension, model, sample)."""
    humans = frame[human_mask(frame)]
    if humans.empty:
        raise InputError("the judgments hold no human ratings (judge 'human:<rater>')", field="judge")
    protocols = sorted({str(p) for p in humans["protocol"].dropna()}) if "protocol" in humans.columns else []
    if len(protocols) > 1:
        raise InputError("human ratings of several protocols: pick one", field="protocol", choices=protocols)
    rows: list[dict[str, Any]] = []
    models = key_text(humans["model"]) if "model" in humans.columns else pd.Series([""] * len(humans))
    samples = key_text(humans["sample"]) if "sample" in humans.columns else pd.Series([""] * len(humans))
    for (_, j), model, sample in zip(humans.iterrows(), models, samples, strict=True):
        if str(j.get("status")) != "ok":
            continue
        rater = str(j["judge"]).removeprefix(HUMAN_PREFIX)
        base: dict[str, Any] = {"id": str(j["case_id"]), "rater": rater}
        if model:
            base["model"], base["sample"] = model, sample
        scores = j.get("scores")
        if isinstance(scores, dict) and scores:
            rows += [{**base, "dimension": str(d), "value": float(v)} for d, v in scores.items() if v is not None]
        elif isinstance(j.get("label"), str) and j["label"]:
            rows.append({**base, "value": j["label"]})
    if not rows:
        raise InputError("the human ratings hold no scored answer", field="status")
    out = pd.DataFrame(rows)
    if "dimension" in out.columns and out["dimension"].isna().any():
        raise InputError("human ratings mix labels and scores", field="scores")
    return out


def read_labels(path: str | Path, *, field: str | None = None) -> pd.DataFrame:
    """A human-labels file, or a judgments export holding human ratings (JSONL or CSV)."""
    from mheval.analysis import load_human_labels

    p = Path(path)
    if p.suffix.lower() in (".jsonl", ".ndjson") and p.is_file():
        with p.open(encoding="utf-8") as fh:
            first = fh.readline()
        if '"judge"' in first and '"case_id"' in first and '"status"' in first:
            from mheval.analysis.judgments import load_judgments

            frame = load_judgments(path=p)
            assert frame is not None
            return labels_from_judgments(frame)
    return load_human_labels(p, field=field)
