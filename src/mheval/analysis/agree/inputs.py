"""Reading the agreement report's inputs: the human labels as an items x raters matrix, the judgments
export as per-judge values per item and repeat (ok rows only, the rest counted), and response sources."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mheval.errors import InputError
from mheval.stats.intervals import is_missing

JUDGE_COLUMNS = ("case_id", "judge", "status")


def key_text(column: pd.Series) -> pd.Series:
    """A key column as text that reads the same from every source: a whole number is "0" whether it was
    stored as 0, 0.0 (a float column with gaps, as the judgments table's sample is) or "0"; a gap is ""."""

    def one(v: Any) -> str:
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            return ""
        if isinstance(v, float | np.floating) and float(v).is_integer():
            return str(int(v))
        if isinstance(v, bool | np.bool_):
            return str(v)
        if isinstance(v, int | np.integer):
            return str(int(v))
        text = str(v).strip()
        if text.endswith(".0") and text[:-2].lstrip("-").isdigit():
            return text[:-2]
        return "" if text.lower() in ("nan", "none", "<na>") else text

    return column.map(one).astype(object)


def item_keys(frame: pd.DataFrame, id_col: str, extra: Sequence[str]) -> pd.Series:
    parts = [frame[id_col].astype(str)] + [key_text(frame[c]) for c in extra]
    if not extra:
        return parts[0]
    return parts[0].str.cat(parts[1:], sep="|", na_rep="")  # vectorised: tables can have 100k rows


def norm(name: Any) -> str:
    return str(name).strip().lower()


def human_matrix(human: pd.DataFrame, keys: pd.Series) -> pd.DataFrame:
    df = pd.DataFrame({"item": keys.values, "rater": human["rater"].astype(str).values, "value": human["value"].values})
    dup = df.duplicated(["item", "rater"], keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        raise InputError(f"item {first['item']!r} has several ratings from rater {first['rater']!r}", field="value")
    order = list(dict.fromkeys(df["item"]))
    raters = list(dict.fromkeys(df["rater"]))
    mat = df.pivot(index="item", columns="rater", values="value")
    return mat.reindex(index=order, columns=raters)


def _scores(value: Any, row: int) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if value is None or (isinstance(value, float) and np.isnan(value)) or value == "":
        return {}
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            raise InputError(f"judgment row {row}: scores is not JSON", field="scores") from None
        if isinstance(parsed, dict):
            return parsed
    raise InputError(f"judgment row {row}: scores must be a dict of dimension -> score", field="scores")


@dataclass
class JudgeRows:
    """One judge's usable values, per item key and repeat, with what was left out."""

    name: str
    values: pd.DataFrame  # columns: item, repeat, value
    counts: dict[str, Any]


@dataclass
class Judgments:
    """The judgments table read once: item keys, ok flags and parsed scores, ready for any dimension."""

    frame: pd.DataFrame  # columns: judge, item, model, repeat, ok, reason, label, scores (normalised keys)
    dims: list[str]  # score names as first spelled


def read_judgments(judge: pd.DataFrame, *, scale: bool, protocol: str | None, extra_keys: Sequence[str]) -> Judgments:
    missing = [c for c in JUDGE_COLUMNS if c not in judge.columns]
    if missing:
        raise InputError(f"judgments lack column(s) {', '.join(missing)}", field=missing[0])
    value_col = "scores" if scale else "label"
    if value_col not in judge.columns:
        raise InputError(f"judgments lack the {value_col!r} column", field=value_col)
    frame = judge.reset_index(drop=True)  # positions, so error messages can name the row
    if "protocol" in frame.columns:
        protocols = sorted({str(p) for p in frame["protocol"].dropna()})
        if protocol is not None:
            frame = frame[frame["protocol"].astype(str) == protocol]
            if frame.empty:
                raise InputError(f"no judgments under protocol {protocol!r}", field="protocol", choices=protocols)
        elif len(protocols) > 1:
            raise InputError("judgments from several protocols: pick one", field="protocol", choices=protocols)
    if not extra_keys and {"model", "sample"} <= set(frame.columns):
        per_case = frame.dropna(subset=["model"]).groupby("case_id")[["model", "sample"]].nunique()
        if (per_case > 1).any(axis=None):
            raise InputError(
                "judgments cover several responses per case but the human labels have no model/sample "
                "columns to match them: add them, or filter the judgments to one model",
                field="model",
            )
    ok = (frame["status"].astype(str) == "ok").to_numpy()
    found: dict[str, str] = {}
    scores: list[dict[str, Any]] = []
    if scale:
        for i, (row_ok, raw) in enumerate(zip(ok, frame["scores"], strict=True)):
            parsed = _scores(raw, int(frame.index[i]) + 1) if row_ok else {}
            for k in parsed:
                found.setdefault(norm(k), str(k))
            scores.append({norm(k): v for k, v in parsed.items()})
    table = pd.DataFrame(
        {
            "judge": frame["judge"].astype(str).to_numpy(),
            "item": item_keys(frame.assign(id=frame["case_id"]), "id", extra_keys).to_numpy(),
            "model": frame["model"].to_numpy(dtype=object) if "model" in frame.columns else None,
            "repeat": frame["repeat"].to_numpy() if "repeat" in frame.columns else np.zeros(len(frame), int),
            "ok": ok,
            "reason": frame["reason"].to_numpy(dtype=object) if "reason" in frame.columns else None,
            "label": frame["label"].to_numpy(dtype=object) if "label" in frame.columns else None,
            "scores": scores if scale else None,
        }
    )
    return Judgments(table, list(found.values()))


def label_text(value: Any) -> Any:
    """Labels compare as text; a whole-number float (3.0 read from a CSV) reads as "3"."""
    if is_missing([value])[0]:
        return value
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _usable(value: Any, scale: bool) -> Any:
    """The value as the statistics want it, or None when an ok judgment carries nothing usable."""
    if scale and isinstance(value, float | int) and not isinstance(value, bool):  # fast path for plain numbers
        return None if value != value else float(value)
    if value is None or (isinstance(value, str) and not value.strip()) or is_missing([value])[0]:
        return None
    if not scale:
        return label_text(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def judge_rows(judgments: Judgments, *, scale: bool, dimension: str | None) -> list[JudgeRows]:
    frame = judgments.frame
    if scale:
        key = norm(dimension) if dimension is not None else None
        raw = [sc.get(key) if key is not None else None for sc in frame["scores"]]
    else:
        raw = list(frame["label"])
    values = [_usable(v, scale) for v in raw]
    out = []
    for name in dict.fromkeys(frame["judge"]):
        mine = (frame["judge"] == name).to_numpy()
        ok = frame["ok"].to_numpy()
        reasons = Counter(
            "unspecified" if is_missing([r])[0] else str(r).split(":")[0] for r in frame.loc[mine & ~ok, "reason"]
        )
        rows = [
            (item, rep, v)
            for item, rep, v, m, o in zip(frame["item"], frame["repeat"], values, mine, ok, strict=True)
            if m and o and v is not None
        ]
        counts: dict[str, Any] = {
            "rows": int(mine.sum()),
            "ok": int((mine & ok).sum()),
            "unscored": int((mine & ~ok).sum()),
            "unscored_reasons": dict(reasons),
            "ok_without_value": int((mine & ok).sum()) - len(rows),
        }
        out.append(JudgeRows(name, pd.DataFrame(rows, columns=["item", "repeat", "value"]), counts))
    return out


def aggregate_repeats(values: pd.DataFrame, scale: bool) -> tuple[pd.Series, int]:
    """Per-item judge value over repeats: majority label (ties: earliest repeat's) or mean score."""
    present = values[~is_missing(values["value"].to_numpy(dtype=object))]
    if scale:
        return present.assign(value=present["value"].astype(float)).groupby("item", sort=False)["value"].mean(), 0
    ordered = present.sort_values("repeat", kind="stable").reset_index(drop=True)
    ordered = ordered.assign(value=ordered["value"].astype(str), pos=np.arange(len(ordered)))
    tally = ordered.groupby(["item", "value"], sort=False).agg(n=("pos", "size"), first=("pos", "min")).reset_index()
    tally = tally.sort_values(["item", "n", "first"], ascending=[True, False, True], kind="stable")
    best = tally.groupby("item", sort=False).head(2)
    ranked = best.groupby("item", sort=False)["n"].agg(list)
    ties = int(sum(len(c) > 1 and c[0] == c[1] for c in ranked))
    winners = tally.drop_duplicates("item", keep="first").set_index("item")["value"]
    return winners.astype(object), ties


# --------------------------------------------------------------------------- response sources


def item_sources(human: pd.DataFrame, keys: pd.Series, judgments: Judgments | None) -> pd.Series:
    """Item key -> response source, from the judgments' ``model`` and the human labels' ``model``."""
    parts = []
    if judgments is not None and judgments.frame["model"].notna().any():
        jf = judgments.frame.dropna(subset=["model"])
        pairs = pd.DataFrame({"item": jf["item"].to_numpy(), "model": jf["model"].astype(str).to_numpy()})
        pairs = pairs.drop_duplicates()
        several = pairs["item"].duplicated(keep=False).to_numpy()
        if several.any():
            item = pairs["item"][several].iloc[0]
            models = pairs["model"][(pairs["item"] == item).to_numpy()]
            raise InputError(
                f"case {item!r} was judged for several models ({', '.join(models)}) and the human labels "
                "have no model column to say which response they rated",
                field="model",
            )
        parts.append(pd.Series(pairs["model"].to_numpy(), index=pairs["item"].to_numpy()))
    if "model" in human.columns:
        has = human["model"].notna().to_numpy()
        parts.append(pd.Series(human["model"][has].astype(str).to_numpy(), index=keys[has].to_numpy()))
    if not parts:
        raise InputError(
            "the response source is unknown: add a 'model' column to the judgments (or to the human labels)",
            field="model",
        )
    out = pd.concat(parts)
    return out[~out.index.duplicated(keep="first")]


def unscored_note(jr: JudgeRows) -> list[str]:
    if not jr.counts["unscored"]:
        return []
    reasons = ", ".join(f"{k}: {v}" for k, v in jr.counts["unscored_reasons"].items())
    return [f"{jr.name}: {jr.counts['unscored']} unscored judgment(s) excluded" + (f" ({reasons})" if reasons else "")]
