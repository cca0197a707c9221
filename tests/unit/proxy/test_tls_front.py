"""The permissive TLS front (services/proxy/tls.py): first-byte routing, the client's address kept
for the spliced connection, connection limit, and self-signed certificates."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

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
