"""Tools generated from an ODX description: one per diagnostic service of a variant.

What `CanDriver.from_dbc` does for a DBC's messages, `OdxServices` does for an ODX variant's
services: each becomes a tool named by the service's short name, its parameters typed from
the description (numbers with their ranges and units, TEXTTABLE value tables as an enum of
labels, text with its length; constant parameters are the description's and not asked for),
the request encoded and the answer decoded by odxtools. Every request goes through
`GatedRequests.send`, so the send policy judges its exact bytes by their service id as for
`uds_request`: reading services run freely, the others need the policy's allow
(`uds_0x2E`...). A value out of range or not among the choices is refused before the request
is encoded. `dry_run: true` returns the request bytes and whether the policy would let them
out, and sends nothing.

A service that cannot be a tool is left out, with the reason, in `skipped` (and a
`OdxServicesWarning`): no request, an OBD-II mode, SecurityAccess (its seed and key go
through `uds_unlock`), a name that is not a tool name or is taken, a parameter this module
cannot type (structures, tables, multiplexers), or beyond `MAX_ODX_TOOLS`.
"""

from __future__ import annotations

import math
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hwbridge.can.database.values import format_number
from hwbridge.core.models import Tool, ToolError, ToolParameter, is_valid_tool_name
from hwbridge.obd.database.odx import OdxDescription
from hwbridge.obd.database.uds import policy_service
from hwbridge.obd.tools.gated import GatedRequests, Sent
from hwbridge.obd.tools.session_keeper import SessionKeeper
from hwbridge.obd.tools.texts import OdxTexts
from hwbridge.obd.transport.base import Ecu

__all__ = ["MAX_ODX_TOOLS", "OdxService", "OdxServices", "OdxServicesWarning"]

MAX_ODX_TOOLS: Final = 256
"""Services offered as tools at most (each costs prompt space)."""
_MAX_TEXT: Final = 4095
_MAX_REQUEST_BITS: Final = 8 * 4095  # a UDS request carries at most 4095 bytes
_MAX_DESCRIPTION: Final = 240
_MAX_RESULT_TEXT: Final = 512
_MAX_RESULT_ITEMS: Final = 256
_MAX_SKIPPED_LISTED: Final = 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0080-\u009f\u2028\u2029]+")
_STRINGS: Final = frozenset({"A_ASCIISTRING", "A_UTF8STRING", "A_UNICODE2STRING"})
_FIXED_KINDS: Final = frozenset(
    {"CodedConstParameter", "PhysicalConstantParameter", "NrcConstParameter",
     "ReservedParameter", "MatchingRequestParameter", "LengthKeyParameter"}
)  # fmt: skip


class OdxServicesWarning(UserWarning):
    """Services of an ODX variant that are not offered as tools, each with its reason."""

    def __init__(self, source: str, skipped: Mapping[str, str]) -> None:
        self.source = source
        self.skipped = dict(skipped)
        listed = "\n".join(
            f"  {name}: {why}" for name, why in list(skipped.items())[:_MAX_SKIPPED_LISTED]
        )
        more = len(skipped) - _MAX_SKIPPED_LISTED
        if more > 0:
            listed += f"\n  ... and {more} more (all in .skipped)"
        super().__init__(f"{source}: {len(skipped)} service(s) not offered as tools:\n{listed}")


def _outside_hwbridge() -> int:
    """The stack level of the first caller outside hwbridge (a warning points at user code)."""
    package = str(Path(__file__).resolve().parents[2])
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(package) or frame.f_code.co_filename == "<string>"
    ):
        frame, level = frame.f_back, level + 1
    return level


def _kind(thing: Any) -> str:
    """The odxtools class of `thing` by name (odxtools links objects by weak proxies, whose
    `type()` is the proxy's; `__class__` is the object's), without importing odxtools."""
    return str(thing.__class__.__name__)


def _clean(text: Any, limit: int = _MAX_DESCRIPTION) -> str:
    """Description text from the ODX: one line, no markup, bounded."""
    plain = re.sub(r"<[^>]{0,200}>", " ", str(text or ""))
    return " ".join(_CONTROL.sub(" ", plain).split())[:limit]


class _Untyped(Exception):
    """A parameter this module cannot type: the service is skipped with the reason."""


