"""Prompt packs: every sentence an LLM sees, every retry hint and every healing rule.

A pack is a TOML file (`prompts/*.toml`). `PromptStrategy.load` reads a packaged pack by name
or a user file merged over a packaged one (keys replace, new keys add), validates it against
a strict schema so a missing or misspelt key fails at load time, and renders tool listings
and messages from it. Python code in hwbridge holds no LLM-facing prose (invariant 6).
"""

from __future__ import annotations

import json
import math
import re
import string
import tomllib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hwbridge.core.models import Tool

__all__ = ["PromptPackError", "PromptStrategy", "estimate_tokens", "packaged_packs", "packs_dir"]

PACKAGED = ("json", "xml", "compact")


class PromptPackError(ValueError):
    """A prompt pack that cannot be used: unreadable, a missing or unknown key, a bad template."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PackMeta(_Strict):
    name: str
    version: str
    description: str = ""
    extends: str | None = None


class RenderSettings(_Strict):
    tools_format: Literal["json", "xml", "compact"]
    result_role: Literal["user", "system", "tool"]
    token_budget: int = Field(gt=0)
    max_result_chars: int = Field(gt=64)


class Texts(_Strict):
    system: str
    native_system: str
    call_example: str
    result: str
    result_truncated: str
    no_description: str
    image_not_carried: str


class RetryTexts(_Strict):
    invalid_json: str
    invalid_arguments: str
    not_an_object: str
    missing_parameter: str
    unknown_parameter: str
    wrong_value: str
    tool_error: str
    retry_allowed: str
    retry_not_allowed: str
    internal_error: str
    unknown_tool: str
    not_executed: str
    too_many_calls: str
    too_deep: str
    result_unreadable: str


class ExpectedTexts(_Strict):
    """How a JSON Schema rule is phrased in a retry hint: 'must be {phrase}'."""

    type: str
    enum: str
    const: str
    minimum: str
    maximum: str
    exclusiveMinimum: str
    exclusiveMaximum: str
    minLength: str
    maxLength: str
    pattern: str
    minItems: str
    maxItems: str
    uniqueItems: str
    other: str


class ParsingRules(_Strict):
    tool_keys: list[str] = Field(min_length=1)
    argument_keys: list[str] = Field(min_length=1)
    call_tag: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    max_calls: int = Field(ge=1, le=1024)  # calls executed from one LLM output
    max_argument_depth: int = Field(ge=2, le=256)  # nesting of a call's arguments


BuiltinHealing = Literal["close_brackets", "python_literals"]


class HealingRule(_Strict):
    """One repair step: a regex substitution or a named builtin repair."""

    pattern: str | None = None
    replacement: str = ""
    builtin: BuiltinHealing | None = None
    enabled: bool = True
    comment: str = ""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"pattern {value!r} is not a valid regex: {exc}") from exc
        return value


class ModelVariant(_Strict):
    """Models whose name matches `pattern` get another pack."""

    pattern: str
    pack: str


class PromptPack(_Strict):
    meta: PackMeta
    render: RenderSettings
    text: Texts
    retry: RetryTexts
    expected: ExpectedTexts
    parsing: ParsingRules
    healing: dict[str, HealingRule] = Field(default_factory=dict)
    models: dict[str, ModelVariant] = Field(default_factory=dict)


# Placeholders each template may use; anything else is a typo caught at load time.
_PLACEHOLDERS: dict[str, frozenset[str]] = {
    "text.system": frozenset({"tools", "call_example", "guidance", "call_tag"}),
    "text.native_system": frozenset({"guidance"}),
    "text.call_example": frozenset({"call_tag"}),
    "text.result": frozenset({"tool", "result"}),
    "text.result_truncated": frozenset({"shown", "total"}),
    "text.no_description": frozenset({"tool"}),
    "retry.invalid_json": frozenset({"tool", "problem", "call_example"}),
    "retry.invalid_arguments": frozenset({"tool", "problems"}),
    "retry.not_an_object": frozenset({"tool"}),
    "retry.missing_parameter": frozenset({"name", "description"}),
    "retry.unknown_parameter": frozenset({"name", "tool", "allowed"}),
    "retry.wrong_value": frozenset({"name", "expected", "got"}),
    "retry.tool_error": frozenset({"tool", "code", "message", "retry_hint"}),
    "retry.retry_allowed": frozenset(),
    "retry.retry_not_allowed": frozenset(),
    "retry.internal_error": frozenset({"tool", "error_id"}),
    "retry.unknown_tool": frozenset({"tool", "available"}),
    "retry.not_executed": frozenset({"tool"}),
    "retry.too_many_calls": frozenset({"tool", "count", "limit"}),
    "retry.too_deep": frozenset({"tool", "limit"}),
    "retry.result_unreadable": frozenset({"tool", "error_id"}),
}
_EXPECTED_PLACEHOLDERS = frozenset({"expected"})


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 3.5 characters a token for JSON-heavy prompts)."""
    return math.ceil(len(text) / 3.5)


