"""Re-computing the papers' reliability tables from their released data, beside the published figures.

`reproduce_mentalalign` follows MentalAlign's judge-reliability procedure; `reproduce_help_harm`
recomputes the human and LLM agreement figures of *Between Help and Harm* on the dev half of its
validation set. Both return plain JSON-ready dicts (numbers, strings, lists, dicts).

What we found reproducing MentalAlign (the published ICCs are matched within 0.002 only this way):

* Human cells that are all zeros (mostly rows whose model response was empty) were *scored as 0*
  in the published analysis, not dropped; the ratings of 6 make no visible difference. We report the
  published procedure and, separately, a "clean" variant that drops 0s and 6s as data errors.
* A human cell with any null attribute is left out for every attribute (the cell counts as not
  parsed), rather than per attribute.
* Judge outputs count when their JSON parses after removing a code fence; the few with unescaped
  quotes inside the explanation were lost in the published run. A tolerant parser recovers them and
  moves the figures by at most 0.004.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mheval.errors import InputError
from mheval.stats.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha, pairwise_kappa
from mheval.stats.correlation import mae, spearman, within
from mheval.stats.icc import icc, icc_bootstrap_ci
from mheval.stats.intervals import Estimate
from mheval.stats.reliability import GOOD_WIDTH, MODERATE_WIDTH, width_verdict

TOLERANCE = 0.005

# --------------------------------------------------------------------------- MentalAlign

ATTRIBUTES = ("guidance", "informativeness", "relevance", "safety", "empathy", "helpfulness", "understanding")
SOURCES = ("original", "claude", "ds_llama", "ds_qwen", "gemini", "gpt4o", "gpt4omini", "llama_3", "qwen_2", "qwen_3")
JUDGES = {"claude": "claude", "gpt-4o": "gpt4o", "gemini": "gemini", "o4-mini": "gpt4omini"}
"""Judge file name -> the response source it wrote itself (left out of its reliability analysis)."""

MENTALALIGN_PUBLISHED: dict[str, dict[str, tuple[float, float]]] = {
    "claude": {
        "guidance": (0.881, 0.837),
        "informativeness": (0.915, 0.915),
        "relevance": (0.730, 0.743),
        "safety": (0.685, 0.597),
        "empathy": (0.906, 0.474),
        "helpfulness": (0.900, 0.742),
        "understanding": (0.791, 0.806),
    },
    "gpt-4o": {
        "guidance": (0.849, 0.475),
        "informativeness": (0.856, 0.681),
        "relevance": (0.532, 0.243),
        "safety": (0.480, 0.279),
        "empathy": (0.835, 0.288),
        "helpfulness": (0.800, 0.457),
        "understanding": (0.823, 0.485),
    },
}
"""Published ICC(C,1) / ICC(A,1) per judge and attribute (shared data README)."""

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_CURLY = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})


def _data_folder(data_dir: str | Path, name: str, files: tuple[str, ...]) -> Path:
    root = Path(data_dir)
    folder = root / name if (root / name).is_dir() else root
    for f in files:
        if not (folder / f).is_file():
            raise InputError(f"missing data file {f} (looked in {folder})", path=folder / f)
    return folder


def _minimal_parse(text: Any) -> dict[str, Any] | None:
    """A judge output as a dict: strip a ```json fence, json.loads, then retry with straight quotes."""
    if not isinstance(text, str) or not text.strip():
        return None
    body = text.strip()
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
    for candidate in (body, body.translate(_CURLY)):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        return obj if isinstance(obj, dict) else None
    return None


def _attribute_values(obj: dict[str, Any] | None) -> dict[str, float] | None:
    """The 7 attribute scores of a decoded cell, or None if any is absent, null or not a number."""
    if obj is None:
        return None
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    out = {}
    for a in ATTRIBUTES:
        v = lowered.get(a)
        if v is None or isinstance(v, bool):
            return None
        try:
            out[a] = float(v)
        except (TypeError, ValueError):
            return None
    return out


def _judge_parser(parser: str) -> tuple[str, Callable[[Any], dict[str, float] | None]]:
    """The judge-output parser: mheval's protocol parser when asked for (or 'auto' and available)."""
    if parser in ("auto", "mheval"):
        try:
            from mheval.protocols import load_protocol, parse_verdict

            spec = load_protocol("mentalalign")
        except Exception as exc:
            if parser == "mheval":
                raise InputError(f"mheval.protocols cannot parse MentalAlign outputs: {exc}") from None
        else:

            def parse(text: Any) -> dict[str, float] | None:
                verdict = parse_verdict(spec, text if isinstance(text, str) else None)
                return _attribute_values(verdict.scores) if verdict.ok else None

            return "mheval.protocols.parse_verdict (protocol 'mentalalign')", parse
    if parser not in ("auto", "mheval", "minimal"):
        raise InputError(f"unknown parser {parser!r}", field="parser", choices=("auto", "mheval", "minimal"))
    return "minimal: strip ```json fence, json.loads, retry with straight quotes", lambda t: _attribute_values(
        _minimal_parse(t)
    )


