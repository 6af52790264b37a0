"""`hwbridge schema DIR`: publish the JSON Schema of the MCS models (spec section 14)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hwbridge.cli.errors import EXIT_OK

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "schema", help="write the JSON Schema of the MCS models (DriverMeta, Tool, ...) to DIR"
    )
    parser.add_argument("directory", metavar="DIR")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hwbridge.core.schema import write_schemas

    for path in write_schemas(Path(args.directory)):
        print(path)
    return EXIT_OK
