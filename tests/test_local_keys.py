"""A model spec whose base URL is this machine or a private network runs without an API key."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import mheval
from fake_openai import FakeOpenAI, reply
from mheval.cli import app
from mheval.errors import InputError
from mheval.models import parse_model_spec
from mheval.models.spec import is_private_url
from mheval.runfolder.store import Store


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/v1", "http://127.9.9.9/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1",
     "http://10.0.0.5:8000/v1", "http://172.16.0.1/v1", "http://172.31.255.255/v1", "https://192.168.1.20/v1"],
)  # fmt: skip
def test_loopback_and_private_hosts_need_no_key(url, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert is_private_url(url)
    spec = parse_model_spec(f"openai/NAME@{url}")
    assert not spec.key_required and spec.missing_key() is None


@pytest.mark.parametrize(
    "url",
    ["https://api.example.com/v1", "http://172.32.0.1/v1", "http://11.0.0.1/v1", "http://192.169.0.1/v1",
     "http://8.8.8.8/v1", "http://127.0.0.1.example.com/v1"],
)  # fmt: skip
def test_public_hosts_still_need_the_key(url, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert not is_private_url(url)
    assert parse_model_spec(f"openai/NAME@{url}").missing_key() == "OPENAI_API_KEY"
    assert parse_model_spec("openai/gpt-4o-mini").missing_key() == "OPENAI_API_KEY"  # the hosted default
    with pytest.raises(InputError, match="OPENAI_API_KEY"):
        mheval.evaluate(cases=[{"id": "a", "text": "hello"}], models=[f"openai/NAME@{url}"], judges=["offline"],
                        protocols=["psycrisis"], out="unused-never-written")  # fmt: skip


def test_run_against_a_loopback_server_without_a_key(tmp_path, fake_openai: FakeOpenAI, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_openai.default = reply("I'm here with you. Are you safe right now? You can call or text 988.")
    result = mheval.evaluate(
        cases=[{"id": "a", "text": "I can't see a way forward anymore."}],
        models=[f"openai/target@{fake_openai.base_url}"],
        judges=["offline"],
        protocols=["psycrisis"],
        out=tmp_path / "run",
    )
    assert result.provider_errors == 0
    with Store.open_existing(result.run_dir) as store:
        (response,) = store.responses()
    assert response.text and "988" in response.text
    assert fake_openai.requests and all("authorization" not in r.headers for r in fake_openai.requests)


def test_help_of_run_says_local_endpoints_need_no_key():
    shown = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert shown.exit_code == 0
    text = " ".join(shown.output.split())
    assert "loopback or a private network" in text and "needs no API key" in text
