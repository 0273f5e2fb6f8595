"""The cores this process may use and how busy they are: what the embedded server (models/local.py) and the
sentence encoders (judges/offline/threads.py) read to choose their thread counts."""

from __future__ import annotations

import os
import time
from pathlib import Path


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says, a container's CPU set and not
    the host's count; else every core)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def process_cpu_seconds() -> float:
    """CPU seconds this process has used, user and system."""
    times = os.times()
    return times.user + times.system


def busy_cores_now(window_s: float) -> float | None:
    """How many of this process's cores other work keeps busy right now: the busy CPU time the kernel counts
    on them (Linux /proc/stat, one line per CPU) over `window_s`, less this process's own; None where there is
    no /proc/stat. Not the load average: it remembers the last minute, so right after `make run` installed the
    packages it read about 1.5 on an idle 2-core machine."""
    before = snapshot()
    if before is None:
        return None
    time.sleep(window_s)
    after = snapshot()
    return None if after is None else others_between(before, after)


Snapshot = tuple[float, float, int, int, int]
"""(monotonic seconds, this process's CPU seconds, busy ticks, total ticks, cores) of this process's cores."""


def snapshot() -> Snapshot | None:
    """The cores' tick counts and this process's CPU time now; None where there is no /proc/stat."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        ticks = cpu_ticks(Path("/proc/stat").read_text(), cpus)
    except (AttributeError, OSError, ValueError):
        return None
    return None if ticks is None else (time.monotonic(), process_cpu_seconds(), *ticks, len(cpus))


def others_between(before: Snapshot, after: Snapshot) -> float | None:
    """Cores that other work kept busy between two snapshots (busy share of the cores' time, less this
    process's own CPU rate); None when no tick passed."""
    elapsed = after[0] - before[0]
    if after[3] <= before[3] or elapsed <= 0:
        return None
    share = (after[2] - before[2]) / (after[3] - before[3])
    own = (after[1] - before[1]) / elapsed
    return max(0.0, share * after[4] - own)


def cpu_ticks(stat: str, cpus: list[int]) -> tuple[int, int] | None:
    """Busy and total clock ticks of `cpus`, summed, from /proc/stat's text (per-CPU lines: user nice system
    idle iowait irq softirq steal; idle and iowait are not busy); None when a CPU has no line."""
    busy = total = 0
    lines = {f.split(maxsplit=1)[0]: f.split()[1:9] for f in stat.splitlines() if f.startswith("cpu")}
    for cpu in cpus:
        fields = lines.get(f"cpu{cpu}")
        if fields is None:
            return None
        ticks = [int(v) for v in fields]
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
    return busy, total
