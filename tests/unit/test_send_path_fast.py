"""The single-message send path's shortcuts give the same results as the general code.

SEND_MESSAGE_V2 headers read by their one-letter names vs the general translation and Fields;
the send queue's inline start of a put when it is idle vs the worker; a Remoting processor run
eagerly in data_received vs in a task.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from orbitmq.broker.processors import send as send_mod
from orbitmq.broker.processors.base import RequestError
from orbitmq.broker.processors.registry import guard
from orbitmq.broker.processors.send_queue import SendQueue
from orbitmq.remoting import RemotingCommand, RequestCode, ResponseCode
from orbitmq.remoting.channel import EAGER_ATTR, Channel, Resumed
from orbitmq.remoting.processor import ProcessorTable

# ---- SEND_MESSAGE_V2 header -------------------------------------------------------------------------

_GOOD = {"a": "PG", "b": "TopicA", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000",
         "h": "0", "i": "UNIQ_KEY\x01ABC\x02TAGS\x01t\x02", "j": "0", "k": "false", "m": "false", "n": "b0"}
_ODD_VALUES = [None, "", " 7 ", "1_0", "x", "-1", "2147483648", "-2147483649", "9223372036854775808",
               "true", "TRUE", " false", "False", 5, True, 3.5, "\u0661", "0x10"]


def _outcome(fields: dict[str, Any], code: int = RequestCode.SEND_MESSAGE_V2) -> Any:
    request = RemotingCommand.request(code, dict(fields), b"body")
    try:
        return send_mod.parse_send_header(request)
    except RequestError as exc:
        return ("error", exc.code, exc.remark)


def _cases() -> list[dict[str, Any]]:
    rng = random.Random(20261122)
    cases = [dict(_GOOD), {k: v for k, v in _GOOD.items() if k != "i"}, {**_GOOD, "l": "16"},
             {**_GOOD, "topic": "Other"}, {"topic": "T", **_GOOD}, {**_GOOD, "k": "true", "m": "true"}, {}]
    keys = [*_GOOD, "l"]
    for _ in range(3000):
        fields = dict(_GOOD)
        for key in rng.sample(keys, rng.randint(1, 3)):
            value = rng.choice(_ODD_VALUES)
            if value is None and rng.random() < 0.5:
                fields.pop(key, None)
            else:
                fields[key] = value
        cases.append(fields)
    return cases


def test_v2_header_fast_read_matches_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = _cases()
    fast = [_outcome(fields) for fields in cases]
    monkeypatch.setattr(send_mod, "_parse_v2_fast", lambda raw: None)
    general = [_outcome(fields) for fields in cases]
    assert fast == general
    assert sum(not isinstance(o, tuple) for o in fast) > 100  # both accepted and refused headers seen
    assert sum(isinstance(o, tuple) for o in fast) > 100


def test_v2_header_fast_read_values() -> None:
    header = _outcome({**_GOOD, "l": "16", "j": "2"})
    assert header == send_mod.SendHeader("PG", "TopicA", "TBW102", 4, 3, 0, 1700000000000, 0,
                                         _GOOD["i"], 2, False, 16, False)


# ---- send queue ----------------------------------------------------------------------------------------


async def test_idle_send_queue_starts_the_put_inline() -> None:
    queue = SendQueue(1, 10, lambda: 200)
    await queue.start()
    await asyncio.sleep(0)  # the worker waits for work
    try:
        seen: list[Any] = []

        async def put() -> str:
            seen.append(asyncio.current_task())
            return "stored"

        assert await queue.submit(put) == "stored"
        assert seen == [asyncio.current_task()]  # no hop through the worker and a put task
    finally:
        await queue.shutdown()


async def test_send_queue_uses_the_worker_when_not_idle() -> None:
    delay = {"ms": 5}
    queue = SendQueue(1, 10, lambda: 200, worker_delay_ms=lambda: delay["ms"])
    await queue.start()
    await asyncio.sleep(0)
    try:
        seen: list[Any] = []

        async def put(i: int) -> int:
            seen.append((i, asyncio.current_task()))
            return i

        assert await queue.submit(lambda: put(0)) == 0  # a test delay: the worker's way
        assert seen[0][1] is not asyncio.current_task()
        delay["ms"] = 0
        seen.clear()
        # Sends submitted while others wait in the queue stay behind them.
        results = await asyncio.gather(*(queue.submit(lambda i=i: put(i)) for i in range(5)))
        assert results == [0, 1, 2, 3, 4]
        assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    finally:
        await queue.shutdown()


async def test_negative_wait_limit_still_cleans_through_the_worker() -> None:
    queue = SendQueue(1, 10, lambda: -1)
    await queue.start()
    await asyncio.sleep(0)
    try:
        async def put() -> str:
            return "stored"

        with pytest.raises(RequestError) as info:
            await queue.submit(put)
        assert info.value.code == ResponseCode.SYSTEM_BUSY
        assert info.value.remark.startswith("[TIMEOUT_CLEAN_QUEUE]")
    finally:
        await queue.shutdown()


async def test_inline_put_that_suspends_outlives_a_cancelled_request() -> None:
    queue = SendQueue(1, 10, lambda: 200)
    await queue.start()
    await asyncio.sleep(0)
    gate = asyncio.get_running_loop().create_future()
    done: list[str] = []

    async def put() -> str:
        done.append("appended")
        await gate  # a SYNC_FLUSH wait
        done.append("flushed")
        return "stored"

    request = asyncio.ensure_future(queue.submit(put))
    await asyncio.sleep(0)
    assert done == ["appended"]
    request.cancel()
    await asyncio.gather(request, return_exceptions=True)
    closing = asyncio.ensure_future(queue.shutdown())
    await asyncio.sleep(0.01)
    assert not closing.done()  # shutdown waits for the put in flight
    gate.set_result(None)
    await closing
    assert done == ["appended", "flushed"]


async def test_inline_put_errors_reach_the_request() -> None:
    queue = SendQueue(1, 10, lambda: 200)
    await queue.start()
    await asyncio.sleep(0)
    try:
        async def bad() -> None:
            raise ValueError("boom")

        async def bad_later() -> None:
            await asyncio.sleep(0)
            raise ValueError("later")

        with pytest.raises(ValueError, match="boom"):
            await queue.submit(bad)
        with pytest.raises(ValueError, match="later"):
            await queue.submit(bad_later)
    finally:
        await queue.shutdown()


# ---- eager Remoting processors -------------------------------------------------------------------------


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.frames: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default

    def write(self, data: Any) -> None:
        self.frames.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)


def _channel(processor: Any) -> tuple[Channel, _Transport]:
    table = ProcessorTable()
    table.register(310, guard(310, processor))
    channel = Channel(table)
    transport = _Transport()
    transport.protocol = channel
    channel.connection_made(transport)
    return channel, transport


class _Proc:
    def __init__(self, gate: asyncio.Future[None] | None = None, fail: bool = False) -> None:
        self.gate = gate
        self.fail = fail

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if self.gate is not None:
            await self.gate
        if self.fail:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "refused")
        return request.response_to(ResponseCode.SUCCESS, None, {"echo": request.ext_fields["x"]})

    async def process_eager(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return await self.process(request, channel)

    process_eager.__dict__[EAGER_ATTR] = True  # type: ignore[attr-defined]


def _frames(n: int) -> list[bytes]:
    return [RemotingCommand.request(310, {"x": str(i)}, b"b").encode() for i in range(n)]


@pytest.mark.parametrize("fail", [False, True])
async def test_eager_processor_answers_inside_data_received(fail: bool) -> None:
    outputs = []
    frames = _frames(3)
    for eager in (False, True):
        proc = _Proc(fail=fail)
        channel, transport = _channel(proc.process_eager if eager else proc.process)
        channel.data_received(b"".join(frames))
        if eager:
            assert len(transport.frames) == 3 and not channel._tasks  # no task, no loop iteration
        for _ in range(3):
            await asyncio.sleep(0)
        outputs.append(transport.frames)
        await channel.close()
    assert outputs[0] == outputs[1]


async def test_eager_processor_that_suspends_finishes_in_a_task() -> None:
    outputs = []
    frames = _frames(2)
    for eager in (False, True):
        gate = asyncio.get_running_loop().create_future()
        proc = _Proc(gate)
        channel, transport = _channel(proc.process_eager if eager else proc.process)
        channel.data_received(b"".join(frames))
        await asyncio.sleep(0)
        assert transport.frames == [] and len(channel._tasks) == 2
        gate.set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        assert not channel._tasks
        outputs.append(transport.frames)
        await channel.close()
    assert outputs[0] == outputs[1] and len(outputs[0]) == 2


async def test_suspended_eager_processor_is_cancelled_when_the_channel_closes() -> None:
    gate = asyncio.get_running_loop().create_future()
    cancelled: list[bool] = []

    async def process(request: RemotingCommand, channel: Any) -> RemotingCommand:
        try:
            await gate
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return request.response_to(ResponseCode.SUCCESS)

    process.__dict__[EAGER_ATTR] = True
    channel, transport = _channel(process)
    channel.data_received(_frames(1)[0])
    await asyncio.sleep(0)
    await channel.close()
    await asyncio.sleep(0)
    assert cancelled == [True] and transport.frames == [] and not channel._tasks


async def test_resumed_passes_values_and_exceptions_through() -> None:
    loop = asyncio.get_running_loop()
    first = loop.create_future()
    second = loop.create_future()

    async def body() -> int:
        a = await first
        try:
            await second
        except KeyError:
            return a + 1
        return -1

    coro = body()
    yielded = coro.send(None)
    assert yielded is first
    task = asyncio.ensure_future(Resumed(coro, yielded))
    first.set_result(41)
    await asyncio.sleep(0)
    second.set_exception(KeyError("x"))
    assert await task == 42
