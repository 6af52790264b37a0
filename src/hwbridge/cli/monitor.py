"""`hwbridge monitor`: a live view of a bus, each message decoded in place (like cantools'
`monitor`), drawn with rich.

    hwbridge monitor --bus socketcand://127.0.0.1:29536/vcan0
    hwbridge monitor --bus socketcan:can0 --dbc car.dbc --filter 'Engine*'

One row per frame id: id, message, rate, age, count and the signals of its latest frame
(labels for labelled values, units), a value that changed highlighted for a second; ids
the database does not know are shown raw, changed bytes highlighted. Keys: `p` or space
pauses the view (frames are still counted), `f` or `/` edits the filter, the arrows and
PgUp/PgDn scroll, `q` quits. Frames are received and counted by the adapter's thread and a
BusMonitor (bounded per-id state); the screen only reads them, four times a second.

When stdout is not a terminal, a plain snapshot of every row is printed each second
instead, until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import logging
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from hwbridge.cli.console import terminal_text
from hwbridge.cli.errors import EXIT_OK

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

    from hwbridge.can.database.database import CanDatabase
    from hwbridge.can.transport.adapter import CanAdapter
    from hwbridge.can.transport.monitor import BusMonitor, FrameKey, FrameRecord

__all__ = ["KeyReader", "MonitorScreen", "register", "run"]

REFRESH_S = 0.25
"""How often the live view is redrawn (and keys are looked at, at the latest)."""
SNAPSHOT_S = 1.0
"""How often a plain snapshot is printed when stdout is not a terminal."""
HIGHLIGHT_S = 1.0
"""How long a changed value stays highlighted."""
RATE_WINDOW_S = 2.0
"""Rates are counted over this much of the recent past."""
MAX_UNKNOWN_IDS = 1024
"""Ids outside the database tracked with their own row; more are counted, not shown."""

_CHANGED = "black on yellow"
_HISTORY_FRAMES = 256  # the BusMonitor's ring is not read here: keep it small
_FIXED = (("ID", 10), ("Message", 20), ("Hz", 7), ("Age", 7), ("Count", 9))
_GAP = 2  # columns between two cells (padding 1 on either side)
_GLOB = frozenset("*?[")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "monitor",
        help="a live view of a bus: each message decoded in place, its rate and age",
        description="Watch a bus live: one row per frame id with its message, rate (Hz), "
        "age, count and the signals of its latest frame (labels, units), changed values "
        "highlighted; ids the database does not know are shown as raw bytes. Keys: p or "
        "space pause, f or / filter, arrows and PgUp/PgDn scroll, q quit. Without --dbc "
        "the demo vehicle's database is used (said in one line): on another bus give its "
        "database, or its frames show raw (and any id the demo vehicle shares is decoded as "
        "the demo's). When stdout is not a terminal, a plain snapshot is printed every "
        "second until Ctrl-C. Nothing is ever sent on the bus.",
    )
    from hwbridge.cli.options import BUS_FORMS

    parser.add_argument("--bus", required=True, metavar="BUS", help=f"the CAN bus: {BUS_FORMS}")
    parser.add_argument(
        "--dbc",
        metavar="FILE",
        help="CAN database (.dbc, .kcd, .sym, .arxml); default: the bundled demo vehicle",
    )
    parser.add_argument(
        "--filter",
        metavar="GLOB",
        default="",
        help="show only messages whose name or id matches (any case; 'Engine*', '0x1?0'; "
        "no wildcard: any name or id containing it); the f key changes it",
    )
    parser.set_defaults(func=run)


# -- the view ---------------------------------------------------------------------------


def matches(pattern: str, name: str, ident: str) -> bool:
    """The filter: a glob on the message name or the id text, any case; plain text
    without a wildcard matches anywhere in either."""
    if not pattern:
        return True
    pat = pattern.lower()
    if not _GLOB & set(pat):
        pat = f"*{pat}*"
    return fnmatch.fnmatchcase(name.lower(), pat) or fnmatch.fnmatchcase(ident.lower(), pat)


def _number(value: float, ndigits: int | None) -> str:
    if isinstance(value, int):  # bool too
        return str(int(value))
    if ndigits is not None and ndigits >= 0:
        return f"{value:.{ndigits}f}"
    return f"{value:g}"


def _age(seconds: float) -> str:
    if seconds < 1.0:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 100.0:
        return f"{seconds:.1f} s"
    if seconds < 6000.0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


@dataclass
class _Row:
    """What the screen keeps of one frame id (only for ids the BusMonitor tracks)."""

    key: FrameKey
    ident: str
    name: str = ""
    count: int = 0
    rate: float | None = None
    age: float | None = None
    data: bytes = b""
    values: dict[str, str] = field(default_factory=dict)  # signal -> text shown
    notes: tuple[str, ...] = ()
    changed: dict[str, float] = field(default_factory=dict)  # signal or byte -> when
    decoded_from: tuple[bytes, ...] = ()


class _Rates:
    """Per-id rates from counts over the last RATE_WINDOW_S (O(ids) per refresh)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, dict[FrameKey, int], int]] = deque()

    def add(self, now: float, counts: dict[FrameKey, int], total: int) -> None:
        self._samples.append((now, counts, total))
        while len(self._samples) > 2 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()

    def _base(self) -> tuple[float, dict[FrameKey, int], int] | None:
        if len(self._samples) < 2:
            return None
        return self._samples[0]

    def of(self, key: FrameKey, count: int, first_seen: float, now: float) -> float | None:
        base = self._base()
        if base is None:
            return None
        then, counts, _ = base
        if key not in counts or now - then <= 0:
            if now - first_seen <= 0 or count < 2:
                return None
            return (count - 1) / (now - first_seen)
        return (count - counts[key]) / (now - then)

    def total(self, total: int, now: float) -> float | None:
        base = self._base()
        if base is None or now - base[0] <= 0:
            return None
        return (total - base[2]) / (now - base[0])


