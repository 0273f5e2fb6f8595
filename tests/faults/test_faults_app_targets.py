"""Faults and abuse against app targets (`python:` and `http:`), issue #32: what a broken or hostile app, or a
hostile app file, can do to a run. Loopback HTTP servers with scripted answers (tests/faults/fault_helpers.py)
stand in for the apps; the run is the library's `evaluate`, or the real `mheval` process where what is tested is
the process itself (it exits; a kill resumes)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from fault_helpers import CRISIS_CASES, SAFE_REPLY, Loopback, app_file, run_cli

import mheval
from mheval.errors import InputError
from mheval.models.http_target import load_app
from mheval.runfolder.store import Store

COMMON: dict[str, Any] = {"judges": ["offline"], "protocols": ["psycrisis"], "concurrency": 2}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Loopback, Loopback]]:
    """Two loopback servers: two origins (the same host, other ports)."""
    with Loopback() as first, Loopback() as second:
        yield first, second


@pytest.fixture
def app(servers: tuple[Loopback, Loopback]) -> Loopback:
    servers[0].reset()
    servers[1].reset()
    return servers[0]


@pytest.fixture
def other(servers: tuple[Loopback, Loopback], app: Loopback) -> Loopback:
    return servers[1]


def _reply(text: str = SAFE_REPLY, status: int = 200) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response({"reply": text}, status=status)

    return handler


def _redirect(location: str, status: int = 307) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": location})

    return handler


def _texts(run_dir: Path) -> list[str | None]:
    with Store.open_existing(run_dir) as store:
        return [r.text for r in store.responses()]


def _errors(run_dir: Path) -> list[str | None]:
    with Store.open_existing(run_dir) as store:
        return [r.error for r in store.responses()]


# == the ten defects of issue #32 (each test failed before its fix) ==========================================


# -- 1: a redirect to another origin must not carry the secret headers --------------------------------------


def test_a_cross_origin_redirect_is_refused_and_the_other_origin_receives_no_secret(tmp_path, app, other,
                                                                                    monkeypatch):  # fmt: skip
    secret = "sk-app-" + "4" * 32
    monkeypatch.setenv("FAULT_APP_KEY", secret)
    headers = {"X-Api-Key": "${FAULT_APP_KEY}", "Authorization": "Bearer ${FAULT_APP_KEY}", "X-Client": "mheval"}
    app.route("/chat", _redirect(other.url("/chat"), 302))
    other.route("/chat", _reply())
    spec = app_file(tmp_path, app.url("/chat"), headers=headers)
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[spec], out=tmp_path / "run", **COMMON)

    (error,) = _errors(result.run_dir)
    assert error is not None and error.startswith("redirect_refused:"), error
    assert f"127.0.0.1:{other.port}" in error and "redirects: any" in error and secret not in error
    assert other.requests == [], "the other origin was never called"

    # Allowed by the app file: followed, but the other origin gets no header that carries a secret.
    allowed = app_file(tmp_path, app.url("/chat"), name="any.yaml", headers=headers, redirects="any")
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[allowed], out=tmp_path / "any", **COMMON)
    assert _texts(result.run_dir) == [SAFE_REPLY]
    (seen,) = other.requests
    names = {k.lower() for k in seen["headers"]}
    assert "x-api-key" not in names and "authorization" not in names and seen["headers"].get("X-Client") == "mheval"
    assert all(secret not in str(v) for v in seen["headers"].values())
    assert seen["method"] == "GET", "a 302 after a POST is followed as a GET, without the body"


def test_a_same_origin_redirect_keeps_method_body_and_headers(tmp_path, app, monkeypatch):
    monkeypatch.setenv("FAULT_APP_KEY", "sk-same-origin-key")
    app.route("/chat", _redirect("/v2/chat", 308))
    app.route("/v2/chat", _reply())
    spec = app_file(tmp_path, app.url("/chat"), headers={"X-Api-Key": "${FAULT_APP_KEY}"})
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[spec], out=tmp_path / "run", **COMMON)
    assert _texts(result.run_dir) == [SAFE_REPLY]
    final = next(r for r in app.requests if r["path"] == "/v2/chat")
    assert final["method"] == "POST" and final["headers"]["X-Api-Key"] == "sk-same-origin-key"
    assert json.loads(final["body"])["message"] == CRISIS_CASES[0]["text"]


# -- 2: a reply that is not valid Unicode, and a poisoned cache row -----------------------------------------


def lone_surrogate(messages):
    return "I hear you \ud800 are you safe right now?"


def test_a_lone_surrogate_is_stored_as_a_replacement_character_and_a_poisoned_cache_row_recovers(tmp_path):
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[lone_surrogate], out=tmp_path / "run", **COMMON)
    assert _texts(result.run_dir) == ["I hear you \ufffd are you safe right now?"]
    assert result.judgments["status"].tolist() == ["ok"]

    # A cache row written before the fix holds the surrogate: the resumed run recovers it, never crashes.
    db = sqlite3.connect(result.run_dir / "run.db")
    with db:
        key, data = db.execute("SELECT key, data FROM cache").fetchone()
        poisoned = {**json.loads(data), "text": "cached \ud800 reply, are you safe?"}
        db.execute("UPDATE cache SET data=? WHERE key=?", (json.dumps(poisoned), key))
        db.execute("DELETE FROM responses")
        db.execute("DELETE FROM judgments")
    db.close()
    again = mheval.evaluate(cases=CRISIS_CASES[:1], models=[lone_surrogate], out=tmp_path / "run", **COMMON)
    assert again.model_calls == 0 and _texts(again.run_dir) == ["cached \ufffd reply, are you safe?"]


# -- 3: token counts that are not token counts --------------------------------------------------------------


def infinite_usage(messages):
    return {"content": SAFE_REPLY, "usage": {"prompt_tokens": float("inf"), "completion_tokens": 5}}


def test_an_infinite_token_count_drops_the_usage_with_a_note(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="mheval"):
        result = mheval.evaluate(cases=CRISIS_CASES, models=[infinite_usage], out=tmp_path / "run", **COMMON)
    assert _texts(result.run_dir) == [SAFE_REPLY, SAFE_REPLY]
    assert result.responses["prompt_tokens"].tolist() == [0, 0]
    assert result.responses["completion_tokens"].tolist() == [0, 0]
    notes = [r.getMessage() for r in caplog.records if "usage dropped" in r.getMessage()]
    assert len(notes) == 1 and "prompt_tokens=inf" in notes[0] and "infinite_usage" in notes[0]


@pytest.mark.parametrize(("usage", "kept"), [
    ({"prompt_tokens": -3, "completion_tokens": 2}, False),
    ({"prompt_tokens": 2.5, "completion_tokens": 2}, False),
    ({"prompt_tokens": "many", "completion_tokens": 2}, False),
    ({"prompt_tokens": 7.0, "completion_tokens": "3"}, True),
])  # fmt: skip
def test_token_counts_are_finite_non_negative_whole_numbers(usage, kept):
    from mheval.models.python_target import usage_of

    counted, note = usage_of(usage)
    assert (note is None) == kept
    assert (counted.prompt_tokens, counted.completion_tokens) == ((7, 3) if kept else (0, 0))


# -- 5: a sync target that never returns must not keep the process alive ------------------------------------


BOT_THAT_HANGS_ONCE = """
import threading

