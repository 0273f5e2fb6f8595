"""The Ray executor: a stage's units done by workers on a Ray cluster (`--executor ray [--ray-address]`).

Each worker is a Ray actor with one CPU that opens its own models and judges from the run's config
and does the units it is sent with the local asyncio machinery (engine/units.py), at its share of the
run's concurrency and tokens-per-minute budget. It returns the finished records and the calls it made
(cache key and answer); the driver, the only process that writes the store, stores both, so a later
run replays those calls from the cache: a local run, or a Ray run whose workers can read the run
folder (same machine or a shared file system; otherwise Ray workers call again). Units go out in
chunks, two chunks in flight per worker, and each chunk is stored as soon as it comes back: a killed
driver loses at most the chunks on the wire, which the same command does again.

A worker that dies (its process, or its whole node) loses only the chunks it was doing: they go back in
the queue for the workers left, so every unit is stored once; the run fails only when no worker is left
(and then resumes where it stopped). Calls a lost chunk made may be made again.

Models must be reachable from the workers: embedded `local/...` models need a URL here. mheval must be
installed on every node (`pip install 'mheval[ray]'`), and a `python:` target importable there. Without an
address, a local Ray instance with this machine's CPUs is started and stopped with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from types import TracebackType
from typing import Any

from mheval.config import RunConfig
from mheval.engine.cache import CachedModel, CallRecorder
from mheval.engine.context import run_context
from mheval.engine.units import Result, Unit, Workbench, perform, pool
from mheval.errors import InputError
from mheval.runfolder.store import Store

CHUNKS_IN_FLIGHT = 2  # per worker: one being done while the other's records travel


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("the Ray executor needs Ray: pip install 'mheval[ray]'", field="executor") from None
    return ray


def _actor_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """What a call to a worker raises when the worker or its node is gone."""
    found = (getattr(ray.exceptions, name, None) for name in ("RayActorError", "ActorUnavailableError"))
    return tuple(e for e in found if isinstance(e, type))


def _share(concurrency: int, workers: int) -> int:
    """Each worker's part of the run's concurrency."""
    return max(1, math.ceil(concurrency / workers))


class RayWorker:
    """One worker's workbench (made on its first chunk) and the calls it made since the last chunk.

    `wanted` are the models the driver opened (targets only when generation runs); `run_dir` is read,
    never written, for answers already in the cache when this node can see it."""

    def __init__(self, config_json: str, workers: int, wanted: list[str], run_dir: str) -> None:
        self.config = RunConfig.model_validate_json(config_json)
        self.workers = workers
        self.wanted = wanted
        self.concurrency = _share(self.config.concurrency, workers)
        self.reader = Store.open_readonly(run_dir)
        self.recorder = CallRecorder(self.reader)
        self.bench: Workbench | None = None
        self.stack = contextlib.AsyncExitStack()

    async def _workbench(self) -> Workbench:
        if self.bench is None:
            from mheval.judges import build_judges
            from mheval.models import open_models
            from mheval.protocols import load_protocol

            config = self.config
            context = run_context(config, tpm_share=self.workers)
            opened = open_models(self.wanted, concurrency=self.concurrency, timeout_s=config.timeout_s,
                                 context=context)  # fmt: skip
            raw = await self.stack.enter_async_context(opened)
            models = {name: CachedModel(m, self.recorder) for name, m in zip(self.wanted, raw, strict=True)}
            judges = build_judges(models, config)
            protocols = {pid: load_protocol(pid) for pid in config.protocols}
            self.bench = Workbench(config, models, judges, protocols)
        return self.bench

    async def perform(self, units: list[Unit]) -> tuple[list[Result], list[tuple[str, dict[str, Any]]], int, int]:
        """(records, calls to record, and this worker's totals so far of calls made (failed ones too)
        and of answers from the cache) for `units`. Totals, not per chunk: chunks overlap in time."""
        bench = await self._workbench()
        results: list[Result | None] = [None] * len(units)

        async def one(index: int) -> None:
            results[index] = await perform(units[index], bench)

        await pool(list(range(len(units))), one, self.concurrency)
        models = [m for m in bench.models.values() if isinstance(m, CachedModel)]
        misses, hits = sum(m.misses for m in models), sum(m.hits for m in models)
        return [r for r in results if r is not None], self.recorder.take(), misses, hits

    async def close(self) -> None:
        await self.stack.aclose()
        if self.reader is not None:
            self.reader.close()


class RayExecutor:
    """The executor interface (engine/executors.py) over Ray actors; an async context manager."""

    def __init__(self, config: RunConfig, store: Store, wanted: list[str]) -> None:
        self.config = config
        self.store = store
        self.wanted = wanted
        self._totals: dict[int, tuple[int, int]] = {}  # per worker: (calls made, cache answers) so far
        self._ray: Any = None
        self._started = False
        self._actors: list[Any] = []
        self._lost: set[int] = set()

    async def __aenter__(self) -> RayExecutor:
        ray = self._ray = require_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            ray.init(address=self.config.ray_address, **kwargs)
            self._started = True
        workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1)(RayWorker)
        config_json = self.config.model_dump_json()
        run_dir = str(self.store.path.parent.resolve())
        self._actors = [actor.remote(config_json, workers, self.wanted, run_dir) for _ in range(workers)]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        ray = self._ray
        with contextlib.suppress(Exception):
            await asyncio.gather(*(a.close.remote() for a in self._actors), return_exceptions=True)
        for a in self._actors:
            with contextlib.suppress(Exception):  # one on a node that is gone
                ray.kill(a)
        self._actors = []
        if self._started:
            ray.shutdown()

    async def run(self, units: list[Unit], on_result: Callable[[Result], None]) -> None:
        if not units:
            return
        # A chunk keeps a worker's calls in flight while the next one travels.
        size = _share(self.config.concurrency, len(self._actors)) * 2
        chunks = [units[i : i + size] for i in range(0, len(units), size)]
        chunks.reverse()  # popped from the end: in order
        left = len(chunks)  # chunks not yet stored (queued or in flight)
        changed = asyncio.Event()  # a chunk was stored or came back from a lost worker
        lost = _actor_errors(self._ray)

        async def feed(index: int) -> None:
            nonlocal left
            while left and index not in self._lost:
                if not chunks:  # the rest is in flight: wait, in case a worker is lost and its chunk comes back
                    changed.clear()
                    await changed.wait()
                    continue
                chunk = chunks.pop()
                try:
                    results, calls, misses, hits = await self._actors[index].perform.remote(chunk)
                except lost:
                    chunks.append(chunk)  # to the workers left
                    self._lost.add(index)
                    changed.set()
                    return
                left -= 1
                changed.set()
                for key, value in calls:
                    self.store.cache_put(key, value)
                seen = self._totals.get(index, (0, 0))
                self._totals[index] = (max(seen[0], misses), max(seen[1], hits))
                for record in results:
                    on_result(record)

        await asyncio.gather(*(feed(i) for i in range(len(self._actors)) for _ in range(CHUNKS_IN_FLIGHT)))
        if left:
            raise RuntimeError(
                f"every Ray worker was lost with {left} chunk(s) of units left: run the same command again to resume"
            )

    @property
    def lost_workers(self) -> int:
        """Workers lost during the run (their process or node died); their chunks went to the others."""
        return len(self._lost)

    @property
    def model_calls(self) -> int:
        return sum(calls for calls, _ in self._totals.values())

    @property
    def cache_hits(self) -> int:
        return sum(hits for _, hits in self._totals.values())


__all__ = ["RayExecutor", "RayWorker", "require_ray"]
