"""`hwbridge record`: a bus into a BLF, MF4, ASC or candump log file, with python-can's writers.

    hwbridge record --bus socketcand://127.0.0.1:29536/vcan0 --out drive.blf
    hwbridge record --bus socketcan:can0 --out drive.mf4 --duration 60 --max-size 100

The writer is the one `can.Logger` picks for the file's extension. A progress line on
stderr (frames, rate, what the file holds and what the writer buffers for it) is redrawn
twice a second on a terminal. The recording ends after --duration, when the file reaches
--max-size, or on Ctrl-C or SIGTERM; every way closes the writer, so the file is complete
and readable. It only listens: nothing is sent.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from hwbridge.cli.errors import EXIT_OK, EXIT_RUNTIME, CliError, one_line, os_text
from hwbridge.cli.out_paths import check_out_file

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    import can
    from hwbridge.can.transport.adapter import CanAdapter

__all__ = ["FORMATS", "Recorder", "register", "run"]

FORMATS = {
    ".blf": "Vector BLF",
    ".mf4": "ASAM MDF4 (needs asammdf)",
    ".asc": "Vector ASC",
    ".log": "candump -l log",
}
"""The extensions `--out` takes, each written by python-can's writer for it."""

MAX_IDS_COUNTED = 4096
"""Distinct frame ids counted for the summary; beyond it the summary says `4096+`."""


class _Writer(Protocol):
    """What the recorder needs of a python-can writer (all four formats' writers have it)."""

    def on_message_received(self, msg: can.Message) -> None: ...
    def file_size(self) -> int: ...
    def stop(self) -> None: ...


_TICK_S = 0.5  # the progress line is redrawn twice a second
_MB = 1_000_000


def _positive(kind: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of {kind}") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: {kind} must be above 0")
        return value

    return parse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    formats = ", ".join(f"{ext} ({name})" for ext, name in FORMATS.items())
    parser = sub.add_parser(
        "record",
        help="record a bus to a BLF, MF4, ASC or candump log file",
        description="Record every frame of a bus to a file with python-can's writers, the "
        f"format chosen by the extension of --out: {formats}. A progress line on stderr "
        "shows frames, rate and size. Recording stops after --duration, at --max-size, or "
        "on Ctrl-C or SIGTERM, and the file is closed properly every time, so python-can "
        "(can.LogReader), `hwbridge decode` and Vector or candump tools can read it. "
        "Nothing is ever sent on the bus. An existing file is overwritten.",
    )
    parser.add_argument("--bus", required=True, metavar="BUS", help=_bus_help())
    parser.add_argument(
        "--out", required=True, metavar="FILE", help=f"the file to write ({', '.join(FORMATS)})"
    )
    parser.add_argument(
        "--duration",
        type=_positive("seconds"),
        metavar="S",
        help="stop after S seconds (default: until Ctrl-C)",
    )
    parser.add_argument(
        "--max-size",
        type=_positive("megabytes"),
        metavar="MB",
        help="stop once the file reaches MB megabytes (1 MB = 1,000,000 bytes)",
    )
    parser.set_defaults(func=run)


def _bus_help() -> str:
    from hwbridge.cli.options import BUS_FORMS

    return f"the CAN bus: {BUS_FORMS}"