def _check_width(parameter: Any) -> None:
    """_Untyped for a request parameter whose coded type is 0 bits wide, or wider than any
    request: odxtools would build it whole (a 4,000,000,000-bit type is a 500 MB request)."""
    coded = getattr(parameter, "diag_coded_type", None)
    if coded is None:
        coded = getattr(getattr(parameter, "dop", None), "diag_coded_type", None)
    bits = getattr(coded, "bit_length", None)
    if isinstance(bits, int) and not 0 < bits <= _MAX_REQUEST_BITS:
        raise _Untyped(
            f"parameter {str(parameter.short_name)[:40]} is {bits:,} bits wide; a request "
            f"carries 1 to {_MAX_REQUEST_BITS:,}"
        )


@dataclass(frozen=True)
class _Param:
    """One parameter the caller gives: its JSON Schema and how a value is checked."""

    name: str
    schema: dict[str, Any]
    required: bool
    description: str | None = None
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    unit: str = ""

    def check(self, value: Any) -> Any:
        """`value` as odxtools wants it; INVALID_VALUE or OUT_OF_RANGE before any encoding."""
        kind = self.schema.get("type")
        if self.choices:
            if isinstance(value, str):
                for label in self.choices:
                    if label.lower() == value.strip().lower():
                        return label
            listed = ", ".join(self.choices[:12])
            raise ToolError(
                "INVALID_VALUE", f"{self.name} is one of {listed}; got {str(value)[:40]!r}."
            )
        if kind in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ToolError("INVALID_VALUE", f"{self.name} takes a number.")
            if not math.isfinite(value):
                raise ToolError("INVALID_VALUE", f"{self.name} takes a finite number.")
            if kind == "integer" and value != int(value):
                raise ToolError("INVALID_VALUE", f"{self.name} takes a whole number.")
            low = -math.inf if self.low is None else self.low
            high = math.inf if self.high is None else self.high
            if not low <= value <= high:
                unit = f" {self.unit}" if self.unit else ""
                raise ToolError(
                    "OUT_OF_RANGE",
                    f"{self.name} is {format_number(low)} to {format_number(high)}{unit}; "
                    f"{format_number(value)} is out of range. Nothing was sent.",
                )
            return int(value) if kind == "integer" else float(value)
        if not isinstance(value, str):
            raise ToolError("INVALID_VALUE", f"{self.name} takes a string.")
        if len(value) > int(self.schema.get("maxLength", _MAX_TEXT)):
            raise ToolError(
                "INVALID_VALUE", f"{self.name} has at most {self.schema['maxLength']} characters."
            )
        if self.schema.get("pattern") == "^([0-9a-fA-F]{2})*$":
            if not re.fullmatch(r"(?:[0-9a-fA-F]{2})*", value):
                raise ToolError("INVALID_VALUE", f"{self.name} is hex bytes, e.g. 02BC.")
            return bytes.fromhex(value)
        return value


@dataclass(frozen=True)
class OdxService:
    """One service as a tool: the odxtools service, its parameters, the policy name of what
    its request starts with (None: it only reads)."""

    tool: str
    service: Any
    prefix: bytes
    policy: str | None
    params: tuple[_Param, ...]
    description: str

    @property
    def read_only(self) -> bool:
        return self.policy is None


def _labels(dop: Any) -> tuple[str, ...]:
    scales = dop.compu_method.compu_internal_to_phys.compu_scales
    labels = [s.compu_const.vt for s in scales if s.compu_const is not None and s.compu_const.vt]
    return tuple(dict.fromkeys(_clean(label, 64) for label in labels))


def _limits(dop: Any) -> tuple[float | None, float | None]:
    """The physical range: the description's PHYS-CONSTR, else what the coded type holds
    through an identical or linear conversion."""
    constr = dop.physical_constr
    if constr is not None:
        low = constr.lower_limit.value if constr.lower_limit is not None else None
        high = constr.upper_limit.value if constr.upper_limit is not None else None
        if isinstance(low, int | float) or isinstance(high, int | float):
            return (
                float(low) if isinstance(low, int | float) else None,
                float(high) if isinstance(high, int | float) else None,
            )
    coded = dop.diag_coded_type
    bits = getattr(coded, "bit_length", None)
    category = dop.compu_method.category.value
    base = coded.base_data_type.value
    if not isinstance(bits, int) or not 0 < bits <= 64 or category not in ("IDENTICAL", "LINEAR"):
        return None, None
    if base == "A_UINT32":
        ends: tuple[int, int] = (0, (1 << bits) - 1)
    elif base == "A_INT32":
        ends = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    else:
        return None, None
    try:
        physical = sorted(float(dop.compu_method.convert_internal_to_physical(e)) for e in ends)
    except Exception:  # a conversion that does not cover the type's ends: no bound from it
        return None, None
    return physical[0], physical[1]


