"""`hwbridge sim ...`: the simulator, exactly as `python -m firmware_sim` runs it (its help
and messages say `hwbridge sim`).

Everything after `sim` goes to `firmware_sim.cli.main` unchanged (its own --help too), so
the two commands can never drift apart. The import is lazy: the simulator is optional for
every other subcommand.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import cast

from hwbridge.cli.errors import EXIT_RUNTIME, CliError

__all__ = ["register", "run_simulator"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Listed for `hwbridge --help`; `main` hands `sim` and what follows over before argparse,
    # which would otherwise claim options such as --help for itself.
    parser = sub.add_parser(
        "sim",
        help="run the simulated vehicle and devices (same options as python -m firmware_sim; "
        "see hwbridge sim --help)",
        add_help=False,
    )
    parser.add_argument("arguments", nargs=argparse.REMAINDER)
    parser.set_defaults(func=lambda args: run_simulator(args.arguments))


def run_simulator(argv: Sequence[str], *, own_process: bool = False) -> int:
    """Run `firmware_sim.cli.main(argv)`; a missing simulator is one clear line.

    `own_process`: this is the `hwbridge` process, not a caller of `main([...])`. Then, as
    `python -m firmware_sim` does, asammdf (pulled in by python-can for MF4 logs the
    simulator never reads) stays unimported: 0.4 s of a start that should take well under
    one second.
    """
    if own_process:
        # None in sys.modules makes `import asammdf` fail fast; python-can then skips MF4.
        sys.modules.setdefault("asammdf", cast(ModuleType, None))
    try:
        cli = importlib.import_module("firmware_sim.cli")
    except ImportError as exc:
        raise CliError(
            f"the simulator is not available ({exc}); it ships as firmware_sim with hwbridge",
            EXIT_RUNTIME,
        ) from exc
    sim_main = cast(Callable[..., int], cli.main)
    code = sim_main(list(argv), prog="hwbridge sim")
    return int(code or 0)
