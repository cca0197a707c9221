"""The single-message send path's shortcuts give the same results as the general code.

SEND_MESSAGE_V2 headers read by their one-letter names vs the general translation and Fields;
the send queue's inline start of a put when it is idle vs the worker.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from orbitmq.broker.processors import send as send_mod
from orbitmq.broker.processors.base import RequestError
from orbitmq.broker.processors.send_queue import SendQueue
from orbitmq.common.aio import Resumed
from orbitmq.remoting import RemotingCommand, RequestCode, ResponseCode

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


# ---- Resumed (a coroutine stepped once outside a task, finished in one) ----------------------------------


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


async def test_resumed_future_can_be_awaited_by_others_before_the_task_runs() -> None:
    """The future a stepped coroutine yielded stays awaitable by anyone else (a shared flush wait)."""
    loop = asyncio.get_running_loop()
    shared = loop.create_future()

    async def body() -> str:
        return await shared

    coro = body()
    first = coro.send(None)
    other = asyncio.ensure_future(body())  # runs first: its task takes the future's blocking flag
    task = asyncio.ensure_future(Resumed(coro, first))
    await asyncio.sleep(0)
    shared.set_result("flushed")
    assert await task == "flushed" and await other == "flushed"

