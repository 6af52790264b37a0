"""Wire formats -> call candidates: every dialect an LLM or its SDK writes a tool call in.

Claim-then-extract: a dict is recognised by its shape (OpenAI `tool_calls`, Anthropic
`tool_use` blocks, Gemini `functionCall` parts, Responses API `function_call` items, an MCS
`{"tool": ..., "arguments": ...}` dict); text is scanned for JSON objects with the C JSON
decoder started at each `{` (a balanced scan: two objects are two candidates, nested objects
stay inside their parent). Nothing here executes anything or knows any tool's schema.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any, NamedTuple

from hwbridge.core.brackets import BracketMap
from hwbridge.core.healing import TooDeep, describe_problem, heal, loads
from hwbridge.core.jsonsafe import loads as _fast_loads
from hwbridge.core.models import Dialect
from hwbridge.core.prompts import PromptStrategy

__all__ = ["TOO_DEEP", "CallExtractor", "Found", "assistant_text", "loads", "unwrap_envelope"]

_DECODER = json.JSONDecoder(strict=False)
# Parser work allowed for retrying objects nested in one that failed, per character of text.
_RETRY_WORK = 4
_RETRY_SLACK = 1 << 16
_NO_ARGS: Any = object()
# A tool's name where text names one: as `Tool.name` allows, dots inside but not at the end
# (the full stop of a sentence is not part of the name).
_NAME = r"[A-Za-z0-9_-](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_-])?"
TOO_DEEP = "arguments nest too deeply"
_OBJECT_START = re.compile(r'\{\s*["}]')
"""`Found.error` of a call whose arguments nest deeper than a parser or a schema allows."""


class Found(NamedTuple):
    """A call-shaped fragment, before it is matched against the driver's tools.

    `arguments` is a dict when it parsed; `error` says why a call that names a tool could
    not be read.
    """

    name: str
    arguments: Any
    call_id: str | None
    dialect: Dialect
    error: str | None = None
    healed: tuple[str, ...] = ()


class CallExtractor:
    """Finds call candidates in any supported wire format, configured by a prompt pack."""

    def __init__(self, strategy: PromptStrategy) -> None:
        rules = strategy.parsing
        self._tool_keys = tuple(rules.tool_keys)
        self._arg_keys = tuple(rules.argument_keys)
        self.tool_key = self._tool_keys[0]
        self.argument_key = self._arg_keys[0]
        self.max_depth = rules.max_argument_depth
        self.max_calls = rules.max_calls
        self._healing = strategy.healing_rules
        tag = re.escape(rules.call_tag)
        self._tag_open = f"<{rules.call_tag}"
        # attributes never hold "<": a run of openings is scanned once, not once per opening
        self._tag_name = re.compile(rf"<{tag}[^<>]*>\s*({_NAME})(?![A-Za-z0-9_-])")
        keys = "|".join(re.escape(k) for k in self._tool_keys)
        # `"tool": "name"`, `'tool': 'name'`, `tool=name`: where a call names its tool.
        q = "[\"'\u201c\u201d\u2018\u2019\u201e]"  # straight and typographic quotes
        self._names_a_tool = re.compile(rf"{q}?\b(?:{keys})\b{q}?\s*[:=]\s*{q}?({_NAME})")

    # -- entry point -----------------------------------------------------------------------

    def extract(
        self, response: str | dict[str, Any], is_known: Callable[[str], bool]
    ) -> list[Found]:
        """All call candidates in `response`; broken calls to known tools carry an error."""
        if isinstance(response, str):
            return self._from_text(response, is_known)
        return self._from_dict(response, is_known)

    # -- dicts -----------------------------------------------------------------------------

    def _from_dict(self, obj: dict[str, Any], is_known: Callable[[str], bool]) -> list[Found]:
        obj = unwrap_envelope(obj)
        tool_calls = obj.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            return self._openai_tool_calls(tool_calls, is_known)
        content = obj.get("content")
        if isinstance(content, list):
            return self._anthropic_blocks(content, is_known) or self._text_of_blocks(
                content, is_known
            )
        parts = obj.get("parts")
        if isinstance(parts, list):
            return self._gemini_parts(parts, is_known)
        output = obj.get("output")
        if isinstance(output, list):
            return self._responses_items(output, is_known)
        kind = obj.get("type")
        if kind == "tool_use":
            return self._anthropic_blocks([obj], is_known)
        if kind == "function_call":
            return self._responses_items([obj], is_known)
        if isinstance(obj.get("functionCall"), dict):
            return self._gemini_parts([obj], is_known)
        legacy = obj.get("function_call")
        if isinstance(legacy, dict):
            if "args" in legacy:  # Gemini part written in snake_case
                return self._gemini_parts([obj], is_known)
            name, raw = legacy.get("name"), legacy.get("arguments")
            return [self._found(name, raw, None, "openai_function_call")]
        if isinstance(content, str) and "role" in obj:
            return self._from_text(content, is_known)
        found = self._call_from_object(obj, "mcs")
        return [found] if found else []

    def _found(
        self, name: Any, raw_args: Any, call_id: Any, dialect: Dialect, read: bool = True
    ) -> Found:
        """A call; `read=False` for one beyond the limit of calls: it will not run, so its
        arguments are not parsed or healed (it is still answered)."""
        name = name if isinstance(name, str) else ""
        cid = call_id if isinstance(call_id, str) and call_id else None
        if raw_args is None or not read:
            return Found(name, {}, cid, dialect)
        if isinstance(raw_args, str):
            try:
                return Found(name, _fast_loads(raw_args), cid, dialect)
            except ValueError:
                pass
            if not raw_args.strip():
                return Found(name, {}, cid, dialect)
            try:
                value, healed = heal(raw_args, self._healing)
            except TooDeep:
                return Found(name, None, cid, dialect, error=TOO_DEEP)
            except ValueError as exc:
                return Found(name, None, cid, dialect, error=describe_problem(exc))
            return Found(name, value, cid, dialect, healed=healed)
        return Found(name, raw_args, cid, dialect)

    def _reader(self, is_known: Callable[[str], bool]) -> Callable[[Any], bool]:
        """Whether the next call's arguments are worth reading: only the first `max_calls`
        calls to this driver's tools can run."""
        known = 0

        def read(name: Any) -> bool:
            nonlocal known
            if isinstance(name, str) and is_known(name):
                known += 1
            return known <= self.max_calls

        return read

    def _openai_tool_calls(self, calls: list[Any], is_known: Callable[[str], bool]) -> list[Found]:
        out = []
        read = self._reader(is_known)
        for call in calls:
            if not isinstance(call, dict):
                continue
            fn = call.get("function")
            fn = fn if isinstance(fn, dict) else call
            raw = fn.get("arguments", fn.get("args"))
            dialect: Dialect = "ollama" if isinstance(raw, dict) and "id" not in call else "openai"
            name = fn.get("name")
            out.append(self._found(name, raw, call.get("id"), dialect, read(name)))
        return out

    def _anthropic_blocks(self, blocks: list[Any], is_known: Callable[[str], bool]) -> list[Found]:
        read = self._reader(is_known)
        return [
            self._found(
                b.get("name"), b.get("input"), b.get("id"), "anthropic", read(b.get("name"))
            )
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]

    def _text_of_blocks(self, blocks: list[Any], is_known: Callable[[str], bool]) -> list[Found]:
        text = assistant_text(blocks)
        return self._from_text(text, is_known) if text else []

    def _gemini_parts(self, parts: list[Any], is_known: Callable[[str], bool]) -> list[Found]:
        out = []
        text: list[str] = []
        read = self._reader(is_known)
        for part in parts:
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall") or part.get("function_call")
            if isinstance(call, dict):
                name = call.get("name")
                out.append(
                    self._found(name, call.get("args"), call.get("id"), "gemini", read(name))
                )
            elif isinstance(part.get("text"), str):
                text.append(part["text"])
        if not out and text:
            return self._from_text("".join(text), is_known)
        return out

    def _responses_items(self, items: list[Any], is_known: Callable[[str], bool]) -> list[Found]:
        read = self._reader(is_known)
        out = [
            self._found(
                i.get("name"), i.get("arguments"), i.get("call_id"), "openai_responses",
                read(i.get("name")),
            )
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call"
        ]  # fmt: skip
        if not out:
            text = "".join(
                c.get("text", "")
                for i in items
                if isinstance(i, dict) and i.get("type") == "message"
                for c in i.get("content") or []
                if isinstance(c, dict) and isinstance(c.get("text"), str)
            )
            return self._from_text(text, is_known) if text else []
        return out

    # -- text ------------------------------------------------------------------------------

    def _from_text(self, text: str, is_known: Callable[[str], bool]) -> list[Found]:
        if "{" not in text and self._tag_open not in text:
            return []
        stripped = text.strip()
        if stripped[:1] == "{" and stripped[-1:] == "}":
            # The common case: the whole output is one JSON object.
            try:
                value = _fast_loads(stripped)
            except ValueError:
                pass
            else:
                call = self._call_from_object(value, "text") if type(value) is dict else None
                if call is not None and is_known(call.name):
                    return [call]
        found, parsed, stuck_at = self._objects_in_prose(text)
        if stuck_at is None:
            for f in found:
                if is_known(f.name):
                    return found
        spots = self._spots(text)
        if not spots:
            return found  # every call names its tool: with no name in the text, no call
        positions = [pos for pos, _ in spots]
        brackets = BracketMap(text, positions)
        if stuck_at is not None:
            self._json_objects(text, brackets, stuck_at, positions, found, parsed)
            for f in found:
                if is_known(f.name):
                    return found
        return found + self._heal_text(text, is_known, found, parsed, spots, brackets)

    def _objects_in_prose(self, text: str) -> tuple[list[Found], list[tuple[int, int]], int | None]:
        """The usual case, cheaply: prose whose every `{` starts a valid JSON object.

        Returns the calls and the spans of the objects that parsed, and the position of the
        first `{` that did not (None when every one did). It stops there, after one failed
        attempt, so it stays linear; the bracket map decides where else to look.
        """
        found: list[Found] = []
        parsed: list[tuple[int, int]] = []
        start = text.find("{")
        while start != -1:
            try:
                value, end = _DECODER.raw_decode(text, start)
            except (ValueError, RecursionError):
                return found, parsed, start
            parsed.append((start, end))
            if isinstance(value, dict):
                call = self._call_from_object(value, "text")
                if call is not None:
                    found.append(call)
            start = text.find("{", end)
        return found, parsed, None

    def _json_objects(  # noqa: PLR0917
        self,
        text: str,
        brackets: BracketMap,
        start_at: int,
        spots: list[int],
        found: list[Found],
        parsed: list[tuple[int, int]],
    ) -> None:
        """Add the call-shaped JSON objects from `start_at` on to `found`, and the spans of
        all objects that parse to `parsed`.

        A `{` that never closes cannot start a JSON object, and one whose span names no
        tool (`spots`) cannot hold a call, so neither is tried; after an object fails to
        parse the objects nested in it are tried too, within a budget of parser work
        proportional to the text, so brace-heavy input stays linear.
        """
        starts = brackets.closed_braces
        budget = _RETRY_WORK * len(text) + _RETRY_SLACK
        spent = 0
        failed_until = -1  # end of the outermost object that failed to parse
        i = brackets.closed_from(start_at)
        while i < len(starts):
            start = starts[i]
            end = brackets.end_of(start) or start
            i += 1
            if start < failed_until and spent > budget:
                i = brackets.closed_from(failed_until)
                continue
            if not _OBJECT_START.match(text, start):
                continue  # "{x}", "{name!r}": braces that cannot start a JSON object
            first_spot = bisect_left(spots, start)
            if first_spot == len(spots) or spots[first_spot] >= end:
                continue  # names no tool: cannot be, nor hold, a call
            spent += end - start
            try:
                # the slice, not the whole text: a parse error's position is then counted
                # from the object's start, not from the text's (which made failures quadratic)
                value, length = _DECODER.raw_decode(text[start:end])
            except (ValueError, RecursionError):
                failed_until = max(failed_until, end)
                continue
            stop = start + length
            parsed.append((start, stop))
            if isinstance(value, dict):
                call = self._call_from_object(value, "text")
                if call is not None:
                    found.append(call)
            i = brackets.closed_from(stop)

    def _spots(self, text: str) -> list[tuple[int, str]]:
        """Where the text names a tool (`"tool": "x"`, `<tool_call>x`), in order."""
        spots = [(m.start(), m.group(1)) for m in self._names_a_tool.finditer(text)]
        if self._tag_open in text:
            spots += [(m.start(), m.group(1)) for m in self._tag_name.finditer(text)]
            spots.sort()
        return spots

    def _call_from_object(self, obj: dict[str, Any], dialect: Dialect) -> Found | None:
        """An object is a call when one of the pack's tool keys holds a name."""
        # The form the prompt asks for, {"tool": name, "arguments": {...}}, without the loops.
        name = obj.get(self.tool_key)
        if type(name) is str and name:
            args = obj.get(self.argument_key)
            if type(args) is dict:
                cid = obj.get("id")
                return Found(name, args, cid if type(cid) is str and cid else None, dialect)
        for tool_key in self._tool_keys:
            value = obj.get(tool_key)
            if isinstance(value, str) and value:
                name = value
                break
            if isinstance(value, dict) and isinstance(value.get("name"), str):
                # {"function": {"name": ..., "arguments": ...}} written as text
                return self._call_from_object(value, dialect)
        else:
            return None
        raw = _NO_ARGS
        for key in self._arg_keys:
            if key in obj:
                raw = obj[key]
                break
        healed: tuple[str, ...] = ()
        if raw is _NO_ARGS:
            # {"tool": "x", "a": 1}: arguments written beside the tool name
            raw = {k: v for k, v in obj.items() if k not in (tool_key, "id", "call_id")}
            healed = ("flat_arguments",) if raw else ()
        call_id = obj.get("id") or obj.get("call_id")
        found = self._found(name, raw, call_id, dialect)
        if healed and not found.healed:
            return Found(found.name, found.arguments, found.call_id, dialect, healed=healed)
        return found

    def _heal_text(  # noqa: PLR0917
        self,
        text: str,
        is_known: Callable[[str], bool],
        found: list[Found],
        parsed: list[tuple[int, int]],
        spots: list[tuple[int, str]],
        brackets: BracketMap,
    ) -> list[Found]:
        """Broken calls that clearly name one of this driver's tools: heal or report them.

        Only text outside objects that already parsed is considered: a valid object that is
        not a call (a nested `{"tool": ...}` in data, say) stays data. Each stretch of text is
        healed at most once, so the work stays linear in the text.
        """
        out: list[Found] = []
        seen_end = -1
        parsed_starts = [a for a, _ in parsed]
        room = self.max_calls - sum(1 for f in found if is_known(f.name))
        for (pos, name), enclosing in zip(spots, brackets.enclosing, strict=True):
            if pos < seen_end or not is_known(name):
                continue
            k = bisect_right(parsed_starts, pos) - 1
            if k >= 0 and pos < parsed[k][1]:
                continue
            if len(out) >= room:  # beyond the limit: counted and answered, never healed
                out.append(Found(name, {}, None, "text"))
                continue
            open_at = enclosing
            if open_at is None:
                later = brackets.braces_from(pos)
                if later == len(brackets.braces):
                    out.append(Found(name, None, None, "text", error="no JSON object found"))
                    seen_end = len(text)
                    continue
                open_at = brackets.braces[later]
            if open_at < seen_end:
                continue  # this brace encloses a stretch already healed
            end = brackets.end_of(open_at)
            span_end = len(text) if end is None else end
            span = self._cut_tag(text[open_at:span_end])
            seen_end = span_end
            try:
                value, healed = heal(span, self._healing)
            except TooDeep:
                out.append(Found(name, None, None, "text", error=TOO_DEEP))
                continue
            except ValueError as exc:
                out.append(Found(name, None, None, "text", error=describe_problem(exc)))
                continue
            call = self._call_from_object(value, "text") if isinstance(value, dict) else None
            if call is None or call.name != name:
                # The name stood inside the arguments, or after a tag: the span holds args.
                call = Found(name, value, None, "text")
            out.append(
                Found(
                    call.name,
                    call.arguments,
                    call.call_id,
                    "text",
                    call.error,
                    healed + call.healed,
                )
            )
        return out

    def _cut_tag(self, span: str) -> str:
        close = span.find(f"</{self._tag_open[1:]}")
        return span[:close] if close != -1 else span


def unwrap_envelope(obj: dict[str, Any]) -> dict[str, Any]:
    """The assistant message inside a whole API response (OpenAI, Ollama, Gemini)."""
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message") or choices[0].get("delta")
        if isinstance(message, dict):
            return message
    message = obj.get("message")
    if isinstance(message, dict) and "role" in message:
        return message
    candidates = obj.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        content = candidates[0].get("content")
        if isinstance(content, dict):
            return content
    return obj


def assistant_text(content: Any) -> str:
    """The prose of an assistant message's content (a string, or text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    return ""
