"""Loopback helpers: pick a free port, wait until something listens on one."""

from __future__ import annotations

import asyncio
import socket
import time


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (bind to 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    """Block until ``host:port`` accepts a TCP connection; TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if port_open(host, port):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.1f}s")
        time.sleep(0.05)


async def async_wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    """The same, without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 0.5)
            writer.close()
            return
        except (OSError, TimeoutError):
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.1f}s")
        await asyncio.sleep(0.05)
