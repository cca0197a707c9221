"""Abusive Remoting clients against a real NameServer process (issue 16, item 5).

Each test keeps a well-behaved RemotingClient asking the server for its config throughout and
checks the server's resident memory against a stated bound, while the abusive connections are
refused or closed: 2,000 idle connections (reaped by serverChannelMaxIdleTimeSeconds), more
connections than serverMaxConnections, a client that sends requests but never reads, and a
frame trickled byte by byte (remotingFrameReadTimeoutMillis).
"""

from __future__ import annotations

import asyncio
import resource
import socket
import time

import pytest

from orbitmq.remoting import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand
from tests.support import ProcessRunner
from tests.support.services import astart_namesrv

# The NameServer's resident set must stay under this while it is abused (it starts near 60 MiB).
RSS_BOUND_BYTES = 200 * 1024 * 1024


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _raise_nofile(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < want:
        pytest.skip(f"cannot raise RLIMIT_NOFILE to {want}")


async def _well_behaved(client: RemotingClient, addr: str) -> None:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG), 10)
    assert response.code == ResponseCode.SUCCESS


async def _closed_by_peer(reader: asyncio.StreamReader, timeout: float) -> bool:  # noqa: ASYNC109
    try:
        data = await asyncio.wait_for(reader.read(1 << 16), timeout)
    except TimeoutError:
        return False
    except (ConnectionError, OSError):
        return True
    return data == b""


async def _open(addr: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = addr.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


@pytest.fixture
def runner(procs: ProcessRunner) -> ProcessRunner:
    _raise_nofile(8192)  # before the NameServer is spawned: it inherits the limit
    return procs


async def test_two_thousand_idle_connections_are_held_then_reaped(runner: ProcessRunner) -> None:
    proc, addr = await astart_namesrv(runner, "serverChannelMaxIdleTimeSeconds=4")
    client = RemotingClient()
    conns = []
    try:
        for _ in range(20):
            conns.extend(await asyncio.gather(*(_open(addr) for _ in range(100))))
            await _well_behaved(client, addr)
        assert len(conns) == 2000
        started = time.monotonic()
        await _well_behaved(client, addr)
        assert _rss(proc.pid) < RSS_BOUND_BYTES
        # half-open/silent peers are dropped after the idle time; the good client, which keeps
        # talking (once a second, well inside the idle time), stays and is answered throughout
        reaped = asyncio.gather(*(_closed_by_peer(r, 30) for r, _ in conns))
        while not reaped.done():
            await _well_behaved(client, addr)
            await asyncio.wait([reaped], timeout=1.0)
        closed = reaped.result()
        assert all(closed), f"{closed.count(False)} idle connections still open"
        assert time.monotonic() - started >= 2.5
        await _well_behaved(client, addr)
    finally:
        for _, writer in conns:
            writer.close()
        await client.close()


async def test_connections_beyond_server_max_connections_are_closed(runner: ProcessRunner) -> None:
    _, addr = await astart_namesrv(runner, "serverMaxConnections=100")
    conns = [await _open(addr) for _ in range(150)]
    try:
        closed = await asyncio.gather(*(_closed_by_peer(r, 3) for r, _ in conns))
        assert closed.count(True) == 50 and not any(closed[:100])
    finally:
        for _, writer in conns:
            writer.close()
    client = RemotingClient()
    try:
        for _, writer in conns:
            await writer.wait_closed()
        await asyncio.sleep(0.2)
        await _well_behaved(client, addr)  # a slot freed: a new client is served again
    finally:
        await client.close()


async def test_a_client_that_never_reads_cannot_grow_the_server(runner: ProcessRunner) -> None:
    proc, addr = await astart_namesrv(runner)
    client = RemotingClient()
    host, port = addr.rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.setblocking(False)
    request = RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG).encode()
    batch = request * 256
    sent = 0
    try:
        await _well_behaved(client, addr)
        deadline = time.monotonic() + 6
        stalled_since: float | None = None
        while time.monotonic() < deadline:
            try:
                sent += sock.send(batch)
                stalled_since = None
            except BlockingIOError:
                # the server stopped reading this connection (its answers are not read)
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 1.5:
                    break
                await asyncio.sleep(0.05)
            await _well_behaved(client, addr)
        assert stalled_since is not None, "the server kept reading requests whose answers pile up"
        requests_sent = sent // len(request)
        # each answer is a few KiB: without back-pressure the server would hold them all
        assert requests_sent < 200_000
        assert _rss(proc.pid) < RSS_BOUND_BYTES
        await _well_behaved(client, addr)
    finally:
        sock.close()
        await client.close()


async def test_a_frame_trickled_byte_by_byte_times_out(runner: ProcessRunner) -> None:
    _, addr = await astart_namesrv(runner, "remotingFrameReadTimeoutMillis=1500")
    client = RemotingClient()
    reader, writer = await _open(addr)
    frame = RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG, {"k": "v" * 200}).encode()
    started = time.monotonic()
    closed_at: float | None = None
    try:
        for byte in frame:
            writer.write(bytes([byte]))
            try:
                await writer.drain()
            except (ConnectionError, OSError):
                break
            if await _closed_by_peer(reader, 0.02):
                closed_at = time.monotonic()
                break
            await _well_behaved(client, addr)
        assert closed_at is not None, "the trickled frame was accepted"
        assert 1.2 <= closed_at - started < 6
        await _well_behaved(client, addr)
    finally:
        writer.close()
        await client.close()
