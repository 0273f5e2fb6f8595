"""Two raters rate 10 units in headless Chromium with the keyboard only, through the real server.

Playwright for Python drives Debian's /usr/bin/chromium (never `playwright install`). Checked: the answers in
SQLite are what was typed, `mheval annotate status` shows the kappa those answers imply, no request leaves the
server and the console logs no error. A screenshot of a Chinese unit is kept in test-artifacts/
(docs/annotate-rating-page.png is a copy of one), and the seconds per unit of a keyboard-only rater are
printed as JSON. Without Chromium or Playwright the test is skipped, except in CI, where it fails.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from annotate_helpers import build_run, free_port, wait_until_serving
from cli_inprocess import mheval
from mheval.annotate import init_study, study_status

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ("empathy_collaboration", "emotion_regulation", "explore_concerns", "risk_assessment", "external_support")


def _needs_browser() -> None:
    missing = not Path(CHROMIUM).is_file()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = True
    if missing:
        if os.environ.get("CI"):
            pytest.fail("CI must have /usr/bin/chromium and playwright (scripts/install-browser.sh, the test extra)")
        pytest.skip("needs /usr/bin/chromium and playwright")


def _answer(rater: str, unit: str, question: str) -> str:
    """What each rater types: the same pattern, except that bob disagrees on one question of every third unit."""
    n = int(unit[1:])
    value = "y" if (n + QUESTIONS.index(question)) % 2 == 0 else "n"
    if rater == "bob" and question == "risk_assessment" and n % 3 == 0:
        value = "n" if value == "y" else "y"
    return value


def test_two_raters_rate_ten_units_with_the_keyboard_only(tmp_path: Path) -> None:
    _needs_browser()
    from playwright.sync_api import sync_playwright

    run_dir = build_run(tmp_path / "run")
    study = init_study(run_dir, "psycrisis", ["alice", "bob"], overlap=2, sample=10, seed=7)
    queues = {r: study.queue(r) for r in study.raters()}
    study.close()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mheval", "annotate", "serve", str(run_dir), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    links: dict[str, str] = {}
    while len(links) < 2:
        line = proc.stdout.readline()
        if "http://" in line:
            name, url = line.strip().split(": ", 1)
            links[name] = url
    wait_until_serving(proc, links["alice"])
    base = f"http://127.0.0.1:{port}/"
    problems: list[str] = []
    per_unit: list[float] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            for rater, url in links.items():
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
                page.on("request", lambda r: None if r.url.startswith(base) else problems.append(r.url))
                page.goto(url)
                assert "988" in page.content()  # the content warning comes first
                page.keyboard.press("Enter")
                for _ in queues[rater]:
                    page.wait_for_selector("body[data-ready='yes'] #unit")  # rate.js has run: keys are seen
                    uid = page.get_attribute("#unit", "data-unit")
                    assert uid is not None
                    started = time.perf_counter()
                    for i, q in enumerate(QUESTIONS, start=1):
                        page.keyboard.press(_answer(rater, uid, q))
                        page.wait_for_selector(f"body[data-saved='{i}']", state="attached")
                    page.keyboard.press("Enter")
                    page.wait_for_url(lambda u, uid=uid: f"/u/{uid}" not in u)
                    per_unit.append(time.perf_counter() - started)
                assert "/done" in page.url
                page.close()
            zh = _chinese_unit(run_dir, queues["alice"])
            page = browser.new_page(viewport={"width": 1000, "height": 1100})
            page.goto(f"{links['alice']}u/{zh}")
            page.keyboard.press("ArrowDown")
            artifacts = ROOT / "test-artifacts"
            artifacts.mkdir(exist_ok=True)
            page.screenshot(path=str(artifacts / "annotate-zh.png"), full_page=True)
            browser.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert problems == []
    with sqlite3.connect(run_dir / "studies.db") as db:
        rows = db.execute("SELECT rater, unit_id, question, value FROM answers").fetchall()
    assert len(rows) == 2 * 10 * len(QUESTIONS)
    for rater, uid, q, value in rows:
        assert value == ("1" if _answer(rater, uid, q) == "y" else "0")
    units = sorted(queues["alice"])
    expected = cohen_kappa_score([_answer("alice", u, "risk_assessment") for u in units],
                                 [_answer("bob", u, "risk_assessment") for u in units])  # fmt: skip
    status = study_status(run_dir)
    (risk,) = [a for a in status.agreement if a.question == "risk_assessment"]
    assert risk.units == 10 and risk.pairs[0][2].value == pytest.approx(expected)
    assert all(r.done == 10 for r in status.raters)
    cli = mheval("annotate", "status", str(run_dir))  # in-process (tests/cli_inprocess.py): the output is tested
    assert cli.returncode == 0 and f"{expected:.3f}" in cli.stdout
    print(json.dumps({"keyboard_seconds_per_unit": round(sum(per_unit) / len(per_unit), 3), "units": len(per_unit)}))


def _chinese_unit(run_dir: Path, queue: list[str]) -> str:
    with sqlite3.connect(run_dir / "studies.db") as db:
        languages = {u: json.loads(d)["language"] for u, d in db.execute("SELECT unit_id, data FROM units")}
    return next(u for u in queue if languages[u] == "zh")


# The burst: 20 keys typed while every save is still in flight. The page's POSTs wait behind a gate the test
# opens only after the last key (so no save can come back during the burst, however slow the machine types),
# then each goes after its own random 0-300 ms, so they come back out of order.
BURST = ["y", "n", "y", "n", "y", "ArrowUp", "ArrowUp", "ArrowUp", "ArrowUp", "n", "y", "n", "ArrowUp", "u", "n", "y",
         "ArrowUp", "ArrowUp", "ArrowUp", "n"]  # fmt: skip
HELD_SAVES = """
(() => {
  const send = window.fetch.bind(window);
  let open;
  const gate = new Promise((ok) => { open = ok; });
  window.openSaves = () => open();
  window.fetch = (...args) => gate
    .then(() => new Promise((ok) => setTimeout(ok, Math.random() * 300)))
    .then(() => send(...args));
})();
"""


def _expected_after(keys: list[str]) -> dict[str, tuple[str | None, int]]:
    """What the page promises: a key acts on the question highlighted when it is pressed; an answer moves on."""
    current, answers = 0, {}
    for key in keys:
        if key in ("y", "n", "u"):
            answers[QUESTIONS[current]] = (None, 1) if key == "u" else ("1" if key == "y" else "0", 0)
            current = min(current + 1, len(QUESTIONS) - 1)
        elif key == "ArrowUp":
            current = max(current - 1, 0)
    return answers


def test_a_burst_of_keys_lands_on_the_questions_that_had_focus_and_the_page_speaks_the_units_language(
    tmp_path: Path,
) -> None:
    _needs_browser()
    from playwright.sync_api import sync_playwright

    run_dir = build_run(tmp_path / "run")
    study = init_study(run_dir, "psycrisis", ["eve"], overlap=1, seed=2)
    queue = study.queue("eve")
    study.close()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mheval", "annotate", "serve", str(run_dir), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    link = ""
    while "http://" not in link:
        link = proc.stdout.readline()
    link = link.strip().split(": ", 1)[1]
    wait_until_serving(proc, link)
    first = queue[0]
    zh = _chinese_unit(run_dir, queue)
    en = next(u for u in queue if u != zh and u not in (first,) and _language(run_dir, u) == "en")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page()
            page.add_init_script(HELD_SAVES)
            page.goto(f"{link}u/{first}")
            page.wait_for_selector("body[data-ready='yes'] #unit")  # rate.js has run: keys are seen
            for key in BURST:
                page.keyboard.press(key)
            # Every key was handled with all its saves still held: none had come back.
            saved_during_burst = page.evaluate("document.body.getAttribute('data-saved')")
            page.evaluate("window.openSaves()")
            saves = sum(k in ("y", "n", "u") for k in BURST)
            page.wait_for_selector(f"body[data-saved='{saves}']", state="attached", timeout=20000)
            page.goto(f"{link}u/{zh}")
            zh_html = page.content()
            zh_title = page.title()
            page.goto(f"{link}u/{en}")
            en_html = page.content()
            browser.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert saved_during_burst is None  # the keys went in before any save came back
    with sqlite3.connect(run_dir / "studies.db") as db:
        rows = db.execute("SELECT question, value, unsure FROM answers WHERE rater='eve' AND unit_id=?", (first,))
        stored = {q: (v, u) for q, v, u in rows}
    assert stored == _expected_after(BURST)
    assert zh_title == "mheval 评分" and "求助者" in zh_html and "助手" in zh_html and "危机干预维度" in zh_html
    assert "Person seeking help" in en_html and "Crisis intervention dimensions" in en_html


def _language(run_dir: Path, unit: str) -> str:
    with sqlite3.connect(run_dir / "studies.db") as db:
        (data,) = db.execute("SELECT data FROM units WHERE unit_id=?", (unit,)).fetchone()
    return str(json.loads(data)["language"])
