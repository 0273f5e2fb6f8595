"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_openai import FakeOpenAI


@pytest.fixture(scope="session")
def _fake_openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake_openai(_fake_openai_server: FakeOpenAI) -> FakeOpenAI:
    """A scriptable OpenAI-compatible server on 127.0.0.1 (see tests/fake_openai.py), reset for each test."""
    _fake_openai_server.reset()
    return _fake_openai_server


# Test modules that start subprocesses, servers, Ray or model training: `make check` leaves them out
# (-m "not slow") to stay under two minutes; `make test` and CI run everything.
SLOW_MODULES = frozenset({
    "test_api", "test_batch", "test_cli_train", "test_crisis_core", "test_e2e_local", "test_finetune",
    "test_injection_policy", "test_inspect", "test_integrity", "test_local_model", "test_offline_speeds",
    "test_pipeline", "test_annotate_browser", "test_multiturn_e2e", "test_multiturn_kill", "test_ray_executor",
    "test_report_browser", "test_reproduce", "test_trained_judges", "test_training", "test_benchmarks_quick",
    "test_import", "test_cli_errors", "test_outputs_overwrite", "test_app_targets", "test_multiturn_truth",
    "test_verdict_block", "test_verdict_corrected", "test_gate", "test_offline_risk", "test_corrected_agree",
    "test_run_counts", "test_gate_workflow", "test_cli_output", "test_appropriateness_rebuild",
})  # fmt: skip

# The slowest modules, slowest first: every module over 30 s in the last whole-suite profiles (`pytest -n 2 --dist
# loadfile --durations=60 --junitxml`, summed per module and averaged over two runs on the shared 2-core machine
# under load, where one module's seconds vary up to fourfold from run to run). `make test` hands whole modules to
# its two workers in the order collected (--no-loadscope-reorder), and a worker takes the next module when its
# current one has two tests left; xdist's own order (most tests first) left these few-test, long modules for the
# end, where one ran alone while the other worker idled. Starting them first lets the many short modules fill in
# beside them: replayed on each profile's durations, the two workers end within 1% of each other.
SLOWEST_FIRST = (
    "test_report_edge_cases", "test_benchmarks_quick", "test_ray_multinode",
    "test_e2e_local", "test_local_model", "test_integrity", "test_ray_executor", "test_inspect", "test_gate_workflow",
    "test_trained_judges", "test_annotate_browser", "test_offline_risk", "test_reply_harm", "test_finetune",
    "test_gate", "test_transcript_import", "test_multiturn_chatbots",
)  # fmt: skip


def _module(item: pytest.Item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _module(item) in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    # A stable sort: each module's tests stay together and in their order, the other modules in theirs.
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(_module(item), len(rank)))
