"""The HTTP guard's helpers: TCP keep-alive on a proven connection, Nagle's algorithm off on
every connection, and uvicorn's warnings about requests let through at most once a minute."""

from __future__ import annotations

import asyncio
import logging
import socket

from hwbridge.mcp.guard import KEEPALIVE, Hushed, keep_alive, no_delay


def test_keep_alive_probes_are_switched_on() -> None:
    async def accepted() -> None:
        done = asyncio.Event()
        seen: list[socket.socket] = []

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            keep_alive(writer.transport)
            seen.append(writer.transport.get_extra_info("socket"))
            assert seen[0].getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0
            for name, value in KEEPALIVE:
                if hasattr(socket, name):
                    assert seen[0].getsockopt(socket.IPPROTO_TCP, getattr(socket, name)) == value
            writer.close()
            done.set()

        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.wait_for(done.wait(), 5)
        writer.close()
        server.close()
        await server.wait_closed()
        assert seen

    asyncio.run(accepted())


def test_nagle_is_off_on_a_socket_bound_by_hand() -> None:
    # run_http binds its own socket; one made without IPPROTO_TCP named keeps Nagle's
    # algorithm on in asyncio, and every response body then waited 40 ms for an ACK
    async def accepted() -> list[int]:
        flags: list[int] = []
        done = asyncio.Event()
        listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listening.bind(("127.0.0.1", 0))

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.transport.get_extra_info("socket")
            flags.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            no_delay(writer.transport)
            flags.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()
            done.set()

        server = await asyncio.start_server(on_client, sock=listening)
        _, writer = await asyncio.open_connection("127.0.0.1", listening.getsockname()[1])
        await asyncio.wait_for(done.wait(), 5)
        writer.close()
        server.close()
        await server.wait_closed()
        return flags

    before, after = asyncio.run(accepted())
    assert before == 0 and after != 0


def record(level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", level, __file__, 1, message, None, None)


def test_warnings_are_let_through_once_a_minute_errors_always() -> None:
    hushed = Hushed(every_s=60)
    assert hushed.filter(record(logging.WARNING, "Invalid HTTP request received."))
    assert not any(
        hushed.filter(record(logging.WARNING, "Unsupported upgrade.")) for _ in range(99)
    )
    assert hushed.filter(record(logging.ERROR, "Exception in ASGI application"))
    assert hushed.held_back == 99
    hushed._passed_at -= 61
    later = record(logging.WARNING, "Invalid HTTP request received.")
    assert hushed.filter(later)
    assert "and 99 more such warnings" in later.getMessage() and hushed.held_back == 0
