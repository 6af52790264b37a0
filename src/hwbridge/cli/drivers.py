"""`hwbridge drivers`: the drivers installed under the `hwbridge.drivers` entry point, each
with its distribution's trust status and, once that is checked, its DriverMeta.

A driver is imported (to read its DriverMeta) only when its distribution's files match
its RECORD, and its pin when one is given; `--no-load` imports none. The digest shown is
what `load_driver(name, sha256=...)` and `--sha256 NAME=DIGEST` pin.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from hwbridge.cli.console import json_text, make_console
from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, CliError

__all__ = ["register"]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_STYLE = {"verified": "green", "intact": "green", "built-in": "cyan", "editable": "yellow"}

EXAMPLES = """\
examples:
  hwbridge drivers                           every installed driver, checked, with its meta
  hwbridge drivers --json
  hwbridge drivers --sha256 thermostat=8c1f...e2 --no-load
exit status 1 when a pinned driver fails its check
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "drivers",
        help="list the installed drivers (entry point hwbridge.drivers) and their trust status",
        description="The drivers registered under the entry point group hwbridge.drivers, "
        "each distribution checked against its RECORD (and a pinned digest) before "
        "anything of it is imported.",
        epilog=EXAMPLES,
    )
    parser.add_argument(
        "--sha256",
        action="append",
        default=[],
        metavar="NAME=DIGEST",
        help="check driver NAME against a pinned digest (repeat for several)",
    )
    parser.add_argument(
        "--no-load", action="store_true", help="import nothing: show the checks only"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hwbridge.core.trust import installed_drivers

    pins = _pins(args.sha256)
    entries = installed_drivers()
    unknown = sorted(set(pins) - {e.name for e in entries})
    if unknown:
        raise CliError(f"--sha256: no driver named {', '.join(unknown)} is installed")
    rows = [_row(e.name, e.value, pins.get(e.name), load=not args.no_load) for e in entries]
    if args.json:
        sys.stdout.write(json_text(json.dumps({"drivers": rows}, indent=2)) + "\n")
    else:
        _blocks(rows)
    failed = [r for r in rows if r["name"] in pins and r["status"] != "verified"]
    return EXIT_RUNTIME if failed else EXIT_OK


def _pins(given: list[str]) -> dict[str, str]:
    pins: dict[str, str] = {}
    for item in given:
        name, sep, digest = item.partition("=")
        digest = digest.strip().lower()
        if (
            not sep
            or not name
            or len(digest) != 64
            or any(c not in "0123456789abcdef" for c in digest)
        ):
            raise CliError(f"--sha256 {item}: expected NAME=<64 hexadecimal characters>")
        pins[name] = digest
    return pins


def _row(name: str, value: str, pin: str | None, *, load: bool) -> dict[str, Any]:
    """One driver: its check, then (when trusted and asked) its DriverMeta."""
    from importlib import metadata

    from hwbridge.core.models import DriverMeta
    from hwbridge.core.trust import DriverTrustError, load_driver, verify_distribution

    row: dict[str, Any] = {"name": name, "entry_point": value}
    ep = next(e for e in metadata.entry_points(group="hwbridge.drivers") if e.name == name)
    if ep.dist is None:
        row.update(status="unverifiable", problems=["it belongs to no installed distribution"])
        return row
    check = verify_distribution(ep.dist, pin)
    row.update(check.model_dump(mode="json"))
    if not (load and check.trusted):
        return row
    try:
        loaded = load_driver(name, sha256=pin)
    except (DriverTrustError, ImportError, AttributeError, LookupError) as exc:
        row["status"] = "load-failed" if not isinstance(exc, DriverTrustError) else "tampered"
        row["problems"] = [*row["problems"], str(exc)[:300]]
        return row
    meta = getattr(loaded, "meta", None)
    if isinstance(meta, DriverMeta):
        row["meta"] = meta.model_dump(mode="json")
    return row


def _blocks(rows: list[dict[str, Any]]) -> None:
    """One block per driver, as `pip show` writes them: a line to read, lines to grep."""
    from rich.text import Text

    console = make_console()
    console.print(f"{len(rows)} drivers (entry point hwbridge.drivers)")
    for row in rows:
        where = f"{row.get('distribution', '?')} {row.get('version') or ''}".strip()
        head = Text(f"{row['name']}  ", style="bold")
        head.append(row["status"], style=_STYLE.get(row["status"], "red"))
        head.append(f"  ({where}, {row['entry_point']})")
        console.print(head)
        meta = row.get("meta")
        lines: list[tuple[str, str]] = []
        if row.get("digest"):
            lines.append(("digest", row["digest"]))
        lines += [("problem", problem) for problem in row.get("problems", [])]
        if meta:
            bindings = ", ".join(
                f"{b['capability']} over {b['adapter']} ({b['spec_format']})"
                for b in meta["bindings"]
            )
            lines.append(("driver", f"{meta['name']} {meta['version']}"))
            if bindings:
                lines.append(("bindings", bindings))
            lines.append(("capabilities", ", ".join(meta["capabilities"])))
            trust = meta.get("trust")
            if trust:
                source = f", {trust['source_url']}" if trust.get("source_url") else ""
                lines.append(("trust", f"{trust['author']}{source}"))
        else:
            lines.append(("driver", "not loaded"))
        for label, value in lines:
            console.print(Text(f"  {label:<13} {value}"), soft_wrap=True)
