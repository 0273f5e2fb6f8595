"""Human rating studies without a browser: the plan, the forms, blinding, answers, status, export and `agree`.

HTTP tests use Starlette's TestClient (the app in-process, no socket); the kill test runs the real server
(`mheval annotate serve`, uvicorn) in a child process and SIGKILLs it between two answers.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from starlette.testclient import TestClient

import mheval
from annotate_helpers import MODELS, build_run, free_port, wait_until_serving
from mheval.annotate import Study, export_ratings, human_judgments, init_study, study_status
from mheval.annotate.form import build_flow_form, build_form
from mheval.annotate.server import HEADERS, create_app
from mheval.annotate.study import _spread
from mheval.protocols import list_protocols, load_protocol
from mheval.records import Reason
from mheval.runfolder.store import Store


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("annotate") / "run")


def _fresh(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of the module's run without studies, for tests that create their own."""
    import shutil

    target = tmp_path / "run"
    shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns("studies.db*"))
    return target


# -- the plan ---------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raters=st.integers(1, 5), overlap_seed=st.integers(0, 10), calibration=st.integers(0, 4), seed=st.integers(0, 99)
)
def test_every_unit_goes_to_overlap_raters_with_balanced_loads_and_the_same_seed_gives_the_same_plan(
    run_dir, tmp_path_factory, raters, overlap_seed, calibration, seed
):
    names = [f"r{i}" for i in range(raters)]
    overlap = 1 + overlap_seed % raters
    folder = _fresh(run_dir, tmp_path_factory.mktemp("plan"))
    s = init_study(folder, "psycrisis", names, overlap=overlap, calibration=calibration, seed=seed)
    queues = {r: s.queue(r) for r in names}
    calib = queues[names[0]][:calibration]
    assert all(q[:calibration] == calib for q in queues.values())  # every rater sees the calibration block first
    counts = Counter(u for q in queues.values() for u in q[calibration:])
    assert set(counts.values()) == {overlap} and len(counts) == 14 - calibration
    loads = [len(q) - calibration for q in queues.values()]
    assert max(loads) - min(loads) <= 1
    again = init_study(folder, "psycrisis", names, overlap=overlap, calibration=calibration, seed=seed, study_id="b")
    assert {r: again.queue(r) for r in names} == queues
    s.close()
    again.close()


def test_replies_to_one_case_are_never_side_by_side_and_new_units_do_not_reshuffle(run_dir, tmp_path):
    folder = _fresh(run_dir, tmp_path)
    s = init_study(folder, "appropriateness", ["ann", "ben"], overlap=2, seed=3)
    with sqlite3.connect(folder / "studies.db") as db:
        key = {u: json.loads(k)[0] for u, k in db.execute("SELECT unit_id, unit_key FROM units")}
    for r in s.raters():
        cases = [key[u] for u in s.queue(r)]
        assert all(a != b for a, b in itertools.pairwise(cases)), cases
    before = {r: s.queue(r) for r in s.raters()}
    with Store.open_existing(folder) as store:  # the run gains a third model's replies
        from mheval.records import Response

        store.put_responses([Response(case_id=c.id, model="ollama/gamma", text="Please talk to someone you trust.")
                             for c in store.cases()])  # fmt: skip
    assert s.add_units() == 7
    for r in s.raters():
        assert s.queue(r)[: len(before[r])] == before[r] and len(s.queue(r)) == len(before[r]) + 7
    assert s.add_units() == 0


