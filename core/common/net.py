"""Loopback helpers shared by the local launchers, the bench and the test support: free ports, a probe."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
# Below the kernel's ephemeral range, so no outgoing connection can take the port between the
# moment it is chosen and the moment a service binds it.
LOW_PORT_FLOOR = 10000

_rng = random.Random()  # seeded from os.urandom: processes started together pick differently
_handed_out: set[int] = set()
_lock = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open(EPHEMERAL_RANGE_FILE, encoding="ascii") as f:
            low, high = (int(v) for v in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _draw_range(low: int) -> tuple[int, int]:
    """[start, stop) to draw ports from below the ephemeral range: under pytest-xdist, worker N of M
    (PYTEST_XDIST_WORKER=gwN, inherited by the services a test starts) draws from its own Mth of
    it, so two workers never pick one port (each process remembers only its own ports)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 1:
        index, total = int(worker[2:]), int(count)
        width = (low - LOW_PORT_FLOOR) // total
        if index < total and width >= 1000:
            start = LOW_PORT_FLOOR + index * width
            return start, start + width
    return LOW_PORT_FLOOR, low


def _bindable(port: int) -> bool:
    """Whether nothing uses ``port`` on any address (no SO_REUSEADDR: a TIME_WAIT port counts as used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing uses now and that this process has not handed out before.

    Why not just bind to port 0: the kernel hands such a port out again as soon as the probe
    closes, to the next probe or to any outgoing connection, so two services of one cluster
    could be given the same port (and a readiness probe would then see the wrong process).
    Ports are drawn at random below the ephemeral range, which connections never use (one
    slice of it per pytest-xdist worker: _draw_range).
    """
    low, _high = _ephemeral_range()
    with _lock:
        start, stop = _draw_range(low)
        if stop - start >= 1000:
            for _ in range(500):
                port = _rng.randrange(start, stop)
                if port not in _handed_out and _bindable(port):
                    _handed_out.add(port)
                    return port
        while True:  # no room below the ephemeral range: let the kernel choose, never twice
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = sock.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


def free_port_pair() -> int:
    """A free port for a broker: listenPort + 1 (its default haListenPort) and listenPort - 2 (its
    fast server, the clients' VIP channel) are free and reserved too."""
    while True:
        port = free_port()
        with _lock:
            others = (port + 1, port - 2)
            if all(p not in _handed_out and _bindable(p) for p in others):
                _handed_out.update(others)
                return port


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports."""
    return [free_port(host) for _ in range(count)]


async def accepts_connection(host: str, port: int, timeout: float = 0.5) -> bool:  # noqa: ASYNC109
    """Whether ``host:port`` accepts a TCP connection within ``timeout`` seconds (then closed)."""
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True
