"""OllamaClient: local models through the official ollama SDK (extra `ollama`).

`host` defaults to OLLAMA_HOST or http://localhost:11434. Native mode uses Ollama's tool
calling (for models that have it); `mode="text"` suits small models without it, with the
driver's compact prompt picked by model name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from hwbridge.core.contract import MCSDriver
from hwbridge.core.runner import ChatSetup, ChatTurn, ProviderError, TextSink, Usage
from hwbridge.llm._base import (
    Mode,
    PerLoop,
    check_mode,
    provider_error,
    require,
    setup_for,
    usage_of,
)

ollama: Any = require("ollama", "ollama", "OllamaClient")

__all__ = ["OllamaClient"]

_FINISH = {"stop": "stop", "length": "length"}
_DEFAULT_HOST = "http://localhost:11434"


class OllamaClient:
    """A chat client for a local Ollama server (no key)."""

    provider = "ollama"

    def __init__(
        self,
        model: str,
        host: str | None = None,
        mode: Mode = "native",
        *,
        options: dict[str, Any] | None = None,
        keep_alive: str | float | None = None,
        timeout_s: float = 300.0,
        stream: bool = True,
    ) -> None:
        self.model = model
        self.stream = stream
        self.mode = check_mode(mode)
        self.host = host or os.environ.get("OLLAMA_HOST") or _DEFAULT_HOST
        self.options = dict(options or {})
        self.keep_alive = keep_alive
        self._timeout = timeout_s
        self._client = ollama.Client(host=self.host, timeout=timeout_s)
        self._async = PerLoop(lambda: ollama.AsyncClient(host=self.host, timeout=self._timeout))

    def setup(self, driver: MCSDriver) -> ChatSetup:
        return setup_for(driver, self.mode, "openai", self.model)  # Ollama takes OpenAI tools

    def check(self) -> None:
        """Ask the server about the model: proves it answers and has the model pulled."""
        try:
            self._client.show(self.model)
        except Exception as exc:
            raise self._error(exc) from exc

    def _request(self, setup: ChatSetup, messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": setup.system}, *messages],
            "stream": self.stream,
        }
        if setup.tools:
            request["tools"] = setup.tools
        if self.options:
            request["options"] = self.options
        if self.keep_alive is not None:
            request["keep_alive"] = self.keep_alive
        return request

    def chat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        answer = _Answer()
        try:
            reply = self._client.chat(**self._request(setup, messages))
            for chunk in reply if self.stream else (reply,):
                answer.add(chunk, on_delta)
        except Exception as exc:
            raise self._error(exc) from exc
        return answer.turn(self.mode)

    async def achat(
        self, setup: ChatSetup, messages: Sequence[dict[str, Any]], on_delta: TextSink
    ) -> ChatTurn:
        answer = _Answer()
        try:
            reply = await self._async.get().chat(**self._request(setup, messages))
            if not self.stream:
                answer.add(reply, on_delta)
            else:
                async for chunk in reply:
                    answer.add(chunk, on_delta)
        except Exception as exc:
            raise self._error(exc) from exc
        return answer.turn(self.mode)

    def _error(self, exc: Exception) -> Exception:
        """A ProviderError for what the server or the connection said; other errors as is."""
        if isinstance(exc, ollama.ResponseError) and exc.status_code == 404:
            return ProviderError(
                "ollama",
                "bad_request",
                f"model {self.model!r} is not on {self.host} (ollama pull {self.model})",
                status=404,
            )
        if isinstance(exc, ollama.ResponseError | ConnectionError | TimeoutError) or (
            type(exc).__module__.startswith("httpx")
        ):
            return provider_error(self.provider, exc, self.host)
        return exc


class _Answer:
    """A streamed Ollama answer: text deltas, tool calls (whole in their chunk), counts."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.finish: str | None = None
        self.usage: Usage | None = None

    def add(self, chunk: Any, on_delta: TextSink) -> None:
        message = chunk.message
        if message is not None:
            if message.content:
                self.text.append(message.content)
                on_delta(message.content)
            for call in message.tool_calls or ():
                function = call.function
                self.calls.append(
                    {"function": {"name": function.name, "arguments": dict(function.arguments)}}
                )
        if chunk.done:
            reason = chunk.done_reason
            self.finish = "tool_calls" if self.calls else _FINISH.get(reason or "", reason)
            self.usage = usage_of(chunk.prompt_eval_count, chunk.eval_count)

    def turn(self, mode: Mode) -> ChatTurn:
        text = "".join(self.text)
        output: str | dict[str, Any] = text
        if mode == "native" or self.calls:
            output = {"role": "assistant", "content": text}
            if self.calls:
                output["tool_calls"] = self.calls
        return ChatTurn(output=output, text=text, finish_reason=self.finish, usage=self.usage)
