"""Loopback helpers: pick a free port, wait until something listens on one."""

from __future__ import annotations

import asyncio
import socket
import time

from orbitmq.common.net import accepts_connection, free_port, free_port_pair, free_ports

__all__ = ["async_wait_for_port", "free_port", "free_port_pair", "free_ports", "port_open", "wait_for_port"]


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
        if await accepts_connection(host, port):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.1f}s")
        await asyncio.sleep(0.05)
