"""The report in a real headless Chromium, driven over the Chrome DevTools Protocol (aiohttp websocket).

Checks what a reader gets: the key sections are visible, the page makes no network request and logs
no error, Chinese text is drawn with a CJK font, and a full-page screenshot is kept in
test-artifacts/ for a person to look at. Without Chromium the test is skipped, except in CI (the
CI variable set), where it fails: scripts/install-browser.sh installs what it needs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from mheval.reporting.html import write_report
from test_report import build_run

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]
SECTIONS = (
    "content-warning",
    "glance",
    "run",
    "appropriateness",
    "psycrisis",
    "triage",
    "reliability",
    "worst-cases",
    "method",
)
TIMEOUT_S = 45


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    reason = "chromium is not installed (run scripts/install-browser.sh)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must run the browser test")
    pytest.skip(reason)


def _cjk_families() -> set[str]:
    """Every family name fontconfig knows for fonts that cover Chinese."""
    try:
        out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {name.strip() for line in out.splitlines() for name in line.split(",") if name.strip()}


class DevTools:
    """A minimal CDP client: one websocket to one page, commands by id, events collected."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.events: list[dict[str, Any]] = []
        self.waiters: dict[str, list[asyncio.Future]] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)
                for fut in self.waiters.pop(data["method"], []):
                    if not fut.done():
                        fut.set_result(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = await fut
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def expect(self, method: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(method, []).append(fut)
        return fut

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")


async def _devtools_port(profile: Path, proc: subprocess.Popen) -> int:
    """Chromium writes its chosen port to DevToolsActivePort in the profile once it listens."""
    marker = profile / "DevToolsActivePort"
    for _ in range(TIMEOUT_S * 10):
        if marker.is_file() and marker.read_text().strip():
            return int(marker.read_text().splitlines()[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        await asyncio.sleep(0.1)
    raise TimeoutError("chromium did not open its DevTools port")


async def _inspect(page_url: str, profile: Path, screenshot: Path, extra: str | None = None) -> dict[str, Any]:
    proc = subprocess.Popen(
        [_chromium(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port = await _devtools_port(profile, proc)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = await resp.json()
            page = next(t for t in targets if t.get("type") == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                cdp = DevTools(ws)
                for domain in ("Page", "Network", "Runtime", "Log", "DOM", "CSS"):
                    await cdp.send(f"{domain}.enable")
                await cdp.send(
                    "Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False
                )
                loaded = cdp.expect("Page.loadEventFired")
                await cdp.send("Page.navigate", url=page_url)
                await asyncio.wait_for(loaded, TIMEOUT_S)
                await asyncio.sleep(0.3)  # let late console messages arrive
                visible = await cdp.evaluate(
                    "Object.fromEntries(" + json.dumps(list(SECTIONS)) + ".map(id => {"
                    " const el = document.getElementById(id); if (!el) return [id, false];"
                    " const r = el.getBoundingClientRect(), s = getComputedStyle(el);"
                    " return [id, r.width > 200 && r.height > 20 && s.visibility !== 'hidden' && s.display !== 'none'];"
                    "}))"
                )
                layout = await cdp.evaluate(
                    "({warningTop: document.getElementById('content-warning').getBoundingClientRect().top,"
                    " images: [...document.images].map(i => i.complete && i.naturalWidth > 100),"
                    " overflowX: document.documentElement.scrollWidth > window.innerWidth,"
                    " title: document.title})"
                )
                more = await cdp.evaluate(extra) if extra else None
                doc = await cdp.send("DOM.getDocument", depth=-1)
                fonts = {}
                for selector in ('.turn[lang="zh"]', "#table-appropriateness tbody tr:first-child td:nth-child(3)"):
                    node = await cdp.send("DOM.querySelector", nodeId=doc["root"]["nodeId"], selector=selector)
                    if node.get("nodeId"):
                        fonts[selector] = (await cdp.send("CSS.getPlatformFontsForNode", nodeId=node["nodeId"]))[
                            "fonts"
                        ]
                metrics = await cdp.send("Page.getLayoutMetrics")
                size = metrics.get("cssContentSize") or metrics["contentSize"]
                shot = await cdp.send(
                    "Page.captureScreenshot",
                    format="png",
                    captureBeyondViewport=True,
                    clip={"x": 0, "y": 0, "width": 1280, "height": min(size["height"], 16000), "scale": 1},
                )
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                cdp.reader.cancel()
                return {"events": cdp.events, "visible": visible, "layout": layout, "fonts": fonts, "extra": more}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_report_in_headless_chromium(tmp_path):
    _chromium()
    run_dir = build_run(tmp_path / "run")
    report = write_report(run_dir)
    result = asyncio.run(
        asyncio.wait_for(
            _inspect(report.resolve().as_uri(), tmp_path / "profile", ARTIFACTS / "report.png"), TIMEOUT_S * 2
        )
    )

    # Key sections are there and laid out; the content warning is the first thing on screen.
    assert result["visible"] == dict.fromkeys(SECTIONS, True)
    assert result["layout"]["warningTop"] < 300
    assert result["layout"]["images"] and all(result["layout"]["images"])
    assert not result["layout"]["overflowX"], "the page should not scroll sideways at 1280 px"

    # No network: the only request is the file itself (and inline data: images).
    requests = [e["params"]["request"]["url"] for e in result["events"] if e["method"] == "Network.requestWillBeSent"]
    assert requests, "the navigation itself should be seen"
    assert all(u.startswith(("file:", "data:")) for u in requests), [u[:80] for u in requests]

    # No console errors, exceptions or failed loads (a CSP violation would show here too).
    errors = [
        e
        for e in result["events"]
        if (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
        or e["method"] == "Runtime.exceptionThrown"
        or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
        or e["method"] == "Network.loadingFailed"
    ]
    assert not errors, errors

    # Chinese text is drawn with a font that covers Chinese, not boxes from a Latin font.
    cjk = _cjk_families()
    if not cjk:
        if os.environ.get("CI"):
            pytest.fail("no CJK font installed: run scripts/install-browser.sh")
        pytest.skip("no CJK font installed (fonts-wqy-microhei)")
    for selector, fonts in result["fonts"].items():
        used = {f["familyName"] for f in fonts if f["glyphCount"] > 0}
        assert used & cjk, f"{selector}: rendered with {used}, none of which covers Chinese"
    assert set(result["fonts"]) == {'.turn[lang="zh"]', "#table-appropriateness tbody tr:first-child td:nth-child(3)"}
    assert (ARTIFACTS / "report.png").stat().st_size > 50_000


# Opens the first clipped text (a click on its summary) and measures the page before and after.
OPEN_CLIPPED = """(() => {
  const d = document.querySelector('details.more');
  if (!d) return null;
  const wide = () => document.documentElement.scrollWidth > window.innerWidth;
  const before = {open: d.open, overflowX: wide()};
  d.querySelector('summary').click();
  return {count: document.querySelectorAll('details.more').length, before, open: d.open, overflowX: wide(),
          shown: d.textContent.length, nul: document.body.innerText.includes('\\u0000')};
})()"""


def test_edge_case_report_in_headless_chromium(tmp_path):
    """200 KB replies clipped behind a click, formula-like ids, NUL bytes, Chinese: laid out, no errors."""
    _chromium()
    from test_report_edge_cases import PROTOCOLS, Unit, _all, _case, write_run

    cases = [
        _case('=HYPERLINK("http://x","y")'),
        _case("nul\x00id", "a NUL\x00 here"),
        _case("例1", "我觉得活着没有意义。", "zh", "suicidal_ideation"),
    ]
    units = [
        Unit(
            c,
            m,
            ("long reply " * 20_000) if i == 0 else "reply\x00 with NUL",
            scores=_all(1 + i, 3),
            rationale="why " * 30_000,
        )
        for i, c in enumerate(cases)
        for m in ("=cmd", "模型")
    ]
    run_dir = write_run(
        tmp_path / "edge", cases, units, protocols=PROTOCOLS, triage={c.id: "suicidal_ideation" for c in cases}
    )
    report = write_report(run_dir)
    result = asyncio.run(
        asyncio.wait_for(
            _inspect(
                report.resolve().as_uri(), tmp_path / "profile", ARTIFACTS / "report-edge-cases.png", OPEN_CLIPPED
            ),
            TIMEOUT_S * 2,
        )
    )
    assert result["visible"] == dict.fromkeys(SECTIONS, True)
    extra = result["extra"]
    assert extra and extra["count"] >= 2 and extra["before"] == {"open": False, "overflowX": False}
    assert extra["open"] and extra["shown"] > 60_000 and not extra["overflowX"] and not extra["nul"]
    errors = [
        e
        for e in result["events"]
        if e["method"] == "Runtime.exceptionThrown"
        or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
        or e["method"] == "Network.loadingFailed"
    ]
    assert not errors, errors