class MonitorScreen:
    """The rows the monitor shows, read from a BusMonitor and decoded with a database.

    `refresh()` reads the monitor (nothing while paused); `render(width, height)` draws
    what fits, `render_all(width)` every row (the plain snapshots). Per-id state exists
    only for ids the BusMonitor tracks, so it is bounded as the BusMonitor is.
    """

    def __init__(
        self,
        monitor: BusMonitor,
        db: CanDatabase | None,
        *,
        bus_name: str,
        db_name: str = "",
        pattern: str = "",
        adapter: CanAdapter | None = None,
    ) -> None:
        self.monitor = monitor
        self.db = db
        self.bus_name = bus_name
        self.db_name = db_name
        self.pattern = pattern
        self.adapter = adapter
        self.paused = False
        self.editing: str | None = None  # the filter being typed, or None
        self.offset = 0  # first row shown
        self.note = ""  # the last library warning, shown in the footer
        self._rows: dict[FrameKey, _Row] = {}
        self._rates = _Rates()
        self._units: dict[str, dict[str, tuple[str, int | None]]] = {}
        self._frames_total = 0
        self._frames_per_s: float | None = None
        self._dropped = 0
        self._down: str | None = None
        self._page = 10
        self._paused_at = 0.0

    # -- reading the bus --------------------------------------------------------------

    def refresh(self) -> None:
        if self.paused:
            return
        monitor = self.monitor
        now = monitor.now()
        stats = monitor.stats(window_s=RATE_WINDOW_S)
        latest = monitor.latest_frames()
        counts = {key: s.count for key, s in stats.ids.items()}
        self._rates.add(now, counts, stats.frames_total)
        self._frames_total = stats.frames_total
        self._frames_per_s = self._rates.total(stats.frames_total, now)
        self._dropped = stats.frames_of_dropped_ids and stats.unknown_ids_dropped
        if self.adapter is not None:
            status = self.adapter.status()
            self._down = None if status.connected else (status.last_error or "no connection")
        for key, st in stats.ids.items():
            row = self._rows.get(key)
            if row is None:
                from hwbridge.can.transport.monitor import frame_id_text

                row = self._rows[key] = _Row(key, frame_id_text(*key))
            row.count = st.count
            row.rate = self._rates.of(key, st.count, st.first_timestamp, now)
            row.age = max(0.0, now - st.last_timestamp)
            frame = latest.get(key)
            if frame is not None:
                self._decode(row, frame, now)

    def _frames_of(self, row: _Row, frame: FrameRecord) -> list[FrameRecord]:
        """The latest frame, or one per multiplexer value seen (all branches shown)."""
        keys = self.monitor.keys_seen(row.key)
        if not keys:
            return [frame]
        frames = [self.monitor.latest(row.key, k) for k in keys]
        return [f for f in frames if f is not None] or [frame]

    def _decode(self, row: _Row, frame: FrameRecord, now: float) -> None:
        frames = self._frames_of(row, frame) if self.db is not None else [frame]
        source = tuple(f.data for f in frames)
        if source == row.decoded_from:
            return
        row.decoded_from = source
        values: dict[str, str] = {}
        notes: list[str] = []
        name = ""
        for f in frames:
            decoded = None
            if self.db is not None:
                try:
                    decoded = self.db.decode_frame(f.arbitration_id, f.data, f.is_extended_id)
                except Exception as exc:  # a frame the database cannot decode: raw
                    notes.append(f"cannot decode: {exc}")
                    known = self.db.message_for_frame(f.arbitration_id, f.is_extended_id)
                    name = str(known.name) if known is not None else name
            if decoded is None:
                continue
            name = decoded.message
            units = self._units_of(decoded.message)
            for signal_name, value in decoded.signals.items():
                values[signal_name] = self._text(value, units.get(signal_name))
            notes.extend(decoded.notes)
        if name and len(frames) > 1:  # branches of a multiplexed message: database order
            order = self._units_of(name)
            values = {k: values[k] for k in order if k in values} | values
        row.name = name
        row.notes = tuple(dict.fromkeys(notes))
        if values:
            for k, text in values.items():
                if k in row.values and row.values[k] != text:
                    row.changed[k] = now
            row.values = values
        else:
            data = frame.data
            for i, byte in enumerate(data):
                if row.data and (i >= len(row.data) or row.data[i] != byte):
                    row.changed[str(i)] = now
            row.values = {}
        row.data = frame.data
        for k in [k for k, t in row.changed.items() if now - t > HIGHLIGHT_S]:
            del row.changed[k]

    def _units_of(self, message: str) -> dict[str, tuple[str, int | None]]:
        units = self._units.get(message)
        if units is None:
            assert self.db is not None
            try:
                specs = self.db.signals(message)
            except Exception:
                specs = ()
            units = {s.name: (s.unit or "", s.ndigits) for s in specs}
            self._units[message] = units
        return units

    @staticmethod
    def _text(value: object, unit: tuple[str, int | None] | None) -> str:
        symbol, ndigits = unit if unit is not None else ("", None)
        if isinstance(value, dict):  # a labelled value: its label
            label = value.get("label")
            shown = str(label) if label is not None else str(value.get("value"))
        elif isinstance(value, int | float):
            shown = _number(value, ndigits)
        else:
            shown = str(value)
        return f"{shown} {symbol}" if symbol else shown

    # -- keys -------------------------------------------------------------------------

    def key(self, key: str) -> bool:
        """Act on one key; False when it asks to quit."""
        if self.editing is not None:
            self._edit(key)
            return True
        if key in ("q", "Q"):
            return False
        if key in ("p", "P", " "):
            self.paused = not self.paused
            self._paused_at = self.monitor.now()
        elif key in ("f", "F", "/"):
            self.editing = self.pattern
        elif key == "up":
            self.offset = max(0, self.offset - 1)
        elif key == "down":
            self.offset += 1
        elif key == "pgup":
            self.offset = max(0, self.offset - self._page)
        elif key == "pgdn":
            self.offset += self._page
        elif key == "home":
            self.offset = 0
        return True

    def _edit(self, key: str) -> None:
        assert self.editing is not None
        if key == "enter":
            self.pattern, self.editing, self.offset = self.editing.strip(), None, 0
        elif key == "esc":
            self.editing = None
        elif key == "backspace":
            self.editing = self.editing[:-1]
        elif len(key) == 1 and key.isprintable() and len(self.editing) < 100:
            self.editing += key

    # -- drawing ----------------------------------------------------------------------

    def rows(self) -> list[_Row]:
        """The rows that pass the filter (the one being typed, while it is), by id."""
        pattern = self.editing if self.editing is not None else self.pattern
        rows = sorted(self._rows.values(), key=lambda r: (r.key[1], r.key[0]))
        return [r for r in rows if matches(pattern, r.name, r.ident)]

    def _cells(self, row: _Row, now: float) -> tuple[str, Text, str, str, str, Text]:
        from rich.text import Text

        signals = Text()
        fresh = {k for k, t in row.changed.items() if now - t <= HIGHLIGHT_S}
        if row.values:
            for i, (signal_name, text) in enumerate(row.values.items()):
                if i:
                    signals.append("  ")
                signals.append(f"{signal_name} ", style="dim")
                signals.append(text, style=_CHANGED if signal_name in fresh else "")
        else:
            for i, byte in enumerate(row.data):
                if i:
                    signals.append(" ")
                signals.append(f"{byte:02X}", style=_CHANGED if str(i) in fresh else "")
        for note in row.notes:
            signals.append(f"  ({note})", style="red")
        name = Text(row.name) if row.name else Text("unknown", style="dim")
        rate = "" if row.rate is None else f"{row.rate:.1f}"
        age = "" if row.age is None else _age(row.age)
        return row.ident, name, rate, age, f"{row.count:,}", signals

    def _header(self) -> Text:
        from rich.text import Text

        head = Text(no_wrap=True, overflow="ellipsis")  # one line, whatever the width
        head.append("hwbridge monitor ", style="bold")
        head.append(self.bus_name)
        if self.db_name:
            head.append(f"  {self.db_name}", style="dim")
        rate = "" if self._frames_per_s is None else f", {self._frames_per_s:,.0f} frames/s"
        head.append(f"  {self._frames_total:,} frames{rate}, {len(self._rows)} ids")
        if self._dropped:
            head.append(f" (+{self._dropped} more ids not tracked)", style="yellow")
        if self._down is not None:
            head.append(f"  bus down: {self._down} (reconnecting)", style="bold red")
        if self.paused:
            head.append("  PAUSED", style="bold reverse")
        if self.pattern and self.editing is None:
            head.append(f"  filter: {self.pattern}", style="cyan")
        return head

    def _footer(self, above: int, below: int) -> Text:
        from rich.text import Text

        foot = Text(no_wrap=True, overflow="ellipsis")
        if self.editing is not None:
            foot.append("filter: ", style="bold")
            foot.append(self.editing + "_")
            foot.append("   Enter keep, Esc cancel, empty: all", style="dim")
            return foot
        if above or below:
            foot.append(f"{above} above, {below} more below  ", style="yellow")
        foot.append("q quit  p pause  f filter  ↑↓ PgUp PgDn scroll", style="dim")
        if self.note:
            foot.append(f"  {self.note}", style="red")
        return foot

    def _table(self, width: int) -> tuple[Any, int]:
        from rich.table import Table

        table = Table(
            box=None,
            padding=(0, 1),
            pad_edge=False,
            show_edge=False,
            header_style="bold underline",
            expand=False,
        )
        for title, w in _FIXED:
            table.add_column(
                title,
                width=w,
                no_wrap=True,
                overflow="ellipsis",
                justify="right" if title in ("Hz", "Age", "Count") else "left",
            )
        rest = max(10, width - sum(w for _, w in _FIXED) - _GAP * len(_FIXED))
        table.add_column("Signals (raw bytes when unknown)", width=rest, overflow="fold")
        return table, rest

    def render(self, console: Console, width: int, height: int) -> RenderableType:
        """Header, the rows that fit in `height` lines from the scroll offset, footer."""
        from rich.console import Group

        now = self._paused_at if self.paused else self.monitor.now()
        rows = self.rows()
        table, rest = self._table(width)
        budget = max(1, height - 3)  # header, the table's header, footer
        self._page = max(1, budget - 1)
        self.offset = max(0, min(self.offset, len(rows) - 1))
        used = shown = 0
        for row in rows[self.offset :]:
            cells = self._cells(row, now)
            lines = len(cells[-1].wrap(console, rest, overflow="fold"))
            if used + lines > budget and shown:
                break
            table.add_row(*cells)
            used += lines
            shown += 1
        below = len(rows) - self.offset - shown
        return Group(self._header(), table, self._footer(self.offset, below))

    def render_all(self, width: int) -> RenderableType:
        from rich.console import Group

        now = self.monitor.now()
        table, _ = self._table(width)
        for row in self.rows():
            table.add_row(*self._cells(row, now))
        return Group(self._header(), table)


