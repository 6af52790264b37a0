"""Opening a bus for the commands that only listen (`monitor`, `record`), with clear errors.

They need no driver, no database and no send policy: an adapter with listeners is all.
A bad bus string is a usage error (exit 2); a bus that does not answer exits 1.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hwbridge.cli.errors import EXIT_RUNTIME, EXIT_USAGE, CliError, one_line, os_text
from hwbridge.cli.stop_signals import relayed_signals

if TYPE_CHECKING:
    import can
    from hwbridge.can.transport.adapter import CanAdapter

__all__ = ["check_bus", "open_adapter"]


def check_bus(bus: str) -> None:
    """A usage error (exit 2) for a bus string that cannot name a bus, without opening it."""
    from hwbridge.can.transport.bus_url import is_replay_url, parse_bus_url
    from hwbridge.can.transport.replay import parse_replay_url

    try:
        if is_replay_url(bus):
            parse_replay_url(bus)
        else:
            parse_bus_url(bus)
    except (ValueError, TypeError) as exc:
        raise CliError(f"--bus: {one_line(str(exc))}", EXIT_USAGE) from exc


def open_adapter(bus: str, listeners: Sequence[Callable[[can.Message], object]]) -> CanAdapter:
    """A python-can adapter (or a replay of a capture) for `bus`, `listeners` registered
    before the first frame; reconnects with backoff when the bus drops."""
    from hwbridge.can.transport import PythonCanAdapter, ReplayAdapter
    from hwbridge.can.transport.bus_url import is_replay_url
    from hwbridge.core.models import ToolError

    try:
        if is_replay_url(bus):
            return ReplayAdapter.from_url(bus, listeners=listeners)
        return PythonCanAdapter(bus, listeners=listeners)
    except ToolError as exc:  # BUS_DOWN: nothing answers
        raise CliError(f"{one_line(exc.message)} ({exc.code})", EXIT_RUNTIME) from exc
    except (ValueError, TypeError, ImportError, NotImplementedError) as exc:
        raise CliError(f"--bus: {one_line(str(exc))}", EXIT_USAGE) from exc
    except FileNotFoundError as exc:  # replay:PATH with no such capture
        raise CliError(f"--bus: {os_text(exc)}", EXIT_USAGE) from exc
    except OSError as exc:
        raise CliError(f"cannot open {bus}: {os_text(exc)}", EXIT_RUNTIME) from exc


def on_stop_signals(handler: Callable[[int], None]) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C and SIGTERM call `handler(signum)` while the block runs, on a thread of their
    own (`relayed_signals`: the handler may set events); the previous handlers come back
    after it."""
    return relayed_signals((signal.SIGINT, signal.SIGTERM), handler)
