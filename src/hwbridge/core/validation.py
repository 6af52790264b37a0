"""Argument validation against each tool's JSON Schema, with hints that name the parameter.

jsonschema-rs (a compiled validator) checks a tool's whole arguments schema (required names,
no unknown names, types, enums, bounds) in well under a microsecond, so every call is
validated. Only a failing call pays for the detailed hints: every missing and unknown name,
then every bad value with what was expected.
"""

from __future__ import annotations

import json
from itertools import islice
from typing import Any

import jsonschema_rs

from hwbridge.core.jsonsafe import clean_text
from hwbridge.core.models import Tool
from hwbridge.core.prompts import PromptStrategy

__all__ = ["ArgumentValidator"]

_MAX_HINTS = 6
_EXPLAINED_ITEMS = 256
_PRESENCE = frozenset({"required", "additionalProperties"})


class ArgumentValidator:
    """Checks one tool's arguments against its compiled schema."""

    __slots__ = ("_names", "_required", "_schema", "_validator", "is_valid", "tool")

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self._names = {p.name: p for p in tool.parameters}
        self._required = [p for p in tool.parameters if p.required]
        self._schema = tool.input_schema()
        self._validator = jsonschema_rs.validator_for(self._schema)
        self.is_valid = self._validator.is_valid

    def problems(self, arguments: dict[str, Any], strategy: PromptStrategy) -> list[str]:
        """Hints for the LLM, one per problem; empty when the arguments are valid."""
        try:
            if self.is_valid(arguments):
                return []
        except (ValueError, TypeError):  # a value JSON cannot hold
            pass
        return self._explain(arguments, strategy)

    def _explain(self, arguments: dict[str, Any], strategy: PromptStrategy) -> list[str]:
        found = [
            strategy.retry(
                "missing_parameter",
                name=p.name,
                description=p.description or strategy.expected("type", _type_of(p.schema)),
            )
            for p in self._required
            if p.name not in arguments
        ]
        allowed = ", ".join(self._names) or "no arguments"
        unknown = [name for name in arguments if name not in self._names]
        found += [
            strategy.retry(
                "unknown_parameter", name=_cut(name), tool=self.tool.name, allowed=allowed
            )
            for name in unknown[:_MAX_HINTS]
        ]
        if found:
            return found
        try:
            # only the first few are shown; listing all is linear in a hostile argument, and
            # slower than that in its items: they are read up to _EXPLAINED_ITEMS each
            shrunk = _shrunk(arguments)
            errors = list(islice(self._validator.iter_errors(shrunk), _MAX_HINTS * 4))
        except (ValueError, TypeError):  # a value JSON cannot hold (an int beyond 4300 digits)
            errors = []
        for error in errors[:_MAX_HINTS]:
            rule = str(error.schema_path[-1]) if error.schema_path else "other"
            if rule in _PRESENCE:
                continue
            found.append(
                strategy.retry(
                    "wrong_value",
                    name=_path(error.instance_path),
                    expected=strategy.expected(rule, self._rule_value(error.schema_path)),
                    got=_shown(error.instance),
                )
            )
        # The check failed, so never report "valid" even if no detail could be named.
        return found or [
            strategy.retry(
                "wrong_value", name="arguments", expected=strategy.expected("other", None), got="?"
            )
        ]

    def _rule_value(self, schema_path: Any) -> Any:
        node: Any = self._schema
        for step in schema_path:
            try:
                node = node[step]
            except (KeyError, IndexError, TypeError):
                return None
        return node


def _shrunk(value: Any) -> Any:
    """`value` with every list cut to its first _EXPLAINED_ITEMS + 1 items (still too long
    for any maxItems below that): what a failing call is explained from. A million bad items
    gave jsonschema-rs a million errors to build (13 s for 7 MB), of which six are shown."""
    if isinstance(value, list):
        return [_shrunk(v) for v in value[: _EXPLAINED_ITEMS + 1]]
    if isinstance(value, dict):
        return {k: _shrunk(v) for k, v in value.items()}
    return value


def _path(instance_path: Any) -> str:
    out = ""
    for step in instance_path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return _cut(out) if out else "arguments"


def _shown(value: Any) -> str:
    """The offending value as the LLM wrote it, cut short; never an interpreter message."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"{'-' if value < 0 else ''}1e{int(value.bit_length() * 0.30103)}"
    try:
        got = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        got = "?"
    return _cut(got)


def _cut(text: str, limit: int = 80) -> str:
    text = clean_text(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_of(schema: dict[str, Any] | None) -> str:
    return str((schema or {}).get("type", "any"))