def _read_sheet(path: Path, prefix: str) -> pd.DataFrame:
    """The response columns of one workbook, renamed to source names (headers may carry spaces)."""
    try:
        frame = pd.read_excel(path)
    except Exception as exc:
        raise InputError(f"cannot read workbook: {exc}", path=path) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    cols = {f"{prefix}{s}": s for s in SOURCES}
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise InputError(f"columns missing: {', '.join(missing)}", path=path, field=missing[0])
    return frame[list(cols)].rename(columns=cols)


def _human_cells(frame: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]]:
    """Per source an (rows x 7) array of human scores (NaN = cell not usable) and the error counts."""
    arrays, errors = {}, {}
    for s in SOURCES:
        arr = np.full((len(frame), len(ATTRIBUTES)), np.nan)
        err = {
            "unparseable_or_empty": 0,
            "null_attribute": 0,
            "all_zero_cell": 0,
            "value_0": 0,
            "value_6": 0,
            "other_out_of_range": 0,
        }
        for i, cell in enumerate(frame[s]):
            obj = None
            if isinstance(cell, str):
                try:
                    obj = json.loads(cell)
                except json.JSONDecodeError:
                    obj = None
            if not isinstance(obj, dict):
                err["unparseable_or_empty"] += 1
                continue
            vals = _attribute_values(obj)
            if vals is None:
                err["null_attribute"] += 1
                continue
            row = np.array([vals[a] for a in ATTRIBUTES])
            err["all_zero_cell"] += bool(np.all(row == 0))
            err["value_0"] += int((row == 0).sum())
            err["value_6"] += int((row == 6).sum())
            err["other_out_of_range"] += int(((row < 0) | ((row > 5) & (row != 6))).sum())
            arr[i] = row
        arrays[s], errors[s] = arr, err
    return arrays, errors


def _judge_cells(frame: pd.DataFrame, parse: Callable[[Any], dict[str, float] | None]):
    arrays, errors = {}, {}
    for s in SOURCES:
        arr = np.full((len(frame), len(ATTRIBUTES)), np.nan)
        bad = 0
        for i, cell in enumerate(frame[s]):
            vals = parse(cell)
            if vals is None or any(not 1 <= v <= 5 for v in vals.values()):
                bad += 1
                continue
            arr[i] = [vals[a] for a in ATTRIBUTES]
        arrays[s], errors[s] = arr, {"unparsed_or_invalid": bad}
    return arrays, errors


def _estimate_dict(est: Estimate) -> dict[str, Any]:
    out = est.to_dict()
    out["verdict"] = width_verdict(est)
    return out


