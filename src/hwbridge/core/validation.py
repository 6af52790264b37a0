"""Argument validation against each tool's JSON Schema, with hints that name the parameter.

fastjsonschema compiles each tool's schema to Python once (lazily, on the first call of that
tool), which keeps validation in the microseconds on the hot path.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import fastjsonschema

from hwbridge.core.models import Tool
from hwbridge.core.prompts import PromptStrategy

__all__ = ["ArgumentValidator"]

log = logging.getLogger(__name__)


class ArgumentValidator:
    """Checks one tool's arguments; reports every missing or unknown name, then bad values."""

    __slots__ = ("_check", "_lock", "_names", "_required", "_schema", "tool")

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self._names = {p.name: p for p in tool.parameters}
        self._required = [p for p in tool.parameters if p.required]
        schema = tool.input_schema()
        # Presence is checked by hand so every problem is reported at once.
        schema.pop("required", None)
        schema.pop("additionalProperties", None)
        self._schema = schema
        self._check: Callable[[Any], Any] | None = None
        self._lock = threading.Lock()

    def _compiled(self) -> Callable[[Any], Any]:
        check = self._check
        if check is None:
            with self._lock:
                if self._check is None:
                    self._check = fastjsonschema.compile(self._schema)
                check = self._check
        return check

    def problems(self, arguments: dict[str, Any], strategy: PromptStrategy) -> list[str]:
        """Hints for the LLM, one per problem; empty when the arguments are valid."""
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
        found += [
            strategy.retry("unknown_parameter", name=name, tool=self.tool.name, allowed=allowed)
            for name in arguments
            if name not in self._names
        ]
        if found or not self._schema["properties"]:
            return found
        try:
            self._compiled()(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            path = exc.name or ""
            name = path[5:] if path.startswith("data.") else path
            got = json.dumps(exc.value, ensure_ascii=False, default=str)
            if len(got) > 80:
                got = got[:77] + "..."
            found.append(
                strategy.retry(
                    "wrong_value",
                    name=name,
                    expected=strategy.expected(exc.rule or "other", exc.rule_definition),
                    got=got,
                )
            )
        return found


def _type_of(schema: dict[str, Any] | None) -> str:
    return str((schema or {}).get("type", "any"))