_lock = threading.Lock()
_calls = [0]


def reply(messages):
    with _lock:
        _calls[0] += 1
        first = _calls[0] == 1
    if first:
        threading.Event().wait()  # never returns: only the timeout gets the run past it
    return "I'm here with you. Are you safe right now?"
"""


@pytest.mark.slow
def test_a_target_that_outlives_its_timeout_never_keeps_the_process_alive(tmp_path):
    """The real `mheval` process (what is tested is that it exits): the first call hangs for ever, the retry after
    the 0.5 s timeout answers. Before the fix the run finished and the process then waited for the hung worker
    thread at exit, for ever; the bound is generous (a hang is the failure, not a speed)."""
    (tmp_path / "hangbot.py").write_text(BOT_THAT_HANGS_ONCE, encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text(json.dumps(CRISIS_CASES[0]) + "\n", encoding="utf-8")
    (tmp_path / "run.yaml").write_text("timeout_s: 0.5\nconcurrency: 1\n", encoding="utf-8")
    command = [sys.executable, "-m", "mheval", "run", "--config", str(tmp_path / "run.yaml"), "--suite",
               f"jsonl:{tmp_path / 'cases.jsonl'}", "--model", f"python:{tmp_path / 'hangbot.py'}:reply",
               "--judge", "offline", "--protocol", "psycrisis", "--out", str(tmp_path / "run"), "--quiet"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
                          env={**os.environ, "MHEVAL_QUIET": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _texts(tmp_path / "run") == ["I'm here with you. Are you safe right now?"]


# -- 6: a conversation with a stateful app, cut mid-way and resumed -----------------------------------------


class StatefulApp:
    """An app that remembers each session's turns and says how many it heard; `fail_on` lists the request
    numbers (1-based) answered without a reply (a 200 without `reply`: not retried, the run stops that
    conversation, the app has taken the turn: as after a kill mid-turn)."""

    def __init__(self, fail_on: tuple[int, ...] = ()) -> None:
        self.sessions: dict[str, list[str]] = {}
        self.fail_on = set(fail_on)
        self.calls = 0

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.calls += 1
        heard = self.sessions.setdefault(body["session"], [])
        heard.append(body["message"])
        if self.calls in self.fail_on:
            return web.json_response({"busy": True})
        return web.json_response({"reply": f"Session {len(self.sessions)} heard {len(heard)} message(s). "
                                           "How are you feeling right now?"})  # fmt: skip


def _one_scenario(tmp_path: Path) -> Path:
    """A replayed three-turn scenario (the user's words fixed)."""
    source = Path(mheval.__file__).parent / "suites" / "builtin" / "crisis-dialogues" / "en-benign-control-01.yaml"
    folder = tmp_path / "scenarios"
    folder.mkdir()
    shutil.copy(source, folder / source.name)
    return folder


def _conversation(run_dir: Path) -> tuple[Any, list[Any]]:
    with Store.open_existing(run_dir) as store:
        (conversation,) = store.conversations()
        return conversation, store.exchanges()


def test_a_resumed_conversation_with_a_stateful_app_is_marked_everywhere(tmp_path, app):
    from mheval.reporting.multiturn import section, transcript_text
    from mheval.runfolder.export import conversation_rows, table_rows

    stateful = StatefulApp(fail_on=(2,))
    app.route("/stateful", stateful)
    spec = app_file(tmp_path, app.url("/stateful"), session={"from": "client"})
    folder, out = _one_scenario(tmp_path), tmp_path / "run"
    first = mheval.evaluate(str(folder), models=[spec], out=out, **COMMON)
    conversation, exchanges = _conversation(first.run_dir)
    assert conversation.stop_reason == "target_error" and len(exchanges) == 1

    mheval.evaluate(str(folder), models=[spec], out=out, **COMMON)  # resumes at turn 2, in a new app session
    conversation, exchanges = _conversation(out)
    assert conversation.stop_reason == "script_done" and [e.turn for e in exchanges] == [1, 2, 3]
    assert [len(h) for h in stateful.sessions.values()] == [2, 2], "turn 2 went to both sessions"
    assert (conversation.resumed_in_new_session, conversation.resumed_at_turn) == (True, 2)
    assert [e.new_session for e in exchanges] == [False, True, False]

    text = transcript_text(out, "en-benign-control-01")
    assert "resumed_in_new_session" in text and "resumed in a new app session at turn 2" in text
    with Store.open_existing(out) as store:
        stops = section(store)["stops"]  # type: ignore[index]
        rows = conversation_rows(store)
        exported = table_rows(store, "exchanges")
    assert [row[-1] for row in stops] == [1]
    assert rows and all(r["resumed_in_new_session"] is True for r in rows)
    assert [r["new_session"] for r in exported] == [False, True, False]
    html = mheval.open_run(out).report().read_text(encoding="utf-8")
    assert "resumed_in_new_session" in html


def test_an_app_that_cannot_resume_plays_the_conversation_again_from_its_first_turn(tmp_path, app):
    stateful = StatefulApp(fail_on=(2,))
    app.route("/stateful", stateful)
    spec = app_file(tmp_path, app.url("/stateful"), session={"from": "client"}, on_resume="restart")
    folder, out = _one_scenario(tmp_path), tmp_path / "run"
    mheval.evaluate(str(folder), models=[spec], out=out, **COMMON)
    mheval.evaluate(str(folder), models=[spec], out=out, **COMMON)
    conversation, exchanges = _conversation(out)
    assert conversation.stop_reason == "script_done" and not conversation.resumed_in_new_session
    # The second session heard the whole conversation, and every stored reply is its own (none from the cache).
    assert [len(h) for h in stateful.sessions.values()] == [2, 3]
    assert [e.reply.split(" heard")[0] for e in exchanges] == ["Session 2"] * 3
    assert [e.reply.split(" heard ")[1][:1] for e in exchanges] == ["1", "2", "3"]


# -- 7: an app file that expands to billions of values --------------------------------------------------------


def _bomb(levels: int) -> str:
    lines = [
        'url: "http://127.0.0.1:9/chat"',
        "reply: $.reply",
        "body:",
        '  l0: &l0 ["x","x","x","x","x","x","x","x","x"]',
    ]
    for i in range(1, levels):
        lines.append(f"  l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_a_yaml_bomb_in_an_app_file_is_refused_before_it_is_expanded(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(9), encoding="utf-8")  # 9^9 (387 million) strings once expanded
    started = time.monotonic()
    with pytest.raises(InputError, match="expands to more than") as caught:
        load_app(str(path))
    assert caught.value.path == str(path) and caught.value.line is not None
    assert time.monotonic() - started < 30, "a hang is the failure; refusing takes milliseconds"
    bad = run_cli("run", "--suite", "crisis-core", "--model", f"http:{path}", "--judge", "offline",
                  "--out", str(tmp_path / "run"), "--quiet")  # fmt: skip
    assert bad.code == 2 and "bomb.yaml" in bad.err and not (tmp_path / "run").exists()


# -- 8: a secret with a quote or a backslash, echoed by the app ---------------------------------------------


def test_a_secret_with_quotes_and_backslashes_echoed_in_a_reply_is_scrubbed_from_the_run(tmp_path, app,
                                                                                         monkeypatch):  # fmt: skip
    secret = 'sk-"quoted"\\back\\slash-' + "9" * 24
    monkeypatch.setenv("FAULT_APP_KEY", secret)

    async def echo(request: web.Request) -> web.StreamResponse:
        return web.json_response({"reply": f"{SAFE_REPLY} (your key: {request.headers['X-Api-Key']})"})

    app.route("/echo", echo)
    spec = app_file(tmp_path, app.url("/echo"), headers={"X-Api-Key": "${FAULT_APP_KEY}"})
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[spec], out=tmp_path / "run", **COMMON)
    assert app.requests[0]["headers"]["X-Api-Key"] == secret
    (text,) = _texts(result.run_dir)
    assert text == f"{SAFE_REPLY} (your key: ***)"
    escaped = json.dumps(secret)[1:-1]
    db = sqlite3.connect(result.run_dir / "run.db")
    stored = [row[0] for table in ("responses", "cache") for row in db.execute(f"SELECT data FROM {table}")]
    db.close()
    for data in stored:
        decoded = json.dumps(json.loads(data), ensure_ascii=False)
        assert secret not in data and escaped not in data and secret not in json.loads(data).get("text", "")
        assert escaped not in decoded
    for file in result.run_dir.rglob("*"):
        if file.is_file():
            assert secret.encode() not in file.read_bytes() and escaped.encode() not in file.read_bytes(), file


# == probes that held: failures are stored with their reason, bad files refused =============================


def raises(messages):
    raise ValueError("no reply for you")


def returns_a_number(messages):
    return 42


def test_a_python_target_that_raises_or_returns_no_text_is_a_failed_reply_with_its_reason(tmp_path):
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[raises, returns_a_number], out=tmp_path / "run",
                             **COMMON)  # fmt: skip
    errors = dict(zip(result.responses["model"], result.responses["error"], strict=True))
    assert errors["python:test_faults_app_targets:raises"] == "exception: ValueError: no reply for you"
    assert errors["python:test_faults_app_targets:returns_a_number"].startswith("bad_response: the target returned int")
    assert set(result.judgments["reason"]) == {"no_response"} and result.provider_errors == 4


