"""Cost accounting: the price table, its overrides, and cost landing in Responses and Judgments of a real
run against the loopback server (tests/fake_openai.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, reply, respond
from mheval.config import RunConfig
from mheval.engine.runner import run
from mheval.errors import InputError
from mheval.models.context import RunContext
from mheval.models.pricing import PriceTable, cost_of, default_prices, price_status
from mheval.records import Usage
from mheval.runfolder.store import Store

MILLION = Usage(prompt_tokens=1_000_000, completion_tokens=1_000_000)


@pytest.fixture(autouse=True)
def _no_price_file(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MHEVAL_PRICES", raising=False)
    yield


def test_known_models_and_their_snapshots() -> None:
    assert cost_of("openai/gpt-4o-mini", MILLION) == pytest.approx(0.15 + 0.60)
    assert cost_of("openai/gpt-4o-mini-2024-07-18", MILLION) == pytest.approx(0.75)
    # An exact snapshot entry wins over its family (the first gpt-4o snapshot was dearer).
    assert cost_of("openai/gpt-4o-2024-05-13", MILLION) == pytest.approx(20.0)
    assert cost_of("openai/gpt-4o-2024-08-06", MILLION) == pytest.approx(12.5)
    # Through a gateway: the last path segment, dots or dashes.
    assert cost_of("openrouter/anthropic/claude-3.5-sonnet", MILLION) == pytest.approx(18.0)
    assert cost_of("openrouter/anthropic/claude-3-5-sonnet-20241022", MILLION) == pytest.approx(18.0)
    assert price_status("openai/gpt-4o-mini") == "known"
    usage = Usage(prompt_tokens=1200, completion_tokens=300)
    assert cost_of("openai/gpt-4o-mini", usage) == pytest.approx((1200 * 0.15 + 300 * 0.60) / 1e6)


def test_self_hosted_costs_nothing_and_unknown_says_so(caplog: pytest.LogCaptureFixture) -> None:
    for name in ("local/smollm2", "vllm/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1", "ollama/llama3.1"):
        assert cost_of(name, MILLION) == 0.0
        assert price_status(name) == "self_hosted"
    with caplog.at_level(logging.WARNING, logger="mheval.models.pricing"):
        assert cost_of("openai/a-model-nobody-priced", MILLION) == 0.0
        assert cost_of("openai/a-model-nobody-priced", MILLION) == 0.0
    assert price_status("openai/a-model-nobody-priced") == "unknown"
    warnings = [r for r in caplog.records if "unknown price" in r.getMessage()]
    assert len(warnings) == 1, "warned once per model, not once per call"
    # A hosted provider's name on someone's own server is not the list price.
    assert price_status("openai/gpt-4o-mini@http://127.0.0.1:9/v1") == "unknown"


def test_overrides_from_yaml_json_env_and_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    yml = tmp_path / "prices.yaml"
    yml.write_text("gpt-4o-mini: {input: 1.0, output: 2.0}\nmy-model: [3, 4]\n", encoding="utf-8")
    run_prices = RunContext.of(prices=yml).prices
    assert run_prices.cost("openai/gpt-4o-mini", MILLION) == pytest.approx(3.0)
    assert run_prices.cost("together/my-model", MILLION) == pytest.approx(7.0)
    assert run_prices.lookup("openai/gpt-4o-mini").price.source == str(yml)  # type: ignore[union-attr]
    # One run's prices are its own: the defaults, and any other run, are untouched.
    assert cost_of("openai/gpt-4o-mini", MILLION) == pytest.approx(0.75)
    assert RunContext.of().prices.cost("together/my-model", MILLION) == 0.0

    js = tmp_path / "prices.json"
    js.write_text(json.dumps({"openai/gpt-4o-mini@http://127.0.0.1:9/v1": {"input": 5, "output": 5}}))
    monkeypatch.setenv("MHEVAL_PRICES", str(js))
    # A full spec string prices one server; the file named by MHEVAL_PRICES is read into each new table.
    table = default_prices()
    assert table.cost("openai/gpt-4o-mini@http://127.0.0.1:9/v1", MILLION) == pytest.approx(10.0)
    assert table.cost("openai/gpt-4o-mini", MILLION) == pytest.approx(0.75)  # the defaults are still there

    entries = RunContext.of(prices={"openai/gpt-4o-mini": {"input": 0.0, "output": 1.0}}).prices
    assert entries.cost("openai/gpt-4o-mini", MILLION) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("gpt-x: {input: 1}\n", "needs 'input' and 'output'"),
        ("- a\n- b\n", "maps model names"),
        ("gpt-x: {input: -1, output: 1}\n", "must not be negative"),
        ("gpt-x: 'cheap'\n", "USD per 1M"),
    ],
)
def test_bad_price_files_say_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        PriceTable().load(path)
    with pytest.raises(InputError, match="not found"):
        PriceTable().load(tmp_path / "missing.yaml")


def _judge_answer(body: dict) -> object:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
    if schema is None:
        return reply("Are you safe right now? You can call a crisis line.", usage=(100, 50))
    dims = schema["properties"]["dimensions"]["properties"]
    verdict = {"value": 1, "rationale": "present", "evidence": ["Are you safe right now?"]}
    return reply(json.dumps({"dimensions": {d: verdict for d in dims}}), usage=(1000, 250))


def test_cost_lands_in_responses_and_judgments(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.default = respond(_judge_answer)
    target = f"test/target@{fake_openai.base_url}"
    judge = f"test/judge@{fake_openai.base_url}"
    prices = {target: {"input": 1.0, "output": 4.0}, judge: {"input": 2.0, "output": 8.0}}
    suite = tmp_path / "cases.jsonl"
    suite.write_text(
        "".join(json.dumps({"id": f"k{i}", "text": f"A hard week, number {i}."}) + "\n" for i in range(3)),
        encoding="utf-8",
    )
    config = RunConfig(
        suite=f"jsonl:{suite}",
        models=[target],
        judges=[judge],
        protocols=["psycrisis"],
        out=str(tmp_path / "run"),
        concurrency=2,
        prices=prices,
    )
    run(config)
    with Store.open_existing(tmp_path / "run") as store:
        responses = store.responses()
        judgments = store.judgments()
    assert len(responses) == 3 and len(judgments) == 3
    for r in responses:
        assert r.usage.cost_usd == pytest.approx((100 * 1.0 + 50 * 4.0) / 1e6)
    for j in judgments:
        assert j.status == "ok"
        assert j.usage.cost_usd == pytest.approx((1000 * 2.0 + 250 * 8.0) / 1e6)
