"""A real multi-node Ray run: a cluster of a head and two worker nodes on this machine (ray.cluster_utils.Cluster),
a suite whose units land on both worker nodes, one worker node killed mid-run, and the run still finishes with
every unit stored exactly once (engine/ray_executor.py gives a lost worker's chunks to the workers left).

The target is a Python function (models/python_target.py) that says which node answered, so the stored replies
show where each unit ran. Marked slow (tests/conftest.py); CI runs it, where the test extra brings Ray."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from mheval.config import RunConfig
from mheval.engine.runner import run
from mheval.runfolder.store import Store

if os.environ.get("CI"):
    import ray  # CI installs Ray with the test extras: a missing Ray fails here instead of skipping
else:
    ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # starts a Ray cluster: `make test` and CI run it, `make check` does not

UNITS = 48
ANSWER_S = 0.25


def on_node(messages):
    """The target: a fixed safe reply that names the Ray node it ran on. It takes ANSWER_S until the test has
    killed the worker node (the file named by MHEVAL_TEST_NODE_KILLED exists): slow enough that the kill lands
    with most units left, and no slower than it need be for the survivor doing the rest."""
    killed = os.environ.get("MHEVAL_TEST_NODE_KILLED")
    node = ray.get_runtime_context().get_node_id()
    # Each node marks its first answer, and none answers until both have: on a busy machine a node slow to
    # start would otherwise find nearly every unit done by the other, and the kill would land after the run.
    # (A node waiting holds its one CPU, so Ray hands the next unit to the other node.)
    seen = os.environ.get("MHEVAL_TEST_NODES_SEEN")
    if seen:
        Path(seen, node).touch()
        deadline = time.monotonic() + 60
        while len(os.listdir(seen)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    time.sleep(0.01 if killed and os.path.exists(killed) else ANSWER_S)
    return f"[{node}] I'm sorry this is so hard. Are you safe right now? You can call or text 988."


def _stored(run_dir: Path) -> int:
    """Responses committed so far, read beside the writing run (SQLite WAL allows it)."""
    try:
        with sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=1) as con:
            return int(con.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
    except sqlite3.Error:
        return 0


def _stored_by(run_dir: Path, node: str) -> int:
    """Responses committed so far that name `node` as where they ran."""
    try:
        with sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=1) as con:
            rows = con.execute("SELECT data FROM responses").fetchall()
    except sqlite3.Error:
        return 0
    return sum(1 for r in rows if node in (json.loads(r[0]).get("text") or ""))


def _nodes_seen(run_dir: Path) -> set[str]:
    try:
        with sqlite3.connect(f"file:{run_dir / 'run.db'}?mode=ro", uri=True, timeout=1) as con:
            rows = con.execute("SELECT data FROM responses").fetchall()
    except sqlite3.Error:
        return set()
    return {json.loads(r[0])["text"].split("]")[0].lstrip("[") for r in rows if json.loads(r[0]).get("text")}


# No bound on the seconds the run takes (they follow the machine's load): a run that never gives the lost node's
# chunks to the survivor hangs, and this timeout fails it.
@pytest.mark.timeout(300)
def test_a_run_on_three_nodes_survives_losing_a_worker_node(tmp_path, monkeypatch):
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's own switch for single-machine use: every address it picks is loopback (here and in its processes).
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    killed_flag = tmp_path / "node-killed"
    monkeypatch.setenv("MHEVAL_TEST_NODE_KILLED", str(killed_flag))  # the nodes' processes inherit it
    nodes_seen = tmp_path / "nodes-seen"
    nodes_seen.mkdir()
    monkeypatch.setenv("MHEVAL_TEST_NODES_SEEN", str(nodes_seen))
    tests = str(Path(__file__).parent)  # the workers import this module for the python: target
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p))
    # Every node on the loopback address: nothing of the cluster listens on or calls another interface.
    small = {"num_cpus": 1, "object_store_memory": 80 << 20, "node_ip_address": "127.0.0.1"}
    # The head (GCS) declares a node dead after health_check_failure_threshold missed checks, one every
    # health_check_period_ms: Ray's defaults (5 x 3 s) leave the run waiting ~15 s on the killed node's
    # chunks before they go to the survivor. The same detection, on a shorter clock.
    fast_death = {
        "health_check_initial_delay_ms": 0,
        "health_check_period_ms": 250,
        "health_check_failure_threshold": 3,
    }
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**small, "num_cpus": 0, "include_dashboard": False, "_system_config": fast_death},
    )
    try:
        workers = [cluster.add_node(wait=False, **small) for _ in range(2)]  # both start at once
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        worker_ids = {n.node_id for n in workers}
        assert {n["NodeID"] for n in ray.nodes() if n["Alive"]} >= worker_ids

        suite = tmp_path / "cases.jsonl"
        suite.write_text("".join(json.dumps({"id": f"c{i:02d}", "text": f"Day {i}: I feel like a burden."}) + "\n"
                                 for i in range(UNITS // 2)))  # fmt: skip
        config = RunConfig(suite=f"jsonl:{suite}", models=["python:test_ray_multinode:on_node"], samples=2,
                           judges=["offline"], protocols=["psycrisis"], executor="ray", concurrency=2,
                           out=str(tmp_path / "run"))  # fmt: skip
        run_dir = tmp_path / "run"
        killed: list[str] = []
        survivor_before: list[int] = []  # the surviving node's units stored when the other was killed
        raylets: list = []

        def kill_when_both_nodes_answered() -> None:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                if _nodes_seen(run_dir) >= worker_ids and _stored(run_dir) < UNITS - 8:
                    victim = workers[1]
                    survivor_before.append(_stored_by(run_dir, workers[0].node_id))
                    raylets.extend(p.process for p in victim.all_processes.get("raylet", []))
                    cluster.remove_node(victim, allow_graceful=False)
                    killed.append(victim.node_id)
                    killed_flag.touch()
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_when_both_nodes_answered, daemon=True)
        killer.start()
        result = run(config, stages=("generate",))
        killer.join(5)

        assert killed, "the worker node was not killed mid-run (both nodes must have answered first)"
        assert raylets and all(p.poll() is not None for p in raylets), "the killed node's raylet is gone"
        with Store.open_existing(result.run_dir) as store:
            responses = store.responses()
            replaced = store._db.execute("SELECT COUNT(*) FROM superseded").fetchone()[0]
        keys = [(r.case_id, r.sample) for r in responses]
        assert len(keys) == len(set(keys)) == UNITS and replaced == 0, "every unit stored exactly once"
        assert all(r.error is None and r.text for r in responses)
        ran_on = {r.text.split("]")[0].lstrip("[") for r in responses if r.text}
        assert ran_on == worker_ids, "units landed on both worker nodes, none on the head (it has no CPU)"
        # The survivor went on after the kill and the units left then (at least 8) were all stored, each once,
        # though the killed node could do none of them. (How many each node did before the kill follows the
        # machine's load: a busy machine lets the kill land late.)
        survivor = sum(1 for r in responses if r.text and workers[0].node_id in r.text)
        assert survivor > survivor_before[0], "the surviving node did the rest, the killed node's unfinished chunks too"
        assert result.counts["responses"] == UNITS
    finally:
        ray.shutdown()
        cluster.shutdown()
