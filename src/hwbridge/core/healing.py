"""Repair of near-JSON written by LLMs, driven by the healing rules of a prompt pack.

The rules (regex substitutions and two builtin repairs) live in `prompts/*.toml`; this module
only knows how to apply them, plus a string-aware bracket scanner used to cut a broken call
out of surrounding prose.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from hwbridge.core.prompts import HealingRule

__all__ = ["enclosing_brace", "heal", "matching_end", "scan_brackets"]

_CLOSERS = {"{": "}", "[": "]"}
_JSON_NAMES = {"true": "True", "false": "False", "null": "None"}
_LENIENT = json.JSONDecoder(strict=False)
# A backslash that starts no Python escape is literal; doubling it keeps that meaning
# without the interpreter's invalid-escape warning.
_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
_PY_ESCAPES = frozenset("\\'\"abfnrtvx01234567NuU\n")


def _keep_escape(m: re.Match[str]) -> str:
    return m.group(0) if m.group(1) and m.group(1) in _PY_ESCAPES else "\\" + m.group(0)


def _brackets(text: str, start: int, stop: int) -> Iterator[tuple[int, str, str]]:
    """(position, bracket, open quote) for each bracket outside string literals; the final
    item has bracket "" and tells whether a string is still open at `stop`."""
    quote = ""
    escaped = False
    for i in range(start, stop):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[]}":
            yield i, ch, quote
    yield stop, "", quote


def scan_brackets(text: str, start: int = 0, stop: int | None = None) -> tuple[list[int], str]:
    """Scan `text[start:stop]`, skipping string literals; return the open brackets and quote.

    The result is the positions of the brackets still open at `stop`, and the quote
    character of a string still open there ("" when none).
    """
    stack: list[int] = []
    open_quote = ""
    for i, ch, quote in _brackets(text, start, len(text) if stop is None else stop):
        if not ch:
            open_quote = quote
        elif ch in "{[":
            stack.append(i)
        elif stack:
            stack.pop()
    return stack, open_quote


def enclosing_brace(text: str, pos: int, *, max_tries: int = 64) -> int | None:
    """Position of the innermost `{` still open at `pos`, or None.

    Walks back from `pos` rather than forward from the start, so apostrophes in the prose
    before a call ("Let's check: {...") cannot be mistaken for string quotes.
    """
    c = text.rfind("{", 0, pos)
    for _ in range(max_tries):
        if c == -1:
            return None
        stack, quote = scan_brackets(text, c, pos)
        if stack and stack[0] == c and not quote:
            return c
        c = text.rfind("{", 0, c)
    return None


def matching_end(text: str, start: int) -> int | None:
    """Index just past the bracket that closes the one at `start`, or None if never closed."""
    depth = 0
    for i, ch, _ in _brackets(text, start, len(text)):
        if not ch:
            break
        if ch in "{[":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def close_brackets(text: str) -> str:
    """Close a string, brackets and braces left open at the end (a truncated call)."""
    body = text.rstrip()
    stack, quote = scan_brackets(body)
    if not stack and not quote:
        return text
    if quote:
        body += quote
    else:
        body = body.rstrip(",:").rstrip()
    return body + "".join(_CLOSERS[body[i]] for i in reversed(stack))


def python_literals(text: str) -> str:
    """Read a Python literal (single quotes, True/None, tuples) and write it as JSON."""
    try:
        tokens = [
            (tok.type, _JSON_NAMES.get(tok.string, tok.string))
            if tok.type == tokenize.NAME
            else (tok.type, tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        ]
        source = _ESCAPE.sub(_keep_escape, tokenize.untokenize(tokens))
        value = ast.literal_eval(source.strip())
        return json.dumps(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, tokenize.TokenError):
        return text


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
    """json.loads that accepts raw control characters inside strings, as LLMs write them."""
    return _LENIENT.decode(text)


def heal(text: str, rules: Iterable[tuple[str, HealingRule]]) -> tuple[Any, tuple[str, ...]]:
    """Apply the rules in order until `text` parses; return the value and the rules used.

    Raises ValueError (with the parser's last complaint) when no rule makes it parse.
    """
    current = text
    applied: list[str] = []
    try:
        return loads(current), ()
    except ValueError as exc:
        problem: ValueError = exc
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