def packaged_packs() -> tuple[str, ...]:
    """Names of the packs that ship inside the wheel."""
    return PACKAGED


def packs_dir() -> Path:
    """Packs ship as hwbridge/prompts in the wheel; an editable install reads the repo's."""
    shipped = resources.files("hwbridge").joinpath("prompts")
    if shipped.is_dir():
        return Path(str(shipped))
    return Path(__file__).resolve().parents[3] / "prompts"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise PromptPackError(f"prompt pack {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise PromptPackError(f"prompt pack {str(path)!r} is not valid TOML: {exc}") from None


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; any other value replaces the base's."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@cache
def _packaged_raw(name: str) -> dict[str, Any]:
    if name not in PACKAGED:
        raise PromptPackError(
            f"unknown prompt pack {name!r}; packaged packs are {', '.join(PACKAGED)} "
            "(or give the path of a .toml file)"
        )
    raw = _read_toml(packs_dir() / f"{name}.toml")
    base = raw.get("meta", {}).get("extends")
    return _merge(_packaged_raw(base), raw) if base else raw


def _check_templates(pack: PromptPack, source: str) -> None:
    fmt = string.Formatter()
    templates: dict[str, tuple[str, frozenset[str]]] = {}
    for key, allowed in _PLACEHOLDERS.items():
        section, field = key.split(".")
        templates[key] = (getattr(getattr(pack, section), field), allowed)
    for field in ExpectedTexts.model_fields:
        templates[f"expected.{field}"] = (getattr(pack.expected, field), _EXPECTED_PLACEHOLDERS)
    for key, (template, allowed) in templates.items():
        try:
            used = {name for _, name, _, _ in fmt.parse(template) if name is not None}
        except ValueError as exc:
            raise PromptPackError(f"{source}: {key} is not a valid template: {exc}") from None
        unknown = used - allowed
        if unknown:
            raise PromptPackError(
                f"{source}: {key} uses unknown placeholder(s) {sorted(unknown)}; "
                f"allowed: {sorted(allowed) or 'none'}"
            )
    if "{tools}" not in pack.text.system:
        raise PromptPackError(f"{source}: text.system must contain {{tools}}")


def _validate(raw: dict[str, Any], source: str) -> PromptPack:
    try:
        pack = PromptPack.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            what = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].lower()
            problems.append(f"{where}: {what}")
        raise PromptPackError(f"{source}: " + "; ".join(problems)) from None
    _check_templates(pack, source)
    return pack


