"""A socketcand server that bridges python-can `virtual` channels to TCP clients.

CI has no SocketCAN, so this is the real network transport the tests and the simulated
vehicle use: python-can's own client connects with
`can.Bus(interface="socketcand", host=..., port=..., channel=...)`.

Protocol subset (what python-can's client speaks): the server greets `< hi >`; the client
sends `< open BUS >` and `< rawmode >`, each answered `< ok >`; then frames flow as
`< frame ID SECS.USECS HEXDATA >` to the client and `< send ID LEN B0 B1 ... >` from it.
`< echo >` is answered. A frame from one client goes to the virtual channel and to the
other clients of that bus, never back to its sender (SocketCAN's default). No UDP beacon:
python-can only listens for one in `detect_available_configs`.

Raw mode carries classic data frames only, as socketcand itself does: at most 8 data bytes,
no remote flag, no FD form (python-can's client has none either). So CAN FD and remote
frames on the bus are not forwarded (a client would take a 64-byte frame for a classic one
and its logger would cut it to 8 bytes; a remote frame would arrive as a zero-length data
frame), and a `send` of more than 8 bytes or of a length without data is refused, never
turned into another frame. The server counts what it did not forward (`not_forwarded`).

Run in its own process with `python -m firmware_sim.socketcand --channel vcan0`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import queue
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Self

import can
from firmware_sim.stop_signals import stop_on_signals

__all__ = ["SocketcandServer", "carried", "format_frame", "main", "parse_send"]

log = logging.getLogger(__name__)

_POLL_S = 0.1  # how often idle threads look at the stop flag
_BATCH_CHARS = 1024
_MAX_COMMAND = 512  # longest `< ... >` accepted; an 8-byte send is ~40 characters
_MAX_CLASSIC = 8  # data bytes of a classic frame, all raw mode carries
_MAX_STANDARD_ID = 0x7FF
_MAX_EXTENDED_ID = 0x1FFFFFFF


def carried(msg: can.Message) -> str | None:
    """None when raw mode can carry `msg`, else why not ("CAN FD", "remote")."""
    if msg.is_error_frame:
        return None
    if msg.is_fd or len(msg.data or b"") > _MAX_CLASSIC:
        return "CAN FD"
    if msg.is_remote_frame:
        return "remote"
    return None


def format_frame(msg: can.Message) -> str:
    """One received frame as socketcand writes it in raw mode.

    Raises ValueError for a frame raw mode cannot carry (CAN FD, remote): see `carried`.
    """
    why = carried(msg)
    if why is not None:
        raise ValueError(f"socketcand raw mode carries no {why} frames")
    seconds = f"{msg.timestamp:.6f}"
    if msg.is_error_frame:
        return f"< error {msg.arbitration_id & _MAX_EXTENDED_ID:08X} {seconds} >"
    ident = f"{msg.arbitration_id:08X}" if msg.is_extended_id else f"{msg.arbitration_id:03X}"
    data = bytes(msg.data or b"").hex().upper()
    # python-can's parser needs the separator before DATA even when DATA is empty.
    return f"< frame {ident} {seconds} {data} >"


def parse_send(args: list[str]) -> can.Message:
    """`send ID LEN B0 B1 ...` (hex fields) as a classic data frame; ValueError when
    malformed, longer than 8 bytes (no FD in raw mode) or a length without its data bytes
    (raw mode has no remote frames: python-can's client writes its RTR frames so)."""
    if len(args) < 2:
        raise ValueError("send needs an ID and a length")
    ident, length = int(args[0], 16), int(args[1], 16)
    extended = len(args[0]) > 3  # socketcand: 3 hex digits standard, 8 extended
    if not 0 <= ident <= (_MAX_EXTENDED_ID if extended else _MAX_STANDARD_ID):
        raise ValueError(f"bad CAN ID {args[0]}")
    payload = bytes(int(b, 16) for b in args[2:])
    if length > _MAX_CLASSIC:
        raise ValueError(f"length {length}: raw mode carries classic frames of at most 8 bytes")
    if len(payload) != length:
        raise ValueError(f"length {length} does not match {len(payload)} data bytes")
    return can.Message(
        timestamp=time.time(),
        arbitration_id=ident,
        data=payload,
        dlc=length,
        is_extended_id=extended,
    )


class _Reply:
    """A control answer the writer sends on its own, optionally followed by a pause."""

    __slots__ = ("pause_s", "text")

    def __init__(self, text: str, pause_s: float = 0.0) -> None:
        self.text = text
        self.pause_s = pause_s


_CLOSE = object()


class _Client:
    """One TCP connection: a reader thread (commands) and a writer thread (queue -> socket)."""

    def __init__(self, server: SocketcandServer, sock: socket.socket, peer: str) -> None:
        self.server = server
        self.sock = sock
        self.peer = peer
        self.bus_name: str | None = None
        self.raw = False
        self.dropped = 0
        self._out: queue.Queue[object] = queue.Queue(server.client_queue_size)
        self._closed = threading.Event()
        self.reader = threading.Thread(target=self._read_loop, name=f"socketcand-rx[{peer}]")
        self.writer = threading.Thread(target=self._write_loop, name=f"socketcand-tx[{peer}]")
        self.reader.daemon = self.writer.daemon = True

    def start(self) -> None:
        self._put(_Reply("< hi >"))
        self.writer.start()
        self.reader.start()

    # -- output -------------------------------------------------------------------------

    def _put(self, item: object) -> None:
        try:
            self._out.put_nowait(item)
        except queue.Full:
            self.dropped += 1  # a client that stops reading loses frames, not the server

    def deliver(self, line: str) -> None:
        if not self._closed.is_set():
            self._put(line)

    def _write_loop(self) -> None:
        out = self._out
        pending: object = None
        try:
            while not self._closed.is_set():
                if pending is not None:
                    item, pending = pending, None
                else:
                    try:
                        item = out.get(timeout=_POLL_S)
                    except queue.Empty:
                        continue
                if item is _CLOSE:
                    return
                if isinstance(item, _Reply):
                    self.sock.sendall(item.text.encode("ascii"))
                    if item.pause_s and self._closed.wait(item.pause_s):
                        return
                    continue
                batch = [str(item)]
                size = len(batch[0])
                # Whole lines up to ~1 KB per write: python-can's client reads 1024 bytes
                # at a time and logs a warning for every line split across two reads.
                while size < _BATCH_CHARS:
                    try:
                        nxt = out.get_nowait()
                    except queue.Empty:
                        break
                    if not isinstance(nxt, str):
                        pending = nxt  # a reply or close goes out after this batch, alone
                        break
                    batch.append(nxt)
                    size += len(nxt)
                    if size + len(nxt) > _BATCH_CHARS:
                        break
                self.sock.sendall("".join(batch).encode("ascii"))
        except OSError as exc:
            log.debug("socketcand client %s: write failed: %s", self.peer, exc)
        finally:
            self.close()

    # -- input --------------------------------------------------------------------------

    def _read_loop(self) -> None:
        buffer = ""
        try:
            while not self._closed.is_set():
                try:
                    chunk = self.sock.recv(4096)
                except TimeoutError:
                    continue
                if not chunk:
                    return
                buffer += chunk.decode("ascii", errors="replace")
                buffer = self._consume(buffer)
        except OSError as exc:
            log.debug("socketcand client %s: read failed: %s", self.peer, exc)
        finally:
            self.close()
            self.writer.join(self.server.send_timeout_s + 1.0)
            self.sock.close()
            self.server._forget(self)

    def _consume(self, buffer: str) -> str:
        while True:
            start = buffer.find("<")
            if start < 0:
                return ""
            end = buffer.find(">", start)
            if end < 0:
                return buffer[start:] if len(buffer) - start <= _MAX_COMMAND else ""
            self._command(buffer[start + 1 : end].split())
            buffer = buffer[end + 1 :]

    def _error(self, text: str) -> None:
        # python-can's client cannot parse `< error >` lines in raw mode (they would
        # break its receive loop), so raw-mode mistakes are only logged.
        if self.raw:
            log.warning("socketcand client %s: %s", self.peer, text)
        else:
            self._put(_Reply(f"< error {text} >"))

    def _command(self, words: list[str]) -> None:
        if not words:
            return
        verb, args = words[0], words[1:]
        if verb == "open" and len(args) == 1 and self.bus_name is None:
            if args[0] in self.server.channels:
                self.bus_name = args[0]
                self._put(_Reply("< ok >"))
            else:
                self._error("could not open bus")
        elif verb == "rawmode" and self.bus_name is not None and not self.raw:
            self.raw = True
            # Subscribe before answering so nothing sent after the client's handshake is
            # lost, and pause after the answer so it arrives alone: the client compares
            # its first read with "< ok >" literally.
            self.server._subscribe(self)
            self._put(_Reply("< ok >", self.server.handshake_grace_s))
        elif verb == "send" and self.bus_name is not None:
            try:
                msg = parse_send(args)
            except ValueError as exc:
                self._error(f"bad send: {exc}")
                return
            self.server._from_client(self, msg)
        elif verb == "echo":
            self._put(_Reply("< echo >"))
        else:
            self._error(f"unsupported command {verb!r}")

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.server._unsubscribe(self)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader; peer sees EOF
        with contextlib.suppress(queue.Full):  # the writer also stops on the closed flag
            self._out.put_nowait(_CLOSE)


class SocketcandServer:
    """Loopback socketcand server over python-can virtual channels.

    `channels` names the buses clients may open: one name, several names, or a mapping
    {socketcand bus name: virtual channel}. A plain name is also its virtual channel.
    Start with `port=0` for a free port and read `port` afterwards.
    """

    def __init__(
        self,
        channels: str | Iterable[str] | Mapping[str, str | int] = "vcan0",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        handshake_grace_s: float = 0.05,
        client_queue_size: int = 100_000,
        send_timeout_s: float = 2.0,
    ) -> None:
        if isinstance(channels, str):
            mapping: dict[str, str | int] = {channels: channels}
        elif isinstance(channels, Mapping):
            mapping = dict(channels)
        else:
            mapping = {name: name for name in channels}
        if not mapping or any(not n or any(c.isspace() or c in "<>" for c in n) for n in mapping):
            raise ValueError(f"bad socketcand bus names: {list(mapping)}")
        self.channels: dict[str, str | int] = mapping
        self.host = host
        self._requested_port = port
        self.handshake_grace_s = handshake_grace_s
        self.client_queue_size = client_queue_size
        self.send_timeout_s = send_timeout_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._port: int | None = None
        self._threads: list[threading.Thread] = []
        self._buses: dict[str, can.BusABC] = {}
        self._clients: set[_Client] = set()
        self._subscribers: dict[str, tuple[_Client, ...]] = {}
        self.not_forwarded: dict[str, int] = {}  # "CAN FD" / "remote" -> frames not sent on

    # -- lifetime -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def running(self) -> bool:
        return self._listener is not None and not self._stop.is_set()

    def url(self, bus_name: str | None = None) -> str:
        """`socketcand://HOST:PORT/BUS`, the form `PythonCanAdapter` accepts."""
        name = bus_name if bus_name is not None else next(iter(self.channels))
        return f"socketcand://{self.host}:{self.port}/{name}"

    @property
    def client_count(self) -> int:
        with self._lock:
            return len(self._clients)

    def start(self) -> Self:
        if self._listener is not None:
            raise RuntimeError("server already started")
        self._stop.clear()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # Lets a restarted server take the same port while old sockets sit in TIME_WAIT.
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self._requested_port))
            listener.listen(16)
            listener.settimeout(_POLL_S)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._subscribers = dict.fromkeys(self.channels, ())
        for name, channel in self.channels.items():
            self._buses[name] = can.Bus(interface="virtual", channel=channel)
        self._threads = [threading.Thread(target=self._accept_loop, name="socketcand-accept")]
        for name in self.channels:
            self._threads.append(
                threading.Thread(
                    target=self._bus_loop, args=(name,), name=f"socketcand-bus[{name}]"
                )
            )
        for thread in self._threads:
            thread.daemon = True
            thread.start()
        log.info("socketcand listening on %s:%d", self.host, self._port)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Close every connection, join every thread, release the port; idempotent."""
        if self._listener is None:
            return
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._listener.close()
        self._listener = None
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            client.close()
        for client in clients:
            client.reader.join(max(0.0, deadline - time.monotonic()))
        for bus in self._buses.values():
            bus.shutdown()
        self._buses.clear()
        self._threads = []

    def __enter__(self) -> Self:
        return self.start() if self._listener is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- threads ------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stop.is_set():
            try:
                sock, address = listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if not self._stop.is_set():
                    log.warning("socketcand accept failed: %s", exc)
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.send_timeout_s)
            client = _Client(self, sock, f"{address[0]}:{address[1]}")
            with self._lock:
                if self._stop.is_set():
                    sock.close()
                    return
                self._clients.add(client)
            client.start()

    def _bus_loop(self, name: str) -> None:
        bus = self._buses[name]
        while not self._stop.is_set():
            try:
                msg = bus.recv(_POLL_S)
            except can.CanError as exc:
                log.warning("socketcand bus %s: receive failed: %s", name, exc)
                return
            if msg is None:
                continue
            why = carried(msg)
            if why is not None:
                self._not_forwarded(name, why)
                continue
            line = format_frame(msg)
            for client in self._subscribers[name]:
                client.deliver(line)

    def _not_forwarded(self, bus_name: str, why: str) -> None:
        with self._lock:
            count = self.not_forwarded.get(why, 0)
            self.not_forwarded[why] = count + 1
        if count == 0:  # expected, documented behaviour: said once, at info level
            log.info(
                "socketcand bus %s: %s frames are not forwarded (raw mode carries classic"
                " data frames only); counted in not_forwarded",
                bus_name,
                why,
            )

    # -- client callbacks ---------------------------------------------------------------

    def _subscribe(self, client: _Client) -> None:
        assert client.bus_name is not None
        with self._lock:
            current = self._subscribers[client.bus_name]
            self._subscribers[client.bus_name] = (*current, client)

    def _unsubscribe(self, client: _Client) -> None:
        if client.bus_name is None:
            return
        with self._lock:
            current = self._subscribers.get(client.bus_name, ())
            self._subscribers[client.bus_name] = tuple(c for c in current if c is not client)

    def _forget(self, client: _Client) -> None:
        with self._lock:
            self._clients.discard(client)

    def _from_client(self, sender: _Client, msg: can.Message) -> None:
        assert sender.bus_name is not None
        bus = self._buses.get(sender.bus_name)
        if bus is None:
            return
        try:
            bus.send(msg)
        except can.CanError as exc:
            log.warning("socketcand bus %s: send failed: %s", sender.bus_name, exc)
            return
        line = format_frame(msg)
        for client in self._subscribers[sender.bus_name]:
            if client is not sender:
                client.deliver(line)


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; prints `socketcand listening on HOST:PORT` once bound."""
    parser = argparse.ArgumentParser(prog="python -m firmware_sim.socketcand")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--channel",
        action="append",
        help="bus name served, also the python-can virtual channel (repeatable; default vcan0)",
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    with (
        stop_on_signals(stop),
        SocketcandServer(args.channel or ["vcan0"], host=args.host, port=args.port) as server,
    ):
        print(f"socketcand listening on {server.host}:{server.port}", flush=True)
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
