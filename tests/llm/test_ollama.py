"""OllamaClient through the official ollama SDK against a loopback fake of /api/chat."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from hwbridge import ProviderError, Runner, llm
from tests.core.drivers import Thermostat
from tests.llm import payloads as P
from tests.llm.fake import Answer, FakeProvider, json_answer, ndjson

if TYPE_CHECKING:  # the SDK is imported by the first test that needs it, not at collection
    from hwbridge.llm import OllamaClient

pytestmark = pytest.mark.timeout(30)


def client(fake: FakeProvider, **options: Any) -> OllamaClient:
    return llm.OllamaClient("llama3.1:8b", host=fake.base_url, **options)


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
    dead = llm.OllamaClient("llama3.1:8b", host=f"http://127.0.0.1:{port}")
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


# -- a whole JSON answer to a streamed request ----------------------------------------------

WHOLE_CASES = [
    pytest.param(2, "json", id="pretty-application/json"),
    pytest.param(None, "json", id="one-line-application/json"),
    pytest.param(2, "ndjson", id="pretty-but-called-ndjson"),
    pytest.param(4, "text", id="pretty-text/plain"),
]


@pytest.mark.parametrize(("indent", "kind"), WHOLE_CASES)
def test_a_whole_json_answer_to_a_streamed_request(
    fake_ollama: FakeProvider, indent: int | None, kind: str
) -> None:
    """A server that ignores `stream: true` and sends one JSON object, pretty-printed or not,
    under any content type: read as the whole answer, tool calls included."""
    fake_ollama.script(
        json_answer(
            P.ollama_completion("", [("get_temperature", {"room": "kitchen"})]),
            indent=indent,
            kind=kind,
        ),
        json_answer(P.ollama_completion("Kitchen: 21.5 degC.", usage=(500, 9)), indent=indent),
    )
    driver = Thermostat()
    shown: list[str] = []
    result = Runner(driver, client(fake_ollama), on_text=shown.append).run("t?")
    assert result.ok and result.answer == "Kitchen: 21.5 degC." and "".join(shown) == result.answer
    assert driver.executed == [("get_temperature", {"room": "kitchen"})]
    assert result.usage is not None and result.usage.input_tokens == 402 + 500
    assert [r["stream"] for r in fake_ollama.requests] == [True, True]


def test_a_whole_pretty_json_answer_async(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(json_answer(P.ollama_completion("Fine."), indent=2))
    result = asyncio.run(Runner(Thermostat(), client(fake_ollama)).arun("t?"))
    assert result.ok and result.answer == "Fine."


def test_stream_false_reads_a_pretty_answer(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(json_answer(P.ollama_completion("Whole."), indent=2))
    result = Runner(Thermostat(), client(fake_ollama, stream=False)).run("t?")
    assert result.answer == "Whole." and fake_ollama.requests[0]["stream"] is False


def test_a_whole_answer_is_read_up_to_a_bound(
    fake_ollama: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hwbridge.llm.ollama_client._WHOLE_MAX", 4096)
    big = P.ollama_completion("x" * 5000)
    fake_ollama.script(json_answer(big, indent=2), json_answer(big, indent=2))
    runner = Runner(Thermostat(), client(fake_ollama))
    for result in (runner.run("t?"), asyncio.run(runner.arun("t?"))):
        assert result.stop_reason == "provider_error"
        assert result.detail is not None
        assert result.detail.startswith("ollama: the answer is not streamed line by line and over")


def test_neither_ndjson_nor_json_is_a_provider_error(fake_ollama: FakeProvider) -> None:
    fake_ollama.script(Answer("<html>\n<body>a proxy page</body>\n</html>\n", kind="text"))
    result = Runner(Thermostat(), client(fake_ollama)).run("t?")
    assert result.stop_reason == "provider_error"
    assert result.detail is not None
    assert result.detail.startswith("ollama: the answer is neither NDJSON nor one JSON object")


def test_ndjson_still_streams(loopback: HTTPServer) -> None:
    """The first piece reaches on_delta while the server still holds the rest back."""
    first_shown = threading.Event()
    released: list[bool] = []
    lines = P.ollama_stream(["Kitchen ", "is warm."]).splitlines(keepends=True)

    def handler(request: Request) -> Response:
        def body() -> Iterator[bytes]:
            yield lines[0].encode()
            released.append(first_shown.wait(5))
            yield "".join(lines[1:]).encode()

        return Response(body(), content_type="application/x-ndjson")

    loopback.clear()
    loopback.expect_request("/api/chat", method="POST").respond_with_handler(handler)
    host = loopback.url_for("").rstrip("/")
    result = Runner(
        Thermostat(),
        llm.OllamaClient("llama3.1:8b", host=host),
        on_text=lambda _: first_shown.set(),
    ).run("t?")
    loopback.clear()
    assert result.answer == "Kitchen is warm."
    assert released == [True]