@pytest.mark.parametrize(("answer", "kind"), [
    ("status400", "http_400"),
    ("nopath", "bad_response: no value at $.reply"),
    ("huge", "oversized_body"),
])  # fmt: skip
def test_an_http_app_failure_is_a_failed_reply_with_its_reason(tmp_path, app, answer, kind):
    async def handler(request: web.Request) -> web.StreamResponse:
        if answer == "status400":
            return web.json_response({"error": "bad request"}, status=400)
        if answer == "nopath":
            return web.json_response({"answer": "somewhere else"})
        return web.Response(body=b'{"reply": "' + b"x" * (9 << 20) + b'"}', content_type="application/json")

    app.route("/chat", handler)
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[app_file(tmp_path, app.url())], out=tmp_path / "run",
                             **COMMON)  # fmt: skip
    (error,) = _errors(result.run_dir)
    assert error is not None and error.startswith(kind), error
    assert len(app.requests) == 1, "a failure that another try cannot heal is not retried"
    assert result.judgments["reason"].tolist() == ["no_response"]


def test_server_errors_and_a_dead_port_are_retried_then_failed_with_their_reason(tmp_path, app):
    import asyncio

    from mheval.models.http_target import HttpTarget
    from mheval.models.limits import RetryPolicy

    app.route("/chat", _reply("down", status=503))

    async def ask(url: str) -> str:
        target = HttpTarget(app_file(tmp_path, url), retry=RetryPolicy(max_attempts=3, base_s=0.0))
        try:
            await target.complete([{"role": "user", "content": "hello"}])
        except mheval.models.ModelError as exc:
            return str(exc)
        finally:
            await target.aclose()
        return "answered"

    assert asyncio.run(ask(app.url())).startswith("http_503: gave up after 3 attempts")
    assert len(app.requests) == 3
    assert asyncio.run(ask("http://127.0.0.1:9/chat")).startswith("connection:")


