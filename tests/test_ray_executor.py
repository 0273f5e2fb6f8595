"""The Ray executor (engine/ray_executor.py) on a local Ray instance with 2 CPUs gives the same stored
results as the local executor, and the calls its workers made replay from the driver's cache."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, respond
from mheval.config import RunConfig
from mheval.engine.runner import RunResult, plan_run, run
from mheval.errors import InputError
from mheval.runfolder.store import Store
from test_pipeline import judge_answer

if os.environ.get("CI"):
    import ray  # CI installs the test extra, which has Ray: a missing Ray fails here instead of skipping
else:
    ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _config(tmp_path: Path, server: FakeOpenAI, out: str, **extra) -> RunConfig:
    suite = tmp_path / "cases.jsonl"
    if not suite.exists():
        rows = [{"id": f"r{i:02d}", "text": f"Day {i}: I can't sleep and I feel like a burden.",
                 "crisis_label": "suicidal_ideation"} for i in range(12)]  # fmt: skip
        suite.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return RunConfig(
        suite=f"jsonl:{suite}",
        models=[f"vllm/target@{server.base_url}"],
        judges=[f"vllm/judge@{server.base_url}"],
        protocols=["crisis-triage", "psycrisis", "appropriateness"],
        samples=2,
        concurrency=4,
        out=str(tmp_path / out),
        **extra,
    )


def _records(run_dir: Path) -> tuple[list[dict], list[dict]]:
    """Responses and judgments as stored, without the wall-clock latency (which differs run to run)."""
    with Store.open_existing(run_dir) as store:
        responses = sorted((r.model_dump(exclude={"latency_s"}) for r in store.responses()), key=json.dumps)
        judgments = sorted((j.model_dump(exclude={"latency_s"}) for j in store.judgments()), key=json.dumps)
    return responses, judgments


@dataclass(frozen=True)
class Pair:
    """The same config run by the local executor, then by Ray, and the calls the server saw after each."""

    folder: Path  # holds the suite file, and the two run folders
    local: RunResult
    local_calls: int
    distributed: RunResult
    calls: int


@pytest.fixture(scope="module")
def pair(tmp_path_factory, _fake_openai_server: FakeOpenAI, local_ray) -> Pair:
    """Made once for the module: the tests below only read these two run folders (the Ray run's workers are
    most of this file's time)."""
    server, folder = _fake_openai_server, tmp_path_factory.mktemp("pair")
    server.reset()
    server.default = respond(judge_answer)
    local = run(_config(folder, server, "local"))
    local_calls = server.calls
    distributed = run(_config(folder, server, "ray", executor="ray"))
    pair = Pair(folder, local, local_calls, distributed, server.calls)
    server.reset()
    return pair


def test_ray_and_local_executors_store_the_same_results(pair):
    local, local_calls, distributed = pair.local, pair.local_calls, pair.distributed
    assert pair.calls == 2 * local_calls, "the workers made the same calls, once each"
    assert distributed.model_calls == local.model_calls == local_calls
    assert distributed.counts == local.counts == {"cases": 12, "responses": 24, "judgments": 12 + 2 * 24}
    assert _records(local.run_dir) == _records(distributed.run_dir)


def test_calls_made_on_ray_workers_replay_from_the_drivers_cache(tmp_path, fake_openai, pair):
    fake_openai.default = respond(judge_answer)
    first = pair.distributed  # a Ray run: its calls were made on the workers
    copy = tmp_path / "replay"
    shutil.copytree(first.run_dir, copy)
    with sqlite3.connect(copy / "run.db") as con:
        con.execute("DELETE FROM judgments")
        con.execute("DELETE FROM responses")
    calls = fake_openai.calls
    # The config of the first run (its suite file) with the copy as the run folder (an absolute `out`).
    again = run(_config(pair.folder, fake_openai, str(copy)))  # the local executor, on the same folder
    assert again.model_calls == 0 and fake_openai.calls == calls
    assert _records(copy) == _records(first.run_dir)

    # Ray workers read the same cache (they see the run folder): no call either.
    with sqlite3.connect(copy / "run.db") as con:
        con.execute("DELETE FROM judgments")
        con.execute("DELETE FROM responses")
    on_ray = run(_config(pair.folder, fake_openai, str(copy), executor="ray"))
    assert on_ray.model_calls == 0 and fake_openai.calls == calls and on_ray.cache_hits > 0
    assert _records(copy) == _records(first.run_dir)


def test_a_judge_only_ray_run_opens_no_target_model(tmp_path, fake_openai, local_ray):
    """The default target is the embedded model: a judge-only run must not start it on the workers."""
    fake_openai.default = respond(judge_answer)
    answered = tmp_path / "answered.jsonl"
    answered.write_text("".join(json.dumps({"id": f"a{i}", "text": "I feel flat.", "response": "I'm here."}) + "\n"
                                for i in range(4)))  # fmt: skip
    config = RunConfig(suite=f"jsonl:{answered}", judges=[f"vllm/judge@{fake_openai.base_url}"],
                       protocols=["psycrisis"], executor="ray", out=str(tmp_path / "judged"))  # fmt: skip
    assert config.models == ["local/smollm2"]
    result = run(config, stages=("judge",))
    assert result.counts["judgments"] == 4 and result.model_calls == 4


def test_what_the_ray_executor_cannot_do_is_refused_before_anything_is_written(tmp_path, fake_openai):
    batch = _config(tmp_path, fake_openai, "x", executor="ray", batch=True)
    with pytest.raises(InputError, match="batch"):
        plan_run(batch)
    embedded = _config(tmp_path, fake_openai, "y", executor="ray").model_copy(update={"models": ["local/smollm2"]})
    with pytest.raises(InputError, match="embedded model"):
        plan_run(embedded)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