def _param(parameter: Any, texts: OdxTexts) -> _Param:
    kind = _kind(parameter)
    name = parameter.short_name
    if not is_valid_tool_name(name) or name in ("ecu", "dry_run"):
        raise _Untyped(f"parameter {name[:40]!r} is not a usable name (or one hwbridge uses)")
    if kind != "ValueParameter":
        raise _Untyped(f"parameter {name} is a {kind}, which hwbridge cannot type")
    dop = parameter.dop
    if _kind(dop) != "DataObjectProperty":
        raise _Untyped(f"parameter {name} is a {_kind(dop)}, which hwbridge cannot type")
    required = parameter.physical_default_value is None
    notes = [_clean(getattr(parameter, "long_name", "") or "", 80)]
    unit = ""
    if dop.unit is not None:
        unit = _clean(dop.unit.display_name, 16)
        notes.append(texts.unit.format(unit=unit))
    physical = dop.physical_type.base_data_type.value
    if dop.compu_method.category.value == "TEXTTABLE":
        labels = _labels(dop)
        if not labels:
            raise _Untyped(f"parameter {name} has a value table without labels")
        schema: dict[str, Any] = {"type": "string", "enum": list(labels)}
        return _Param(name, schema, required, _note(notes), choices=labels)
    if physical in _STRINGS:
        most = getattr(dop.diag_coded_type, "max_length", None)
        bits = getattr(dop.diag_coded_type, "bit_length", None)
        most = most if isinstance(most, int) else (bits // 8 if isinstance(bits, int) else None)
        limit = min(most or _MAX_TEXT, _MAX_TEXT)
        return _Param(name, {"type": "string", "maxLength": limit}, required, _note(notes))
    if physical == "A_BYTEFIELD":
        schema = {"type": "string", "pattern": "^([0-9a-fA-F]{2})*$", "maxLength": 2 * _MAX_TEXT}
        return _Param(name, schema, required, _note(notes))
    if physical not in ("A_INT32", "A_UINT32", "A_FLOAT32", "A_FLOAT64"):
        raise _Untyped(f"parameter {name} has the physical type {physical}")
    low, high = _limits(dop)
    integer = physical in ("A_INT32", "A_UINT32")
    schema = {"type": "integer" if integer else "number"}
    if low is not None:
        schema["minimum"] = int(low) if integer else low
    if high is not None:
        schema["maximum"] = int(high) if integer else high
    if low is not None and high is not None:
        notes.append(texts.range.format(low=format_number(low), high=format_number(high)))
    return _Param(name, schema, required, _note(notes), low=low, high=high, unit=unit)


def _note(parts: list[str]) -> str | None:
    return "; ".join(p for p in parts if p) or None


def _json(value: Any, depth: int = 0) -> Any:
    """A decoded value as bounded JSON: bytes as hex, text cut, nesting and items bounded."""
    if isinstance(value, bytes | bytearray):
        return bytes(value[:_MAX_RESULT_TEXT]).hex(" ").upper()
    if isinstance(value, str):
        return _CONTROL.sub(" ", value)[:_MAX_RESULT_TEXT]
    if isinstance(value, bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= 8:
        return "..."
    if isinstance(value, dict):
        items = list(value.items())[:_MAX_RESULT_ITEMS]
        return {str(k)[:64]: _json(v, depth + 1) for k, v in items}
    if isinstance(value, list | tuple):
        return [_json(v, depth + 1) for v in value[:_MAX_RESULT_ITEMS]]
    return _clean(value, _MAX_RESULT_TEXT)


def _physical_units(coding: Any) -> dict[str, tuple[str, Any]]:
    """Per value parameter of a response: its unit, and its DOP (for labels' raw values)."""
    out: dict[str, tuple[str, Any]] = {}
    for parameter in getattr(coding, "parameters", ()):
        dop = getattr(parameter, "dop", None) if _kind(parameter) == "ValueParameter" else None
        if dop is not None and _kind(dop) == "DataObjectProperty":
            unit = _clean(dop.unit.display_name, 16) if dop.unit is not None else ""
            out[parameter.short_name] = (unit, dop)
    return out


@dataclass
class OdxServices:
    """The tools of one ODX variant, sent through `gate` and kept by `keeper`."""

    description: OdxDescription
    gate: GatedRequests
    keeper: SessionKeeper
    texts: OdxTexts
    variant: str | None = None
    taken: frozenset[str] = frozenset()
    services: dict[str, OdxService] = field(init=False, default_factory=dict)
    skipped: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        layer = self.description.variant(self.variant)
        self.variant = layer.short_name
        address = layer.get_can_receive_id()
        self.address: int | None = address if isinstance(address, int) else None
        for service in layer.services:
            name = str(service.short_name)
            if _kind(service) != "DiagService":
                self.skipped[name] = "a job, not a service with a request"
                continue
            try:
                built = self._build(service)
            except _Untyped as exc:
                self.skipped[name] = str(exc)
                continue
            if len(self.services) >= MAX_ODX_TOOLS:
                self.skipped[name] = f"beyond the first {MAX_ODX_TOOLS} services"
                continue
            self.services[built.tool] = built
        if self.skipped:
            warnings.warn(
                OdxServicesWarning(f"{self.description.path} ({self.variant})", self.skipped),
                stacklevel=_outside_hwbridge(),
            )

    def _build(self, service: Any) -> OdxService:
        name = str(service.short_name)
        if not is_valid_tool_name(name) or name in self.taken:
            raise _Untyped("its name is not a usable tool name, or another tool has it")
        request = service.request
        if request is None:
            raise _Untyped("it has no request")
        for parameter in request.parameters:
            _check_width(parameter)
        prefix = bytes(request.coded_const_prefix())
        if not prefix:
            raise _Untyped("its request does not start with a constant service id")
        if prefix[0] < 0x10:
            raise _Untyped("an OBD-II mode: the obd_ tools ask those")
        if prefix[0] == 0x27:
            raise _Untyped("SecurityAccess goes through uds_unlock (seed and key stay hidden)")
        params = []
        for parameter in request.parameters:
            if _kind(parameter) in _FIXED_KINDS or not parameter.is_settable:
                continue
            params.append(_param(parameter, self.texts))
        policy = policy_service(prefix[:1]) if prefix[0] != 0x10 else policy_service(prefix)
        what = _clean(getattr(service, "long_name", "") or "", 80)
        desc = getattr(service, "description", None)
        what = " ".join(p for p in (what, _clean(getattr(desc, "text", desc) or "")) if p)
        template = self.texts.read if policy is None else self.texts.change
        text = template.format(
            what=what,
            service=name,
            variant=self.variant,
            request=prefix.hex(" ").upper(),
            policy=policy,
        )
        return OdxService(name, service, prefix, policy, tuple(params), " ".join(text.split()))

    # -- the tools ------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        out = []
        for svc in self.services.values():
            params = []
            if self.address is None:
                schema = {"type": "string", "minLength": 1, "maxLength": 40}
                params.append(
                    ToolParameter(
                        name="ecu", description=self.texts.ecu, schema=schema, required=True
                    )
                )
            params += [
                ToolParameter(
                    name=p.name, description=p.description, schema=p.schema, required=p.required
                )
                for p in svc.params
            ]
            params.append(
                ToolParameter(
                    name="dry_run", description=self.texts.dry_run, schema={"type": "boolean"}
                )
            )
            tool = Tool(
                name=svc.tool,
                description=svc.description,
                parameters=params,
                read_only=svc.read_only,
            )
            out.append(tool)
        return out

    def changing(self) -> dict[str, str]:
        """The tools that change an ECU, with the policy name of their service."""
        return {name: svc.policy for name, svc in self.services.items() if svc.policy}

    def ecu_text(self, arguments: Mapping[str, Any]) -> str:
        """Which ECU a call goes to: the description's request id, else the `ecu` argument."""
        if self.address is not None:
            return f"0x{self.address:X}"
        return str(arguments.get("ecu", ""))

    def call(
        self, name: str, arguments: Mapping[str, Any], find_ecu: Callable[[str], Ecu]
    ) -> dict[str, Any]:
        svc = self.services[name]
        values = {}
        for param in svc.params:
            if param.name in arguments:
                values[param.name] = param.check(arguments[param.name])
            elif param.required:
                raise ToolError("INVALID_VALUE", f"{name} needs {param.name}.")
        try:
            payload = bytes(svc.service.encode_request(**values))
        except Exception as exc:  # odxtools raises EncodeError, OdxError, ValueError...
            problem = _clean(exc, 200) or type(exc).__name__
            raise ToolError(
                "INVALID_VALUE", f"{name}: the ODX description cannot encode that ({problem})."
            ) from None
        if not payload or len(payload) > 4095:
            raise ToolError(
                "INVALID_VALUE", f"{name}: the encoded request has {len(payload)} bytes."
            )
        if payload[: len(svc.prefix)] != svc.prefix:
            # a parameter laid over the constants: another service than the one offered
            # (SecurityAccess, an OBD-II mode) would go out
            raise ToolError(
                "INVALID_VALUE",
                f"{name}: the ODX description encodes a request starting "
                f"{payload[: len(svc.prefix)].hex(' ').upper()}, not its constant "
                f"{svc.prefix.hex(' ').upper()}; nothing was sent.",
            )
        service = policy_service(payload)
        if arguments.get("dry_run") is True:
            allowed = service is None or self.gate.policy.allows_service(service)
            out = {"sent": False, "dry_run": True, "service": name,
                   "request": payload.hex(" ").upper(), "allowed": allowed}  # fmt: skip
            if service is not None:
                out["policy"] = service
            return out
        ecu = find_ecu(self.ecu_text(arguments))
        if service is not None:
            self.keeper.confirm(ecu, self.gate.timeout_s)
        sent = self.gate.send(ecu, payload, tool=name)
        if sent.dry_run:
            return {"sent": False, "dry_run": True, "service": name,
                    "request": payload.hex(" ").upper()}  # fmt: skip
        return self._answer(svc, sent, service is not None)

    def _answer(self, svc: OdxService, sent: Sent, changing: bool) -> dict[str, Any]:
        ecu = sent.ecu
        if (unanswered := sent.no_answer(svc.tool)) is not None:
            if svc.prefix[0] == 0x11:  # as uds_reset: the ECU may have reset without a word
                self.keeper.lost(ecu, f"a reset was asked for ({svc.tool}), and may have happened")
            return unanswered | ({"state": self.keeper.state(ecu)} if changing else {})
        if (refusal := sent.refusal()) is not None:
            self.keeper.answered(ecu, refusal.code)
            raise sent.refused(refusal, svc.tool)
        data = sent.positive()
        if data is None:
            raise ToolError(
                "INVALID_RESPONSE",
                f"The {ecu.name} ECU answered {svc.tool} with something that is not its answer"
                f" ({sent.reply.data[:16].hex(' ').upper() if sent.reply else ''}).",
            )
        if svc.prefix[0] == 0x10 and len(data) >= 2:
            self.keeper.entered(ecu, data[1] & 0x7F)
        elif svc.prefix[0] == 0x11:
            self.keeper.lost(ecu, f"the ECU reset ({svc.tool})")
        out = sent.outcome(service=svc.tool, request=sent.request.hex(" ").upper())
        out["response"] = data[:_MAX_RESULT_TEXT].hex(" ").upper()
        out["values"] = self._decode(svc, data)
        if changing:
            out["state"] = self.keeper.state(ecu)
        return out

    def _decode(self, svc: OdxService, data: bytes) -> Any:
        try:
            message = svc.service.decode_message(data)
        except Exception as exc:  # odxtools' DecodeError and others: the bytes stay
            return {"decode_error": _clean(exc, 200) or type(exc).__name__}
        units = _physical_units(message.coding_object)
        values: dict[str, Any] = {}
        for key, value in list(message.param_dict.items())[:_MAX_RESULT_ITEMS]:
            if key not in units:
                continue  # constant parameters: the service id, the DID, the routine
            unit, dop = units[key]
            entry: dict[str, Any] = {"value": _json(value)}
            if unit:
                entry["unit"] = unit
            if dop.compu_method.category.value == "TEXTTABLE":
                try:
                    entry["raw"] = _json(dop.compu_method.convert_physical_to_internal(value))
                except Exception:
                    entry["raw"] = None
            values[str(key)[:64]] = entry
        return values
