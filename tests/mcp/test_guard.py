"""The HTTP guard's helpers: TCP keep-alive on a proven connection."""

from __future__ import annotations

import asyncio
import socket

from hwbridge.mcp.guard import KEEPALIVE, keep_alive


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
