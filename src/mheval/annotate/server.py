"""The rating server: server-rendered pages (Starlette + jinja2), every asset from the package, CSP `default-src
'self'`. Each rater has a secret link; a wrong token gets 403. A page shows one unit (the conversation and the
reply, nothing else) and its form; the page's script saves each answer at once (POST, JSON) and drives the
keyboard. Nothing a rater receives names a model, a sample, a judge or another rater. A unit of a multi-turn
run shows its conversation as a numbered transcript: the turns before the reply to rate, that reply marked,
or every turn when the whole conversation is rated.
"""

from __future__ import annotations

import ipaddress
import json
import math
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from mheval.annotate.study import Study
from mheval.errors import InputError
from mheval.resources import warning_lines

BREAK_EVERY = 20
"""A break prompt after this many units in a row."""
SESSION_CAP = 60
"""Units one rater may rate in one run of the server: rating crisis conversations is heavy work."""

HEADERS = {
    "Content-Security-Policy": "default-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the token is in the URL
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}

TEXT: dict[str, dict[str, Any]] = {
    "en": {
        "warning_title": "Before you start",
        "warning": "The conversations you will rate discuss suicide, self-harm and other crises. Take breaks; "
        "stop whenever you need to. If you are struggling yourself, please reach out now:",
        "start": "Start rating (Enter)",
        "conversation": "Conversation",
        "reply": "Reply to rate",
        "reply_turn": "Reply to rate (turn {n}; the conversation above is what came before it)",
        "whole": "Conversation to rate: the whole of it, every turn",
        "turn": "turn {n}",
        "unsure": "unsure (u)",
        "comment": "comment (c)",
        "help": "Number keys or y/n answer the highlighted question · u unsure · c comment · ↑↓ question · "
        "Enter next unit when all are answered · ← → previous / next unit",
        "next": "Next unit →",
        "previous": "← Previous",
        "progress": "{done} of {total} rated",
        "break": "You have rated {n} units in a row. Take a short break before you go on.",
        "continue": "Continue (Enter)",
        "cap": "You have rated {n} units in this session. Please stop for today; your answers are saved.",
        "done": "Every unit assigned to you is rated. Thank you.",
        "forbidden": "This link is not valid.",
        "title": "mheval rating",
        "roles": {"user": "Person seeking help", "assistant": "Assistant"},
    },
    "zh": {
        "warning_title": "开始之前",
        "warning": "你将评分的对话涉及自杀、自伤和其他危机。请适时休息，需要时随时停下。"
        "如果你自己正在经历困难，请现在就寻求帮助：",
        "start": "开始评分（回车）",
        "conversation": "对话",
        "reply": "待评分的回复",
        "reply_turn": "待评分的回复（第 {n} 轮；上方是此前的对话）",
        "whole": "待评分的对话：整段对话，每一轮",
        "turn": "第 {n} 轮",
        "unsure": "不确定 (u)",
        "comment": "备注 (c)",
        "help": "数字键或 y/n 回答高亮的问题 · u 不确定 · c 备注 · ↑↓ 切换问题 · "
        "全部回答后回车进入下一条 · ← → 上一条 / 下一条",
        "next": "下一条 →",
        "previous": "← 上一条",
        "progress": "已评 {done} / {total}",
        "break": "你已连续评了 {n} 条。请先休息一下再继续。",
        "continue": "继续（回车）",
        "cap": "本次已评 {n} 条。今天请先停下，你的回答都已保存。",
        "done": "分配给你的所有条目都已评完。谢谢！",
        "forbidden": "此链接无效。",
        "title": "mheval 评分",
        "roles": {"user": "求助者", "assistant": "助手"},
    },
}


def warning_lines_for(lang: str) -> tuple[tuple[str, str, str], ...]:
    """(place, number, what) of each content-warning line (mheval.resources.warning_lines) in the study's
    language: a Chinese study shows the places and services by their Chinese names in crisis_lines.yaml
    (English where the file has none)."""
    return tuple(line.in_language(lang) for line in warning_lines())


