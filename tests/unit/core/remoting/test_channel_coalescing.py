"""Channel writes: the frames of one loop pass leave in one write, in order, and none is lost."""

from __future__ import annotations

import asyncio
from typing import Any

from orbitmq.remoting.channel import _COALESCE_BYTES, Channel
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.processor import ProcessorTable
from orbitmq.remoting.protocol import RemotingCommand


class _RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False
        self.closed_after_writes = -1

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(name, default)

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True
        self.closed_after_writes = len(self.written)


async def _pass() -> None:
    """Let the loop run the callbacks scheduled so far (the flush runs one pass after the writes)."""
    for _ in range(3):
        await asyncio.sleep(0)


def _channel() -> tuple[Channel, _RecordingTransport]:
    channel = Channel(ProcessorTable())
    transport = _RecordingTransport()
    channel.connection_made(transport)
    return channel, transport


async def test_frames_of_one_pass_leave_in_one_write_in_order():
    channel, transport = _channel()
    frames = [RemotingCommand.request(10 + i, body=bytes([i]) * (i * 100)).encode() for i in range(5)]
    for frame in frames:
        channel._write(frame)
    assert transport.written == []  # nothing before the pass ends
    await _pass()
    assert transport.written == [b"".join(frames)]
    channel._write(frames[0])
    await _pass()
    assert transport.written[1:] == [frames[0]]


async def test_concurrent_invokes_share_a_write_and_each_gets_its_response():
    channel, transport = _channel()
    requests = [RemotingCommand.request(20, ext_fields={"n": str(i)}) for i in range(8)]
    calls = [asyncio.ensure_future(channel.invoke(r, timeout=5)) for r in requests]
    await _pass()
    assert len(transport.written) == 1
    assert transport.written[0] == b"".join(r.encode() for r in requests)
    answers = b"".join(RemotingCommand.response(ResponseCode.SUCCESS, remark=f"r{r.opaque}", opaque=r.opaque)
                       .encode() for r in reversed(requests))
    for r in requests:  # as a peer would send them: flagged as responses
        assert r.opaque in channel._response_table
    channel.data_received(answers)
    results = await asyncio.gather(*calls)
    assert [c.remark for c in results] == [f"r{r.opaque}" for r in requests]


async def test_a_large_frame_with_nothing_pending_is_written_at_once():
    channel, transport = _channel()
    big = RemotingCommand.request(30, body=b"x" * _COALESCE_BYTES).encode()
    channel._write(big)
    assert transport.written == [big]


async def test_large_pending_frames_go_out_in_bounded_chunks_in_order():
    channel, transport = _channel()
    small = RemotingCommand.request(31, body=b"s" * 100).encode()
    frames = [small] + [RemotingCommand.request(32, body=bytes([i]) * 30_000).encode() for i in range(6)] \
        + [RemotingCommand.request(33, body=b"b" * (_COALESCE_BYTES + 5)).encode(), small]
    for frame in frames:
        channel._write(frame)
    await _pass()
    assert b"".join(transport.written) == b"".join(frames)
    assert len(transport.written) > 1
    for chunk in transport.written:
        # a chunk holds whole frames; only a single frame may exceed the bound
        assert len(chunk) <= _COALESCE_BYTES or chunk in frames


async def test_close_sends_what_the_pass_wrote_first():
    channel, transport = _channel()
    oneway = RemotingCommand.request(40, body=b"bye")
    oneway.mark_oneway()
    channel._write(oneway.encode())
    channel._begin_close()
    assert transport.written == [oneway.encode()]
    assert transport.closed_after_writes == 1
    await _pass()  # the scheduled flush finds nothing left and writes nothing after the close
    assert transport.written == [oneway.encode()]


async def test_over_real_sockets_oneway_before_close_and_many_invokes_arrive():
    received: list[RemotingCommand] = []
    table = ProcessorTable()

    async def echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        received.append(request)
        return RemotingCommand.response(ResponseCode.SUCCESS, body=request.body)

    table.register_default(echo)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Channel(table), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, client = await loop.create_connection(lambda: Channel(ProcessorTable()), "127.0.0.1", port)
        bodies = [bytes([i % 256]) * (i * 997 % 150_000) for i in range(200)]
        answers = await asyncio.gather(*(client.invoke(RemotingCommand.request(50, body=b), timeout=10)
                                         for b in bodies))
        assert [a.body for a in answers] == bodies
        await client.invoke_oneway(RemotingCommand.request(51, body=b"last words"))
        await client.close()
        for _ in range(200):
            if any(r.code == 51 for r in received):
                break
            await asyncio.sleep(0.01)
        assert [r.body for r in received if r.code == 51] == [b"last words"]
    finally:
        server.close()
        await server.wait_closed()
