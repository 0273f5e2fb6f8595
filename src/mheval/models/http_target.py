"""HTTP targets: a chat application behind its own HTTP API, evaluated like a model (`http:path/to/app.yaml`).

The YAML file says how to call it::

    url: https://support.example.com/api/chat      # may hold {{session_id}}
    method: POST                                     # default POST (GET, POST, PUT, PATCH)
    headers:
      Authorization: Bearer ${SUPPORT_APP_TOKEN}     # ${ENV_VAR}: read at each call, never stored
    body:                                            # a JSON template
      message: "{{message}}"                         # the last user message
      history: "{{messages}}"                        # the whole conversation, [{"role", "content"}, ...]
      session: "{{session_id}}"
    reply: $.reply                                   # JSONPath (jsonpath-ng) of the reply's text
    session:
      from: client                                   # mheval makes one id per conversation
      # from: response, path: $.session_id           # or: read from the first answer's body and sent back
      # from: header, name: X-Session-Id             # or: from the first answer's header
    timeout_s: 30                                    # optional; default: the run's timeout_s
    redirects: same-origin                           # or any: follow redirects to other hosts (no secrets sent)
    on_resume: mark                                  # or restart: a conversation cut mid-way starts again

A string that is exactly "{{message}}", "{{messages}}" or "{{session_id}}" becomes that value (the list stays a
list); inside a longer string they are replaced as text. Before a session id exists ({from: response} on the
first turn) "{{session_id}}" is null (empty inside text).

Secrets: a header value may name environment variables as ${NAME}; they are read when each request is made,
scrubbed from every error message, and never written to the run (its config holds the spec, `http:PATH`, and
its identity is the file's content with the ${NAME} placeholders, not their values). A header that carries
credentials (Authorization, Cookie, or a name with key, token, secret or password) must use ${NAME}: a literal
value there is refused. A value the app echoes is scrubbed from the decoded answer (the reply as stored), not
only from the JSON text, where quotes and backslashes are escaped.

Redirects are followed by mheval, not aiohttp (which drops only Authorization across hosts): within the URL's
origin (scheme, host, port) with every header; to another origin only when the file says `redirects: any`, and
then without the file's credential headers and ${NAME} values. Otherwise a cross-origin redirect fails the call
(`redirect_refused`, not retried), naming the origin it pointed at.

Resume: a conversation of an app with sessions that was cut mid-way (a kill, a failed turn) cannot go on in the
app session it began in. `on_resume: mark` (the default) plays the rest in a new session and marks the
conversation `resumed_in_new_session`; `on_resume: restart` plays it again from its first turn in a new session.

Identity (what resume and the call cache key on): the YAML's parsed content. Calls go through the run's retry
policy and the endpoint's adaptive limiter like model calls: timeouts, dropped connections, 408, 429 and 5xx
are retried; a 200 whose body is not JSON is retried too; a JSON body without a value at `reply` (or without the
session id) is not (a wrong path does not heal, and a stateful app has already taken the turn): the reply is
recorded as failed with the reason. Retrying a turn of a stateful app may show it that turn twice.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from yarl import URL

from mheval.errors import InputError
from mheval.models.app_session import AppSession
from mheval.models.base import Completion, Message, ModelError, OneCallSession, valid_text
from mheval.models.limits import (
    OVERLOAD_STATUSES,
    EndpointLimiter,
    RetryPolicy,
    TransientError,
    endpoint_limiter,
    is_retryable_status,
    parse_retry_after,
)
from mheval.models.loop_client import LoopClient
from mheval.models.openai_compat import MAX_BODY_BYTES, _read_capped
from mheval.models.spec import URL_CREDENTIALS
from mheval.yamlio import compose_yaml, read_yaml_file

PREFIX = "http:"
KEYS = ("url", "method", "headers", "body", "reply", "session", "timeout_s", "redirects", "on_resume")
REDIRECTS = ("same-origin", "any")
ON_RESUME = ("mark", "restart")
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 10
METHODS = ("POST", "GET", "PUT", "PATCH")
SESSION_FROM = ("client", "response", "header")
_ENV = re.compile(r"\$\{([^}]*)\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SENSITIVE = re.compile(r"authorization|cookie|key|token|secret|password", re.IGNORECASE)
_SLOTS = {"{{message}}": "message", "{{messages}}": "messages", "{{session_id}}": "session_id"}
_MAX_MESSAGE = 300


def _line_of(text: str, *path: str) -> int | None:
    """The 1-based line of the deepest key of `path` found in the YAML text."""
    try:
        node = compose_yaml(text)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for key in path:
        if not isinstance(node, yaml.MappingNode):
            break
        pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == key), None)
        if pair is None:
            break
        line, node = pair[0].start_mark.line + 1, pair[1]
    return line


@dataclass(frozen=True)
class HttpApp:
    """A parsed and checked app file."""

    path: Path
    url: str
    method: str
    headers: dict[str, str]
    body: Any
    reply: str
    session_from: str | None
    session_path: str | None  # JSONPath ({from: response}) or header name ({from: header})
    timeout_s: float | None
    redirects: str  # same-origin or any
    on_resume: str  # mark or restart
    content: dict[str, Any]  # what the file says, ${NAME} placeholders and all: the target's identity

    def env_names(self) -> list[str]:
        return sorted({m for v in self.headers.values() for m in _ENV.findall(v)})


def _compile(expr: str) -> Any:
    from jsonpath_ng.ext import parse

    return parse(expr)


def load_app(path_text: str) -> HttpApp:
    """Read and check an app file; InputError naming the file, the line and the field otherwise."""
    path = Path(path_text)
    if not path.is_file():
        raise InputError("HTTP target file not found", path=path, field="model")
    text, data = read_yaml_file(path, "HTTP target file")

    def fail(message: str, *keys: str) -> InputError:
        return InputError(message, path=path, line=_line_of(text, *keys), field=".".join(keys) or None)

    if not isinstance(data, dict):
        raise fail("an HTTP target file is a mapping with url, body, reply, ...")
    for key in data:
        if key not in KEYS:
            raise InputError(f"unknown key {key!r}", path=path, line=_line_of(text, str(key)), field=str(key),
                             choices=KEYS)  # fmt: skip
    url = data.get("url")
    if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
        raise fail("url must be an http:// or https:// URL", "url")
    if URL_CREDENTIALS.search(url):
        raise fail("url holds credentials: put them in a header as ${ENV_VAR}", "url")
    method = str(data.get("method", "POST")).upper()
    if method not in METHODS:
        raise InputError(f"method {method!r} is not supported", path=path, line=_line_of(text, "method"),
                         field="method", choices=METHODS)  # fmt: skip
    headers_in = data.get("headers") or {}
    if not isinstance(headers_in, dict):
        raise fail("headers must be a mapping of names to values", "headers")
    headers: dict[str, str] = {}
    for name, value in headers_in.items():
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise fail("a header value must be text", "headers", str(name))
        value = str(value)
        for env in _ENV.findall(value):
            if not _ENV_NAME.match(env):
                raise fail(f"${{{env}}} is not an environment variable name", "headers", str(name))
        if "${" in _ENV.sub("", value):
            raise fail("an unclosed ${ in the value", "headers", str(name))
        if _SENSITIVE.search(str(name)) and not _ENV.search(value):
            raise fail("this header carries credentials: give them as ${ENV_VAR}, never in the file",
                       "headers", str(name))  # fmt: skip
        headers[str(name)] = value
    body = data.get("body")
    if body is not None and method == "GET":
        raise fail("a GET request has no body", "body")
    reply = data.get("reply")
    if not isinstance(reply, str) or not reply.strip():
        raise fail("reply must be a JSONPath to the reply's text, e.g. $.reply", "reply")
    try:
        _compile(reply)
    except Exception as exc:
        raise fail(f"reply is not a JSONPath: {exc}", "reply") from None
    session_from = session_path = None
    session = data.get("session")
    if session is not None:
        if not isinstance(session, dict):
            raise fail("session must be a mapping: {from: client}, {from: response, path: $.x} or "
                       "{from: header, name: X-Session}", "session")  # fmt: skip
        session_from = session.get("from")
        if session_from not in SESSION_FROM:
            raise InputError(f"session from {session_from!r} is not supported", path=path,
                             line=_line_of(text, "session", "from"), field="session.from",
                             choices=SESSION_FROM)  # fmt: skip
        extra = set(session) - {"from", "path", "name"}
        if extra:
            raise fail(f"unknown key {sorted(extra)[0]!r}", "session", sorted(extra)[0])
        if session_from == "response":
            session_path = session.get("path")
            if not isinstance(session_path, str):
                raise fail("session from response needs path: a JSONPath to the id, e.g. $.session_id", "session")
            try:
                _compile(session_path)
            except Exception as exc:
                raise fail(f"session path is not a JSONPath: {exc}", "session", "path") from None
        elif session_from == "header":
            session_path = session.get("name")
            if not isinstance(session_path, str) or not session_path:
                raise fail("session from header needs name: the response header that holds the id", "session")
    timeout = data.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        raise fail("timeout_s must be a positive number of seconds", "timeout_s")
    choices = {"redirects": (REDIRECTS, "same-origin"), "on_resume": (ON_RESUME, "mark")}
    chosen: dict[str, str] = {}
    for key, (allowed, default) in choices.items():
        value = data.get(key, default)
        if value not in allowed:
            raise InputError(f"{key} {value!r} is not supported", path=path, line=_line_of(text, key), field=key,
                             choices=allowed)  # fmt: skip
        chosen[key] = value
    try:
        json.dumps(body)
    except (TypeError, ValueError):
        raise fail("body must be JSON-like (mappings, lists, text, numbers)", "body") from None
    return HttpApp(path, url, method, headers, body, reply, session_from, session_path,
                   float(timeout) if timeout is not None else None, chosen["redirects"], chosen["on_resume"],
                   data)  # fmt: skip


def identity(app: HttpApp) -> str:
    """The app's identity: a digest of the file's content (secrets are only ever ${NAME} placeholders there)."""
    import hashlib

    payload = json.dumps(app.content, sort_keys=True, ensure_ascii=False, default=str)
    return f"{PREFIX}{app.path}#{hashlib.sha256(payload.encode('utf-8')).hexdigest()[:16]}"


def fill(template: Any, values: dict[str, Any]) -> Any:
    """The template with its {{message}}, {{messages}} and {{session_id}} slots filled."""
    if isinstance(template, str):
        if template in _SLOTS:
            return values[_SLOTS[template]]
        for slot, key in _SLOTS.items():
            if slot in template:
                value = values[key]
                text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
                template = template.replace(slot, text)
        return template
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    return template


def _first(expr: str, data: Any) -> Any:
    found = _compile(expr).find(data)
    return found[0].value if found else None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text[:_MAX_MESSAGE] + ("..." if len(text) > _MAX_MESSAGE else "")


class HttpTarget(OneCallSession):
    """A SessionTarget (models/base.py) over an app file: one aiohttp session per object and loop, the shared
    limiter of the app's endpoint, and the run's retry policy."""

    def __init__(
        self, text: str, *, concurrency: int = 16, timeout_s: float = 120.0, retry: RetryPolicy | None = None
    ) -> None:
        self.app = load_app(text.strip()[len(PREFIX) :].strip())
        self.name = f"{PREFIX}{self.app.path}"
        self.endpoint = identity(self.app)
        self.concurrency = concurrency
        self.timeout_s = self.app.timeout_s or timeout_s
        self.retry = retry or RetryPolicy()
        self._client = LoopClient()

    def __repr__(self) -> str:
        return f"HttpTarget({self.name!r}, url={self.app.url!r})"

    def missing_env(self) -> str | None:
        """An environment variable the headers name that is not set (checked before the run starts)."""
        return next((name for name in self.app.env_names() if name not in os.environ), None)

    def session(self, key: str) -> HttpSession:
        return HttpSession(self, key)

    def _open(self) -> tuple[aiohttp.ClientSession, EndpointLimiter]:
        return self._client.open(
            self.concurrency, self.timeout_s, lambda: endpoint_limiter(self.app.url.split("?")[0], self.concurrency)
        )

    async def aclose(self) -> None:
        await self._client.close()

    def headers(self, session_id: str | None) -> tuple[dict[str, str], list[str]]:
        """The request's headers with ${NAME} read now, and the secret values (to scrub from errors)."""
        secrets: list[str] = []

        def env(match: re.Match[str]) -> str:
            value = os.environ.get(match[1])
            if value is None:
                raise ModelError("missing_env", f"set the environment variable {match[1]} (named in {self.app.path})")
            secrets.append(value)
            return value

        out = {"Content-Type": "application/json"} if self.app.body is not None else {}
        for name, template in self.app.headers.items():
            out[name] = _ENV.sub(env, fill(template, {"message": "", "messages": [], "session_id": session_id}))
        return out, [s for s in secrets if s]

    def public_headers(self, headers: dict[str, str]) -> dict[str, str]:
        """`headers` without any that carries a secret (a ${NAME} value, or a credential's name): what another
        origin may receive when the file allows cross-origin redirects."""
        return {
            name: value
            for name, value in headers.items()
            if not _SENSITIVE.search(name) and not _ENV.search(self.app.headers.get(name, ""))
        }


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
        if len(secret) > 12:
            text = text.replace(secret[: len(secret) // 2], "***")
    return text


def _scrub_values(data: Any, secrets: list[str]) -> Any:
    """Every text in a decoded JSON answer (keys too) scrubbed: a secret with a quote or a backslash is escaped in
    the JSON text, so only its decoded form matches."""
    if not secrets:
        return data
    if isinstance(data, str):
        return _scrub(data, secrets)
    if isinstance(data, dict):
        return {_scrub(str(k), secrets): _scrub_values(v, secrets) for k, v in data.items()}
    if isinstance(data, list):
        return [_scrub_values(v, secrets) for v in data]
    return data


def _origin(url: URL) -> tuple[str, str | None, int | None]:
    return (url.scheme, url.host, url.port)


@dataclass
class _Answer:
    status: int
    raw: bytes
    cut: bool
    retry_after: str | None
    headers: dict[str, str]


class HttpSession(AppSession["HttpTarget"]):
    """One conversation with an HTTP app: its session id (made here for {from: client}, else read from the
    first answer) is sent with every turn."""

    def __init__(self, target: HttpTarget, key: str) -> None:
        self.target = target
        self.key = key
        self.name = target.name
        app = target.app
        self.session_id: str | None = uuid.uuid4().hex if app.session_from == "client" else None
        # An app with sessions keeps state: its conversations' answers are cached apart (models/base.py).
        self.endpoint = f"{target.endpoint}#{key}" if app.session_from else target.endpoint
        # What a conversation cut mid-way does on resume (engine/conversation_stages.py): a new session cannot know
        # the turns the old one took.
        self.stateful = app.session_from is not None
        self.on_resume = app.on_resume

    async def aclose(self) -> None:
        self.session_id = None

    async def _answer(self, messages: list[Message], context: dict[str, Any]) -> Completion:
        """The app reads the turn and the conversation, not the sampling settings."""
        last = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        conversation = [{"role": m["role"], "content": m["content"]} for m in messages]
        return await self._post(last, conversation)

    async def _post(self, last: str, conversation: list[Message]) -> Completion:
        target, app = self.target, self.target.app
        http, limiter = target._open()
        headers, secrets = target.headers(self.session_id)
        values = {"message": last, "messages": conversation, "session_id": self.session_id}
        url = fill(app.url, {**values, "session_id": self.session_id or ""})
        payload = None if app.body is None else json.dumps(fill(app.body, values), ensure_ascii=False).encode()
        async with limiter:
            slot = limiter.now()
            started = time.perf_counter()
            try:
                answer = await self._send(http, url, payload, headers, secrets)
            except TimeoutError:
                limiter.on_overload(slot)
                raise TransientError("timeout", f"no answer within {target.timeout_s:g} s") from None
            except aiohttp.ClientError as exc:
                raise TransientError("connection", _scrub(f"{type(exc).__name__}: {exc}", secrets)) from None
            latency = time.perf_counter() - started
            status, raw, cut, retry_after = answer.status, answer.raw, answer.cut, answer.retry_after
            session_header = answer.headers.get(app.session_path or "") if app.session_from == "header" else None
            decoded = raw.decode("utf-8", "replace")
            text = _scrub(decoded, secrets)
            if not 200 <= status < 300:
                if status in OVERLOAD_STATUSES:
                    limiter.on_overload(slot)
                message = f"{app.url}: {_short(text) or '(empty body)'}"
                if is_retryable_status(status):
                    raise TransientError(f"http_{status}", message, parse_retry_after(retry_after))
                raise ModelError(f"http_{status}", message)
            limiter.on_success(latency, slot)
        if cut:
            raise ModelError("oversized_body", f"the answer is longer than {MAX_BODY_BYTES >> 20} MiB")
        try:
            data = _scrub_values(json.loads(decoded), secrets)
        except ValueError:
            raise TransientError("bad_response", f"the answer is not JSON: {_short(text)[:120]!r}") from None
        reply = _first(app.reply, data)
        if reply is None:
            raise ModelError("bad_response", f"no value at {app.reply} in the answer: {_short(text)[:120]!r}")
        if self.session_id is None and app.session_from in ("response", "header"):
            found = session_header if app.session_from == "header" else _first(app.session_path or "", data)
            if found in (None, ""):
                raise ModelError("bad_response", f"no session id at {app.session_path} in the first answer")
            self.session_id = str(found)
        return Completion(
            text=valid_text(reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)),
            latency_s=latency,
            raw=data if isinstance(data, dict) else {"body": data},
        )

    async def _send(
        self, http: aiohttp.ClientSession, url: str, payload: bytes | None, headers: dict[str, str], secrets: list[str]
    ) -> _Answer:
        """One request, following redirects here rather than in aiohttp, so that no secret header reaches another
        origin: same-origin hops keep every header; a cross-origin hop is refused unless the file says
        `redirects: any`, and then carries only the headers without secrets (HttpTarget.public_headers)."""
        target, app = self.target, self.target.app
        method, start = app.method, URL(url)
        current = start
        for _hop in range(MAX_REDIRECTS + 1):
            same = _origin(current) == _origin(start)
            sent = headers if same else target.public_headers(headers)
            async with http.request(method, current, data=payload, headers=sent, allow_redirects=False) as resp:
                location = resp.headers.get("Location")
                if resp.status not in REDIRECT_STATUSES or not location:
                    raw, cut = await _read_capped(resp, MAX_BODY_BYTES)
                    return _Answer(resp.status, raw, cut, resp.headers.get("Retry-After"), dict(resp.headers))
                status = resp.status
            following = current.join(URL(location))
            if _origin(following) != _origin(start) and app.redirects != "any":
                where = _scrub(f"{following.scheme}://{following.host}:{following.port}", secrets)
                raise ModelError(
                    "redirect_refused",
                    f"{app.url} redirected (HTTP {status}) to another origin, {where}; app targets follow only "
                    f"same-origin redirects, so that no secret header leaves the app's origin (set `redirects: any` "
                    f"in {app.path} to follow it without the secret headers)",
                )
            if status == 303 or (status in (301, 302) and method != "GET"):
                method, payload = "GET", None  # as browsers and aiohttp do; 307 and 308 keep method and body
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            current = following
        raise ModelError("redirect_loop", f"{app.url}: more than {MAX_REDIRECTS} redirects")