def test_a_secret_echoed_in_an_error_body_appears_nowhere_in_the_run(tmp_path, app, monkeypatch):
    secret = "sk-echo-" + "5" * 40
    monkeypatch.setenv("FAULT_APP_KEY", secret)

    async def echo401(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": f"bad key {request.headers['Authorization']}"}, status=401)

    app.route("/chat", echo401)
    spec = app_file(tmp_path, app.url(), headers={"Authorization": "Bearer ${FAULT_APP_KEY}"})
    result = mheval.evaluate(cases=CRISIS_CASES[:1], models=[spec], out=tmp_path / "run", **COMMON)
    (error,) = _errors(result.run_dir)
    assert error is not None and error.startswith("http_401") and "***" in error
    result.report()
    for file in result.run_dir.rglob("*"):
        if file.is_file():
            assert secret.encode() not in file.read_bytes() and secret[:20].encode() not in file.read_bytes()


@pytest.mark.parametrize(("text", "field", "line"), [
    ("url: http://127.0.0.1:9/chat\nreply: 42\n", "reply", 2),
    ("url: http://127.0.0.1:9/chat\nreply: $.reply\nmethod: DELETE\n", "method", 3),
    ("url: http://127.0.0.1:9/chat\nreply: $.reply\nheaders:\n  X-Api-Key: sk-literal-secret\n", "headers.X-Api-Key",
     4),
    ("url: http://127.0.0.1:9/chat\nreply: $.reply\nredirects: everywhere\n", "redirects", 3),
    ("url: http://user:pw@127.0.0.1:9/chat\nreply: $.reply\n", "url", 1),
])  # fmt: skip
def test_a_bad_app_file_exits_2_naming_file_line_and_field_and_writes_nothing(tmp_path, text, field, line):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    bad = run_cli("run", "--suite", "crisis-core", "--model", f"http:{path}", "--judge", "offline",
                  "--out", str(tmp_path / "run"), "--quiet")  # fmt: skip
    assert bad.code == 2, bad.err
    assert f"bad.yaml:{line}" in bad.err and f"field '{field}'" in bad.err, bad.err
    assert not (tmp_path / "run").exists()


def test_an_unset_secret_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("FAULT_UNSET_KEY", raising=False)
    spec = app_file(tmp_path, "http://127.0.0.1:9/chat", headers={"X-Api-Key": "${FAULT_UNSET_KEY}"})
    with pytest.raises(InputError, match="FAULT_UNSET_KEY"):
        mheval.evaluate(cases=CRISIS_CASES[:1], models=[spec], out=tmp_path / "run", **COMMON)
    assert not (tmp_path / "run").exists()


# -- a run killed with SIGKILL resumes exactly ----------------------------------------------------------------


SLOW_BOT = """
import os
import time


def reply(messages):
    with open(os.environ["FAULT_CALL_LOG"], "a", encoding="utf-8") as log:
        log.write(messages[-1]["content"] + "\\n")
    time.sleep(0.05)
    return "I'm here with you. Are you safe right now?"
"""


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_with_every_reply_once_and_finished_ones_never_redone(tmp_path, monkeypatch):
    """The real `mheval` process, killed with SIGKILL once some replies are stored, then the same command again
    (in this process: the kill needs a process of its own, the resume has only the run folder to go by)."""
    n = 30
    (tmp_path / "slowbot.py").write_text(SLOW_BOT, encoding="utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i:02}", "text": f"I feel hopeless ({i})."}) + "\n"
                             for i in range(n)), encoding="utf-8")  # fmt: skip
    log, out = tmp_path / "calls.log", tmp_path / "run"
    command = [sys.executable, "-m", "mheval", "run", "--suite", f"jsonl:{cases}", "--model",
               f"python:{tmp_path / 'slowbot.py'}:reply", "--judge", "offline", "--protocol", "psycrisis",
               "--concurrency", "2", "--out", str(out), "--quiet"]  # fmt: skip
    env = {**os.environ, "MHEVAL_QUIET": "1", "FAULT_CALL_LOG": str(log)}
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=env)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "run.db").exists():
            try:
                with sqlite3.connect(f"{(out / 'run.db').resolve().as_uri()}?mode=ro", uri=True) as db:
                    if db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] >= 5:
                        break
            except sqlite3.Error:
                pass  # the schema is being created
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before the kill: the test's timing assumption broke"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with Store.open_existing(out) as store:
        kept = len(store.responses())
    assert 5 <= kept < n

    monkeypatch.setenv("MHEVAL_QUIET", "1")
    monkeypatch.setenv("FAULT_CALL_LOG", str(log))
    done = run_cli(*command[3:])
    assert done.code == 0, done.err
    assert sqlite3.connect(out / "run.db").execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store.open_existing(out) as store:
        responses = store.responses()
    assert sorted(r.case_id for r in responses) == [f"c{i:02}" for i in range(n)]
    assert all(r.text for r in responses)
    calls = log.read_text(encoding="utf-8").splitlines()
    # Every case called once, save the (at most `concurrency`) calls in flight when the kill landed.
    assert n <= len(calls) <= n + 2, len(calls)
