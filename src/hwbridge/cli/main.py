"""The `hwbridge` command: thin subcommands over the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hwbridge.core.schema import write_schemas

__all__ = ["main"]


def _schema(args: argparse.Namespace) -> int:
    for path in write_schemas(Path(args.directory)):
        print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hwbridge", description="MCS drivers for CAN buses and serial hardware."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    schema = sub.add_parser(
        "schema", help="write the JSON Schema of the MCS models (DriverMeta, Tool, ...) to DIR"
    )
    schema.add_argument("directory", metavar="DIR")
    schema.set_defaults(func=_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except OSError as exc:
        print(f"hwbridge: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
