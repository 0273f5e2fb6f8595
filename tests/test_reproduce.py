"""The papers' reliability figures, recomputed from ../shared/data (skipped when it is absent)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mheval.analysis.reproduce import (
    ATTRIBUTES,
    MENTALALIGN_PUBLISHED,
    _minimal_parse,
    reproduce_help_harm,
    reproduce_mentalalign,
)
from mheval.errors import InputError
from mheval.stats import icc, icc_bootstrap_ci

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = [
    pytest.mark.shared_data,
    pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is absent"),
]


def _protocol_parser_available() -> bool:
    if importlib.util.find_spec("mheval.protocols") is None:
        return False
    try:
        from mheval.protocols import load_protocol

        load_protocol("mentalalign")
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def mentalalign() -> dict[str, Any]:
    return reproduce_mentalalign(DATA, parser="minimal")


@pytest.fixture(scope="module")
def help_harm() -> dict[str, Any]:
    return reproduce_help_harm(DATA / "help_harm")


def test_mentalalign_matches_published_within_0_005(mentalalign: dict[str, Any]) -> None:
    for judge, attrs in MENTALALIGN_PUBLISHED.items():
        for attr, (c1, a1) in attrs.items():
            got = mentalalign["judges"][judge]["attributes"][attr]
            assert got["icc_c1"]["value"] == pytest.approx(c1, abs=0.005), (judge, attr)
            assert got["icc_a1"]["value"] == pytest.approx(a1, abs=0.005), (judge, attr)
    assert mentalalign["matches_published"] is True
    assert mentalalign["max_abs_diff_vs_published"] <= 0.005


def test_mentalalign_reports_intervals_verdicts_and_exclusions(mentalalign: dict[str, Any]) -> None:
    claude = mentalalign["judges"]["claude"]
    assert claude["own_model_excluded"] == "claude" and "claude" not in claude["sources"]
    assert len(claude["sources"]) == 9
    assert mentalalign["judges"]["o4-mini"]["own_model_excluded"] == "gpt4omini"
    for judge in ("claude", "gpt-4o", "gemini", "o4-mini"):
        for attr in ATTRIBUTES:
            e = mentalalign["judges"][judge]["attributes"][attr]["icc_a1"]
            assert e["ci_low"] <= e["value"] <= e["ci_high"]
            assert e["verdict"] in ("Good", "Moderate", "Poor")
            assert e["width"] == pytest.approx(e["ci_high"] - e["ci_low"])
    errors = mentalalign["data_errors"]["human"]
    assert errors["qwen_2"]["unparseable_or_empty"] == 39
    assert errors["qwen_2"]["all_zero_cell"] == 20
    assert errors["gpt4o"]["value_6"] == 7
    assert mentalalign["data_errors"]["judges"]["claude"]["ds_llama"]["unparsed_or_invalid"] == 1
    json.dumps(mentalalign)


def test_dropping_zero_scores_moves_away_from_the_published_figures(mentalalign: dict[str, Any]) -> None:
    # The finding behind the procedure: the published ICCs scored the all-zero human cells as 0.
    assert mentalalign["clean_variant"]["max_abs_diff_vs_published"] > 0.05


def test_interval_is_the_seeded_bootstrap_over_the_source_means(mentalalign: dict[str, Any]) -> None:
    entry = mentalalign["judges"]["gpt-4o"]["attributes"]["safety"]
    matrix = np.array([[m["human"], m["judge"]] for m in entry["source_means"].values()])
    assert matrix.shape == (9, 2)
    again = icc_bootstrap_ci(matrix, "C,1", n_boot=1000, seed=0)
    assert entry["icc_c1"]["value"] == again.value
    assert (entry["icc_c1"]["ci_low"], entry["icc_c1"]["ci_high"]) == (again.ci_low, again.ci_high)
    assert entry["icc_a1"]["value"] == pytest.approx(icc(matrix, "A,1").value, abs=1e-12)


@pytest.mark.skipif(not _protocol_parser_available(), reason="mheval.protocols cannot load 'mentalalign'")
def test_mentalalign_with_the_project_parser_also_matches() -> None:
    result = reproduce_mentalalign(DATA, parser="mheval", n_boot=200)
    assert result["parser"].startswith("mheval.protocols")
    assert result["max_abs_diff_vs_published"] <= 0.005


def test_minimal_parser() -> None:
    fenced = '```json\n{"Guidance": 4, "Explanation": "fine"}\n```'
    assert _minimal_parse(fenced) == {"Guidance": 4, "Explanation": "fine"}
    assert _minimal_parse("{“Guidance”: 3}") == {"Guidance": 3}
    assert _minimal_parse("not json") is None
    assert _minimal_parse(None) is None
    assert _minimal_parse("[1, 2]") is None


def test_missing_data_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing data file"):
        reproduce_mentalalign(tmp_path)
    with pytest.raises(InputError, match="missing data file"):
        reproduce_help_harm(tmp_path)


def test_help_harm_human_crisis_agreement(help_harm: dict[str, Any]) -> None:
    humans = help_harm["crisis_labels"]["humans"]
    assert humans["fleiss_kappa"]["value"] == pytest.approx(0.553, abs=0.005)
    assert len(humans["pairwise_kappa"]) == 6
    low, high = humans["pairwise_kappa_range"]
    assert 0.40 < low < high < 0.62  # published 0.46-0.59 on the full 206
    json.dumps(help_harm)


def test_help_harm_llm_labels(help_harm: dict[str, Any]) -> None:
    llm = help_harm["crisis_labels"]["llm"]
    assert set(llm) == {"gpt-4o-mini", "gpt-5-nano", "Llama-4-Scout"}
    for entry in llm.values():
        assert len(entry["runs"]) == 3
        assert entry["run_to_run_fleiss_kappa"]["value"] > 0.85
    mini = llm["gpt-4o-mini"]
    assert mini["majority_over_runs"]["mean_kappa_vs_humans"]["value"] == pytest.approx(0.645, abs=0.01)
    assert mini["merged_file"]["mean_kappa_vs_humans"]["value"] == pytest.approx(0.645, abs=0.01)
    assert mini["run_to_run_fleiss_kappa"]["value"] == pytest.approx(0.944, abs=0.02)
    assert sum(r["n_unlabelled"] for r in llm["Llama-4-Scout"]["runs"]) == 16


def test_help_harm_appropriateness(help_harm: dict[str, Any]) -> None:
    humans = help_harm["appropriateness"]["humans"]
    assert humans["n_both_rated"] == 98
    assert humans["within_1"]["value"] == pytest.approx(0.953, abs=0.01)
    assert humans["mae"]["value"] == pytest.approx(0.52, abs=0.001)  # published 0.463 on the full n=190
    judges = help_harm["appropriateness"]["judges"]
    assert {"gpt-4o-mini", "gpt-5-nano", "meta-llama", "jury"} <= set(judges)
    for name in ("gpt-4o-mini", "gpt-5-nano", "meta-llama", "jury"):
        assert judges[name]["vs_human_mean"]["spearman"]["value"] > 0.5
    assert judges["gpt-4o-mini"]["run_to_run_icc_a1"]["value"] > 0.5
    figures = {row["figure"]: row for row in help_harm["comparison"]}
    assert figures["human Fleiss kappa (dev half)"]["published"] == 0.553
