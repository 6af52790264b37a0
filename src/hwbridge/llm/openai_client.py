"""OpenAIClient: chat completions through the official openai SDK (extra `openai`).

With `base_url` it talks to any OpenAI-compatible server: llama.cpp's `llama-server`, vLLM,
LM Studio, Ollama's `/v1`. Answers stream: text reaches `on_delta` as it comes, tool calls
(parallel ones included) are assembled from their deltas. A server that answers a streamed
request with one plain JSON completion (some proxies and local servers do) is read as that
completion; `stream=False` never asks for a stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hwbridge.core.contract import MCSDriver
from hwbridge.core.runner import ChatSetup, ChatTurn, ProviderError, TextSink, Usage
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

openai: Any = require("openai", "openai", "OpenAIClient")

__all__ = ["OpenAIClient"]

_FINISH = {"function_call": "tool_calls"}
_NO_KEY = "not-needed"  # local OpenAI-compatible servers ignore the key the SDK insists on


class OpenAIClient:
    """A chat-completions client for `Runner`.

    `mode="native"` sends the driver's native tools (`get_native_tools("openai")`) and
    `get_native_system_message()`; `mode="text"` sends `get_driver_system_message(model)`
    and lets the driver find the calls in the text. The key comes from `api_key` or
    OPENAI_API_KEY; with `base_url` a local server needs none.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        mode: Mode = "native",
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stream: bool = True,
        stream_usage: bool = True,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.mode = check_mode(mode)
        self.base_url = base_url
        self.provider = "openai" if base_url is None else "openai-compatible"
        key = env_key(api_key, "OPENAI_API_KEY")
        if key is None:
            if base_url is None:
                raise ProviderError(
                    "openai", "auth", "no API key: set OPENAI_API_KEY or pass api_key="
                )
            key = _NO_KEY
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stream = stream
        self.stream_usage = stream_usage
        self._options: dict[str, Any] = {
            "api_key": key,
            "base_url": base_url,
            "timeout": timeout_s,
            "max_retries": max_retries,
        }
        self._client = openai.OpenAI(**self._options)
        self._async = PerLoop(lambda: openai.AsyncOpenAI(**self._options))

    @property
    def where(self) -> str:
        return self.base_url or "the OpenAI API"

    def setup(self, driver: MCSDriver) -> ChatSetup:
        return setup_for(driver, self.mode, "openai", self.model)

    def check(self) -> None:
        """One request (the model list) that proves the server answers and takes the key."""
        try:
            self._client.models.list()
        except openai.OpenAIError as exc:
            raise provider_error(self.provider, exc, self.where) from exc

    # -- requests ---------------------------------------------------------------------------

    def _request(self, setup: ChatSetup, messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": setup.system}, *messages],
        }
        if setup.tools:
            request["tools"] = setup.tools
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.max_tokens is not None:
            request["max_tokens"] = self.max_tokens
        if self.stream:
            request["stream"] = True
            if self.stream_usage:
                request["stream_options"] = {"include_usage": True}
        return request

    def chat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        request = self._request(setup, messages)
        try:
            if not self.stream:
                return self._turn_of(self._client.chat.completions.create(**request))
            answer = _Answer()
            with self._client.chat.completions.create(**request) as stream:
                if is_json(stream.response):  # a whole completion despite stream=True
                    return self._turn_of(json_body(self.provider, stream.response.read()))
                for chunk in stream:
                    answer.add(chunk, on_delta)
            return answer.turn(self.mode)
        except openai.OpenAIError as exc:
            raise provider_error(self.provider, exc, self.where) from exc

    async def achat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        client = self._async.get()
        request = self._request(setup, messages)
        try:
            if not self.stream:
                return self._turn_of(await client.chat.completions.create(**request))
            answer = _Answer()
            async with await client.chat.completions.create(**request) as stream:
                if is_json(stream.response):
                    return self._turn_of(json_body(self.provider, await stream.response.aread()))
                async for chunk in stream:
                    answer.add(chunk, on_delta)
            return answer.turn(self.mode)
        except openai.OpenAIError as exc:
            raise provider_error(self.provider, exc, self.where) from exc

    def _turn_of(self, completion: Any) -> ChatTurn:
        """A whole (not streamed) completion: the SDK's object or the JSON body as a dict."""
        data: dict[str, Any] = (
            completion if isinstance(completion, dict) else completion.model_dump(exclude_none=True)
        )
        choices = data.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        raw = choice.get("message")
        message = {k: v for k, v in (raw if isinstance(raw, dict) else {}).items() if v is not None}
        message.setdefault("role", "assistant")
        text = message.get("content") or ""
        usage = data.get("usage") or {}
        finish = choice.get("finish_reason")
        return ChatTurn(
            output=message if self.mode == "native" or message.get("tool_calls") else text,
            text=text,
            refusal=message.get("refusal"),
            finish_reason=_FINISH.get(str(finish), finish),
            usage=(
                usage_of(usage.get("prompt_tokens"), usage.get("completion_tokens"))
                if usage
                else None
            ),
        )


class _Answer:
    """A streamed answer put back together: text, refusal, tool calls by index, usage."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Usage | None = None

    def add(self, chunk: Any, on_delta: TextSink) -> None:
        if getattr(chunk, "usage", None) is not None:
            self.usage = usage_of(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self.text.append(delta.content)
                    on_delta(delta.content)
                if getattr(delta, "refusal", None):
                    self.refusal.append(delta.refusal)
                for piece in delta.tool_calls or ():
                    self._add_call(piece)
            if choice.finish_reason:
                self.finish = _FINISH.get(choice.finish_reason, choice.finish_reason)

    def _add_call(self, piece: Any) -> None:
        index = piece.index if piece.index is not None else len(self.calls)
        call = self.calls.setdefault(
            index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if piece.id:
            call["id"] = piece.id
        function = piece.function
        if function is not None:
            if function.name:
                call["function"]["name"] += function.name
            if function.arguments:
                call["function"]["arguments"] += function.arguments

    def turn(self, mode: Mode) -> ChatTurn:
        text = "".join(self.text)
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self.calls:
            message["tool_calls"] = [
                {k: v for k, v in self.calls[i].items() if v is not None}
                for i in sorted(self.calls)
            ]
        refusal = "".join(self.refusal) or None
        if refusal:
            message["refusal"] = refusal
        return ChatTurn(
            output=message if mode == "native" or self.calls else text,
            text=text,
            refusal=refusal,
            finish_reason=self.finish,
            usage=self.usage,
        )
