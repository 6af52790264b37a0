"""Data files that ship inside the wheel: the databases (demo vehicle, J1939 truck) and the
device specs.

The repository's `dbc/` and `devices/` folders are the one source of truth. The wheel carries
them as `hwbridge/dbc` and `hwbridge/devices` (read with importlib.resources); an editable
install or a checkout reads the repository's folders directly. Either way the functions here
return a real file path, since cantools, pyserial specs and subprocesses all want one.
"""

from __future__ import annotations

import atexit
import contextlib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = [
    "DEMO_DBC",
    "J1939_TRUCK_DBC",
    "bundled_dbc",
    "bundled_dbcs",
    "bundled_spec",
    "bundled_specs",
    "default_dbc_notice",
]

DEMO_DBC = "demo_vehicle.dbc"
"""The simulated demo vehicle: what every command uses when no --dbc is given."""

J1939_TRUCK_DBC = "j1939_truck.dbc"
"""The simulated J1939 truck (`python -m firmware_sim --j1939`): engine, transmission and
brake controllers, SPN attributes on every signal, EC1 as a 39-byte multi-packet PGN."""

_DATABASE_SUFFIXES = frozenset({".dbc", ".kcd", ".sym", ".arxml"})
_SPEC_SUFFIX = ".toml"
_CHECKOUT = Path(__file__).resolve().parents[2]  # src/hwbridge/resources.py -> the repository
_extracted = contextlib.ExitStack()  # files copied out of a zipped install, removed at exit
atexit.register(_extracted.close)


def _folder(kind: str) -> Traversable:
    """The packaged folder when hwbridge runs from a wheel, else the checkout's."""
    shipped = resources.files("hwbridge").joinpath(kind)
    if shipped.is_dir():
        return shipped
    return _CHECKOUT / kind


def _names(kind: str, suffixes: frozenset[str]) -> tuple[str, ...]:
    folder = _folder(kind)
    if not folder.is_dir():
        return ()
    return tuple(
        sorted(
            entry.name
            for entry in folder.iterdir()
            if entry.is_file() and Path(entry.name).suffix.lower() in suffixes
        )
    )


def _file(kind: str, name: str, suffixes: frozenset[str], what: str) -> Path:
    """A bundled file by bare name; anything that looks like a path is refused."""
    if not name or name.startswith(".") or "/" in name or "\\" in name:
        raise ValueError(f"a bundled {what} is named by its file name alone, got {name!r}")
    available = _names(kind, suffixes)
    chosen = (
        name if name in available else next((n for n in available if Path(n).stem == name), None)
    )
    if chosen is None:
        listed = ", ".join(available) or "none"
        raise FileNotFoundError(f"no bundled {what} {name!r} (bundled: {listed})")
    entry = _folder(kind).joinpath(chosen)
    if isinstance(entry, Path):
        return entry
    return _extracted.enter_context(resources.as_file(entry))  # a zipped install


def bundled_dbcs() -> tuple[str, ...]:
    """File names of the databases that ship with hwbridge."""
    return _names("dbc", _DATABASE_SUFFIXES)


def bundled_dbc(name: str = DEMO_DBC) -> Path:
    """The path of a bundled database (default: the demo vehicle), from a wheel or a checkout.

    `name` may omit the suffix (`"demo_vehicle"`). Raises FileNotFoundError naming the
    bundled databases when there is no such file.
    """
    return _file("dbc", name, _DATABASE_SUFFIXES, "database")


def bundled_specs() -> tuple[str, ...]:
    """File names of the device specs (TOML) that ship with hwbridge."""
    return _names("devices", frozenset({_SPEC_SUFFIX}))


def bundled_spec(name: str) -> Path:
    """The path of a bundled device spec, `name` with or without `.toml`."""
    return _file("devices", name, frozenset({_SPEC_SUFFIX}), "device spec")


def default_dbc_notice(path: Path | str) -> str:
    """The one stderr line a command prints when it falls back to the demo database."""
    return f"no --dbc given, using the bundled demo vehicle ({path})"
