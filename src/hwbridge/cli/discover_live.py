"""`hwbridge discover --bus URL --duration S`: record a live bus, then discover as from a file.

The frames go to a BLF file in a temporary folder as they arrive (python-can's writer, fed
by the adapter's receive thread), so the analysis is the one a capture gets, and the file is
gone afterwards. With `--reference obd` the vehicle is asked for its OBD-II mode 01 PIDs
meanwhile (`ObdPoller`: read-only requests within the default send policy's frame budget):
the answers are in the recording, decoded as the reference like a capture's. Ctrl-C or
SIGTERM ends the recording early; what was recorded is discovered.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwbridge.cli.errors import EXIT_RUNTIME, CliError, one_line

if TYPE_CHECKING:
    import can

__all__ = ["record_live"]

_TICK_S = 0.25


def record_live(bus: str, duration_s: float, folder: Path, *, obd: bool) -> tuple[Path, int]:
    """Record `bus` for `duration_s` into `folder` (asking for OBD-II PIDs when `obd`); the
    capture and the frames it holds. Raises CliError when the bus cannot be opened or the
    file written."""
    import can
    from hwbridge.cli.live_bus import check_bus, on_stop_signals, open_adapter
    from hwbridge.cli.record import Recorder

    check_bus(bus)
    path = folder / "live.blf"
    stop = threading.Event()
    recorder = Recorder(_OneChannel(can.Logger(str(path))), ended=stop)
    try:
        adapter = open_adapter(bus, [recorder.on_message])
    except BaseException:
        recorder.close()
        raise
    poller = None
    try:
        if obd:
            from hwbridge.discovery.live.obd_poll import ObdPoller
            from hwbridge.policy import SendPolicy

            poller = ObdPoller(adapter, SendPolicy())
        polling = poller.polling() if poller is not None else contextlib.nullcontext()
        with on_stop_signals(lambda signum: stop.set()), polling:
            end = time.monotonic() + duration_s
            while (left := end - time.monotonic()) > 0 and not stop.wait(min(left, _TICK_S)):
                if getattr(adapter.status(), "finished", False):  # replay:CAPTURE ended
                    break
    finally:
        if poller is not None:
            poller.close()
        adapter.close()
        try:
            recorder.close()
        except Exception as exc:
            raise CliError(f"cannot write {path}: {one_line(str(exc))}", EXIT_RUNTIME) from exc
    if recorder.error is not None:
        raise CliError(f"cannot write {path}: {one_line(str(recorder.error))}", EXIT_RUNTIME)
    return path, recorder.frames


class _OneChannel:
    """A BLF writer fed frames without their channel: discovery reads one bus, and BLF keeps
    a channel as a small number (python-can reads one from a name's trailing digits, and a
    virtual channel `bus-35774992` has too many)."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def on_message_received(self, msg: can.Message) -> None:
        if msg.channel is not None:
            msg = copy.copy(msg)
            msg.channel = None
        self._writer.on_message_received(msg)

    def file_size(self) -> int:
        return int(self._writer.file_size())

    def stop(self) -> None:
        self._writer.stop()
