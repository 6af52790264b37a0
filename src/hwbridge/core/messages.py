"""DriverResponse.messages in the dialect of the input, ready to append to the conversation.

Text input gets the assistant message plus one result message (role from the prompt pack);
native input gets exactly what that provider expects next: OpenAI `tool` messages with their
`tool_call_id`, Anthropic `tool_result` blocks, Gemini `functionResponse` parts, Responses API
`function_call_output` items. Calls of other drivers are left out of the echo so that every
call in the history has its answer.

A result that is a picture (`hwbridge.core.images`) goes as an image where the format carries
one (an Anthropic image block in the `tool_result`, a Gemini inline image beside the
`functionResponse`); elsewhere the model reads its summary and a note that the picture could
not be shown.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hwbridge.core.extraction import assistant_text, unwrap_envelope
from hwbridge.core.images import ImageResult, image_of
from hwbridge.core.jsonsafe import dumps
from hwbridge.core.models import CallView
from hwbridge.core.prompts import PromptStrategy

__all__ = ["Outcome", "build_messages", "plain_messages", "result_text_json"]


class Outcome(NamedTuple):
    """What happened to one call: its JSON-safe result, or the hint the LLM gets instead."""

    call: CallView
    ok: bool
    result: Any = None
    result_json: str = "null"
    retry: str | None = None
    detail: str | None = None
    error: dict[str, Any] | None = None

    def content(self, strategy: PromptStrategy) -> str:
        """The tool-result text for a native tool message."""
        return strategy.bounded(self.text_json(strategy)) if self.ok else (self.retry or "")

    def image(self) -> ImageResult | None:
        """The picture the result carries, if it is one."""
        return image_of(self.result) if self.ok else None

    def text_json(self, strategy: PromptStrategy) -> str:
        """The result as text: its JSON, or for a picture its summary and a note that the
        picture is not in the text."""
        return result_text_json(self.call.tool, self.result, self.result_json, strategy)

    def summary_json(self, strategy: PromptStrategy, image: ImageResult) -> str:
        """A picture's summary as text, beside the picture itself."""
        return strategy.bounded(dumps(image.summary)[0])


def result_text_json(tool: str, result: Any, result_json: str, strategy: PromptStrategy) -> str:
    """A successful result as a model reads it in text: its JSON, or for a picture its
    summary and a note that the picture is not in the text."""
    image = image_of(result)
    if image is None:
        return result_json
    note = strategy.image_note(tool, image.mime_type, image.size_bytes)
    return dumps(image.summary)[0] + "\n" + note


def build_messages(outcomes: list[Outcome], strategy: PromptStrategy) -> list[dict[str, Any]]:
    first = outcomes[0].call
    origin = first.origin
    builder = _BUILDERS.get(first.dialect, _text)
    return builder(origin, outcomes, strategy)


def plain_messages(outcomes: list[Outcome], strategy: PromptStrategy) -> list[dict[str, Any]]:
    """The last resort when a dialect's messages cannot be built: every outcome, as text."""
    parts = [
        strategy.result_text(o.call.tool, o.text_json(strategy)) if o.ok else (o.retry or "")
        for o in outcomes
    ]
    return [{"role": strategy.result_role, "content": "\n\n".join(p for p in parts if p)}]


def _text(origin: Any, outcomes: list[Outcome], strategy: PromptStrategy) -> list[dict[str, Any]]:
    if len(outcomes) == 1 and type(origin) is str:
        o = outcomes[0]
        content = strategy.result_text(o.call.tool, o.text_json(strategy)) if o.ok else o.retry
        return [
            {"role": "assistant", "content": origin},
            {"role": strategy.result_role, "content": content},
        ]
    if isinstance(origin, str):
        said = origin
    elif isinstance(origin, dict):
        inner = unwrap_envelope(origin)
        said = assistant_text(inner.get("content")) if "role" in inner else ""
        said = said or dumps(origin)[0]
    else:
        said = "\n".join(_call_json(o.call) for o in outcomes)
    parts = [
        strategy.result_text(o.call.tool, o.text_json(strategy)) if o.ok else (o.retry or "")
        for o in outcomes
    ]
    return [
        {"role": "assistant", "content": said},
        {"role": strategy.result_role, "content": "\n\n".join(p for p in parts if p)},
    ]


def _openai(origin: Any, outcomes: list[Outcome], strategy: PromptStrategy) -> list[dict[str, Any]]:
    content = _content_of(origin)
    calls = [
        {
            "id": o.call.call_id,
            "type": "function",
            "function": {"name": o.call.tool, "arguments": _args_json(o.call)},
        }
        for o in outcomes
    ]
    out: list[dict[str, Any]] = [
        {"role": "assistant", "content": content or None, "tool_calls": calls}
    ]
    out += [
        {"role": "tool", "tool_call_id": o.call.call_id, "content": o.content(strategy)}
        for o in outcomes
    ]
    return out


def _ollama(origin: Any, outcomes: list[Outcome], strategy: PromptStrategy) -> list[dict[str, Any]]:
    calls = [{"function": {"name": o.call.tool, "arguments": o.call.arguments}} for o in outcomes]
    out: list[dict[str, Any]] = [
        {"role": "assistant", "content": _content_of(origin), "tool_calls": calls}
    ]
    for o in outcomes:
        msg = {"role": "tool", "content": o.content(strategy), "tool_name": o.call.tool}
        out.append(msg)
    return out


