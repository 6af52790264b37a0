"""Repair of near-JSON written by LLMs, driven by the healing rules of a prompt pack.

The rules (regex substitutions and two builtin repairs) live in `prompts/*.toml`; this module
only knows how to apply them. Every rule must run in time linear in its input (a pattern that
starts with a repeated class is anchored), because the input is whatever an LLM wrote.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from hwbridge.core.brackets import BracketMap
from hwbridge.core.prompts import HealingRule

__all__ = [
    "MAX_HEAL_CHARS",
    "RepairError",
    "TooDeep",
    "close_brackets",
    "describe_problem",
    "heal",
    "loads",
    "python_literals",
]

MAX_HEAL_CHARS = 1 << 16


class RepairError(ValueError):
    """A call that cannot be read, for a reason this module names (not the parser)."""


class TooDeep(RepairError):
    """The text nests deeper than a parser can walk."""


_CLOSERS = {"{": "}", "[": "]"}
_LENIENT = json.JSONDecoder(strict=False)
# A backslash that starts no Python escape is literal; doubling it keeps that meaning
# without the interpreter's invalid-escape warning.
_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
_PY_ESCAPES = frozenset("\\'\"abfnrtvx01234567NuU\n")


def _keep_escape(m: re.Match[str]) -> str:
    return m.group(0) if m.group(1) and m.group(1) in _PY_ESCAPES else "\\" + m.group(0)


def close_brackets(text: str) -> str:
    """Close a string, brackets and braces left open at the end (a truncated call)."""
    body = text.rstrip()
    brackets = BracketMap(body)
    stack, quote = brackets.unclosed, brackets.open_quote
    if not stack and not quote:
        return text
    if quote:
        body += quote
    else:
        body = body.rstrip(",:").rstrip()
    return body + "".join(_CLOSERS[body[i]] for i in reversed(stack))


def python_literals(text: str) -> str:
    """Read a Python literal (single quotes, True/None, tuples) and write it as JSON.

    Python's own parser reads it (linear, in C, nesting bounded by the parser), and only
    literal nodes are turned into values; JSON's true/false/null are read as well.
    """
    try:
        source = _ESCAPE.sub(_keep_escape, text).strip()
        return json.dumps(_literal(ast.parse(source, mode="eval").body))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


_NAMES = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}


def _literal(node: ast.expr) -> Any:
    """The value of a literal expression; ValueError for anything else (names, calls...)."""
    if isinstance(node, ast.Constant):
        constant = node.value
        if constant is None or isinstance(constant, str | int | float):
            return constant
    elif isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    elif isinstance(node, ast.Dict):
        out = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError("** in a literal")
            k = _literal(key)
            if not isinstance(k, str | int | float | bool) and k is not None:
                raise ValueError("a key that JSON cannot hold")
            out[k] = _literal(item)
        return out
    elif isinstance(node, ast.List | ast.Tuple):
        return [_literal(item) for item in node.elts]
    elif (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
        and not isinstance(node.operand.value, bool)
    ):
        number = node.operand.value
        return -number if isinstance(node.op, ast.USub) else number
    raise ValueError("not a literal")


_BUILTINS = {"close_brackets": close_brackets, "python_literals": python_literals}


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _apply(rule: HealingRule, text: str) -> str:
    if rule.builtin is not None:
        return _BUILTINS[rule.builtin](text)
    if rule.pattern is None:
        return text
    return _compiled(rule.pattern).sub(rule.replacement, text)


def loads(text: str) -> Any:
    """json.loads that accepts raw control characters inside strings, as LLMs write them.

    Raises ValueError for anything it cannot read, nesting too deep for the parser included.
    """
    try:
        return _LENIENT.decode(text)
    except RecursionError:
        raise TooDeep("the JSON nests too deeply") from None


def describe_problem(exc: ValueError) -> str:
    """Why a call could not be read, in the parser's words, never interpreter internals."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at character {exc.pos}"
    if isinstance(exc, RepairError):
        return str(exc)
    return "a value could not be read"  # e.g. an integer beyond the interpreter's digit limit


def heal(text: str, rules: Iterable[tuple[str, HealingRule]]) -> tuple[Any, tuple[str, ...]]:
    """Apply the rules in order until `text` parses; return the value and the rules used.

    Raises ValueError (with the parser's last complaint) when no rule makes it parse. A
    text longer than MAX_HEAL_CHARS that does not parse is not repaired: no real call is
    that long and broken, and the rules would only multiply the work.
    """
    current = text
    applied: list[str] = []
    try:
        return loads(current), ()
    except ValueError as exc:
        problem: ValueError = exc
    if len(text) > MAX_HEAL_CHARS:
        reason = describe_problem(problem)
        raise RepairError(f"{reason}; a call this long is not repaired") from None
    for name, rule in rules:
        changed = _apply(rule, current)
        if changed == current:
            continue
        current = changed
        applied.append(name)
        try:
            return loads(current), tuple(applied)
        except ValueError as exc:
            problem = exc
    raise problem
