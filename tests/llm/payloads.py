"""Provider payloads in the shapes the real APIs send, for the loopback fake provider.

The envelopes (ids, `object`, `created`, `system_fingerprint`, SSE event names, Ollama's
timing fields, error bodies) follow responses recorded from the OpenAI chat-completions,
Anthropic Messages and Ollama `/api/chat` APIs; only the model's words and calls vary per
test. Nothing here reaches the network.
"""

from __future__ import annotations

import json
from typing import Any

# -- OpenAI chat completions ---------------------------------------------------------------

OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
_CHUNK = {
    "id": "chatcmpl-AqX1vT4b0oGm5yP3xKcH2nRz9sLd",
    "object": "chat.completion.chunk",
    "created": 1737062400,
    "model": OPENAI_MODEL,
    "system_fingerprint": "fp_72ed7ab54c",
}


def openai_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def openai_completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish_reason: str | None = None,
    refusal: str | None = None,
    usage: tuple[int, int] = (812, 41),
) -> dict[str, Any]:
    """A whole chat.completion object."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": refusal,
        "annotations": [],
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-AqX1vT4b0oGm5yP3xKcH2nRz9sLd",
        "object": "chat.completion",
        "created": 1737062400,
        "model": OPENAI_MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_72ed7ab54c",
    }


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        **_CHUNK,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def openai_stream(
    text_pieces: list[str] = (),  # type: ignore[assignment]
    tool_calls: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
    *,
    refusal: str | None = None,
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = (812, 41),
) -> str:
    """An SSE body as chat.completions streams it: role, content pieces, tool calls split
    into name and argument fragments (parallel ones by index), finish, usage, [DONE]."""
    chunks = [_chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [_chunk({"content": piece}) for piece in text_pieces]
    if refusal is not None:
        half = len(refusal) // 2
        chunks += [_chunk({"refusal": refusal[:half]}), _chunk({"refusal": refusal[half:]})]
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        head = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        chunks.append(_chunk({"tool_calls": [head]}))
        text = json.dumps(arguments)
        for start in range(0, len(text), 7):
            piece = {"index": index, "function": {"arguments": text[start : start + 7]}}
            chunks.append(_chunk({"tool_calls": [piece]}))
    finish = finish_reason or ("tool_calls" if tool_calls else "stop")
    chunks.append(_chunk({}, finish))
    if usage is not None:
        chunks.append(
            {
                **_CHUNK,
                "choices": [],
                "usage": {
                    "prompt_tokens": usage[0],
                    "completion_tokens": usage[1],
                    "total_tokens": sum(usage),
                },
            }
        )
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


OPENAI_401 = {
    "error": {
        "message": "Incorrect API key provided: sk-dummy. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}
OPENAI_429 = {
    "error": {
        "message": "Rate limit reached for gpt-4o-mini in organization org-dummy on requests "
        "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
OPENAI_500 = {
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}

# -- Anthropic Messages --------------------------------------------------------------------

ANTHROPIC_MODEL = "claude-opus-4-6"


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def anthropic_stream(
    text_pieces: list[str] = (),  # type: ignore[assignment]
    tool_uses: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (1520, 89),
) -> str:
    """An SSE body as the Messages API streams it: message_start, a text block in deltas,
    tool_use blocks whose input arrives as input_json_delta fragments, message_delta with
    the stop reason and usage, message_stop; a ping as the API sends one."""
    events = [
        _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                    "type": "message",
                    "role": "assistant",
                    "model": ANTHROPIC_MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": usage[0],
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 1,
                    },
                },
            },
        ),
        _event("ping", {"type": "ping"}),
    ]
    index = 0
    if text_pieces:
        events.append(
            _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for piece in text_pieces:
            events.append(
                _event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        events.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for offset, (tool_id, name, arguments) in enumerate(tool_uses):
        at = index + offset
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
        events.append(
            _event(
                "content_block_start",
                {"type": "content_block_start", "index": at, "content_block": block},
            )
        )
        text = json.dumps(arguments)
        for piece in ["", *(text[i : i + 9] for i in range(0, len(text), 9))]:
            events.append(
                _event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": at,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        events.append(_event("content_block_stop", {"type": "content_block_stop", "index": at}))
    reason = stop_reason or ("tool_use" if tool_uses else "end_turn")
    events.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    events.append(_event("message_stop", {"type": "message_stop"}))
    return "".join(events)


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- Ollama /api/chat ----------------------------------------------------------------------

OLLAMA_MODEL = "llama3.1:8b"


def ollama_stream(
    text_pieces: list[str] = (),  # type: ignore[assignment]
    tool_calls: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    *,
    done_reason: str = "stop",
    usage: tuple[int, int] = (402, 37),
) -> str:
    """NDJSON as /api/chat streams it: content pieces, tool calls whole in their chunk,
    then the done chunk with its counts and durations."""
    created = "2025-01-16T21:14:03.511235Z"
    lines = [
        {
            "model": OLLAMA_MODEL,
            "created_at": created,
            "message": {"role": "assistant", "content": piece},
            "done": False,
        }
        for piece in text_pieces
    ]
    if tool_calls:
        lines.append(
            {
                "model": OLLAMA_MODEL,
                "created_at": created,
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"function": {"name": name, "arguments": arguments}}
                        for name, arguments in tool_calls
                    ],
                },
                "done": False,
            }
        )
    lines.append(
        {
            "model": OLLAMA_MODEL,
            "created_at": created,
            "message": {"role": "assistant", "content": ""},
            "done_reason": done_reason,
            "done": True,
            "total_duration": 4883583458,
            "load_duration": 1334875,
            "prompt_eval_count": usage[0],
            "prompt_eval_duration": 342546000,
            "eval_count": usage[1],
            "eval_duration": 4535599000,
        }
    )
    return "".join(json.dumps(line) + "\n" for line in lines)


def ollama_completion(
    text: str = "",
    tool_calls: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    *,
    usage: tuple[int, int] = (402, 37),
) -> dict[str, Any]:
    """A whole /api/chat answer, as Ollama sends it with `stream: false`."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"function": {"name": name, "arguments": arguments}} for name, arguments in tool_calls
        ]
    return {
        "model": OLLAMA_MODEL,
        "created_at": "2025-01-16T21:14:03.511235Z",
        "message": message,
        "done_reason": "stop",
        "done": True,
        "total_duration": 4883583458,
        "prompt_eval_count": usage[0],
        "eval_count": usage[1],
    }
