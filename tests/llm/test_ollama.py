"""OllamaClient through the official ollama SDK against a loopback fake of /api/chat."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from hwbridge import ProviderError, Runner
from hwbridge.llm import OllamaClient
from tests.core.drivers import Thermostat
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, json_answer, ndjson

pytestmark = pytest.mark.timeout(30)


def client(fake: FakeProvider, **options: Any) -> OllamaClient:
    return OllamaClient("llama3.1:8b", host=fake.base_url, **options)


def test_native_tool_calls_then_an_answer(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(
        ndjson(
            P.ollama_stream(
                [],
                [
                    ("get_temperature", {"room": "kitchen"}),
                    ("set_temperature", {"room": "kitchen", "celsius": 22}),
                ],
            )
        ),
        ndjson(P.ollama_stream(["Kitchen ", "set to 22."], usage=(500, 9))),
    )
    driver = Thermostat()
    shown: list[str] = []
    result = Runner(driver, client(fake_ollama), on_text=shown.append).run("warmer")
    assert result.ok and result.answer == "Kitchen set to 22." and "".join(shown) == result.answer
    assert [c.tool for c in result.steps[0].calls] == ["get_temperature", "set_temperature"]
    assert all(c.ok for c in result.steps[0].calls)
    assert result.usage is not None and result.usage.input_tokens == 402 + 500
    first, second = fake_ollama.requests
    assert first["model"] == "llama3.1:8b" and first["stream"] is True
    assert first["messages"][0]["content"] == driver.get_native_system_message("llama3.1:8b")
    assert first["tools"][0]["type"] == "function"
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_name"] for m in tool_messages] == ["get_temperature", "set_temperature"]


def test_text_mode_for_small_models(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(
        ndjson(
            P.ollama_stream(['{"tool": "get_temperature", ', '"arguments": {"room": "kitchen"}}'])
        ),
        ndjson(P.ollama_stream(["21.5 degC."])),
    )
    driver = Thermostat()
    shown: list[str] = []
    result = Runner(driver, client(fake_ollama, mode="text"), on_text=shown.append).run("t?")
    assert result.answer == "21.5 degC." and "".join(shown) == "21.5 degC."
    assert driver.executed == [("get_temperature", {"room": "kitchen"})]
    assert not fake_ollama.requests[0].get("tools")


def test_a_model_that_is_not_pulled(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(
        json_answer({"error": 'model "llama3.1:8b" not found, try pulling it first'}, 404)
    )
    result = Runner(Thermostat(), client(fake_ollama)).run("hi")
    assert result.stop_reason == "provider_error"
    assert result.detail == (
        f"ollama: model 'llama3.1:8b' is not on {fake_ollama.base_url} (ollama pull llama3.1:8b)"
    )


def test_a_server_error(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(
        json_answer({"error": "llama runner process has terminated: exit status 2"}, 500)
    )
    result = Runner(Thermostat(), client(fake_ollama)).run("hi")
    assert result.detail == (
        "ollama: HTTP 500 (server error): llama runner process has terminated: exit status 2"
    )


def test_no_server() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = OllamaClient("llama3.1:8b", host=f"http://127.0.0.1:{port}")
    result = Runner(Thermostat(), dead).run("hi")
    assert result.stop_reason == "provider_error"
    assert result.detail is not None
    assert result.detail.startswith(f"ollama: cannot reach http://127.0.0.1:{port}")
    with pytest.raises(ProviderError) as caught:
        dead.check()
    assert caught.value.kind == "connection"


def test_async(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(
        ndjson(P.ollama_stream([], [("get_temperature", {"room": "kitchen"})])),
        ndjson(P.ollama_stream(["Fine."])),
    )
    driver = Thermostat()
    result = asyncio.run(Runner(driver, client(fake_ollama)).arun("t?"))
    assert result.answer == "Fine." and len(driver.executed) == 1
