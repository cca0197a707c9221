"""The permissive TLS front (services/proxy/tls.py): first-byte routing, the client's address kept
for the spliced connection, connection limit, and self-signed certificates."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq.proxy import tls
from orbitmq.proxy.context import _peer_address


async def _backend(seen: list[tuple[bytes, str]]) -> tuple[asyncio.AbstractServer, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read(100)
        peer = writer.get_extra_info("peername")
        seen.append((data, _peer_address(f"ipv4:{peer[0]}:{peer[1]}")))
        writer.write(b"echo:" + data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_first_byte_picks_the_backend_and_the_client_address_is_kept() -> None:
    plain_seen: list[tuple[bytes, str]] = []
    tls_seen: list[tuple[bytes, str]] = []
    plain, plain_port = await _backend(plain_seen)
    secure, tls_port = await _backend(tls_seen)
    front = tls.TlsFront("127.0.0.1", 0, plain_port, tls_port, max_connections=2)
    port = await front.start()
    try:
        for first in (b"PRI * HTTP/2.0", b"\x16\x03\x01\x00\x05hello"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(first)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(100), 5) == b"echo:" + first
            me = writer.get_extra_info("sockname")
            seen = plain_seen if first.startswith(b"PRI") else tls_seen
            assert seen[-1] == (first, f"{me[0]}:{me[1]}")  # the client, not the front's loopback socket
            writer.close()
        # beyond max_connections a connection is closed at once
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        assert await asyncio.wait_for(conns[2][0].read(10), 5) == b""
        for _, writer in conns:
            writer.close()
    finally:
        await front.close()
        plain.close()
        secure.close()


def test_self_signed_pair_is_trusted_for_localhost(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    tls.generate_self_signed(cert, key)
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.load_cert_chain(str(cert), str(key))  # the key matches the certificate
    assert key.stat().st_mode & 0o077 == 0
    assert "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH" in tls.trust_hint(str(cert))


def test_tls_mode_and_enablement() -> None:
    from orbitmq.proxy.config import ProxyConfig
    assert not tls.tls_enabled(ProxyConfig())
    assert tls.tls_enabled(ProxyConfig(tls_test_mode_enable=True))
    assert not tls.tls_enabled(ProxyConfig(tls_test_mode_enable=True, tls_server_mode="disabled"))
    assert ProxyConfig.from_mapping({"tls.server.mode": "enforcing"}).tls_server_mode == "enforcing"


_GREETING_SERVER = """
import socket, sys
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    with conn:
        conn.sendall(b"SETTINGS")
        conn.recv(100)  # the client's first bytes
        conn.sendall(b"+ACK")
"""


@contextlib.contextmanager
def _greeting_backend() -> Iterator[int]:
    """A backend that speaks first, as an HTTP/2 server sends its SETTINGS on accept. It runs in a
    process of its own, so its greeting can reach the front before the front has linked the two
    sides of the splice (a thread would wait for the GIL and miss that moment)."""
    proc = subprocess.Popen([sys.executable, "-c", _GREETING_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


async def _greetings_survive(port: int, rounds: int) -> None:
    for _ in range(rounds):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"PRI * HTTP/2.0")
        got = b""
        while len(got) < len(b"SETTINGS+ACK"):
            chunk = await asyncio.wait_for(reader.read(100), 5)
            assert chunk, f"closed after {got!r}"
            got += chunk
        assert got == b"SETTINGS+ACK"
        writer.close()
        await asyncio.sleep(0.002)  # an idle loop between dials: how the race shows on uvloop


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_what_the_backend_says_first_is_never_dropped(loop_name: str) -> None:
    async def main(backend_port: int) -> None:
        front = tls.TlsFront("127.0.0.1", 0, backend_port, None)
        port = await front.start()
        try:
            await _greetings_survive(port, 100)
        finally:
            await front.close()

    with _greeting_backend() as backend_port:
        if loop_name == "uvloop":
            import uvloop
            uvloop.run(main(backend_port))
        else:
            asyncio.run(main(backend_port))