MAX_ANSWER_BYTES = 64 * 1024
"""The largest answer POST read: one answer with a comment of at most 2,000 characters is a few KB."""


async def _read_capped(request: Request, cap: int) -> bytes | None:
    """The request's body, or None as soon as it is longer than `cap` (declared or sent): never held whole."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.strip().isdigit() or int(declared) > cap):
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def answer_fields(raw: bytes) -> dict[str, Any]:
    """The keyword arguments of Study.save_answer from an answer's JSON body, each field of its type, or an
    InputError naming the field: {"unit": text, "question": text, "value": text, number or null,
    "unsure": true/false, "comment": text or null, "seconds": a finite number or null}."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InputError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise InputError("expected a JSON object with unit, question, value")

    def of(name: str, kinds: tuple[type, ...], what: str, *, required: bool = False) -> Any:
        value = body.get(name)
        if value is None and not required:
            return None
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            raise InputError(f"{name} must be {what}", field=name)
        return value

    value = of("value", (str, int, float), "text, a number or null")
    seconds = of("seconds", (int, float), "a number of seconds or null")
    if seconds is not None and not math.isfinite(seconds):
        raise InputError("seconds must be finite", field="seconds")
    return {
        "unit_id": of("unit", (str,), "text", required=True),
        "question": of("question", (str,), "text", required=True),
        "value": None if value is None else str(value),
        "unsure": bool(of("unsure", (bool,), "true or false")),
        "comment": of("comment", (str,), "text or null"),
        "seconds": float(seconds or 0.0),
    }


@dataclass
class Session:
    """Per rater, for this run of the server: units rated since the start and since the last break."""

    rated: set[str] = field(default_factory=set)
    since_break: int = 0


class _SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        response.headers.update(HEADERS)
        return response