# -- the terminal -----------------------------------------------------------------------

_SEQUENCES = {
    "\x1b[A": "up",
    "\x1b[B": "down",
    "\x1bOA": "up",
    "\x1bOB": "down",
    "\x1b[5~": "pgup",
    "\x1b[6~": "pgdn",
    "\x1b[H": "home",
    "\x1b[1~": "home",
}


def parse_keys(data: str) -> list[str]:
    """Keys from what the terminal sent: characters, and names for the few escape
    sequences the monitor knows (other sequences are dropped whole)."""
    keys: list[str] = []
    i = 0
    while i < len(data):
        ch = data[i]
        if ch == "\x1b":
            for seq, name in _SEQUENCES.items():
                if data.startswith(seq, i):
                    keys.append(name)
                    i += len(seq)
                    break
            else:
                if i + 1 < len(data) and data[i + 1] in "[O":  # unknown sequence: skip it
                    j = i + 2
                    while j < len(data) and not ("@" <= data[j] <= "~"):
                        j += 1
                    i = j + 1
                else:
                    keys.append("esc")
                    i += 1
            continue
        if ch in "\r\n":
            keys.append("enter")
        elif ch in "\x7f\x08":
            keys.append("backspace")
        else:
            keys.append(ch)
        i += 1
    return keys


