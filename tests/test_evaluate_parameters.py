"""`evaluate` takes the parameters of `evaluate_async` (declared once, on the async one) and shows them: to
inspect.signature, so help() and editors list them, and at call time, where a wrong argument is refused at once."""

from __future__ import annotations

import inspect

import pytest

import mheval


def test_evaluate_shows_the_parameters_of_evaluate_async():
    sync, async_ = inspect.signature(mheval.evaluate), inspect.signature(mheval.evaluate_async)
    assert list(sync.parameters.values()) == list(async_.parameters.values())
    assert {"suite", "cases", "models", "judges", "protocols", "out", "config", "options"} <= set(sync.parameters)
    assert sync.return_annotation == "EvalResults"
    assert mheval.evaluate.__name__ == "evaluate"
    assert not inspect.iscoroutinefunction(mheval.evaluate)


def test_a_second_positional_argument_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(TypeError):
        mheval.evaluate("crisis-core", ["offline"], out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_suite_and_cases_together_are_bad_input(tmp_path):
    with pytest.raises(mheval.InputError, match="either a suite or cases"):
        mheval.evaluate("crisis-core", cases=[{"id": "a", "text": "I feel low."}], out=tmp_path / "run")
    assert not (tmp_path / "run").exists()
