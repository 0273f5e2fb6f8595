"""How many threads the sentence encoders use for their next call: the cores other work leaves free.

Both encoders split every matrix product between their threads and wait for the slowest before the next
one. On a machine that other work keeps busy, a second thread is often not scheduled for a while, and
every product waits for it: on the shared 2-core machine at a load average of 6-12, one USE thread
embedded a batch of long conversation texts about five times faster than two. On a quiet machine two
threads are faster. So the count is chosen per call, not once at load.

Other work is read from the kernel's CPU time counters (Linux /proc/stat) over the last few seconds, less
this process's own CPU time: the busy share of the cores when the encoder is asked, not the 1-minute load
average, which keeps counting a process that ended seconds ago (right after an import or an install it read
1.3 on an idle 2-core machine, and the encoders took one thread of two). Until two readings a second apart
exist, and where there is no /proc/stat, the load average less this process's own recent CPU use (over about
the last minute, the window the load average covers) stands in.

`MHEVAL_EMBED_THREADS=N` fixes the count (a positive integer); `auto` or unset chooses per call.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Generic, TypeVar

from mheval.cpu import Snapshot, others_between, process_cpu_seconds, snapshot, usable_cores
from mheval.errors import InputError

THREADS_ENV = "MHEVAL_EMBED_THREADS"
WINDOW_S = 60.0  # the 1-minute load average's horizon
RECENT_S = 5.0  # how far back the CPU time counters are read
_SAMPLE_EVERY_S = 1.0


def fixed_threads() -> int | None:
    """The count MHEVAL_EMBED_THREADS sets, or None when it is unset or `auto`."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if raw in ("", "auto"):
        return None
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    raise InputError(
        f"{THREADS_ENV}={raw!r} is not a thread count", field=THREADS_ENV, choices=["auto", "1", "2", "..."]
    )


Reading = TypeVar("Reading", tuple[float, float], Snapshot)


class _Readings(Generic[Reading]):
    """Readings (monotonic seconds first) kept at most once a second over the last `window_s` seconds."""

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._samples: deque[Reading] = deque()
        self._lock = threading.Lock()

    def oldest(self, now: Reading) -> Reading:
        """Keep `now` when a second has passed since the last kept reading; the oldest reading in the window."""
        with self._lock:
            if not self._samples or now[0] - self._samples[-1][0] >= _SAMPLE_EVERY_S:
                self._samples.append(now)
            while len(self._samples) > 2 and now[0] - self._samples[1][0] >= self._window_s:
                self._samples.popleft()
            return self._samples[0]


class OwnLoad(_Readings[tuple[float, float]]):
    """This process's CPU seconds per wall second over the last `WINDOW_S` seconds (sampled at most once a
    second, whenever a caller asks)."""

    def __init__(self) -> None:
        super().__init__(WINDOW_S)

    def rate(self) -> float:
        now, cpu = time.monotonic(), process_cpu_seconds()
        start, start_cpu = self.oldest((now, cpu))
        elapsed = now - start
        return (cpu - start_cpu) / elapsed if elapsed >= _SAMPLE_EVERY_S else 0.0


class RecentOthers(_Readings[Snapshot]):
    """Cores other work kept busy over about the last `RECENT_S` seconds, from CPU time counters read whenever
    asked (kept at most once a second; never waits); None until a reading a second old exists."""

    def __init__(self) -> None:
        super().__init__(RECENT_S)

    def cores(self) -> float | None:
        now = snapshot()
        if now is None:
            return None
        first = self.oldest(now)
        return others_between(first, now) if now[0] - first[0] >= _SAMPLE_EVERY_S else None


OWN_LOAD = OwnLoad()
RECENT_OTHERS = RecentOthers()


def free_threads(own: OwnLoad | None = None, recent: RecentOthers | None = None) -> int:
    """Threads for the next encoder call: MHEVAL_EMBED_THREADS, or the usable cores less the cores other work
    keeps busy (rounded, at least 1)."""
    fixed = fixed_threads()
    if fixed is not None:
        return fixed
    cores = usable_cores()
    others = (recent or RECENT_OTHERS).cores()
    if others is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # Windows: no load average; use every core
            return cores
        others = max(0.0, load - (own or OWN_LOAD).rate())
    return max(1, min(cores, round(cores - others)))