class KeyReader:
    """Keys from a terminal in cbreak mode (no echo, no line buffering, Ctrl-C still a
    signal), read without blocking; the terminal's mode comes back on exit."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] | None = None

    def __enter__(self) -> KeyReader:
        import termios
        import tty

        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd, termios.TCSANOW)
        return self

    def __exit__(self, *exc: object) -> None:
        import termios

        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def read(self, timeout_s: float) -> list[str]:
        """The keys pressed within `timeout_s` (at once when one is already waiting)."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        if not ready:
            return []
        data = os.read(self.fd, 256)
        if not data:  # the terminal went away
            return ["q"]
        return parse_keys(data.decode("utf-8", errors="replace"))


class _NoKeys:
    """stdin is not a terminal: no keys, just the pace."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop

    def read(self, timeout_s: float) -> list[str]:
        self._stop.wait(timeout_s)
        return []


class _NoteHandler(logging.Handler):
    """Library warnings while the screen is drawn: kept for the footer and for after."""

    def __init__(self, screen: MonitorScreen) -> None:
        super().__init__(logging.WARNING)
        self.screen = screen
        self.kept: deque[str] = deque(maxlen=5)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())[:200]
        except Exception:
            return
        self.count += 1
        self.kept.append(text)
        self.screen.note = text


@contextlib.contextmanager
def _logs_to(handler: _NoteHandler) -> Iterator[None]:
    """Logs go to `handler` instead of the terminal the screen is drawn on."""
    root = logging.getLogger()
    saved = root.handlers[:]
    for h in saved:
        root.removeHandler(h)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        for h in saved:
            root.addHandler(h)
        if handler.count:
            more = handler.count - len(handler.kept)
            for text in handler.kept:
                print(f"hwbridge: warning: {terminal_text(text)}", file=sys.stderr)
            if more > 0:
                print(f"hwbridge: ... and {more} more warnings", file=sys.stderr)


def _until_signal(stop: threading.Event) -> contextlib.AbstractContextManager[None]:
    """SIGTERM (and, without a terminal, Ctrl-C) ends the monitor like `q`."""
    from hwbridge.cli.live_bus import on_stop_signals

    return on_stop_signals(lambda signum: stop.set())


# -- the command ------------------------------------------------------------------------


def _open(args: argparse.Namespace) -> tuple[MonitorScreen, CanAdapter]:
    from hwbridge.can.network import frame_owner, multiplexer_extractors
    from hwbridge.can.transport.monitor import BusMonitor
    from hwbridge.cli.live_bus import open_adapter
    from hwbridge.cli.options import database_path, load_database

    db = load_database(database_path(args), debug=bool(getattr(args, "debug", False)))
    monitor = BusMonitor(
        history_s=RATE_WINDOW_S,
        max_frames=_HISTORY_FRAMES,
        mux=multiplexer_extractors(db) or None,
        known=lambda aid, ext: frame_owner(db, aid, ext),
        max_unknown_ids=MAX_UNKNOWN_IDS,
    )
    adapter = open_adapter(args.bus, [monitor.on_message])
    screen = MonitorScreen(
        monitor,
        db,
        bus_name=str(getattr(adapter, "description", args.bus)),
        db_name=os.path.basename(str(args.dbc)),
        pattern=args.filter,
        adapter=adapter,
    )
    return screen, adapter


def run(args: argparse.Namespace) -> int:
    import rich.console
    import rich.live  # noqa: F401  # before the bus opens: the first screen comes at once

    screen, adapter = _open(args)
    try:
        if sys.stdout.isatty():
            return _live(screen)
        return _snapshots(screen)
    finally:
        adapter.close()


def _live(screen: MonitorScreen) -> int:
    from rich.live import Live

    from hwbridge.cli.console import make_console

    console = make_console()
    stop = threading.Event()
    keys: Any
    tty_in = sys.stdin is not None and sys.stdin.isatty()
    handler = _NoteHandler(screen)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_logs_to(handler))
        stack.enter_context(_until_sigterm())
        keys = stack.enter_context(KeyReader(sys.stdin.fileno())) if tty_in else _NoKeys(stop)
        live = stack.enter_context(
            Live(
                console=console,
                screen=True,
                auto_refresh=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )
        )
        try:
            next_refresh = 0.0
            while not stop.is_set():
                now = time.monotonic()
                if now >= next_refresh:
                    screen.refresh()
                    next_refresh = now + REFRESH_S
                size = console.size
                live.update(screen.render(console, size.width, size.height), refresh=True)
                pressed = keys.read(max(0.0, next_refresh - time.monotonic()))
                if not all(screen.key(key) for key in pressed):
                    break
        except KeyboardInterrupt:  # Ctrl-C: as `q`
            pass
    return EXIT_OK


@contextlib.contextmanager
def _until_sigterm() -> Iterator[None]:
    def on_signal(signum: int, frame: FrameType | None) -> None:
        # out of a blocking select at once; nothing here may take a lock (stop_signals.py)
        raise KeyboardInterrupt

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _snapshots(screen: MonitorScreen) -> int:
    from hwbridge.cli.console import make_console

    console = make_console()
    stop = threading.Event()
    with _until_signal(stop):
        while not stop.wait(SNAPSHOT_S):
            screen.refresh()
            console.print(screen.render_all(console.width))
            console.print()
            console.file.flush()
    return EXIT_OK
