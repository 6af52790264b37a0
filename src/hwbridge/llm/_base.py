"""What the chat clients share: loading an optional SDK, the two modes, provider errors."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

from hwbridge.core.contract import Capability, MCSDriver
from hwbridge.core.runner import ChatSetup, ProviderError, ProviderErrorKind, Usage

__all__ = [
    "MissingExtraError",
    "Mode",
    "PerLoop",
    "check_mode",
    "env_key",
    "is_json",
    "json_body",
    "provider_error",
    "require",
    "setup_for",
    "usage_of",
]

Mode = Literal["native", "text"]
"""native: the provider's function calling (tools sent as definitions, calls as structured
objects); text: the driver's system prompt with its tool catalog, calls written as JSON in
the text (for models or servers without function calling)."""

_WORDS: dict[ProviderErrorKind, str] = {
    "auth": "the API key was refused",
    "rate_limit": "rate limited",
    "server": "server error",
    "bad_request": "request refused",
    "connection": "no answer",
    "other": "error",
}


class MissingExtraError(ImportError):
    """A client's SDK is not installed; the message names the extra that installs it."""


def require(module: str, extra: str, client: str) -> ModuleType:
    """Import a provider SDK, or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{client} needs the {module} package: pip install mcs-hwbridge[{extra}]"
            f" (or mcs-hwbridge[llm] for every client)"
        ) from exc


def check_mode(mode: str) -> Mode:
    if mode not in ("native", "text"):
        raise ValueError(f"mode must be 'native' or 'text', not {mode!r}")
    return mode  # type: ignore[return-value]


def env_key(api_key: str | None, variable: str) -> str | None:
    """The key given, else the provider's environment variable (None: neither)."""
    return api_key or os.environ.get(variable) or None


def setup_for(driver: MCSDriver, mode: Mode, dialect: str, model: str) -> ChatSetup:
    """The system prompt and tools for `driver` (native tools in the provider's `dialect`)."""
    if mode == "text":
        return ChatSetup(system=driver.get_driver_system_message(model))
    tools = getattr(driver, "get_native_tools", None)
    system = getattr(driver, "get_native_system_message", None)
    flags = getattr(driver.meta, "capabilities", ())
    if Capability.NATIVE_TOOLS.value not in flags or not callable(tools) or not callable(system):
        raise ValueError(
            f"{type(driver).__name__} offers no native tools (capability 'native_tools'); "
            "use mode='text'"
        )
    return ChatSetup(system=str(system(model)), tools=list(tools(dialect)) or None)


def _kind(status: int) -> ProviderErrorKind:
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status >= 500:
        return "server"
    if 400 <= status < 500:
        return "bad_request"
    return "other"


def _body_message(body: Any) -> str | None:
    """The human part of an error body: OpenAI, Anthropic, llama.cpp and Ollama shapes."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail")
            return str(message) if message else None
        if isinstance(error, str):
            return error
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


def provider_error(provider: str, exc: BaseException, where: str) -> ProviderError:
    """One ProviderError for any SDK failure: an HTTP status, a connection, a timeout."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 400:
        kind = _kind(status)
        detail = _body_message(getattr(exc, "body", None)) or _body_message(
            getattr(exc, "error", None)
        )
        detail = detail or getattr(exc, "message", None) or str(exc)
        return ProviderError(
            provider,
            kind,
            f"HTTP {status} ({_WORDS[kind]}): {detail}",
            status=status,
            retryable=kind in ("rate_limit", "server"),
        )
    name = type(exc).__name__
    if "Timeout" in name or isinstance(exc, TimeoutError):
        late = f"{where} did not answer in time"
        return ProviderError(provider, "connection", late, retryable=True)
    if "Connect" in name or isinstance(exc, ConnectionError) or "httpx" in type(exc).__module__:
        cause = exc.__cause__ or exc.__context__ or exc
        return ProviderError(
            provider, "connection", f"cannot reach {where}: {cause}", retryable=True
        )
    return ProviderError(provider, "other", f"{name}: {exc}")


def usage_of(input_tokens: Any, output_tokens: Any) -> Usage | None:
    """Usage when the provider reported it (either count), else None."""
    if input_tokens is None and output_tokens is None:
        return None
    return Usage(input_tokens=int(input_tokens or 0), output_tokens=int(output_tokens or 0))


class PerLoop:
    """An SDK's async client, one per event loop: its connection pool belongs to the loop
    that made it, so a client used from another loop (a second `asyncio.run`) is made anew."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._held: tuple[asyncio.AbstractEventLoop, Any] | None = None

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._held is None or self._held[0] is not loop:
            self._held = (loop, self._make())
        return self._held[1]


def is_json(response: Any) -> bool:
    """An HTTP response that is one JSON document, not the event stream that was asked for
    (some proxies and local servers answer a streamed request so)."""
    content_type = str(response.headers.get("content-type", ""))
    return content_type.split(";", maxsplit=1)[0].strip().lower() == "application/json"


def json_body(provider: str, raw: bytes) -> dict[str, Any]:
    """The JSON object of a whole answer; a ProviderError when it is none."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ProviderError(provider, "server", f"the answer is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ProviderError(provider, "server", "the answer is JSON but not an object")
    return data
