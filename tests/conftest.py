"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fake_openai import FakeOpenAI


@pytest.fixture(scope="session")
def _fake_openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake_openai(_fake_openai_server: FakeOpenAI) -> FakeOpenAI:
    """A scriptable OpenAI-compatible server on 127.0.0.1 (see tests/fake_openai.py), reset for each test."""
    _fake_openai_server.reset()
    return _fake_openai_server