class PromptStrategy:
    """A loaded, validated prompt pack and the rendering that depends on it.

    Immutable and shareable between threads and drivers.
    """

    __slots__ = (
        "_expected",
        "_healing",
        "_max_chars",
        "_overrides",
        "_result",
        "_role",
        "_variants",
        "pack",
        "source",
    )

    def __init__(
        self, pack: PromptPack, *, source: str, overrides: Mapping[str, Any] | None = None
    ) -> None:
        self.pack = pack
        self.source = source
        self._overrides = dict(overrides or {})
        self._variants = tuple(
            (re.compile(v.pattern), v.pack) for v in pack.models.values() if v.pack
        )
        self._healing = tuple((name, r) for name, r in pack.healing.items() if r.enabled)
        self._expected = pack.expected.model_dump()
        # read on every tool call: keep them out of the pydantic attribute chain
        self._result = pack.text.result
        self._role = pack.render.result_role
        self._max_chars = pack.render.max_result_chars

    # -- loading ---------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        name_or_path: str | Path = "json",
        overrides: Mapping[str, Any] | str | Path | None = None,
    ) -> PromptStrategy:
        """Load a packaged pack by name, or a user TOML file merged over a packaged one.

        A user file merges over the pack its `[meta] extends` names (default `json`);
        `overrides` (a dict or another TOML file) merges over the result.
        """
        if isinstance(overrides, str | Path):
            overrides = _read_toml(Path(overrides))
        is_path = isinstance(name_or_path, Path) or str(name_or_path).endswith(".toml")
        if is_path:
            path = Path(name_or_path)
            user = _read_toml(path)
            base_name = user.get("meta", {}).get("extends", "json")
            raw = _merge(_packaged_raw(base_name), user) if base_name else user
            source = str(path)
        else:
            raw = _packaged_raw(str(name_or_path))
            source = f"packaged pack {name_or_path!r}"
        if overrides:
            raw = _merge(raw, overrides)
        return cls(_validate(raw, source), source=source, overrides=overrides)

    @classmethod
    def default(cls) -> PromptStrategy:
        return _default_strategy()

    def for_model(self, model_name: str | None) -> PromptStrategy:
        """The variant of this pack for `model_name` (itself when no pattern matches)."""
        if model_name:
            for pattern, pack_name in self._variants:
                if pattern.search(model_name):
                    key = json.dumps(self._overrides, sort_keys=True) if self._overrides else ""
                    return _cached_load(pack_name, key)
        return self

    # -- settings --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.pack.meta.name

    @property
    def parsing(self) -> ParsingRules:
        return self.pack.parsing

    @property
    def healing_rules(self) -> tuple[tuple[str, HealingRule], ...]:
        return self._healing

    @property
    def result_role(self) -> str:
        return self._role

    @property
    def token_budget(self) -> int:
        return self.pack.render.token_budget

    @property
    def max_result_chars(self) -> int:
        return self.pack.render.max_result_chars

    # -- rendering -------------------------------------------------------------------------

    def call_example(self) -> str:
        return self.pack.text.call_example.format(call_tag=self.pack.parsing.call_tag)

    def render_tools(self, tools: list[Tool]) -> str:
        fmt = self.pack.render.tools_format
        if fmt == "xml":
            return self._tools_xml(tools)
        if fmt == "compact":
            return "\n".join(self._tool_compact(t) for t in tools)
        return self._tools_json(tools)

    def system_message(self, tools: list[Tool], guidance: str = "") -> str:
        return self.pack.text.system.format(
            tools=self.render_tools(tools),
            call_example=self.call_example(),
            guidance=guidance,
            call_tag=self.pack.parsing.call_tag,
        ).strip()

    def native_system_message(self, guidance: str = "") -> str:
        return self.pack.text.native_system.format(guidance=guidance).strip()

    def result_text(self, tool: str, result_json: str) -> str:
        if len(result_json) > self._max_chars:
            result_json = self.bounded(result_json)
        return self._result.format(tool=tool, result=result_json)

    def image_note(self, tool: str, mime_type: str, size: int) -> str:
        """What a model reads in place of a picture its conversation cannot carry."""
        return self.pack.text.image_not_carried.format(tool=tool, mime_type=mime_type, size=size)

    def bounded(self, text: str) -> str:
        """Cut an oversized result and say so, so one tool call cannot flood the context."""
        limit = self._max_chars
        if len(text) <= limit:
            return text
        note = self.pack.text.result_truncated.format(shown=limit, total=len(text))
        return text[:limit] + note

    def retry(self, key: str, **values: Any) -> str:
        template: str = getattr(self.pack.retry, key)
        return template.format(**values)

    def expected(self, rule: str, expected: Any) -> str:
        template = self._expected.get(rule) or self._expected["other"]
        shown = ", ".join(map(str, expected)) if isinstance(expected, list) else expected
        return str(template).format(expected=shown)

    def description_of(self, tool: Tool) -> str:
        return (
            tool.description or tool.title or self.pack.text.no_description.format(tool=tool.name)
        )

    def _tools_json(self, tools: list[Tool]) -> str:
        lines = []
        for t in tools:
            entry = {
                "name": t.name,
                "description": self.description_of(t),
                "parameters": t.input_schema(),
            }
            lines.append(_json_inline(entry))
        return "[\n" + ",\n".join(lines) + "\n]"

    def _tools_xml(self, tools: list[Tool]) -> str:
        out = ["<tools>"]
        for t in tools:
            out.append(f"<tool name={quoteattr(t.name)}>")
            out.append(f"<description>{_xml_text(self.description_of(t))}</description>")
            for p in t.parameters:
                attrs = [f"name={quoteattr(escape_inline(p.name))}"]
                schema = p.schema or {}
                for key in ("type", "minimum", "maximum"):
                    if key in schema:
                        attrs.append(f"{key}={quoteattr(escape_inline(_plain(schema[key])))}")
                if "enum" in schema:
                    attrs.append(f"enum={quoteattr(_json_inline(schema['enum']))}")
                attrs.append(f"required={quoteattr(str(p.required).lower())}")
                extra = {
                    k: v
                    for k, v in schema.items()
                    if k not in {"type", "minimum", "maximum", "enum", "description"}
                }
                body = _xml_text(p.description or schema.get("description", ""))
                if extra:
                    body += f"<schema>{_xml_text(_json_inline(extra))}</schema>"
                out.append(f"<parameter {' '.join(attrs)}>{body}</parameter>")
            out.append("</tool>")
        out.append("</tools>")
        return "\n".join(out)

    def _tool_compact(self, tool: Tool) -> str:
        params = []
        for p in tool.parameters:
            schema = p.schema or {}
            declared = schema.get("type", "any")
            kinds = declared if isinstance(declared, list) else [declared]
            kind = escape_inline("|".join(map(_plain, kinds)))
            if "enum" in schema:
                kind = "|".join(_json_inline(v) for v in schema["enum"])
            params.append(f"{escape_inline(p.name)}{'' if p.required else '?'}: {kind}")
        described = (tool.title or self.description_of(tool)).strip()
        summary = escape_inline(described.splitlines()[0] if described else "")
        return f"- {tool.name}({', '.join(params)}): {summary}"


# Characters that some tokenizers and chat templates read as a line break, beyond \n and \r.
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_LINE_BREAK = re.compile("[\u0085\u2028\u2029]")


def _json_inline(value: Any) -> str:
    """Compact JSON that cannot break a line: what a tool list may quote of a database."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _LINE_BREAK.sub(lambda m: _LINE_BREAKS[m.group()], text)


def escape_inline(text: str) -> str:
    """`text` escaped as inside a JSON string, without the quotes.

    Every pack writes text that comes from a device's description (DBC names, comments,
    value labels) through this, so none of it can start a line of its own in a system
    prompt, whatever the pack's format.
    """
    return _json_inline(text)[1:-1]


def _xml_text(text: str) -> str:
    return xml_escape(escape_inline(text))


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@cache
def _cached_load(name: str, overrides_json: str) -> PromptStrategy:
    return PromptStrategy.load(name, json.loads(overrides_json) if overrides_json else None)


@cache
def _default_strategy() -> PromptStrategy:
    return PromptStrategy.load("json")
