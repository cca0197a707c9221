"""Certificate rotation on a Remoting port (upstream's FileWatchService + loadSslContext): new
handshakes get the new certificate once its files change, open connections keep theirs, and a
half-written rotation (certificate without its key) keeps serving the old pair until it is whole."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from orbitmq.common.file_watch import FileWatchService
from orbitmq.remoting.server import RemotingServer
from orbitmq.remoting.tls import generate_self_signed


def _client(trust: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(trust))
    ctx.check_hostname = False
    return ctx


async def _handshake(port: int, trust: Path) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=_client(trust)), 5)
    except (ssl.SSLError, ConnectionError):
        return False
    writer.close()
    return True


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
async def test_a_rotated_certificate_is_served_without_a_restart(tmp_path: Path, mode: str) -> None:
    old_cert, old_key = tmp_path / "old.crt", tmp_path / "old.key"
    new_cert, new_key = tmp_path / "new.crt", tmp_path / "new.key"
    generate_self_signed(str(old_cert), str(old_key))
    generate_self_signed(str(new_cert), str(new_key))
    live_cert, live_key = tmp_path / "server.crt", tmp_path / "server.key"
    shutil.copy(old_cert, live_cert)
    shutil.copy(old_key, live_key)
    server = RemotingServer(tls_config=SimpleNamespace(tls_server_mode=mode, tls_server_cert_path=str(live_cert),
                                                       tls_server_key_path=str(live_key)))
    await server.start()
    try:
        assert await _handshake(server.port, old_cert)
        assert not await _handshake(server.port, new_cert)
        _, kept = await asyncio.open_connection("127.0.0.1", server.port, ssl=_client(old_cert))

        shutil.copy(new_cert, live_cert)  # half a rotation: the key does not match yet
        await asyncio.sleep(1.2)  # two looks at the files
        assert await _handshake(server.port, old_cert)  # still the old pair

        shutil.copy(new_key, live_key)
        deadline = time.monotonic() + 10
        while not await _handshake(server.port, new_cert):
            assert time.monotonic() < deadline, "the new certificate was never served"
            await asyncio.sleep(0.2)
        assert not await _handshake(server.port, old_cert)
        assert not kept.is_closing()  # made with the old certificate, still open
        kept.close()
    finally:
        await server.close()


async def test_file_watch_keeps_the_last_digest_of_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("a")
    seen: list[set[str]] = []

    async def on_change(changed: set[str]) -> bool:
        seen.append(changed)
        return True

    watch = FileWatchService([str(path)], 60, on_change)
    await watch.start()
    try:
        path.unlink()
        await watch.check()
        assert seen == []  # deleted mid-rotation: not a change
        path.write_text("a")
        await watch.check()
        assert seen == []  # same content back
        path.write_text("b")
        await watch.check()
        assert seen == [{str(path)}]
    finally:
        await watch.stop()
