"""Tool definitions for providers' native function calling, with no model registry.

The caller names the wire format it talks; nothing here guesses from a model name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from hwbridge.core.models import Tool, is_valid_tool_name
from hwbridge.core.prompts import PromptStrategy

__all__ = ["native_aliases", "native_tools"]

Provider = Literal["openai", "openai_responses", "anthropic", "gemini"]

# The OpenAPI-subset Gemini accepts in function declarations.
_GEMINI_KEYS = frozenset(
    {
        "type", "format", "description", "nullable", "enum", "properties", "required",
        "items", "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength",
        "pattern", "anyOf", "title", "propertyOrdering",
    }
)  # fmt: skip


def native_tools(
    tools: list[Tool], provider: Provider, strategy: PromptStrategy
) -> list[dict[str, Any]]:
    """The definitions, with every line break inside their text escaped: a provider renders
    them into the model's context, where a description (from a database, say) must not be
    able to start a line of its own."""
    definitions: list[dict[str, Any]] = _no_breaks(_definitions(tools, provider, strategy))
    return definitions


def native_aliases(names: Iterable[str], kept: Mapping[str, str] | None = None) -> dict[str, str]:
    """A provider-safe alias for each name a provider would refuse (`bench1.read_signals`
    -> `bench1__read_signals`), unique among all `names`: OpenAI and Anthropic refuse dots
    in function names. Names every provider accepts are not in the mapping.

    `kept` holds the aliases given before (name -> alias, names gone included): a name keeps
    its alias, and no other name is given an alias that was given before, so an alias a
    model was offered never comes to run another tool when the tools change. (Only a tool
    whose own name is that alias takes it over: a name is never an alias. In a farm with
    dotted names that cannot happen: every name has a dot, no alias has one.)"""
    names = list(names)
    kept = kept or {}
    real = set(names)
    taken = real | set(kept.values())
    aliases: dict[str, str] = {}
    for name in names:
        alias = kept.get(name)
        if alias is not None and alias not in real and not is_valid_tool_name(name):
            aliases[name] = alias
    for name in names:
        if is_valid_tool_name(name) or name in aliases:
            continue
        base = re.sub(r"[^A-Za-z0-9_-]", "_", name.replace(".", "__"))
        if len(base) > 64:  # kept apart from its neighbours by a digest of the whole name
            base = f"{base[:55]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
        alias, n = base, 2
        while alias in taken:
            suffix = f"_{n}"
            alias, n = base[: 64 - len(suffix)] + suffix, n + 1
        taken.add(alias)
        aliases[name] = alias
    return aliases


def _definitions(
    tools: list[Tool], provider: Provider, strategy: PromptStrategy
) -> list[dict[str, Any]]:
    if provider == "openai":
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": strategy.description_of(t),
                    "parameters": t.input_schema(),
                },
            }
            for t in tools
        ]
    if provider == "openai_responses":
        return [
            {
                "type": "function",
                "name": t.name,
                "description": strategy.description_of(t),
                "parameters": t.input_schema(),
            }
            for t in tools
        ]
    if provider == "anthropic":
        return [
            {
                "name": t.name,
                "description": strategy.description_of(t),
                "input_schema": t.input_schema(),
            }
            for t in tools
        ]
    if provider == "gemini":
        declarations = []
        for t in tools:
            decl: dict[str, Any] = {"name": t.name, "description": strategy.description_of(t)}
            if t.parameters:
                decl["parameters"] = _gemini_schema(t.input_schema())
            declarations.append(decl)
        return [{"functionDeclarations": declarations}]
    raise ValueError(
        f"unknown provider {provider!r}; use openai, openai_responses, anthropic or gemini"
    )


def _gemini_schema(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_gemini_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _GEMINI_KEYS:
            continue
        if key == "properties":
            out[key] = {name: _gemini_schema(s) for name, s in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = _gemini_schema(value)
        elif key == "enum":
            out[key] = [str(v) for v in value]
        else:
            out[key] = value
    if isinstance(out.get("type"), list):  # ["number", "string"] -> anyOf
        out["anyOf"] = [{"type": t} for t in out.pop("type")]
    return out


_BREAK = re.compile("[\x00-\x1f\x7f\u0085\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    return json.dumps(match.group())[1:-1]


def _no_breaks(value: Any) -> Any:
    """A copy with the control characters and line separators in its strings escaped."""
    if isinstance(value, str):
        return _BREAK.sub(_escape, value) if _BREAK.search(value) else value
    if isinstance(value, dict):
        return {k: _no_breaks(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_breaks(v) for v in value]
    return value