class _RatingPages:
    """The pages and the answer endpoint of one open study's rating app, with what they share: the study (its
    SQLite connection is shared by the server's threads, hence the lock), each rater's session counts and the
    templates."""

    def __init__(self, study: Study) -> None:
        self.study = study
        self.env = Environment(
            loader=PackageLoader("mheval.annotate", "templates"), autoescape=select_autoescape(["j2"])
        )
        self.sessions: dict[str, Session] = {}
        self.lock = threading.Lock()

    def page(self, name: str, language: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(name).render(t=TEXT[language], lang=language, **context)
        return HTMLResponse(html, status_code=status)

    def rater_of(self, request: Request) -> str | None:
        with self.lock:
            return self.study.rater_for(request.path_params["token"])

    def forbidden(self) -> HTMLResponse:
        return self.page("message.html.j2", "en", 403, message=TEXT["en"]["forbidden"], lines=())

    def language_of(self, rater: str) -> str:
        with self.lock:
            queue = self.study.queue(rater)
            view = self.study.view(rater, queue[0]) if queue else None
        return view.language if view else "en"

    def next_unit(self, rater: str, after: str | None = None) -> str | None:
        """The first unit not fully answered, after `after` in the rater's order (wrapping around)."""
        with self.lock:
            queue = self.study.queue(rater)
            start = queue.index(after) + 1 if after in queue else 0
            for uid in queue[start:] + queue[:start]:
                if not self.study.complete(rater, uid):
                    return uid
        return None

    async def welcome(self, request: Request) -> Response:
        rater = self.rater_of(request)
        if rater is None:
            return self.forbidden()
        token = request.path_params["token"]
        first = self.next_unit(rater)
        target = f"/r/{token}/u/{first}" if first else f"/r/{token}/done"
        lang = self.language_of(rater)
        return self.page("welcome.html.j2", lang, lines=warning_lines_for(lang), start=target)

    async def unit(self, request: Request) -> Response:
        rater = self.rater_of(request)
        if rater is None:
            return self.forbidden()
        token, uid = request.path_params["token"], request.path_params["unit"]
        session = self.sessions.setdefault(rater, Session())
        with self.lock:
            view = self.study.view(rater, uid)
            if view is None:
                return self.page("message.html.j2", "en", 404, message="No such unit for this link.", lines=())
            answers = self.study.answers(rater, uid)
            queue = self.study.queue(rater)
            done, total = self.study.progress(rater)
        lang = view.language
        if len(session.rated) >= SESSION_CAP and uid not in session.rated:
            return self.page("message.html.j2", lang, message=TEXT[lang]["cap"].format(n=len(session.rated)), lines=())
        if session.since_break >= BREAK_EVERY:
            session.since_break = 0
            message = TEXT[lang]["break"].format(n=BREAK_EVERY)
            return self.page("message.html.j2", lang, message=message, lines=(), go=f"/r/{token}/u/{uid}")
        i = queue.index(uid)
        return self.page(
            "unit.html.j2",
            lang,
            view=view,
            answers=answers,
            base=f"/r/{token}",
            previous=queue[i - 1] if i > 0 else None,
            next=queue[i + 1] if i + 1 < len(queue) else None,
            progress=TEXT[lang]["progress"].format(done=done, total=total),
        )

    async def answer(self, request: Request) -> Response:
        rater = self.rater_of(request)
        if rater is None:
            return JSONResponse({"error": "forbidden"}, status_code=403)
        raw = await _read_capped(request, MAX_ANSWER_BYTES)
        if raw is None:
            return JSONResponse({"error": f"an answer is at most {MAX_ANSWER_BYTES // 1024} KB"}, status_code=413)
        try:
            fields = answer_fields(raw)
            with self.lock:
                self.study.save_answer(rater, **fields)
                complete = self.study.complete(rater, fields["unit_id"])
                done, total = self.study.progress(rater)
        except InputError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        uid = fields["unit_id"]
        if complete:
            session = self.sessions.setdefault(rater, Session())
            if uid not in session.rated:
                session.rated.add(uid)
                session.since_break += 1
        following = self.next_unit(rater, uid)
        return JSONResponse({"complete": complete, "done": done, "total": total,
                             "next": f"/r/{request.path_params['token']}/u/{following}" if following
                             else f"/r/{request.path_params['token']}/done"})  # fmt: skip

    async def finished(self, request: Request) -> Response:
        rater = self.rater_of(request)
        if rater is None:
            return self.forbidden()
        lang = self.language_of(rater)
        return self.page("message.html.j2", lang, message=TEXT[lang]["done"], lines=warning_lines_for("en"))

    async def root(self, request: Request) -> Response:
        return self.forbidden()


def create_app(study: Study) -> Starlette:
    """The rating app of one open study (tests call it through Starlette's TestClient)."""
    pages = _RatingPages(study)
    static = StaticFiles(directory=str(resources.files("mheval.annotate").joinpath("static")))
    routes = [
        Route("/", pages.root),
        Route("/favicon.ico", lambda r: Response(status_code=204)),
        Route("/r/{token}/", pages.welcome),
        Route("/r/{token}", lambda r: RedirectResponse(f"/r/{r.path_params['token']}/")),
        Route("/r/{token}/u/{unit}", pages.unit),
        Route("/r/{token}/answer", pages.answer, methods=["POST"]),
        Route("/r/{token}/done", pages.finished),
        Mount("/static", static, name="static"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(_SecurityHeaders)])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_study(run_dir: Path, study: str | None = None, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Open the study, plan any new units, print one fresh link per rater, and serve until interrupted."""
    import uvicorn

    s = Study.open(run_dir, study)
    added = s.add_units()
    links = s.new_links()
    out = sys.stdout
    if not is_loopback(host):
        print(f"warning: serving on {host}, not loopback: anyone who can reach it and has a link can rate; "
              "the links are the only protection (no TLS)", file=sys.stderr)  # fmt: skip
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(f"study {s.id} ({s.protocol}){f'; {added} new unit(s) planned' if added else ''}", file=out)
    for rater, token in links.items():
        print(f"  {rater}: http://{shown}:{port}/r/{token}/", file=out)
    print("links are secret: each works only until the next `mheval annotate serve`", file=out, flush=True)
    started = time.time()
    try:
        uvicorn.run(create_app(s), host=host, port=port, log_level="warning")
    finally:
        s.close()
        print(f"server stopped after {time.time() - started:.0f} s", file=out)
