"""Batch API mode (engine/batch.py) against the loopback server's batch endpoints (tests/fake_openai.py):
one job per stage instead of chat calls, half the price, failed lines and expired jobs submitted again,
and a run killed while its job is in progress finishing from that same job when started again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_inprocess import mheval as inprocess
from fake_openai import FakeOpenAI, respond, status
from mheval.config import RunConfig
from mheval.engine.batch import BATCH_PRICE_FACTOR
from mheval.engine.runner import execute, plan_run, run
from mheval.models.context import RunContext
from mheval.runfolder.store import Store
from test_pipeline import REPLY, judge_answer

PRICES = {"vllm/judge": {"input": 2.0, "output": 8.0}, "vllm/target": {"input": 1.0, "output": 4.0}}


def _cases(tmp_path: Path, n: int, *, answered: bool) -> str:
    path = tmp_path / ("answered.jsonl" if answered else "cases.jsonl")
    rows = [{"id": f"b{i:02d}", "text": f"Week {i} has been heavy and I keep to myself.", "crisis_label": "no_crisis"}
            for i in range(n)]  # fmt: skip
    if answered:
        rows = [{**r, "response": REPLY} for r in rows]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"jsonl:{path}"


def _config(tmp_path: Path, server: FakeOpenAI, **extra) -> RunConfig:
    data = {
        "suite": _cases(tmp_path, 5, answered=False),
        "models": [f"vllm/target@{server.base_url}"],
        "judges": [f"vllm/judge@{server.base_url}"],
        "protocols": ["crisis-triage", "psycrisis"],
        "out": str(tmp_path / "run"),
        "batch": True,
        "batch_poll_s": 0.02,
        "prices": PRICES,
    }
    data.update(extra)
    return RunConfig(**data)


def test_each_stage_is_one_batch_job_at_half_price_and_a_second_run_calls_nothing(tmp_path, fake_openai):
    fake_openai.default = respond(judge_answer)
    config = _config(tmp_path, fake_openai)
    result = run(config)

    assert fake_openai.calls == 0, "no chat call goes out one by one"
    # triage (judge model), generation (target model), judging (judge model): one job each.
    assert [b["requests"] for b in fake_openai.batches] == [5, 5, 5]
    assert all(b["status"] == "completed" for b in fake_openai.batches)
    assert result.counts == {"cases": 5, "responses": 5, "judgments": 10}
    with Store.open_existing(result.run_dir) as store:
        judgments = store.judgments()
        responses = store.responses()
        assert [b["id"] for b in store.batches()] == ["batch-1", "batch-2", "batch-3"]
    assert all(j.status == "ok" for j in judgments)
    assert {j.label for j in judgments if j.protocol == "crisis-triage"} == {"suicidal_ideation"}
    assert all(r.text == REPLY for r in responses)
    for j in judgments:
        full = RunContext.of(prices=PRICES).prices.cost("vllm/judge", prompt_tokens=j.usage.prompt_tokens,
                             completion_tokens=j.usage.completion_tokens)  # fmt: skip
        assert full > 0 and j.usage.cost_usd == pytest.approx(BATCH_PRICE_FACTOR * full)

    again = run(config)
    assert again.model_calls == 0 and len(fake_openai.batches) == 3


def test_failed_lines_are_unscored_then_submitted_again_alone(tmp_path, fake_openai):
    fake_openai.script(status(500, "overloaded"))  # the first line of the first job fails
    fake_openai.default = respond(judge_answer)
    config = _config(tmp_path, fake_openai, suite=_cases(tmp_path, 4, answered=True), protocols=["psycrisis"])
    run(config, stages=("judge",))
    with Store.open_existing(tmp_path / "run") as store:
        first = store.judgments()
    unscored = [j for j in first if j.status != "ok"]
    assert len(first) == 4 and len(unscored) == 1
    assert unscored[0].reason == "provider_error" and "http_500" in unscored[0].reason_text

    run(config, stages=("judge",))
    assert [b["requests"] for b in fake_openai.batches] == [4, 1], "only the failed call goes out again"
    with Store.open_existing(tmp_path / "run") as store:
        assert all(j.status == "ok" for j in store.judgments())


def test_an_expired_job_leaves_its_units_unscored_and_the_next_run_resubmits_them(tmp_path, fake_openai):
    fake_openai.default = respond(judge_answer)
    fake_openai.batch_outcome = "expired"
    config = _config(tmp_path, fake_openai, suite=_cases(tmp_path, 3, answered=True), protocols=["psycrisis"])
    run(config, stages=("judge",))
    with Store.open_existing(tmp_path / "run") as store:
        judgments = store.judgments()
    assert len(judgments) == 3
    assert all(j.reason == "provider_error" and "batch_expired" in j.reason_text for j in judgments)

    fake_openai.batch_outcome = "completed"
    run(config, stages=("judge",))
    assert [b["requests"] for b in fake_openai.batches] == [3, 3]
    with Store.open_existing(tmp_path / "run") as store:
        assert all(j.status == "ok" for j in store.judgments())


def test_sigkill_while_the_job_runs_then_the_same_command_collects_that_job(tmp_path, fake_openai):
    fake_openai.default = respond(judge_answer)
    fake_openai.batch_hold = True  # the job stays in progress until the test lets it finish
    suite = _cases(tmp_path, 6, answered=True)
    cfg = tmp_path / "batch.yaml"
    cfg.write_text("batch: true\nbatch_poll_s: 0.05\n")
    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "mheval",
        "judge",
        "--config",
        str(cfg),
        "--suite",
        suite,
        "--judge",
        f"vllm/judge@{fake_openai.base_url}",
        "--protocol",
        "psycrisis",
        "--out",
        str(out),
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    # Until the job is submitted and polled, however slowly a busy machine starts the process; the 240 s are a
    # hang guard (a start-up on a loaded 2-core machine has taken over 60 s).
    deadline = time.monotonic() + 240
    polled = False
    while time.monotonic() < deadline and not polled:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.05)
        polled = bool(fake_openai.batches) and fake_openai.batches[0]["polls"] >= 2
    assert polled, "the job was not submitted and polled twice within 240 s"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    with sqlite3.connect(out / "run.db") as con:
        assert con.execute("SELECT COUNT(*) FROM batch_requests").fetchone()[0] == 6, "the job was noted"
        assert con.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] == 0

    fake_openai.batch_hold = False
    # The same command again, in this process (tests/cli_inprocess.py): the kill above needed a process of its
    # own; what the second run is tested for is that it finds the noted job in the run folder and collects it.
    done = inprocess(*cmd[3:])
    assert done.returncode == 0, done.stderr
    assert len(fake_openai.batches) == 1, "the restarted run waits for the job it submitted, not a new one"
    assert fake_openai.calls == 0
    with Store.open_existing(out) as store:
        judgments = store.judgments()
    assert len(judgments) == 6 and all(j.status == "ok" for j in judgments)


def test_a_job_the_server_no_longer_knows_is_submitted_again(tmp_path, fake_openai):
    fake_openai.default = respond(judge_answer)
    fake_openai.batch_hold = True
    config = _config(tmp_path, fake_openai, suite=_cases(tmp_path, 2, answered=True), protocols=["psycrisis"])
    plan = plan_run(config, stages=("judge",))

    async def submit_then_stop() -> None:  # a run that ends (as if killed) while its job is in progress
        task = asyncio.ensure_future(execute(plan))
        while not (fake_openai.batches and fake_openai.batches[0]["polls"]):
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(submit_then_stop())
    fake_openai.batches.clear()  # the server forgets the job
    fake_openai.batch_hold = False
    run(config, stages=("judge",))  # polling answers 404: the calls are unscored and forgotten
    with Store.open_existing(tmp_path / "run") as store:
        assert all("http_404" in (j.reason_text or "") for j in store.judgments())
    run(config, stages=("judge",))
    assert [b["requests"] for b in fake_openai.batches] == [2]
    with Store.open_existing(tmp_path / "run") as store:
        assert all(j.status == "ok" for j in store.judgments())


def test_a_refused_response_format_moves_the_next_run_to_the_next_shape(tmp_path, fake_openai):
    def refuse_schema(body: dict):  # like a server without json_schema support, line by line
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return status(400, "response_format json_schema is not supported")
        return judge_answer(body)

    fake_openai.default = respond(refuse_schema)
    config = _config(tmp_path, fake_openai, suite=_cases(tmp_path, 2, answered=True), protocols=["psycrisis"])
    run(config, stages=("judge",))
    with Store.open_existing(tmp_path / "run") as store:
        assert all("json_schema" in (j.reason_text or "") for j in store.judgments())
    run(config, stages=("judge",))
    with Store.open_existing(tmp_path / "run") as store:
        judgments = store.judgments()
    assert all(j.status == "ok" for j in judgments)
    second = fake_openai.files[fake_openai.batches[1]["input_file_id"]].decode().splitlines()
    assert {json.loads(line)["body"]["response_format"]["type"] for line in second} == {"json_object"}


def test_an_upload_that_breaks_fails_the_calls_instead_of_hanging(tmp_path, fake_openai, monkeypatch):
    def broken_put_batch(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Store, "put_batch", broken_put_batch)  # a store failure after the job was created
    fake_openai.default = respond(judge_answer)
    config = _config(tmp_path, fake_openai, suite=_cases(tmp_path, 2, answered=True), protocols=["psycrisis"])
    run(config, stages=("judge",))  # returns: every caller heard of the failure
    with Store.open_existing(tmp_path / "run") as store:
        assert all("batch_submit" in (j.reason_text or "") for j in store.judgments())


def test_a_creation_whose_answer_is_lost_finds_its_job_instead_of_starting_a_second(tmp_path, fake_openai):
    fake_openai.default = respond(judge_answer)
    fake_openai.batch_create_drops = 1
    config = _config(tmp_path, fake_openai, suite=_cases(tmp_path, 3, answered=True), protocols=["psycrisis"])
    run(config, stages=("judge",))
    assert len(fake_openai.batches) == 1, "the lost answer is not followed by a second, billed job"
    with Store.open_existing(tmp_path / "run") as store:
        assert [b["id"] for b in store.batches()] == ["batch-1"]
        assert all(j.status == "ok" for j in store.judgments())
