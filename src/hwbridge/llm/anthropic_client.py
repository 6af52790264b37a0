"""AnthropicClient: the Messages API through the official anthropic SDK (extra `anthropic`).

Native tools by default (`tool_use` blocks, parallel calls answered with `tool_result`
blocks by the driver); the answer streams, text reaching `on_delta` as it comes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hwbridge.core.contract import MCSDriver
from hwbridge.core.runner import ChatSetup, ChatTurn, ProviderError, TextSink
from hwbridge.llm._base import (
    Mode,
    PerLoop,
    check_mode,
    env_key,
    is_json,
    json_body,
    provider_error,
    require,
    setup_for,
    usage_of,
)

anthropic: Any = require("anthropic", "anthropic", "AnthropicClient")

__all__ = ["AnthropicClient"]

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "refusal",
}
_USER_ROLES = frozenset({"system", "tool", "function"})


class AnthropicClient:
    """A Messages API client for `Runner`; the key comes from `api_key` or
    ANTHROPIC_API_KEY. `mode="text"` sends the driver's text prompt instead of tools."""

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        mode: Mode = "native",
        max_tokens: int = 4096,
        temperature: float | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.stream = stream
        self.mode = check_mode(mode)
        self.base_url = base_url
        key = env_key(api_key, "ANTHROPIC_API_KEY")
        if key is None:
            raise ProviderError(
                "anthropic", "auth", "no API key: set ANTHROPIC_API_KEY or pass api_key="
            )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._options: dict[str, Any] = {
            "api_key": key,
            "base_url": base_url,
            "timeout": timeout_s,
            "max_retries": max_retries,
        }
        self._client = anthropic.Anthropic(**self._options)
        self._async = PerLoop(lambda: anthropic.AsyncAnthropic(**self._options))

    @property
    def where(self) -> str:
        return self.base_url or "the Anthropic API"

    def setup(self, driver: MCSDriver) -> ChatSetup:
        return setup_for(driver, self.mode, "anthropic", self.model)

    def check(self) -> None:
        """One request (the model list) that proves the API answers and takes the key."""
        try:
            self._client.models.list(limit=1)
        except anthropic.AnthropicError as exc:
            raise provider_error(self.provider, exc, self.where) from exc

    def _request(self, setup: ChatSetup, messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": setup.system,
            "messages": [_message(m) for m in messages],
        }
        if setup.tools:
            request["tools"] = setup.tools
        if self.temperature is not None:
            request["temperature"] = self.temperature
        return request

    def chat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        request = self._request(setup, messages)
        try:
            if not self.stream:
                return self._turn_of(self._client.messages.create(**request))
            with self._client.messages.stream(**request) as stream:
                if is_json(stream.response):  # a whole message despite the stream asked for
                    return self._turn_of(json_body(self.provider, stream.response.read()))
                for text in stream.text_stream:
                    on_delta(text)
                return self._turn_of(stream.get_final_message())
        except anthropic.AnthropicError as exc:
            raise provider_error(self.provider, exc, self.where) from exc

    async def achat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        client = self._async.get()
        request = self._request(setup, messages)
        try:
            if not self.stream:
                return self._turn_of(await client.messages.create(**request))
            async with client.messages.stream(**request) as stream:
                if is_json(stream.response):
                    body = await stream.response.aread()
                    return self._turn_of(json_body(self.provider, body))
                async for text in stream.text_stream:
                    on_delta(text)
                return self._turn_of(await stream.get_final_message())
        except anthropic.AnthropicError as exc:
            raise provider_error(self.provider, exc, self.where) from exc

    def _turn_of(self, message: Any) -> ChatTurn:
        """A whole message: the SDK's object, or the JSON body as a dict."""
        data: dict[str, Any] = (
            message if isinstance(message, dict) else message.model_dump(exclude_none=True)
        )
        blocks = [
            {k: v for k, v in b.items() if v is not None}
            for b in data.get("content") or ()
            if isinstance(b, dict)
        ]
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        has_calls = any(b.get("type") == "tool_use" for b in blocks)
        usage = data.get("usage") or {}
        stop = data.get("stop_reason")
        return ChatTurn(
            output=(
                {"role": "assistant", "content": blocks}
                if self.mode == "native" or has_calls
                else text
            ),
            text=text,
            finish_reason=_FINISH.get(str(stop), stop),
            usage=usage_of(usage.get("input_tokens"), usage.get("output_tokens"))
            if usage
            else None,
        )


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """The Messages API knows only user and assistant turns: a text-mode tool result written
    with another role (a prompt pack's `result_role`) goes in as a user turn."""
    if message.get("role") in _USER_ROLES:
        return {"role": "user", "content": message.get("content") or ""}
    return message
