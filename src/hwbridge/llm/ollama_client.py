"""OllamaClient: local models through the official ollama SDK (extra `ollama`).

`host` defaults to OLLAMA_HOST or http://localhost:11434. Native mode uses Ollama's tool
calling (for models that have it); `mode="text"` suits small models without it, with the
driver's compact prompt picked by model name.

Answers stream as NDJSON. A server that answers a streamed request with one plain JSON object
instead (some proxies and servers ignore `stream: true`; pretty-printed over many lines or
not) is read as that whole answer, up to 8 MiB; `stream=False` never asks for a stream.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from hwbridge.core.contract import MCSDriver
from hwbridge.core.runner import ChatSetup, ChatTurn, ProviderError, TextSink, Usage
from hwbridge.llm._base import (
    Mode,
    PerLoop,
    check_mode,
    is_json,
    provider_error,
    require,
    setup_for,
    usage_of,
)

ollama: Any = require("ollama", "ollama", "OllamaClient")
import httpx  # noqa: E402  (ollama's own dependency: there once ollama is)

__all__ = ["OllamaClient"]

_FINISH = {"stop": "stop", "length": "length"}
_DEFAULT_HOST = "http://localhost:11434"
_WHOLE_MAX = 8 * 1024 * 1024  # bytes of an answer read whole (not streamed line by line)


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
        self._client = ollama.Client(host=self.host, timeout=timeout_s, transport=_Transport())
        self._async = PerLoop(
            lambda: ollama.AsyncClient(
                host=self.host, timeout=self._timeout, transport=_AsyncTransport()
            )
        )

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
        if isinstance(exc, json.JSONDecodeError):
            return ProviderError(
                self.provider, "server", f"the answer is neither NDJSON nor one JSON object: {exc}"
            )
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


# -- a whole JSON answer to a streamed request ----------------------------------------------
#
# The SDK reads a streamed /api/chat answer line by line, one JSON object a line: a whole
# answer pretty-printed over several lines fails on its first line ("{"). The transports
# below hand the SDK such a body as one line; NDJSON passes through as it comes.


class _Reframer:
    """The body of an /api/chat answer, fed in pieces: NDJSON (the first line is JSON)
    passes through unchanged; a body sent as `application/json`, or whose first line is not
    JSON, is held (up to _WHOLE_MAX) and given out as one line if it is one JSON object."""

    def __init__(self, whole: bool) -> None:
        self._whole = whole
        self._passing = False
        self._held = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        if self._passing:
            return chunk
        self._held += chunk
        if len(self._held) > _WHOLE_MAX:
            raise ProviderError(
                "ollama",
                "server",
                f"the answer is not streamed line by line and over {_WHOLE_MAX >> 20} MiB",
            )
        if self._whole:
            return b""
        start = len(self._held) - len(self._held.lstrip())
        end = self._held.find(b"\n", start)
        if end < 0:
            return b""
        try:
            json.loads(self._held[start:end])
        except ValueError:
            self._whole = True  # "{" of a pretty-printed object: read it whole
            return b""
        self._passing = True
        out = bytes(self._held)
        self._held.clear()
        return out

    def end(self) -> bytes:
        held = bytes(self._held)
        self._held.clear()
        if not self._whole:
            return held  # one line without an end, or nothing
        try:
            whole = json.loads(held)
        except ValueError:
            return held  # NDJSON called application/json, or no JSON: the SDK reads lines
        if not isinstance(whole, dict):
            return held
        return json.dumps(whole).encode() + b"\n"


def _reframes(request: httpx.Request, response: httpx.Response) -> bool:
    return response.is_success and request.url.path.endswith("/api/chat")


def _headers(response: httpx.Response) -> list[tuple[bytes, bytes]]:
    """The headers without those of the bytes on the wire (the body is decoded, re-framed)."""
    dropped = (b"content-length", b"content-encoding")
    return [(k, v) for k, v in response.headers.raw if k.lower() not in dropped]


class _Stream(httpx.SyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._reframer = _Reframer(is_json(response))

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._response.iter_bytes():
            if out := self._reframer.feed(chunk):
                yield out
        if tail := self._reframer.end():
            yield tail

    def close(self) -> None:
        self._response.close()


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._reframer = _Reframer(is_json(response))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_bytes():
            if out := self._reframer.feed(chunk):
                yield out
        if tail := self._reframer.end():
            yield tail

    async def aclose(self) -> None:
        await self._response.aclose()


class _Transport(httpx.BaseTransport):
    """httpx's own transport, with /api/chat answers re-framed for the SDK."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        if not _reframes(request, response):
            return response
        response.request = request
        return httpx.Response(
            response.status_code,
            headers=_headers(response),
            stream=_Stream(response),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._inner.close()


class _AsyncTransport(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if not _reframes(request, response):
            return response
        response.request = request
        return httpx.Response(
            response.status_code,
            headers=_headers(response),
            stream=_AsyncStream(response),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
