"""The HTTP guard's helpers: TCP keep-alive on a proven connection, and uvicorn's warnings
about requests let through at most once a minute."""

from __future__ import annotations

import asyncio
import logging
import socket

from hwbridge.mcp.guard import KEEPALIVE, Hushed, keep_alive


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
