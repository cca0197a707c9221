"""Loopback helpers shared by the local launchers and the test support: a free port, a probe."""

from __future__ import annotations

import asyncio
import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (bind to 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        return sock.getsockname()[1]


async def accepts_connection(host: str, port: int, timeout: float = 0.5) -> bool:  # noqa: ASYNC109
    """Whether ``host:port`` accepts a TCP connection within ``timeout`` seconds (then closed)."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True
