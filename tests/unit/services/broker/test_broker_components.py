"""Unit tests of the broker's pure parts: request field parsing, fastjson bodies, batch codec,
client registry, orderly locks, the send queue's flow control and the pull hold service."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.broker.client.channel_info import ClientChannelInfo
from orbitmq.broker.client.consumer_manager import ConsumerManager
from orbitmq.broker.client.rebalance_lock import RebalanceLockManager
from orbitmq.broker.longpolling.pull_request_hold import PullRequest, PullRequestHoldService
from orbitmq.broker.processors.admin import parse_attributes
from orbitmq.broker.processors.base import Fields, RequestError
from orbitmq.broker.processors.batch_codec import BatchDecodeError, BatchItem, decode_batch, encode_batch
from orbitmq.broker.processors.filtering import matches
from orbitmq.broker.processors.send_queue import SendQueue
from orbitmq.common import fastjson
from orbitmq.common.filter import build_message_filter, java_string_hash
from orbitmq.remoting.codes import ResponseCode

# ---- request fields -------------------------------------------------------------------------------


def test_fields_enforce_java_ranges_and_types() -> None:
    f = Fields({"i": "42", "big": "2147483648", "l": "9223372036854775807", "bad": "4x", "b": "TRUE", "n": "-1"})
    assert f.int("i") == 42 and f.long("l") == 2**63 - 1 and f.int("n") == -1 and f.bool("b") is True
    for call in (lambda: f.int("big"), lambda: f.int("bad"), lambda: f.int("missing"), lambda: f.bool("i")):
        with pytest.raises(RequestError) as info:
            call()
        assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert f.int("missing", 7) == 7 and f.str("missing", required=False) == ""


# ---- fastjson bodies --------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=20))
_mq_keys = st.builds(fastjson.message_queue_key, st.text(min_size=1, max_size=10), st.text(max_size=5),
                     st.integers(0, 1000))
_json = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.text(max_size=8), inner, max_size=4),
    st.dictionaries(_mq_keys, inner, max_size=4)), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_fastjson_round_trips_object_keys(value) -> None:
    assert fastjson.loads(fastjson.dumps(value)) == value


def test_fastjson_shape_and_errors() -> None:
    text = fastjson.dumps({"offsetTable": {fastjson.message_queue_key("T", "b", 1): 5}})
    assert text == '{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:5}}'
    assert fastjson.loads('{"a": [1, 2.5, true], "brokerAddrs": {0: "x"}}') == {"a": [1, 2.5, True],
                                                                               "brokerAddrs": {"0": "x"}}
    for bad in ("{", '{"a" 1}', "[1,]", "tru", '{"a":1} x', "[" * 500 + "]" * 500):
        with pytest.raises(ValueError):
            fastjson.loads(bad)


# ---- batch codec ----------------------------------------------------------------------------------


def test_batch_codec_round_trip_and_rejects_garbage() -> None:
    items = [BatchItem(0, b"a", "UNIQ_KEY\x01k1\x02"), BatchItem(3, b"", ""), BatchItem(1, b"x" * 300, "K\x01v\x02")]
    assert decode_batch(encode_batch(items)) == items
    data = encode_batch(items)
    for bad in (b"", data[:-1], b"\x00\x00\x00\x05abc", data[:20] + b"\xff" * 4 + data[24:]):
        with pytest.raises(BatchDecodeError):
            decode_batch(bad)


def test_attribute_parser() -> None:
    assert parse_attributes("+message.type=FIFO, -old") == {"+message.type": "FIFO", "-old": ""}
    for bad in ("message.type=FIFO", "+k", "-k=v", "+=v"):
        with pytest.raises(ValueError):
            parse_attributes(bad)


# ---- client registry and locks -------------------------------------------------------------------------


def test_consumer_manager_membership_notifies_and_expires() -> None:
    events: list[tuple[str, int]] = []
    manager = ConsumerManager(lambda group, channels: events.append((group, len(channels))), channel_expired_millis=50)
    sub = {"topic": "T", "subString": "*", "subVersion": 1}
    assert manager.register_consumer("G", ClientChannelInfo("ch1", "c1"), "CONSUME_PASSIVELY", "CLUSTERING",
                                     "CONSUME_FROM_LAST_OFFSET", [sub], notify=True)
    manager.register_consumer("G", ClientChannelInfo("ch2", "c2"), "CONSUME_PASSIVELY", "CLUSTERING",
                              "CONSUME_FROM_LAST_OFFSET", [sub], notify=True)
    assert events == [("G", 1), ("G", 2)]
    assert manager.get_consumer_group_info("G").client_ids() == ["c1", "c2"]
    # A repeated heartbeat is not a membership change.
    assert not manager.register_consumer("G", ClientChannelInfo("ch2", "c2"), "CONSUME_PASSIVELY", "CLUSTERING",
                                         "CONSUME_FROM_LAST_OFFSET", [sub], notify=True)
    manager.do_channel_close_event("ch1")
    assert events[-1] == ("G", 1)
    time.sleep(0.06)
    assert manager.scan_not_active_channel() == ["ch2"]
    assert manager.get_consumer_group_info("G") is None


def test_rebalance_locks_conflict_renew_and_expire() -> None:
    locks = RebalanceLockManager(max_live_millis=50)
    q0, q1 = ("T", "b", 0), ("T", "b", 1)
    assert locks.try_lock_batch("G", [q0], "c1") == [q0]
    assert locks.try_lock_batch("G", [q0, q1], "c2") == [q1]
    locks.unlock_batch("G", [q1], "c1")  # not the holder: ignored
    assert locks.is_locked("G", q1, "c2")
    time.sleep(0.06)
    assert locks.try_lock_batch("G", [q0], "c2") == [q0]  # c1 did not renew


# ---- send queue -----------------------------------------------------------------------------------------


async def test_send_queue_keeps_order_and_cleans_expired_requests() -> None:
    order: list[int] = []
    delay = {"ms": 0}
    queue = SendQueue(1, 3, lambda: 50, worker_delay_ms=lambda: delay["ms"])
    await queue.start()
    try:
        async def put(i: int) -> int:
            order.append(i)
            return i

        assert await asyncio.gather(*(queue.submit(lambda i=i: put(i)) for i in range(3))) == [0, 1, 2]
        assert order == [0, 1, 2]
        delay["ms"] = 120
        results = await asyncio.gather(*(queue.submit(lambda i=i: put(i)) for i in range(3)),
                                       return_exceptions=True)
        assert results[0] == 0
        assert all(isinstance(r, RequestError) and r.code == ResponseCode.SYSTEM_BUSY
                   and r.remark.startswith("[TIMEOUT_CLEAN_QUEUE]") for r in results[1:])
        delay["ms"] = 500
        flood = [asyncio.ensure_future(queue.submit(lambda: put(9))) for _ in range(5)]
        overflow = await asyncio.gather(*flood, return_exceptions=True)
        assert any(isinstance(r, RequestError) and r.remark.startswith("[OVERLOAD]") for r in overflow)
    finally:
        await queue.shutdown()


# ---- pull hold service -------------------------------------------------------------------------------------


async def test_hold_service_wakes_on_matching_arrival_and_times_out() -> None:
    max_offsets = {("T", 0): 0}
    service = PullRequestHoldService(lambda t, q: max_offsets[(t, q)], matches, check_interval_mills=5000)
    await service.start()
    try:
        tag_a = build_message_filter("TAG", "TagA")
        woken = service.suspend_pull_request(PullRequest("T", 0, 0, 10_000, tag_a))
        max_offsets[("T", 0)] = 1
        service.notify_message_arriving("T", 0, 1, java_string_hash("TagB"), {"TAGS": "TagB"})
        assert not woken.done() and service.parked_count() == 1
        service.notify_message_arriving("T", 0, 2, java_string_hash("TagA"), {"TAGS": "TagA"})
        assert woken.done() and woken.result() is True

        started = time.monotonic()
        quiet = service.suspend_pull_request(PullRequest("T", 0, 5, 150, tag_a))
        assert await asyncio.wait_for(quiet, 2) is False
        assert time.monotonic() - started >= 0.14
        assert service.parked_count() == 0
    finally:
        await service.shutdown()