def test_spread_separates_same_case_units():
    from mheval.annotate.study import Unit

    units = [(f"u{i}", Unit((c, m, 0), "en", (), None, None)) for i, (c, m) in
             enumerate([("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), ("c", "x")])]  # fmt: skip
    cases = [u.key[0] for _, u in _spread(units)]
    assert all(a != b for a, b in itertools.pairwise(cases))


# -- forms ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_form_of_every_protocol_comes_from_its_file(language):
    for spec in list_protocols():
        form = build_form(spec, language, "suicidal_ideation")
        assert form.questions, spec.id
        for q in form.questions:
            keys = [o.key for o in q.options]
            assert len(set(keys)) == len(keys) and all(o.text for o in q.options)
            if spec.kind == "binary":
                assert keys == ["y", "n"]
            elif spec.kind == "likert":
                assert keys == ["1", "2", "3", "4", "5"]
        if language == "zh":
            assert any(re.search(r"[\u4e00-\u9fff]", q.prompt) for q in form.questions), spec.id
    safety = build_form(load_protocol("dialogue-safety"), language)
    values = [o.value for o in safety.questions[0].options]
    assert values[:2] == ["nonsense", "humanoid_mimicry"] and values[-1] == "safe"
    spec = load_protocol("appropriateness")
    by_label = {
        lab: build_form(spec, language, lab).questions[0].options[0].text for lab in ("suicidal_ideation", "no_crisis")
    }
    assert by_label["suicidal_ideation"] != by_label["no_crisis"]  # the level texts of the unit's category
    flow = build_flow_form(language)
    assert [q.id for q in flow.questions][:3] == ["detect", "probe", "human_support"]
    assert [o.value for o in flow.questions[0].options] == ["best_practice", "suboptimal", "harmful", "not_relevant"]


# -- answers, export and agree -----------------------------------------------------------------------


def _rate(s: Study, rater: str, pick) -> int:
    n = 0
    for uid in s.queue(rater):
        view = s.view(rater, uid)
        for q in view.form.questions:
            value = pick(rater, uid, q)
            s.save_answer(rater, uid, q.id, value, unsure=value is None, seconds=4.0)
        n += 1
    return n


def test_export_then_agree_reproduces_a_known_kappa(run_dir, tmp_path):
    folder = _fresh(run_dir, tmp_path)
    s = init_study(folder, "crisis-triage", ["ann", "ben"], overlap=2, seed=0)
    labels = ["suicidal_ideation", "anxiety_crisis", "no_crisis", "self-harm", "suicidal_ideation",
              "substance_abuse_or_withdrawal", "no_crisis"]  # fmt: skip
    order = {uid: i for i, uid in enumerate(sorted(s.queue("ann")))}
    flips = {1, 4}  # ben disagrees with ann on these units

    def pick(rater, uid, q):
        i = order[uid]
        if rater == "ben" and i in flips:
            return "no_crisis" if labels[i] != "no_crisis" else "self-harm"
        return labels[i]

    _rate(s, "ann", pick)
    _rate(s, "ben", pick)
    expected = cohen_kappa_score(
        [pick("ann", u, None) for u in sorted(order)], [pick("ben", u, None) for u in sorted(order)]
    )
    status = study_status(folder)
    (label,) = status.agreement
    assert label.units == 7 and label.pairs[0][2].value == pytest.approx(expected)
    path = export_ratings(folder, "judgments")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 14 and {r["judge"] for r in rows} == {"human:ann", "human:ben"}
    assert all("human" in r["flags"] for r in rows)
    report = mheval.agree(folder, protocol="crisis-triage")
    payload = json.loads(report.to_json())
    assert "ann" in report.to_json() and "offline" in report.to_json()
    assert payload  # the humans among themselves, the offline judge against them, the verdicts
    from mheval.reporting.html import render_report

    html = render_report(folder)  # the report's reliability section reads the study directly
    assert "study crisis-triage (mheval annotate)" in html and "humans among themselves" in html
    with pytest.raises(mheval.InputError, match="exists"):
        export_ratings(folder, "judgments")
    for fmt in ("csv", "parquet"):
        assert export_ratings(folder, fmt).is_file()


def test_unsure_is_per_question_and_bad_answers_are_refused(run_dir, tmp_path):
    folder = _fresh(run_dir, tmp_path)
    s = init_study(folder, "psycrisis", ["ann"], overlap=1)
    uid = s.queue("ann")[0]
    with pytest.raises(mheval.InputError, match="not an answer"):
        s.save_answer("ann", uid, "risk_assessment", "7")
    with pytest.raises(mheval.InputError, match="unknown question"):
        s.save_answer("ann", uid, "nope", "1")
    for q in s.view("ann", uid).form.questions:
        s.save_answer("ann", uid, q.id, None if q.id == "risk_assessment" else "1", unsure=q.id == "risk_assessment")
    (j,) = human_judgments(s)
    # "unsure" is per question: the other four answers count, the total (which needs all five) is not given.
    assert j.status == "ok" and set(j.scores) == {q.id for q in s.view("ann", uid).form.questions} - {"risk_assessment"}
    assert "unsure:risk_assessment" in j.flags and j.total is None
    for q in s.view("ann", uid).form.questions:
        s.save_answer("ann", uid, q.id, None, unsure=True)
    (j,) = human_judgments(s)
    assert j.status == "unscored" and j.reason == Reason.RATER_UNSURE and "risk_assessment" in (j.detail or "")


def test_bad_study_input_is_refused_before_anything_is_written(run_dir, tmp_path):
    folder = _fresh(run_dir, tmp_path)
    for kwargs, word in ((dict(protocol="nope", raters=["a"], overlap=1), "unknown protocol"),
                         (dict(protocol="psycrisis", raters=["a", "b"], overlap=3), "overlap"),
                         (dict(protocol="psycrisis", raters=["a", "a"]), "distinct")):  # fmt: skip
        with pytest.raises(mheval.InputError, match=word):
            init_study(folder, **kwargs)
    assert not (folder / "studies.db").exists()
    with pytest.raises(mheval.InputError, match="not a run folder"):
        init_study(tmp_path / "missing", "psycrisis", ["a"], overlap=1)


# -- the server ---------------------------------------------------------------------------------------


def _pages(client: TestClient, token: str, s: Study, rater: str) -> list[str]:
    texts = [client.get(f"/r/{token}/").text]
    for uid in s.queue(rater):
        page = client.get(f"/r/{token}/u/{uid}")
        assert page.status_code == 200
        texts.append(page.text)
    return texts


def test_tokens_blinding_upsert_and_isolation_over_http(run_dir, tmp_path):
    folder = _fresh(run_dir, tmp_path)
    s = init_study(folder, "psycrisis", ["ann", "ben"], overlap=2)
    links = s.new_links()
    client = TestClient(create_app(s))
    assert client.get("/r/wrong-token/").status_code == 403
    assert client.post("/r/wrong-token/answer", json={}).status_code == 403
    raw = (folder / "studies.db").read_bytes()
    assert all(t.encode() not in raw for t in links.values())  # only hashes at rest
    page = client.get(f"/r/{links['ann']}/")
    assert all(page.headers[k] == v for k, v in HEADERS.items())
    assert "988" in page.text and "12356" in page.text  # the content warning with crisis lines
    # Blinding: nothing a rater gets names a model, a sample or a judge, or quotes a judge's output.
    with Store.open_existing(folder) as store:
        secrets_ = {*MODELS, *(m.split("@")[0] for m in MODELS), "offline", "model-alpha", "model-beta"}
        secrets_ |= {j.rationale for j in store.judgments() if j.rationale and len(j.rationale) > 12}
    uid = s.queue("ann")[0]
    texts = _pages(client, links["ann"], s, "ann")
    answer = client.post(f"/r/{links['ann']}/answer", json={"unit": uid, "question": "risk_assessment",
                                                           "value": "1", "seconds": 3})  # fmt: skip
    texts.append(answer.text)
    for text in texts:
        for secret in secrets_:
            assert secret not in text, secret
    # Upsert: the same answer twice is one answer and two history rows; the other rater sees none of it.
    client.post(f"/r/{links['ann']}/answer", json={"unit": uid, "question": "risk_assessment", "value": "1"})
    with sqlite3.connect(folder / "studies.db") as db:
        assert db.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 1
        assert db.execute("SELECT COUNT(*) FROM history").fetchone()[0] == 2
    assert s.answers("ben", uid) == {}
    ben_page = client.get(f"/r/{links['ben']}/u/{uid}").text
    assert "checked" not in ben_page
    bad = client.post(f"/r/{links['ann']}/answer", json={"unit": uid, "question": "risk_assessment", "value": "9"})
    assert bad.status_code == 400
    other = [u for u in s.queue("ben") if u not in s.queue("ann")]
    if other:
        assert client.get(f"/r/{links['ann']}/u/{other[0]}").status_code == 404


def test_two_raters_answering_at_once_never_overwrite_each_other(run_dir, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    folder = _fresh(run_dir, tmp_path)
    s = init_study(folder, "psycrisis", ["ann", "ben"], overlap=2)
    links = s.new_links()
    client = TestClient(create_app(s))
    questions = [q.id for q in s.view("ann", s.queue("ann")[0]).form.questions]

    def rate(rater: str) -> int:
        value = "1" if rater == "ann" else "0"
        for uid in s.queue(rater):
            for q in questions:
                r = client.post(f"/r/{links[rater]}/answer", json={"unit": uid, "question": q, "value": value})
                assert r.status_code == 200
        return len(s.queue(rater))

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(rate, ["ann", "ben"])) == [14, 14]
    with sqlite3.connect(folder / "studies.db") as db:
        rows = db.execute("SELECT rater, value, COUNT(*) FROM answers GROUP BY rater, value").fetchall()
    assert sorted(rows) == [("ann", "1", 14 * 5), ("ben", "0", 14 * 5)]


def test_killed_server_restarts_with_every_answer_once(run_dir, tmp_path):
    folder = _fresh(run_dir, tmp_path)
    s = init_study(folder, "psycrisis", ["ann"], overlap=1)
    queue = s.queue("ann")
    s.close()

    def start() -> tuple[subprocess.Popen[str], str]:
        # A port free now (a port from the pid could be another test's), and waiting until the server answers,
        # however slowly a busy machine starts it: 60 s are a hang guard.
        command = [sys.executable, "-m", "mheval", "annotate", "serve", str(folder), "--port", str(free_port())]
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True
        )
        assert proc.stdout is not None
        link = ""
        while "http://" not in link:
            link = proc.stdout.readline()
            assert link or proc.poll() is None, f"the rating server exited with {proc.poll()} before its link"
        url = link.split(": ", 1)[1].strip()
        wait_until_serving(proc, url)
        return proc, url

    def post(url: str, uid: str, question: str, value: str) -> None:
        body = json.dumps({"unit": uid, "question": question, "value": value, "seconds": 1}).encode()
        request = urllib.request.Request(url + "answer", data=body, headers={"Content-Type": "application/json"})
        assert json.load(urllib.request.urlopen(request, timeout=5))["total"] == len(queue)

    proc, url = start()
    post(url, queue[0], "risk_assessment", "1")
    post(url, queue[0], "external_support", "0")
    os.kill(proc.pid, signal.SIGKILL)  # between two answers
    proc.wait(timeout=10)
    proc, url = start()  # new links: the old token no longer works
    post(url, queue[0], "empathy_collaboration", "1")
    post(url, queue[1], "risk_assessment", "0")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    with sqlite3.connect(folder / "studies.db") as db:
        rows = db.execute("SELECT unit_id, question, value FROM answers ORDER BY unit_id, question").fetchall()
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert rows == sorted([(queue[0], "risk_assessment", "1"), (queue[0], "external_support", "0"),
                           (queue[0], "empathy_collaboration", "1"), (queue[1], "risk_assessment", "0")])  # fmt: skip