class Recorder:
    """One python-can writer fed from the adapter's receive thread.

    The writer is called under a lock, so the main thread can ask its size and stop it
    while frames arrive; frames after `close()` are not written. The recording ends (and
    `ended` is set) when a write fails (a full disk: kept in `error`) or when the file
    reaches `max_bytes`, checked after every frame, so the file ends at the frame that
    reached the limit, and after `duration_s` from the first frame or from `start()`,
    whichever came first: a frame that arrives later is not written, however late the main
    thread notices that the time is up (on a loaded machine it did, by a tenth of a second).
    """

    def __init__(
        self,
        writer: _Writer,
        *,
        max_bytes: int | None = None,
        ended: threading.Event | None = None,
        duration_s: float | None = None,
    ) -> None:
        self._writer = writer
        self.duration_s = duration_s
        self.started: float | None = None  # monotonic: the first frame, or start()
        self._lock = threading.Lock()
        self._closed = False
        self.max_bytes = max_bytes
        self.frames = 0
        self.full = False
        self.error: BaseException | None = None
        self.ended = ended if ended is not None else threading.Event()
        self._ids: set[tuple[int, bool]] = set()

    def start(self) -> None:
        """The bus is open: the duration runs from now, unless a frame came first."""
        with self._lock:
            if self.started is None:
                self.started = time.monotonic()

    @property
    def timed_out(self) -> bool:
        """Whether the duration has run out (frames are no longer written)."""
        with self._lock:
            return self._past_duration(time.monotonic())

    def _past_duration(self, now: float) -> bool:
        return (
            self.duration_s is not None
            and self.started is not None
            and now - self.started >= self.duration_s
        )

    def on_message(self, msg: can.Message) -> None:
        with self._lock:
            if self._closed or self.full or self.error is not None:
                return
            if self.duration_s is not None:
                now = time.monotonic()
                if self.started is None:
                    self.started = now
                elif self._past_duration(now):
                    self.ended.set()
                    return
            try:
                self._writer.on_message_received(msg)
                size = self._writer.file_size() if self.max_bytes is not None else 0
            except Exception as exc:
                self.error = exc
                self.ended.set()
                return
            self.frames += 1
            if len(self._ids) < MAX_IDS_COUNTED and not msg.is_error_frame:
                self._ids.add((msg.arbitration_id, bool(msg.is_extended_id)))
            if self.max_bytes is not None and size >= self.max_bytes:
                self.full = True
                self.ended.set()

    @property
    def ids(self) -> str:
        count = len(self._ids)
        return f"{count}+" if count >= MAX_IDS_COUNTED else str(count)

    def size(self) -> int:
        """The file's size in bytes, including what the writer still buffers (python-can's
        estimate, which `--max-size` is checked against)."""
        return sum(self.sizes())

    def sizes(self) -> tuple[int, int]:
        """What the file holds now, and what the writer holds beside it to write later, in
        bytes: BLF buffers a block of frames uncompressed and writes it compressed once it
        is full or at close (a block is 128 KiB: a few seconds of a busy bus), MF4 saves the
        whole recording at close. Only python-can's estimate of the whole (`file_size()`)
        is known until then, so the second is that estimate less what is written."""
        with self._lock:
            if self._closed:
                return 0, 0
            try:
                estimate = int(self._writer.file_size())
                file = getattr(self._writer, "file", None)
                written = int(file.tell()) if file is not None else estimate
            except Exception:
                return 0, 0
            return written, max(0, estimate - written)

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._writer.stop()


def _check_out(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(FORMATS)
        given = f"{suffix!r} is not" if suffix else "a file without an extension is not"
        raise CliError(f"--out {path}: {given} a recording format; use one of {known}")
    check_out_file(path, "the recording")
    return suffix


def _open_writer(path: Path, suffix: str) -> _Writer:
    if suffix == ".mf4":
        from hwbridge._deferred import require_asammdf

        try:
            require_asammdf()
        except ImportError:
            raise CliError(
                "recording .mf4 files needs asammdf: pip install 'mcs-hwbridge[mf4]'",
                EXIT_RUNTIME,
            ) from None
    import can

    try:
        return cast(_Writer, can.Logger(path))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {os_text(exc)}", EXIT_RUNTIME) from exc


def _stop_on_signals(
    stop: threading.Event, why: list[str]
) -> contextlib.AbstractContextManager[None]:
    """Ctrl-C and SIGTERM end the recording through `stop` (the writer is then closed by
    the main thread, never interrupted in the middle of a frame)."""
    from hwbridge.cli.live_bus import on_stop_signals

    def on_signal(signum: int) -> None:
        why[0] = "interrupted" if signum == signal.SIGINT else "terminated"
        stop.set()

    return on_stop_signals(on_signal)


def _size_text(written: int, buffered: int) -> str:
    """The progress line's size: what the file holds, and what the writer holds for it
    (`2.1 kB written, 26.0 kB buffered`): a BLF's buffered frames are compressed when they
    are written, so its file comes out smaller than the two together."""
    from rich.filesize import decimal

    text = f"{decimal(written)} written"
    return f"{text}, {decimal(buffered)} buffered" if buffered else text


def _progress() -> Progress:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hwbridge.cli.console import make_console

    console = make_console(sys.stderr)
    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(bar_width=20),
        TimeElapsedColumn(),
        console=console,
        auto_refresh=False,
        transient=False,
        disable=not console.is_terminal,
        redirect_stdout=False,
        redirect_stderr=False,
    )


