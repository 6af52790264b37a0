"""One place that turns the `bus=` argument into keyword arguments for `can.Bus`.

Strings are a short-hand for the common transports; a dict passes straight through so that
python-can's own configuration files and environment (`can.util.load_config`) still apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from can.util import cast_from_string

import can

__all__ = [
    "ACCEPTED_FORMS",
    "DEFAULT_SOCKETCAND_PORT",
    "REPLAY_PREFIX",
    "bus_kwargs",
    "describe_bus",
    "is_replay_url",
    "parse_bus_url",
]

DEFAULT_SOCKETCAND_PORT = 29536
"""The port socketcand listens on when none is given."""

REPLAY_PREFIX = "replay:"
"""A capture file played back as a read-only bus (hwbridge.can.transport.replay, not a can.Bus)."""

ACCEPTED_FORMS = (
    "virtual:CHANNEL",
    "socketcand://HOST[:PORT]/CHANNEL",
    "slcan://PORT@BAUD",
    "socketcan:CHANNEL",
    "INTERFACE:CHANNEL (any python-can interface)",
    "replay:PATH?speed=FACTOR|max&loop=0|1&plays=N&channel=CH (a capture file, read-only)",
)

_FORMS_HELP = (
    "accepted forms: "
    + ", ".join(ACCEPTED_FORMS)
    + "; any form may end in ?key=value&... for extra can.Bus arguments"
)

_SOCKETCAND = re.compile(
    r"socketcand://(?P<host>[A-Za-z0-9._-]+)(?::(?P<port>[0-9]{1,5}))?/(?P<channel>[^\s<>/?]+)",
    re.ASCII,
)
_SLCAN = re.compile(r"slcan://(?P<port>\S+)@(?P<baud>[0-9]{1,9})", re.ASCII)
_GENERIC = re.compile(r"(?P<interface>[A-Za-z][A-Za-z0-9_]*):(?P<channel>.+)", re.ASCII | re.DOTALL)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_RESERVED_KEYS = frozenset({"interface", "bustype", "channel"})


def _bad(text: str, why: str) -> ValueError:
    return ValueError(f"invalid CAN bus {text!r}: {why}; {_FORMS_HELP}")


def _tty_baudrate_key() -> str:
    """python-can 4.5 renamed slcan's `ttyBaudrate` to `tty_baudrate` (old name warns)."""
    parts = can.__version__.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return "tty_baudrate"
    return "tty_baudrate" if (major, minor) >= (4, 5) else "ttyBaudrate"


def _parse_query(text: str, query: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for item in query.split("&"):
        key, sep, value = item.partition("=")
        if not sep or not _KEY.fullmatch(key):
            raise _bad(text, f"query item {item!r} is not key=value")
        if key in _RESERVED_KEYS:
            raise _bad(text, f"{key!r} cannot be set in the query")
        if key in extra:
            raise _bad(text, f"{key!r} is given twice")
        try:
            extra[key] = cast_from_string(value)
        except ValueError as exc:  # e.g. an integer beyond Python's digit limit
            raise _bad(text, f"bad value for {key!r}") from exc
    return extra


def _channel_for(interface: str, channel: str) -> str | int:
    if interface in ("virtual", "socketcan"):
        return channel  # names: "1" and 1 would be different virtual channels
    # Interfaces such as kvaser, ixxat or neovi number their channels.
    numeric = channel.isascii() and channel.isdigit() and len(channel) <= 9
    return int(channel) if numeric else channel


def is_replay_url(spec: object) -> TypeGuard[str]:
    """True for `replay:PATH...`, which `hwbridge.can.transport.replay` parses and opens."""
    return isinstance(spec, str) and spec[: len(REPLAY_PREFIX)].lower() == REPLAY_PREFIX


def parse_bus_url(text: str) -> dict[str, Any]:
    """Keyword arguments for `can.Bus` from a bus string; ValueError lists the accepted forms."""
    if not isinstance(text, str):
        raise TypeError(f"bus string must be str, not {type(text).__name__}")
    if is_replay_url(text):
        raise _bad(text, "a replay: bus is a capture file, opened by ReplayAdapter, not can.Bus")
    body, sep, query = text.partition("?")
    if not body:
        raise _bad(text, "empty")
    extra = _parse_query(text, query) if sep else {}

    if body.startswith("socketcand:"):
        match = _SOCKETCAND.fullmatch(body)
        if match is None:
            raise _bad(text, "expected socketcand://HOST[:PORT]/CHANNEL")
        port = int(match["port"]) if match["port"] else DEFAULT_SOCKETCAND_PORT
        if not 0 < port < 65536:
            raise _bad(text, f"port {port} out of range")
        kwargs: dict[str, Any] = {
            "interface": "socketcand",
            "host": match["host"],
            "port": port,
            "channel": match["channel"],
        }
    elif body.startswith("slcan://"):
        match = _SLCAN.fullmatch(body)
        if match is None:
            raise _bad(text, "expected slcan://PORT@BAUD")
        baud = int(match["baud"])
        if baud <= 0:
            raise _bad(text, "baud rate must be positive")
        kwargs = {"interface": "slcan", "channel": match["port"], _tty_baudrate_key(): baud}
    else:
        match = _GENERIC.fullmatch(body)
        if match is None:
            raise _bad(text, "expected INTERFACE:CHANNEL")
        interface = match["interface"].lower()
        channel = match["channel"]
        if interface not in can.interfaces.VALID_INTERFACES:
            known = ", ".join(sorted(can.interfaces.VALID_INTERFACES))
            raise _bad(text, f"unknown python-can interface {interface!r} (known: {known})")
        if channel.startswith("//") or channel != channel.strip():
            raise _bad(text, f"malformed channel {channel!r}")
        kwargs = {"interface": interface, "channel": _channel_for(interface, channel)}
    kwargs.update(extra)
    return kwargs


def bus_kwargs(spec: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """Normalise a bus string, a python-can keyword dict, or None (python-can's config)."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        return parse_bus_url(spec)
    if isinstance(spec, Mapping):
        return dict(spec)
    raise TypeError(f"bus must be a string, a mapping or a can.BusABC, not {type(spec).__name__}")


def describe_bus(kwargs: Mapping[str, Any]) -> str:
    """A short human-readable name for a bus configuration (for logs and errors)."""
    interface = kwargs.get("interface") or kwargs.get("bustype") or "python-can default"
    if interface == "socketcand":
        return f"socketcand://{kwargs.get('host')}:{kwargs.get('port')}/{kwargs.get('channel')}"
    channel = kwargs.get("channel")
    return f"{interface}:{channel}" if channel is not None else str(interface)
