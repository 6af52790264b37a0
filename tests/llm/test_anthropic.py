"""AnthropicClient through the official anthropic SDK against a loopback fake: streamed
text and parallel tool_use blocks, tool_result answers, refusals, errors."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from hwbridge import Orchestrator, ProviderError, Runner, llm
from tests.core.drivers import Thermostat
from tests.llm import payloads as P
from tests.llm.fake import FakeProvider, json_answer, sse

if TYPE_CHECKING:  # the SDK is imported by the first test that needs it, not at collection
    from hwbridge.llm import AnthropicClient

pytestmark = pytest.mark.timeout(30)

KITCHEN = ("toolu_01A09q90qw90lq917835lq9", "get_temperature", {"room": "kitchen"})
FAIL = ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "fail", {"kind": "retryable"})


def client(fake: FakeProvider, **options: Any) -> AnthropicClient:
    return llm.AnthropicClient(
        "claude-opus-4-6", api_key="sk-ant-dummy", base_url=fake.base_url, max_retries=0, **options
    )


def test_parallel_tool_use_then_an_answer(fake_anthropic: FakeProvider) -> None:
    fake_anthropic.script(
        sse(P.anthropic_stream(["Let me ", "check both."], [KITCHEN, FAIL], usage=(1520, 89))),
        sse(P.anthropic_stream(["Kitchen: 21.5 degC; ", "the heater is busy."], usage=(1700, 20))),
    )
    driver = Thermostat()
    shown: list[str] = []
    result = Runner(driver, client(fake_anthropic), on_text=shown.append).run("status?")

    assert result.ok and result.answer == "Kitchen: 21.5 degC; the heater is busy."
    assert "".join(shown) == "Let me check both.Kitchen: 21.5 degC; the heater is busy."
    calls = result.steps[0].calls
    assert [(c.tool, c.ok, c.code) for c in calls] == [
        ("get_temperature", True, None),
        ("fail", False, "BUSY"),
    ]
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3220, 109)

    first = fake_anthropic.requests[0]
    assert first["system"] == driver.get_native_system_message("claude-opus-4-6")
    assert first["stream"] is True and first["max_tokens"] == 4096
    assert {t["name"] for t in first["tools"]} == {t.name for t in driver.list_tools()}
    assert all("input_schema" in t for t in first["tools"])
    assistant, results = fake_anthropic.requests[1]["messages"][1:3]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert results["role"] == "user"
    assert [(b["tool_use_id"], b.get("is_error", False)) for b in results["content"]] == [
        (KITCHEN[0], False),
        (FAIL[0], True),
    ]


def test_text_mode_results_go_in_as_user_turns(fake_anthropic: FakeProvider) -> None:
    call = '{"tool": "get_temperature", "arguments": {"room": "kitchen"}}'
    fake_anthropic.script(
        sse(P.anthropic_stream([call[:20], call[20:]])),
        sse(P.anthropic_stream(["21.5 degC."])),
    )
    driver = Thermostat(prompt_overrides={"render": {"result_role": "system"}})
    shown: list[str] = []
    result = Runner(driver, client(fake_anthropic, mode="text"), on_text=shown.append).run("t?")
    assert result.answer == "21.5 degC." and "".join(shown) == "21.5 degC."
    first, second = fake_anthropic.requests
    assert "tools" not in first and first["system"] == driver.get_driver_system_message(
        "claude-opus-4-6"
    )
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]


def test_refusal_stop_reason(fake_anthropic: FakeProvider) -> None:
    fake_anthropic.script(
        sse(P.anthropic_stream(["I won't help with that."], stop_reason="refusal"))
    )
    result = Runner(Thermostat(), client(fake_anthropic)).run("bad idea")
    assert result.stop_reason == "refusal" and result.answer == "I won't help with that."


@pytest.mark.parametrize(
    ("status", "kind", "error_type", "message"),
    [
        (401, "auth", "authentication_error", "invalid x-api-key"),
        (
            429,
            "rate_limit",
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        ),
        (529, "server", "overloaded_error", "Overloaded"),
        (500, "server", "api_error", "Internal server error"),
    ],
)
def test_http_errors(
    fake_anthropic: FakeProvider, status: int, kind: str, error_type: str, message: str
) -> None:
    fake_anthropic.script(json_answer(P.anthropic_error(error_type, message), status))
    result = Runner(Thermostat(), client(fake_anthropic)).run("hi")
    assert result.stop_reason == "provider_error"
    assert result.detail == f"anthropic: HTTP {status} ({_words(kind)}): {message}"


def _words(kind: str) -> str:
    return {
        "auth": "the API key was refused",
        "rate_limit": "rate limited",
        "server": "server error",
    }[kind]


def test_a_missing_key_is_one_clear_error() -> None:
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY") as caught:
        llm.AnthropicClient("claude-opus-4-6")
    assert caught.value.kind == "auth"


def test_async(fake_anthropic: FakeProvider) -> None:
    fake_anthropic.script(
        sse(P.anthropic_stream([], [KITCHEN])), sse(P.anthropic_stream(["Warm enough."]))
    )
    driver = Thermostat()
    result = asyncio.run(Runner(driver, client(fake_anthropic)).arun("t?"))
    assert result.answer == "Warm enough." and driver.executed == [
        ("get_temperature", {"room": "kitchen"})
    ]


def test_a_farm_s_dotted_tools_go_out_and_come_back_under_their_alias(
    fake_anthropic: FakeProvider,
) -> None:
    use = ("toolu_01Bench2", "bench2__get_temperature", {"room": "kitchen"})
    fake_anthropic.script(
        sse(P.anthropic_stream(["Checking."], [use])),
        sse(P.anthropic_stream(["21.5 degC on bench 2."])),
    )
    one, two = Thermostat(), Thermostat()
    farm = Orchestrator({"bench1": one, "bench2": two}, names="dotted")
    result = Runner(farm, client(fake_anthropic)).run("bench 2 kitchen?")
    assert result.ok and two.executed == [("get_temperature", {"room": "kitchen"})]
    sent = {t["name"] for t in fake_anthropic.requests[0]["tools"]}
    assert "bench2__get_temperature" in sent and not any("." in name for name in sent)
    assistant, results = fake_anthropic.requests[1]["messages"][1:3]
    assert [b.get("name") for b in assistant["content"] if b["type"] == "tool_use"] == [
        "bench2__get_temperature"
    ]
    assert results["content"][0]["tool_use_id"] == "toolu_01Bench2"
