"""A recorded capture played back as a live, read-only bus.

    CanDriver.from_dbc("truck.dbc", bus="replay:logs/truck.MF4?speed=10&loop=1")

`ReplayAdapter` reads .asc, .blf, .csv, .db, .log (candump), .trc and .mf4 files (optionally
gzip-compressed, e.g. `.asc.gz`) through the capture readers (`hwbridge.can.io`: the same
bounded readers and frame checks as `hwbridge decode`) on one thread, keeps the recorded gaps
between frames (divided by `speed`), and stamps every frame with the live clock, so the
monitor's ages, rates and histories work as on a real bus. Error and remote frames are
counted, not replayed. The file is opened on the replay thread: constructing the adapter
only checks the path, the format and the options.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import threading
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import can
from hwbridge.can.transport.adapter import (
    AdapterStatus,
    CanAdapter,
    FrameListener,
    ModifierCallback,
    PeriodicHandle,
)
from hwbridge.can.transport.bus_url import REPLAY_PREFIX
from hwbridge.core.models import ToolError

__all__ = [
    "REPLAY_OPTIONS",
    "ReplayAdapter",
    "ReplayOptions",
    "ReplayStatus",
    "parse_replay_url",
    "supported_suffixes",
]

log = logging.getLogger(__name__)

REPLAY_OPTIONS = ("speed=FACTOR|max", "loop=0|1", "plays=N", "channel=CH")
"""The query keys of a `replay:PATH?...` bus string (see `parse_replay_url`)."""

_OPTIONS_HELP = "accepted options: " + ", ".join(REPLAY_OPTIONS)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_AS_FAST_AS_POSSIBLE = frozenset({"max", "0", "inf"})

_MIN_WAIT_S = 0.0002
"""Gaps shorter than this are not slept: a timer wake-up costs about as much."""
_MAX_LAG_S = 0.5
"""Falling further behind than this (a slow listener, a busy machine) restarts the schedule
from now instead of bursting to catch up, so live timestamps stay close to the clock."""


def supported_suffixes() -> list[str]:
    """File suffixes of the captures that can be replayed, lower case."""
    # the readers (numpy) load when a capture is first replayed, not with the CAN bridge
    from hwbridge.can.io.readers import capture_formats

    return capture_formats()


def _formats_help() -> str:
    return (
        "supported formats: "
        + ", ".join(supported_suffixes())
        + " (any of them gzip-compressed, e.g. .asc.gz)"
    )


def _format_of(path: Path) -> str:
    """The reader suffix of `path` ('.mf4' for 'x.MF4', '.asc' for 'x.asc.gz')."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    suffix = suffixes[-1] if suffixes else ""
    if suffix not in supported_suffixes():
        shown = "".join(path.suffixes) or "no suffix"
        raise ValueError(
            f"cannot replay {str(path)!r}: unknown capture format ({shown}); {_formats_help()}"
        )
    return suffix


def _check_file(path: Path) -> None:
    """Fail at construction, naming the file, instead of later on the replay thread."""
    if not path.exists():
        raise FileNotFoundError(errno.ENOENT, "replay capture not found", str(path))
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "replay capture is a directory", str(path))
    if not os.access(path, os.R_OK):
        raise PermissionError(errno.EACCES, "replay capture is not readable", str(path))


def _check_dependencies(suffix: str) -> None:
    if suffix == ".mf4":
        from hwbridge._deferred import require_asammdf

        try:
            require_asammdf()
        except ImportError:
            raise ImportError(
                "replaying .mf4 captures needs asammdf: pip install 'mcs-hwbridge[mf4]'"
            ) from None


def _messages(path: Path, counts: list[int]) -> Generator[can.Message, None, None]:
    """The data frames of a capture as python-can messages, in file order, read through the
    bounded readers; its error frames are added to `counts[0]` once the file is read."""
    from hwbridge.can.io.readers import open_capture

    reader = open_capture(path)
    try:
        for chunk in reader.chunks():
            stamps = (chunk.timestamp_us / 1e6).tolist()
            ids = chunk.arbitration_id.tolist()
            extended = chunk.extended.tolist()
            lengths = chunk.length.tolist()
            channels = chunk.channel.tolist()
            data = chunk.data
            for row in range(len(chunk)):
                size = lengths[row]
                yield can.Message(
                    timestamp=stamps[row],
                    arbitration_id=ids[row],
                    is_extended_id=extended[row],
                    data=data[row, :size].tobytes(),
                    is_fd=size > 8,
                    channel=channels[row] if channels[row] >= 0 else None,
                    check=False,
                )
        counts[0] += reader.counts.error_frames
    finally:
        reader.close()


