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
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    try:
        before, own_before = cpu_ticks(Path("/proc/stat").read_text(), cpus), process_cpu_seconds()
        time.sleep(window_s)
        after, own_after = cpu_ticks(Path("/proc/stat").read_text(), cpus), process_cpu_seconds()
    except (OSError, ValueError):
        return None
    if before is None or after is None or after[1] <= before[1]:
        return None
    share = (after[0] - before[0]) / (after[1] - before[1])  # of the cores' time, busy
    own = (own_after - own_before) / window_s
    return max(0.0, share * len(cpus) - own)


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