def reproduce_mentalalign(
    data_dir: str | Path, *, n_boot: int = 1000, seed: int = 0, parser: str = "auto"
) -> dict[str, Any]:
    """MentalAlign's judge reliability (ICC(C,1), ICC(A,1), bootstrap CI, width verdict) per judge.

    ``data_dir`` is the shared data folder or its ``mentalalign`` subfolder. For each judge and
    attribute, the judge's own model is left out; for each of the 9 remaining sources the mean
    human and mean judge score are taken over the rows where both cells parsed; the ICCs are computed
    over that 9 x 2 matrix with a 95% percentile bootstrap over the sources (``n_boot``, ``seed``).
    ``parser`` is "auto" (mheval's protocol parser if importable, else the minimal one), "mheval" or
    "minimal". The result also holds the data errors found, the published figures and differences,
    and a "clean" variant that drops human 0s and 6s.
    """
    files = ("human_scores.xlsx", *(f"judge_{j}.xlsx" for j in JUDGES))
    folder = _data_folder(data_dir, "mentalalign", files)
    parser_name, parse = _judge_parser(parser)
    human, human_errors = _human_cells(_read_sheet(folder / "human_scores.xlsx", "human_response_"))
    clean_human = {s: np.where((a >= 1) & (a <= 5), a, np.nan) for s, a in human.items()}

    result: dict[str, Any] = {
        "dataset": "MentalAlign-70k: human_scores.xlsx and judge_<judge>.xlsx",
        "procedure": [
            "per judge and attribute, leave out the judge's own model",
            "per remaining source: mean human and mean judge score over rows where both cells parsed "
            "(a human cell parses when all 7 attributes are present; its 0s and 6s are kept, as published)",
            "ICC(C,1) and ICC(A,1) over the 9 sources x 2 raters matrix",
            f"95% percentile bootstrap over the 9 sources, B={n_boot}, seed={seed}",
            f"reliability by CI width: Good <= {GOOD_WIDTH}, Moderate <= {MODERATE_WIDTH}, Poor above",
        ],
        "parser": parser_name,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "resampled": "response sources", "interval": "95% percentile"},
        "data_errors": {"human": human_errors, "judges": {}},
        "judges": {},
        "clean_variant": {
            "description": "as above, but human values outside 1..5 (the 0s and 6s) are excluded as data errors",
            "judges": {},
        },
    }
    diffs: list[float] = []
    clean_diffs: list[float] = []
    for judge, own in JUDGES.items():
        jframe = _read_sheet(folder / f"judge_{judge}.xlsx", "judge_response_")
        jcells, jerrors = _judge_cells(jframe, parse)
        result["data_errors"]["judges"][judge] = jerrors
        sources = [s for s in SOURCES if s != own]
        published = MENTALALIGN_PUBLISHED.get(judge)
        attrs: dict[str, Any] = {}
        clean_attrs: dict[str, Any] = {}
        for ai, attr in enumerate(ATTRIBUTES):
            entry: dict[str, Any] = {}
            clean_entry: dict[str, Any] = {}
            for variant, hsrc, target in (("published", human, entry), ("clean", clean_human, clean_entry)):
                means, counts = [], {}
                for s in sources:
                    h, j = hsrc[s][:, ai], jcells[s][:, ai]
                    both = np.isfinite(h) & np.isfinite(j)
                    counts[s] = int(both.sum())
                    means.append((float(h[both].mean()), float(j[both].mean())) if both.any() else (np.nan, np.nan))
                matrix = np.array(means)
                c1 = icc_bootstrap_ci(matrix, "C,1", n_boot=n_boot, seed=seed)
                a1 = icc_bootstrap_ci(matrix, "A,1", n_boot=n_boot, seed=seed)
                if variant == "published":
                    target.update(
                        {
                            "rows_used": counts,
                            "source_means": {
                                s: {"human": m[0], "judge": m[1]} for s, m in zip(sources, means, strict=True)
                            },
                            "icc_c1": _estimate_dict(c1),
                            "icc_a1": _estimate_dict(a1),
                        }
                    )
                else:
                    target.update({"icc_c1": c1.value, "icc_a1": a1.value})
                if published:
                    pub = dict(zip(("icc_c1", "icc_a1"), published[attr], strict=True))
                    diff = {
                        k: (None if e.value is None else e.value - pub[k]) for k, e in (("icc_c1", c1), ("icc_a1", a1))
                    }
                    target["published"] = pub
                    target["diff"] = diff
                    (diffs if variant == "published" else clean_diffs).extend(
                        abs(d) if d is not None else np.inf for d in diff.values()
                    )
            attrs[attr], clean_attrs[attr] = entry, clean_entry
        result["judges"][judge] = {"own_model_excluded": own, "sources": sources, "attributes": attrs}
        result["clean_variant"]["judges"][judge] = clean_attrs
    result["max_abs_diff_vs_published"] = max(diffs) if diffs else None
    result["matches_published"] = bool(diffs) and max(diffs) <= TOLERANCE
    result["clean_variant"]["max_abs_diff_vs_published"] = max(clean_diffs) if clean_diffs else None
    return result