# --- options ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """What a `replay:` bus string asks for."""

    path: Path
    speed: float | None = 1.0
    """Playback speed factor; None plays as fast as possible."""
    plays: int | None = 1
    """Passes through the capture; None loops until closed."""
    channel: str | None = None
    """Only frames whose channel (as the reader reports it) is this; None keeps all."""


def _bad_option(text: str, why: str) -> ValueError:
    return ValueError(f"invalid replay bus {text!r}: {why}; {_OPTIONS_HELP}")


def _parse_speed(text: str, value: str) -> float | None:
    if value.lower() in _AS_FAST_AS_POSSIBLE:
        return None
    try:
        speed = float(value)
    except ValueError:
        raise _bad_option(
            text, f"speed must be a positive number or 'max', not {value!r}"
        ) from None
    if not (speed > 0 and math.isfinite(speed)):
        raise _bad_option(text, f"speed must be a positive number or 'max', not {value!r}")
    return speed


def _parse_query(text: str, query: str) -> dict[str, str]:
    items: dict[str, str] = {}
    accepted = {option.partition("=")[0] for option in REPLAY_OPTIONS}
    for item in query.split("&"):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or not value:
            raise _bad_option(text, f"query item {item!r} is not key=value")
        if key not in accepted:
            raise _bad_option(text, f"unknown option {key!r}")
        if key in items:
            raise _bad_option(text, f"{key!r} is given twice")
        items[key] = value.strip()
    return items


def parse_replay_url(text: str) -> ReplayOptions:
    """`replay:PATH[?speed=FACTOR|max&loop=0|1&plays=N&channel=CH]` -> ReplayOptions.

    speed: recorded gaps are divided by it (default 1; `max` or 0: no pacing at all).
    loop=1 replays until closed; plays=N replays N times then finishes (default: once).
    ValueError names the accepted options.
    """
    if not text[: len(REPLAY_PREFIX)].lower() == REPLAY_PREFIX:
        raise ValueError(f"not a replay bus string: {text!r} (expected {REPLAY_PREFIX}PATH)")
    body, sep, query = text[len(REPLAY_PREFIX) :].partition("?")
    if not body.strip():
        raise _bad_option(text, "no capture file given (replay:PATH)")
    items = _parse_query(text, query) if sep else {}
    speed = _parse_speed(text, items["speed"]) if "speed" in items else 1.0
    plays: int | None = 1
    if "loop" in items:
        loop = items["loop"].lower()
        if loop not in _TRUE | _FALSE:
            raise _bad_option(text, f"loop must be 0 or 1, not {items['loop']!r}")
        if loop in _TRUE:
            if "plays" in items:
                raise _bad_option(text, "give loop=1 (until closed) or plays=N, not both")
            plays = None
    if "plays" in items:
        value = items["plays"]
        if not (value.isascii() and value.isdigit() and len(value) <= 9 and int(value) >= 1):
            raise _bad_option(text, f"plays must be a whole number >= 1, not {value!r}")
        plays = int(value)
    return ReplayOptions(Path(body).expanduser(), speed, plays, items.get("channel"))


# --- status ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayStatus(AdapterStatus):
    """AdapterStatus plus where the replay is. `bus_state` is opening, replaying, finished,
    failed or closed; `position_s` is the recorded time of the last frame from the start of
    the capture; length and progress are known once a whole pass has been read."""

    path: str
    speed: float | None
    plays: int | None
    play: int
    frames_replayed: int
    position_s: float
    duration_s: float | None
    frames_per_play: int | None
    progress: float | None
    finished: bool
    channels: list[str]


# --- the adapter -----------------------------------------------------------------------