def _function_call(
    origin: Any, outcomes: list[Outcome], strategy: PromptStrategy
) -> list[dict[str, Any]]:
    o = outcomes[0]
    return [
        {
            "role": "assistant",
            "content": _content_of(origin) or None,
            "function_call": {"name": o.call.tool, "arguments": _args_json(o.call)},
        },
        {"role": "function", "name": o.call.tool, "content": o.content(strategy)},
    ]


def _responses(
    origin: Any, outcomes: list[Outcome], strategy: PromptStrategy
) -> list[dict[str, Any]]:
    ours = {o.call.call_id for o in outcomes}
    items = origin.get("output") if isinstance(origin, dict) else None
    if not isinstance(items, list):
        items = [origin] if isinstance(origin, dict) else []
    echo = [
        i
        for i in items
        if isinstance(i, dict) and (i.get("type") != "function_call" or i.get("call_id") in ours)
    ]
    if not echo:
        echo = [
            {
                "type": "function_call",
                "call_id": o.call.call_id,
                "name": o.call.tool,
                "arguments": _args_json(o.call),
            }
            for o in outcomes
        ]
    return echo + [
        {"type": "function_call_output", "call_id": o.call.call_id, "output": o.content(strategy)}
        for o in outcomes
    ]


def _anthropic(
    origin: Any, outcomes: list[Outcome], strategy: PromptStrategy
) -> list[dict[str, Any]]:
    ours = {o.call.call_id for o in outcomes}
    blocks: Any = None
    if isinstance(origin, dict):
        blocks = [origin] if origin.get("type") == "tool_use" else origin.get("content")
    if isinstance(blocks, list):
        # our calls are echoed with the arguments as read ({} for a call that could not be
        # read, so a hostile input is not sent back); other drivers' calls are left out
        by_id = {o.call.call_id: o.call for o in outcomes}
        kept = [
            {**b, "input": by_id[b.get("id")].arguments} if b.get("type") == "tool_use" else b
            for b in blocks
            if isinstance(b, dict) and (b.get("type") != "tool_use" or b.get("id") in ours)
        ]
    else:
        kept = [
            {
                "type": "tool_use",
                "id": o.call.call_id,
                "name": o.call.tool,
                "input": o.call.arguments,
            }
            for o in outcomes
        ]
    results = []
    for o in outcomes:
        image = o.image()
        content: str | list[dict[str, Any]]
        if image is not None and image.mime_type in _CARRIED:
            content = [
                {"type": "text", "text": o.summary_json(strategy, image)},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
                },
            ]
        else:
            content = o.content(strategy)
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": o.call.call_id,
            "content": content,
        }
        if not o.ok:
            block["is_error"] = True
        results.append(block)
    return [{"role": "assistant", "content": kept}, {"role": "user", "content": results}]


def _gemini(origin: Any, outcomes: list[Outcome], strategy: PromptStrategy) -> list[dict[str, Any]]:
    ours = {o.call.call_id for o in outcomes}
    names = {o.call.tool for o in outcomes}
    parts: Any = None
    if isinstance(origin, dict):
        inner = unwrap_envelope(origin)
        parts = inner.get("parts") if isinstance(inner.get("parts"), list) else [inner]

    def is_ours(part: dict[str, Any]) -> bool:
        call = part.get("functionCall") or part.get("function_call")
        if not isinstance(call, dict):
            return True
        return call.get("id") in ours if call.get("id") else call.get("name") in names

    if isinstance(parts, list):
        kept = _echo_gemini([p for p in parts if isinstance(p, dict) and is_ours(p)], outcomes)
    else:
        kept = [{"functionCall": {"name": o.call.tool, "args": o.call.arguments}} for o in outcomes]
    responses = []
    images = []
    for o in outcomes:
        payload: dict[str, Any]
        image = o.image()
        if image is not None and image.mime_type in _CARRIED:
            payload = {"result": image.summary}
            images.append({"inlineData": {"mimeType": image.mime_type, "data": image.data}})
        elif o.ok:
            text = o.content(strategy)
            payload = {"result": o.result if text == o.result_json else text}
        else:
            payload = {"error": o.retry}
        fr: dict[str, Any] = {"name": o.call.tool, "response": payload}
        if o.call.call_id:
            fr["id"] = o.call.call_id
        responses.append({"functionResponse": fr})
    responses += images  # after every function response: the pictures they refer to
    return [{"role": "model", "parts": kept}, {"role": "user", "parts": responses}]


def _echo_gemini(parts: list[dict[str, Any]], outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Our function calls with the arguments as read, matched by id or else in order."""
    by_id: dict[Any, CallView] = {o.call.call_id: o.call for o in outcomes if o.call.call_id}
    in_order = iter([o.call for o in outcomes if not o.call.call_id])
    out = []
    for part in parts:
        key = "functionCall" if isinstance(part.get("functionCall"), dict) else "function_call"
        call = part.get(key)
        if not isinstance(call, dict):
            out.append(part)
            continue
        ours = by_id.get(call.get("id")) if call.get("id") else next(in_order, None)
        out.append(part if ours is None else {**part, key: {**call, "args": ours.arguments}})
    return out


def _content_of(origin: Any) -> str:
    if isinstance(origin, dict):
        return assistant_text(unwrap_envelope(origin).get("content"))
    return origin if isinstance(origin, str) else ""


def _args_json(call: CallView) -> str:
    return dumps(call.arguments)[0]


def _call_json(call: CallView) -> str:
    return dumps({"tool": call.tool, "arguments": call.arguments})[0]


_CARRIED = ("image/png", "image/jpeg")  # what Anthropic and Gemini take inline

_BUILDERS = {
    "text": _text,
    "mcs": _text,
    "openai": _openai,
    "ollama": _ollama,
    "openai_function_call": _function_call,
    "openai_responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}