# --------------------------------------------------------------------------- Between Help and Harm

HELP_HARM_PUBLISHED = {
    "human_fleiss_kappa_dev": 0.553,
    "human_fleiss_kappa_full": 0.549,
    "human_pairwise_kappa_range_full": [0.46, 0.59],
    "gpt-4o-mini_mean_kappa_vs_humans_full": 0.645,
    "gpt-4o-mini_run_to_run_fleiss_kappa_full": 0.944,
    "appropriateness_h1_h2_full": {"mae": 0.463, "within_1": 0.953, "n": 190},
}
HUMANS = ("H1", "H2", "H3", "H4")
LLM_LABELLERS = {
    "gpt-4o-mini": "gpt-4o-mini-labeled",
    "gpt-5-nano": "gpt-5-nano-labeled",
    "Llama-4-Scout": "meta-llama-Llama-4-Scout-17B-16E-Instruct-labeled",
}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", path=path, line=number) from None
    return out


def _read_json_list(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(data, list):
        raise InputError("expected a JSON list of records", path=path)
    return data


def _label(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _kappas_vs_humans(labels: list[Any], humans: pd.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    frame = humans.copy()
    frame.insert(0, "llm", labels)
    pw = pairwise_kappa(frame, against="llm", n_boot=n_boot, seed=seed)
    return {
        "mean_kappa_vs_humans": pw.mean.to_dict(),
        "kappa_vs": {p.b: p.estimate.value for p in pw.pairs},
        "n_labelled": int(sum(v is not None for v in labels)),
        "n_unlabelled": int(sum(v is None for v in labels)),
    }


def reproduce_help_harm(data_dir: str | Path, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Human and LLM agreement of *Between Help and Harm* on the dev half of the validation set.

    Crisis labels: Fleiss' kappa and pairwise Cohen's kappas of H1..H4; per LLM labeller its runs'
    mean kappa against each human, the majority over runs, and its run-to-run Fleiss' kappa (an empty
    label counts as missing). Appropriateness: H1 vs H2 (MAE, within-1, quadratic-weighted kappa,
    ICC) and each published judge against each human and the human mean (MAE, Spearman).
    """
    folder = _data_folder(data_dir, "help_harm", ("human_crisis_labels.dev.jsonl", "appropriateness_scores.dev.jsonl"))
    records = _read_jsonl(folder / "human_crisis_labels.dev.jsonl")
    ids = [r["id"] for r in records]
    humans = pd.DataFrame([{h: _label(r["human_labels"].get(h)) for h in HUMANS} for r in records])
    human_pw = pairwise_kappa(humans, n_boot=n_boot, seed=seed)
    crisis: dict[str, Any] = {
        "n_cases": len(records),
        "humans": {
            "fleiss_kappa": fleiss_kappa(humans, n_boot=n_boot, seed=seed).to_dict(),
            "alpha_nominal": krippendorff_alpha(humans, "nominal", n_boot=n_boot, seed=seed).to_dict(),
            "pairwise_kappa": [p.to_dict() for p in human_pw.pairs],
            "pairwise_kappa_range": [human_pw.low, human_pw.high],
            "mean_pairwise_kappa": human_pw.mean.to_dict(),
        },
        "llm": {},
    }
    for name, prefix in LLM_LABELLERS.items():
        run_files = (folder / "llm_crisis_labels").glob(f"{prefix}*.dev.json")
        files = sorted(p for p in run_files if not p.name.endswith("merged_labels.dev.json"))
        runs = []
        run_labels = []
        for f in files:
            data = _read_json_list(f)
            by_id = {r["id"]: _label(r.get("label")) for r in data}
            labels = [by_id.get(i) for i in ids]
            run_labels.append(labels)
            runs.append({"file": f.name, **_kappas_vs_humans(labels, humans, n_boot, seed)})
        entry: dict[str, Any] = {"runs": runs}
        if run_labels:
            matrix = pd.DataFrame(np.array(run_labels, dtype=object).T)
            entry["run_to_run_fleiss_kappa"] = fleiss_kappa(matrix, n_boot=n_boot, seed=seed).to_dict()
            entry["majority_over_runs"] = _kappas_vs_humans(_majority(run_labels), humans, n_boot, seed)
            vals = [r["mean_kappa_vs_humans"]["value"] for r in runs if r["mean_kappa_vs_humans"]["value"] is not None]
            entry["mean_over_runs_of_mean_kappa"] = float(np.mean(vals)) if vals else None
        merged = list((folder / "llm_crisis_labels").glob(f"{prefix}*merged_labels.dev.json"))
        if merged:
            by_id = {r["id"]: _label(r.get("label")) for r in _read_json_list(merged[0])}
            entry["merged_file"] = {
                "file": merged[0].name,
                **_kappas_vs_humans([by_id.get(i) for i in ids], humans, n_boot, seed),
            }
        crisis["llm"][name] = entry

    appropriateness = _appropriateness(folder, n_boot, seed)
    return {
        "dataset": "Between Help and Harm, validation dev half (even-indexed 103 of 206 cases)",
        "published": HELP_HARM_PUBLISHED,
        "crisis_labels": crisis,
        "appropriateness": appropriateness,
        "comparison": _help_harm_comparison(crisis, appropriateness),
    }


def _majority(runs: list[list[str | None]]) -> list[str | None]:
    """Most common label across runs per case; ties go to the earliest run's label among the tied."""
    out: list[str | None] = []
    for labels in zip(*runs, strict=True):
        present = [v for v in labels if v is not None]
        if not present:
            out.append(None)
            continue
        counts = {v: present.count(v) for v in present}
        top = max(counts.values())
        out.append(next(v for v in present if counts[v] == top))
    return out


def _appropriateness(folder: Path, n_boot: int, seed: int) -> dict[str, Any]:
    rows = _read_jsonl(folder / "appropriateness_scores.dev.jsonl")

    def num(v: Any) -> float:
        try:
            return float(v)
        except (TypeError, ValueError):
            return np.nan

    h1 = np.array([num(r["human_scores"].get("H1")) for r in rows])
    h2 = np.array([num(r["human_scores"].get("H2")) for r in rows])
    pair = np.column_stack([h1, h2])
    scale = list(range(1, 6))
    human = {
        "n_cases": len(rows),
        "n_both_rated": int((np.isfinite(h1) & np.isfinite(h2)).sum()),
        "mae": mae(h1, h2, n_boot=n_boot, seed=seed).to_dict(),
        "within_1": within(h1, h2).to_dict(),
        "weighted_kappa_quadratic": cohen_kappa(h1, h2, "quadratic", labels=scale, n_boot=n_boot, seed=seed).to_dict(),
        "icc_a1": icc(pair, "A,1").to_dict(),
        "icc_c1": icc(pair, "C,1").to_dict(),
    }
    rated = np.isfinite(pair).sum(axis=1)
    mean_h = np.where(rated > 0, np.nansum(pair, axis=1) / np.maximum(rated, 1), np.nan)
    judges: dict[str, Any] = {}
    names = list(dict.fromkeys(k for r in rows for k in (r.get("judge_scores") or {})))
    for name in names:
        j = np.array([num((r.get("judge_scores") or {}).get(name)) for r in rows])
        entry = {}
        for ref, y in (("H1", h1), ("H2", h2), ("human_mean", mean_h)):
            entry[f"vs_{ref}"] = {
                "mae": mae(j, y, n_boot=n_boot, seed=seed).to_dict(),
                "spearman": spearman(j, y).to_dict(),
            }
        judges[name] = entry
    runs = [r.get("judge_runs_gpt_4o_mini") for r in rows]
    lists = [v for v in runs if isinstance(v, list) and len(v) >= 2]
    if len(lists) == len(runs):  # every case has two or more runs
        width = min(len(v) for v in lists)
        mat = np.array([[num(x) for x in v[:width]] for v in lists])
        judges.setdefault("gpt-4o-mini", {})["run_to_run_icc_a1"] = icc(mat, "A,1").to_dict()
    return {"humans": human, "judges": judges}


def _help_harm_comparison(crisis: dict[str, Any], appr: dict[str, Any]) -> list[dict[str, Any]]:
    """Ours beside published, one row per figure the README states."""
    gpt = crisis["llm"].get("gpt-4o-mini", {})
    rows = [
        ("human Fleiss kappa (dev half)", crisis["humans"]["fleiss_kappa"]["value"], 0.553, "dev half"),
        ("human pairwise kappa min", crisis["humans"]["pairwise_kappa_range"][0], 0.46, "published on full 206"),
        ("human pairwise kappa max", crisis["humans"]["pairwise_kappa_range"][1], 0.59, "published on full 206"),
        (
            "gpt-4o-mini mean kappa vs humans (majority of 3 runs)",
            gpt.get("majority_over_runs", {}).get("mean_kappa_vs_humans", {}).get("value"),
            0.645,
            "published on full 206",
        ),
        (
            "gpt-4o-mini run-to-run Fleiss kappa",
            gpt.get("run_to_run_fleiss_kappa", {}).get("value"),
            0.944,
            "published on full 206",
        ),
        ("appropriateness H1 vs H2 MAE", appr["humans"]["mae"]["value"], 0.463, "published on full (n=190)"),
        ("appropriateness H1 vs H2 within-1", appr["humans"]["within_1"]["value"], 0.953, "published on full (n=190)"),
    ]
    return [
        {
            "figure": f,
            "ours": ours,
            "published": pub,
            "difference": None if ours is None else ours - pub,
            "published_on": where,
        }
        for f, ours, pub, where in rows
    ]


def reproduce_paper(paper: str, data_dir: str | Path) -> dict[str, Any]:
    """Dispatch by paper name (`mentalalign` or `help-harm`)."""
    return REPRODUCIBLE[paper](data_dir)


def reproduction_table(paper: str, result: dict[str, Any]) -> pd.DataFrame:
    """The headline table of a reproduction, one row per figure, for the terminal and CSV."""
    if paper == "help-harm":
        return pd.DataFrame(result["comparison"], columns=["figure", "ours", "published", "difference", "published_on"])
    rows = []
    for judge, block in result["judges"].items():
        for attribute, fig in block["attributes"].items():
            c1, a1 = fig["icc_c1"], fig["icc_a1"]
            published = fig.get("published") or {}
            rows.append(
                {
                    "judge": judge,
                    "attribute": attribute,
                    "ICC(C,1)": c1["value"],
                    "C,1 95% CI": f"{c1['ci_low']:.3f}-{c1['ci_high']:.3f}",
                    "C,1 width": c1["width"],
                    "C,1 verdict": c1["verdict"],
                    "ICC(A,1)": a1["value"],
                    "A,1 95% CI": f"{a1['ci_low']:.3f}-{a1['ci_high']:.3f}",
                    "A,1 width": a1["width"],
                    "A,1 verdict": a1["verdict"],
                    "published C,1 / A,1": (
                        f"{published['icc_c1']:.3f} / {published['icc_a1']:.3f}" if published else ""
                    ),
                }
            )
    return pd.DataFrame(rows)


REPRODUCIBLE: dict[str, Callable[[str | Path], dict[str, Any]]] = {
    "mentalalign": reproduce_mentalalign,
    "help-harm": reproduce_help_harm,
}


__all__ = [
    "ATTRIBUTES",
    "HELP_HARM_PUBLISHED",
    "MENTALALIGN_PUBLISHED",
    "reproduce_help_harm",
    "reproduce_mentalalign",
]