class _Pacer:
    """Maps recorded offsets to monotonic deadlines and monotonic times to live timestamps."""

    __slots__ = ("mono0", "speed", "started", "wall0")

    def __init__(self, speed: float | None) -> None:
        self.speed = speed
        self.started = False
        self.mono0 = self.wall0 = 0.0

    def start(self, mono: float) -> None:
        """Anchor the schedule at the first frame (not at construction: opening takes time)."""
        self.started = True
        self.mono0 = mono
        self.wall0 = time.time()

    def wall(self, mono: float) -> float:
        return self.wall0 + (mono - self.mono0)


class ReplayAdapter(CanAdapter):
    """A capture file as a read-only live bus (one reader thread, frames fanned out).

    `speed` divides the recorded gaps (None or 0: as fast as possible); `plays` is how many
    passes to make (None: until closed); `channel` keeps only that recorded channel. Frames carry
    live `time.time()`-based timestamps. Sending raises `ToolError("READ_ONLY_BUS")`.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        speed: float | None = 1.0,
        plays: int | None = 1,
        channel: str | int | None = None,
        listeners: Iterable[FrameListener] = (),
        join_timeout_s: float = 2.0,
    ) -> None:
        if speed is not None and not speed >= 0:
            raise ValueError(f"speed must be positive (0 or None: as fast as possible): {speed}")
        if plays is not None and plays < 1:
            raise ValueError(f"plays must be >= 1 (or None to loop until closed): {plays}")
        self.path = Path(path).expanduser()
        suffix = _format_of(self.path)
        _check_file(self.path)
        _check_dependencies(suffix)
        self.speed = None if not speed or math.isinf(speed) else float(speed)
        self.plays = plays
        self.channel = None if channel is None else str(channel)
        self.description = f"{REPLAY_PREFIX}{self.path}"
        self._join_timeout_s = join_timeout_s

        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._listeners: tuple[FrameListener, ...] = tuple(listeners)
        self._state = "opening"
        self._last_error: str | None = None
        self._play = 0
        self._frames = 0
        self._error_frames = 0
        self._listener_errors = 0
        self._position_s = 0.0
        self._duration_s: float | None = None
        self._frames_per_play: int | None = None
        self._channels: dict[str | None, None] = {}
        self._first_frame_at: float | None = None
        self._started_at = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, name=f"hwbridge-replay[{self.path.name}]", daemon=True
        )
        self._thread.start()

    @classmethod
    def from_url(cls, text: str, *, listeners: Iterable[FrameListener] = ()) -> ReplayAdapter:
        """An adapter from a `replay:PATH?...` bus string (see `parse_replay_url`)."""
        options = parse_replay_url(text)
        return cls(
            options.path,
            speed=options.speed,
            plays=options.plays,
            channel=options.channel,
            listeners=listeners,
        )

    # -- the replay thread --------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._replay()
        except Exception as exc:
            with self._lock:
                if self._state != "closed":
                    self._state = "failed"
                self._last_error = f"cannot replay {self.path}: {exc}"
            log.warning("replay of %s failed: %s", self.path, exc, exc_info=True)
        finally:
            self._done.set()

    def _replay(self) -> None:
        pacer = _Pacer(self.speed)
        base = 0.0  # recorded seconds played in earlier passes
        while self.plays is None or self._play < self.plays:
            errors = [0]
            frames = _messages(self.path, errors)
            try:
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._state = "replaying"
                    self._play += 1
                count, span = self._play_once(frames, pacer, base)
            finally:
                frames.close()
            self._error_frames += errors[0]
            if self._stop.is_set():
                return
            if self._frames_per_play is None:
                self._frames_per_play, self._duration_s = count, span
            if count == 0:
                break  # nothing to loop over
            # The seam between passes gets the capture's mean gap.
            base += span + (span / (count - 1) if count > 1 else 0.0)
        with self._lock:
            if self._state == "replaying":
                self._state = "finished"

    def _play_once(
        self, frames: Iterator[can.Message], pacer: _Pacer, base: float
    ) -> tuple[int, float]:
        """Replay one pass; returns (frames replayed, recorded span in seconds)."""
        stop = self._stop
        wanted = self.channel
        speed = pacer.speed
        channels = self._channels
        monotonic = time.monotonic
        first: float | None = None
        offset = 0.0
        count = 0
        for msg in frames:
            if stop.is_set():
                break
            channel = None if msg.channel is None else str(msg.channel)
            if channel not in channels:
                channels[channel] = None
            if wanted is not None and channel != wanted:
                continue
            stamp = float(msg.timestamp)
            if first is None:
                first = stamp
            recorded = stamp - first
            offset = max(offset, recorded)  # out-of-order or NaN stamps never go back
            now = monotonic()
            if not pacer.started:
                pacer.start(now)
            if speed is not None:
                due = pacer.mono0 + (base + offset) / speed
                delay = due - now
                if delay > _MIN_WAIT_S:
                    if stop.wait(delay):
                        break
                    now = monotonic()
                elif delay < -_MAX_LAG_S:
                    pacer.mono0 -= delay  # drop the backlog: restart the schedule from now
                    due = now
                now = min(now, due)
            msg.timestamp = pacer.wall(now)
            self._position_s = offset
            self._frames += 1
            count += 1
            if self._first_frame_at is None:
                self._first_frame_at = monotonic()
            if msg.is_error_frame:
                self._error_frames += 1
            self._dispatch(msg)
        return count, offset

    # -- listeners ----------------------------------------------------------------------

    def _dispatch(self, msg: can.Message) -> None:
        for callback in self._listeners:
            try:
                callback(msg)
            except Exception:
                self._listener_errors += 1
                count = self._listener_errors
                if count <= 10 or count % 1000 == 0:
                    log.exception("replay listener raised (error #%d); others still run", count)

    def add_listener(self, callback: FrameListener) -> None:
        with self._lock:
            self._listeners = (*self._listeners, callback)

    def remove_listener(self, callback: FrameListener) -> None:
        with self._lock:
            listeners = list(self._listeners)
            if callback in listeners:
                listeners.remove(callback)
            self._listeners = tuple(listeners)

    # -- sending: never ----------------------------------------------------------------

    def _read_only(self) -> ToolError:
        return ToolError(
            "READ_ONLY_BUS",
            f"This bus is a replay of {self.path.name}: a replayed capture cannot be sent to. "
            "Only reading tools work here.",
        )

    def send(self, msg: can.Message, timeout_s: float | None = None) -> None:
        raise self._read_only()

    def send_periodic(
        self,
        msg: can.Message,
        period_s: float,
        modifier_callback: ModifierCallback | None = None,
        *,
        duration_s: float | None = None,
    ) -> PeriodicHandle:
        raise self._read_only()

    # -- status and lifetime ------------------------------------------------------------

    def status(self) -> ReplayStatus:
        with self._lock:
            state = self._state
            last_error = self._last_error
            play = self._play
        duration = self._duration_s
        position = self._position_s
        progress = None
        if state == "finished":
            progress = 1.0
        elif duration is not None:
            progress = min(1.0, position / duration) if duration > 0 else 1.0
        return ReplayStatus(
            connected=state in ("opening", "replaying"),
            bus=self.description,
            interface="replay",
            bus_state=state,
            error_frames=self._error_frames,
            last_error=last_error,
            reconnecting=False,
            reconnects=0,
            periodic_tasks=0,
            listener_errors=self._listener_errors,
            path=str(self.path),
            speed=self.speed,
            plays=self.plays,
            play=play,
            frames_replayed=self._frames,
            position_s=position,
            duration_s=duration,
            frames_per_play=self._frames_per_play,
            progress=progress,
            finished=state == "finished",
            channels=[c for c in self._channels.copy() if c is not None],
        )

    @property
    def time_to_first_frame_s(self) -> float | None:
        """Seconds from construction to the first frame handed to listeners (diagnostics)."""
        first = self._first_frame_at
        return None if first is None else first - self._started_at

    def wait_finished(self, timeout_s: float | None = None) -> bool:
        """Block until the replay thread has ended (finished, failed or closed)."""
        return self._done.wait(timeout_s)

    def close(self) -> None:
        """Stop the replay thread (within one frame or one reader chunk); idempotent. A
        finished replay keeps its state and counts."""
        with self._lock:
            if self._stop.is_set():
                return
            if self._state in ("opening", "replaying"):
                self._state = "closed"
            self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(self._join_timeout_s)
            if self._thread.is_alive():
                log.warning("replay thread for %s did not stop in time", self.path)

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def __repr__(self) -> str:
        return f"ReplayAdapter({str(self.path)!r}, speed={self.speed}, plays={self.plays})"
