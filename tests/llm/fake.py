"""A fake LLM provider on loopback: answers the official SDKs with scripted payloads.

Each request to the chat endpoint takes the next scripted answer (JSON, an SSE or NDJSON
body, or an HTTP error) and is recorded, so a test can check what the client sent: the
system prompt, the tools, the tool results appended by the driver.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

MODEL_LISTS = {  # what each client's check() asks
    "openai": (
        "/v1/models",
        "GET",
        {
            "object": "list",
            "data": [{"id": "local", "object": "model", "created": 1, "owned_by": "me"}],
        },
    ),
    "anthropic": (
        "/v1/models",
        "GET",
        {
            "data": [
                {
                    "id": "claude-opus-4-6",
                    "type": "model",
                    "display_name": "Claude",
                    "created_at": "2026-01-01T00:00:00Z",
                }
            ],
            "has_more": False,
            "first_id": "claude-opus-4-6",
            "last_id": "claude-opus-4-6",
        },
    ),
    "ollama": (
        "/api/show",
        "POST",
        {
            "modelfile": "",
            "parameters": "",
            "template": "",
            "details": {"format": "gguf", "family": "llama"},
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
            "capabilities": ["completion", "tools"],
        },
    ),
}
CHAT_PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "ollama": "/api/chat",
}
_TYPES = {
    "sse": "text/event-stream",
    "ndjson": "application/x-ndjson",
    "json": "application/json",
    "text": "text/plain",
}


@dataclass
class Answer:
    body: str
    status: int = 200
    kind: str = "json"  # json | sse | ndjson | text (the content type)
    delay_s: float = 0.0  # before the body: a slow model
    stall_s: float = 0.0  # after the first line of the body: a long stream
    headers: dict[str, str] = field(default_factory=dict)


def json_answer(
    payload: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
    *,
    indent: int | None = None,
    kind: str = "json",
) -> Answer:
    """One JSON document; `indent` pretty-prints it over lines, `kind` names its content type."""
    return Answer(json.dumps(payload, indent=indent), status, kind, headers=dict(headers or {}))


def sse(body: str, *, stall_s: float = 0.0) -> Answer:
    return Answer(body, 200, "sse", stall_s=stall_s)


def ndjson(body: str) -> Answer:
    return Answer(body, 200, "ndjson")


@dataclass
class FakeProvider:
    """Scripted answers for one provider's chat endpoint on a pytest-httpserver."""

    server: HTTPServer
    provider: str
    answers: list[Answer] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.server.expect_request(CHAT_PATHS[self.provider], method="POST").respond_with_handler(
            self._handle
        )
        path, method, listing = MODEL_LISTS[self.provider]
        self.server.expect_request(path, method=method).respond_with_json(listing)

    @property
    def base_url(self) -> str:
        if self.provider == "openai":
            return self.server.url_for("/v1")
        return self.server.url_for("").rstrip("/")

    def script(self, *answers: Answer) -> FakeProvider:
        with self._lock:
            self.answers.extend(answers)
        return self

    def _handle(self, request: Request) -> Response:
        with self._lock:
            self.requests.append(json.loads(request.get_data(as_text=True)))
            if not self.answers:
                return Response(
                    json.dumps({"error": {"message": "the test scripted no more answers"}}),
                    status=500,
                    content_type="application/json",
                )
            answer = self.answers.pop(0)
        if answer.delay_s:
            time.sleep(answer.delay_s)
        content_type = _TYPES[answer.kind]
        if not answer.stall_s:
            return Response(
                answer.body, status=answer.status, content_type=content_type, headers=answer.headers
            )

        def body() -> Iterator[bytes]:
            first, _, rest = answer.body.partition("\n\n")
            yield (first + "\n\n").encode()
            time.sleep(answer.stall_s)
            yield rest.encode()

        return Response(body(), status=answer.status, content_type=content_type)

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]