def run(args: argparse.Namespace) -> int:
    path = Path(args.out).expanduser()
    suffix = _check_out(path)
    if not path.parent.is_dir():
        raise CliError(f"cannot write {path}: no such folder: {path.parent}", EXIT_RUNTIME)

    from hwbridge.cli.live_bus import check_bus, open_adapter

    check_bus(args.bus)  # a bad bus string is a usage error before the file is touched
    stop = threading.Event()
    max_bytes = None if args.max_size is None else int(args.max_size * _MB)
    # the writer first, so the first frame the bus gives is written (a replay at full
    # speed gives them at once); a bus that does not open takes the empty file away
    recorder = Recorder(
        _open_writer(path, suffix), max_bytes=max_bytes, ended=stop, duration_s=args.duration
    )
    try:
        adapter = open_adapter(args.bus, [recorder.on_message])
    except BaseException:
        recorder.close()
        path.unlink(missing_ok=True)
        raise
    recorder.start()
    try:
        return _record(args, path, adapter, recorder, stop)
    finally:
        adapter.close()  # no frame arrives after this: the writer can close
        try:
            recorder.close()
        except Exception as exc:  # flushing the last block failed (a full disk)
            raise CliError(f"cannot write {path}: {one_line(str(exc))}", EXIT_RUNTIME) from exc


def _record(
    args: argparse.Namespace,
    path: Path,
    adapter: CanAdapter,
    recorder: Recorder,
    stop: threading.Event,
) -> int:
    from rich.filesize import decimal

    duration: float | None = args.duration
    max_bytes = recorder.max_bytes
    why = ["stopped"]
    progress = _progress()
    total = duration if duration is not None else None if max_bytes is None else float(max_bytes)
    bus_name = str(getattr(adapter, "description", args.bus))
    start = recorder.started if recorder.started is not None else time.monotonic()
    last_t, last_frames, rate = start, 0, 0.0
    with _stop_on_signals(stop, why), progress:
        task: TaskID = progress.add_task(f"recording {path.name}", total=total)
        while True:
            elapsed = time.monotonic() - start
            wait = _TICK_S if duration is None else min(_TICK_S, max(0.0, duration - elapsed))
            if stop.wait(wait) and not recorder.timed_out:
                break
            now = time.monotonic()
            elapsed = now - start
            frames, (written, buffered) = recorder.frames, recorder.sizes()
            size = written + buffered  # what --max-size is checked against
            if now - last_t >= 0.2:
                rate = (frames - last_frames) / (now - last_t)
                last_t, last_frames = now, frames
            status = adapter.status()
            if getattr(status, "finished", False):  # replay:CAPTURE played to its end
                why[0] = "the replay ended"
                break
            state = "" if status.connected else ", bus down (reconnecting)"
            progress.update(
                task,
                description=f"recording {path.name}: {frames:,} frames, {rate:,.0f} frames/s, "
                f"{_size_text(written, buffered)}{state}",
                completed=elapsed if duration is not None else size if max_bytes else None,
            )
            progress.refresh()
            if duration is not None and elapsed >= duration:
                why[0] = f"{duration:g} s recorded"
                break
    elapsed = time.monotonic() - start
    if recorder.full and max_bytes is not None:
        why[0] = f"size limit {decimal(max_bytes)} reached"
    status = adapter.status()
    adapter.close()
    recorder.close()
    if recorder.error is not None:
        raise CliError(
            f"cannot write {path}: {one_line(str(recorder.error))} "
            f"({recorder.frames:,} frames written before it)",
            EXIT_RUNTIME,
        )
    size = path.stat().st_size if path.exists() else 0
    print(
        f"hwbridge: {why[0]}: {recorder.frames:,} frames from {recorder.ids} ids of "
        f"{bus_name} in {elapsed:.1f} s, {path} ({decimal(size)})",
        file=sys.stderr,
    )
    if not status.connected and not getattr(status, "finished", False):
        reason = f": {status.last_error}" if status.last_error else ""
        print(f"hwbridge: the bus was down when the recording ended{reason}", file=sys.stderr)
        return EXIT_RUNTIME
    return EXIT_OK
