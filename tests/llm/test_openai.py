"""OpenAIClient through the official openai SDK against a loopback fake: native parallel
calls, streamed text mode, refusals, HTTP errors, a server that is not there."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import TYPE_CHECKING, Any

import pytest

from hwbridge import Orchestrator, ProviderError, Runner, llm
from tests.core.drivers import Thermostat
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, json_answer, sse

if TYPE_CHECKING:  # the SDK is imported by the first test that needs it, not at collection
    from hwbridge.llm import OpenAIClient

pytestmark = pytest.mark.timeout(30)

KITCHEN = ("call_kDlq0o1YgG1", "get_temperature", {"room": "kitchen"})
SET = ("call_9xQ2mEw7Tz4", "set_temperature", {"room": "living_room", "celsius": 21})


def client(fake: FakeProvider, **options: Any) -> OpenAIClient:
    return llm.OpenAIClient("gpt-4o-mini", base_url=fake.base_url, max_retries=0, **options)


def test_native_parallel_calls_then_a_streamed_answer(fake_openai: FakeProvider) -> None:
    fake_openai.script(
        sse(P.openai_stream([], [KITCHEN, SET], usage=(812, 41))),
        sse(P.openai_stream(["The kitchen is ", "21.5 degC; ", "living room set to 21."])),
    )
    driver = Thermostat()
    shown: list[str] = []
    announced: list[str] = []
    runner = Runner(
        driver,
        client(fake_openai),
        on_text=shown.append,
        on_call=lambda c: announced.append(c.tool),
    )
    result = runner.run("How warm is the kitchen? Set the living room to 21.")

    assert result.ok and result.stop_reason == "answer"
    assert result.answer == "The kitchen is 21.5 degC; living room set to 21."
    assert "".join(shown) == result.answer
    assert announced == ["get_temperature", "set_temperature"]
    assert driver.executed == [
        ("get_temperature", {"room": "kitchen"}),
        ("set_temperature", {"room": "living_room", "celsius": 21}),
    ]
    first, last = result.steps
    assert [(c.tool, c.ok, c.call_id) for c in first.calls] == [
        ("get_temperature", True, KITCHEN[0]),
        ("set_temperature", True, SET[0]),
    ]
    assert first.calls[0].result == {"room": "kitchen", "celsius": 21.5}
    assert first.finish_reason == "tool_calls" and last.calls == []
    assert result.usage is not None and result.usage.input_tokens == 812 * 2

    sent = fake_openai.requests[0]
    assert sent["model"] == "gpt-4o-mini" and sent["stream"] is True
    assert sent["messages"][0] == {
        "role": "system",
        "content": driver.get_native_system_message("gpt-4o-mini"),
    }
    assert [t["function"]["name"] for t in sent["tools"]] == [t.name for t in driver.list_tools()]
    # the second request carries the calls and one tool message per call id
    history = fake_openai.requests[1]["messages"]
    assert history[1] == {
        "role": "user",
        "content": "How warm is the kitchen? Set the living room to 21.",
    }
    assert [c["id"] for c in history[2]["tool_calls"]] == [KITCHEN[0], SET[0]]
    assert [(m["role"], m["tool_call_id"]) for m in history[3:5]] == [
        ("tool", KITCHEN[0]),
        ("tool", SET[0]),
    ]
    assert json.loads(history[3]["content"]) == {"room": "kitchen", "celsius": 21.5}


def test_text_mode_never_shows_the_call_json(fake_openai: FakeProvider) -> None:
    call = '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}'
    pieces = ["Let me look ", "that up. ", *(call[i : i + 5] for i in range(0, len(call), 5))]
    fake_openai.script(
        sse(P.openai_stream(pieces)),
        sse(P.openai_stream(["It is 21.5 degC ", "{as measured}."])),
    )
    driver = Thermostat()
    shown: list[str] = []
    runner = Runner(driver, client(fake_openai, mode="text"), on_text=shown.append)
    result = runner.run("How warm is the kitchen?")

    assert driver.executed == [("get_temperature", {"room": "kitchen"})]
    assert result.answer == "It is 21.5 degC {as measured}."
    assert "".join(shown) == "Let me look that up. It is 21.5 degC {as measured}."
    assert not any("tool" in s or "arguments" in s for s in shown)
    sent = fake_openai.requests[0]
    assert "tools" not in sent
    assert sent["messages"][0]["content"] == driver.get_driver_system_message("gpt-4o-mini")
    # text mode: the call and its result went back as text
    history = fake_openai.requests[1]["messages"]
    assert history[2] == {"role": "assistant", "content": "Let me look that up. " + call}
    assert (
        history[3]["role"] == "user" and "Tool result of get_temperature" in history[3]["content"]
    )


def test_a_whole_completion_without_streaming(fake_openai: FakeProvider) -> None:
    calls = [P.openai_call(*KITCHEN), P.openai_call(*SET)]
    fake_openai.script(
        json_answer(P.openai_completion(None, calls, usage=(700, 30))),
        json_answer(P.openai_completion("Done.", usage=(760, 5))),
    )
    driver = Thermostat()
    result = Runner(driver, client(fake_openai, stream=False)).run("go")
    assert result.answer == "Done." and len(driver.executed) == 2
    assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (
        1460,
        35,
    )
    assert "stream" not in fake_openai.requests[0]


def test_a_refusal_is_the_answer_with_its_reason(fake_openai: FakeProvider) -> None:
    refusal = "I can't help with disabling the airbag."
    fake_openai.script(sse(P.openai_stream([], refusal=refusal)))
    shown: list[str] = []
    result = Runner(Thermostat(), client(fake_openai), on_text=shown.append).run("disable it")
    assert result.stop_reason == "refusal" and result.answer == refusal
    assert "".join(shown) == refusal and not result.ok


def test_an_answer_cut_at_the_token_limit_says_so(fake_openai: FakeProvider) -> None:
    fake_openai.script(sse(P.openai_stream(["The engine speed is"], finish_reason="length")))
    result = Runner(Thermostat(), client(fake_openai)).run("rpm?")
    assert result.stop_reason == "length" and result.answer == "The engine speed is"


@pytest.mark.parametrize(
    ("status", "body", "kind", "words"),
    [
        (401, P.OPENAI_401, "auth", "Incorrect API key provided"),
        (429, P.OPENAI_429, "rate_limit", "Rate limit reached"),
        (500, P.OPENAI_500, "server", "The server had an error"),
    ],
)
def test_http_errors_stop_the_run_with_one_line(
    fake_openai: FakeProvider, status: int, body: dict[str, Any], kind: str, words: str
) -> None:
    fake_openai.script(json_answer(body, status))
    runner = Runner(Thermostat(), client(fake_openai))
    result = runner.run("hello")
    assert result.stop_reason == "provider_error" and result.answer is None
    assert result.detail is not None and "\n" not in result.detail
    assert (
        result.detail.startswith(f"openai-compatible: HTTP {status} (") and words in result.detail
    )
    with pytest.raises(ProviderError) as caught:
        client(fake_openai).chat(client(fake_openai).setup(Thermostat()), [], print)
    assert caught.value.kind == "server"  # nothing scripted any more: the fake says 500
    fake_openai.script(json_answer(body, status))
    with pytest.raises(ProviderError) as caught:
        client(fake_openai).chat(client(fake_openai).setup(Thermostat()), [], print)
    assert caught.value.kind == kind and caught.value.status == status


def test_a_server_that_is_not_there(fake_openai: FakeProvider) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    dead = llm.OpenAIClient("local", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    result = Runner(Thermostat(), dead).run("hello")
    assert result.stop_reason == "provider_error"
    assert result.detail is not None
    assert result.detail.startswith(f"openai-compatible: cannot reach http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderError) as caught:
        dead.check()
    assert caught.value.kind == "connection"


def test_a_missing_key_is_refused_before_any_request() -> None:
    with pytest.raises(ProviderError) as caught:
        llm.OpenAIClient("gpt-4o-mini")
    assert caught.value.kind == "auth" and "OPENAI_API_KEY" in str(caught.value)


def test_check_lists_models(fake_openai: FakeProvider) -> None:
    fake_openai.server.expect_request("/v1/models").respond_with_json(
        {
            "object": "list",
            "data": [{"id": "gpt-4o-mini", "object": "model", "created": 1, "owned_by": "system"}],
        }
    )
    client(fake_openai).check()
    fake_openai.server.clear()
    fake_openai.server.expect_request("/v1/models").respond_with_json(P.OPENAI_401, status=401)
    with pytest.raises(ProviderError, match="HTTP 401"):
        client(fake_openai).check()


def test_async_run_is_the_same_run(fake_openai: FakeProvider) -> None:
    fake_openai.script(
        sse(P.openai_stream([], [KITCHEN])),
        sse(P.openai_stream(["21.5 degC."])),
    )
    driver = Thermostat()
    result = asyncio.run(Runner(driver, client(fake_openai)).arun("kitchen?"))
    assert result.answer == "21.5 degC." and driver.executed == [
        ("get_temperature", {"room": "kitchen"})
    ]
    assert [c.tool for c in result.steps[0].calls] == ["get_temperature"]


def test_a_farm_s_dotted_tools_go_out_and_come_back_under_their_alias(
    fake_openai: FakeProvider,
) -> None:
    # OpenAI refuses dots in function names: bench2.get_temperature travels as an alias
    call = ("call_7bT2", "bench2__get_temperature", {"room": "kitchen"})
    fake_openai.script(
        sse(P.openai_stream([], [call])),
        sse(P.openai_stream(["The kitchen of bench 2 is at 21.5 degC."])),
    )
    one, two = Thermostat(), Thermostat()
    farm = Orchestrator({"bench1": one, "bench2": two}, names="dotted")
    announced: list[str] = []
    result = Runner(farm, client(fake_openai), on_call=lambda c: announced.append(c.tool)).run(
        "How warm is bench 2's kitchen?"
    )
    assert result.ok and result.steps[0].calls[0].ok
    assert two.executed == [("get_temperature", {"room": "kitchen"})] and one.executed == []
    sent = [t["function"]["name"] for t in fake_openai.requests[0]["tools"]]
    assert "bench2__get_temperature" in sent and not any("." in name for name in sent)
    history = fake_openai.requests[1]["messages"]
    assert history[2]["tool_calls"][0]["function"]["name"] == "bench2__get_temperature"
    assert history[3]["tool_call_id"] == "call_7bT2"
