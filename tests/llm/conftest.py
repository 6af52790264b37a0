"""A threaded loopback HTTP server per session for the fake providers, cleared per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_httpserver import HTTPServer

from tests.llm.fake import FakeProvider


@pytest.fixture(scope="session")
def loopback() -> Iterator[HTTPServer]:
    server = HTTPServer(host="127.0.0.1", threaded=True)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture
def fake_openai(loopback: HTTPServer) -> Iterator[FakeProvider]:
    loopback.clear()
    yield FakeProvider(loopback, "openai")
    loopback.clear()


@pytest.fixture
def fake_anthropic(loopback: HTTPServer) -> Iterator[FakeProvider]:
    loopback.clear()
    yield FakeProvider(loopback, "anthropic")
    loopback.clear()


@pytest.fixture
def fake_ollama(loopback: HTTPServer) -> Iterator[FakeProvider]:
    loopback.clear()
    yield FakeProvider(loopback, "ollama")
    loopback.clear()


@pytest.fixture(autouse=True)
def no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see a real key, and never need one."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
