"""Where units are done: the executor interface and the local (asyncio) executor.

An executor takes a stage's units and calls `on_result` with each finished record, in the driver's
process, where the store is written; it never writes the store itself. `LocalExecutor` performs the
units in this event loop; `RayExecutor` (engine/ray_executor.py, extra `mheval[ray]`) on Ray workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mheval.engine.units import Result, Unit, Workbench, perform, pool


class Executor(Protocol):
    async def run(self, units: list[Unit], on_result: Callable[[Result], None]) -> None: ...


class LocalExecutor:
    """Units as coroutines of this process, `width` model calls at a time (see units.pool)."""

    def __init__(self, bench: Workbench, width: int) -> None:
        self.bench = bench
        self.width = width

    async def run(self, units: list[Unit], on_result: Callable[[Result], None]) -> None:
        async def one(unit: Unit) -> None:
            on_result(await perform(unit, self.bench))

        await pool(units, one, self.width)
