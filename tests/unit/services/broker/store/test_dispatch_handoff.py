"""The appends' DispatchRequest hand-off: each handed-off request equals, field by field, what
check_message_and_return_size decodes from the record on disk, and reput dispatches the same
requests (so ConsumeQueue, index, listeners and extra dispatchers see the same) with or without
the hand-off, gaps and stale entries included."""

import time

import pytest

from orbitmq.broker.controller import BrokerController
from orbitmq.broker.schedule.delay_levels import DelayLevelTable
from orbitmq.broker.schedule.redirect import DelayRedirect
from orbitmq.broker.store import commit_log as commit_log_module
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.consume_queue import CQ_ENTRY
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus
from orbitmq.common import sysflag
from orbitmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC
from orbitmq.common.message import parse_properties_exact, properties_to_string

CL_SIZE = 8192


def _config(tmp_path) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=CL_SIZE,
                              mapped_file_size_consume_queue=20 * 64, message_index_enable=True)


def _broker_inner(props_s: str, **kw) -> MessageExtBrokerInner:
    """A message as the send processor builds it: parsed once, the exact string handed over."""
    broker = object.__new__(BrokerController)
    props, exact = parse_properties_exact(props_s)
    assert exact
    base = dict(topic="T", queue_id=0, body=b"b" * 200, flag=0, sys_flag=0, born_timestamp=1,
                born_host="10.1.2.3:4567", reconsume_times=0)
    base.update(kw)
    return broker.new_inner_message(properties=props, properties_string=props_s, **base)


def _mixed_messages(now: int) -> list[list[MessageExtBrokerInner]]:
    """One list per put: single puts of every kind, and batches (one big enough to roll)."""
    puts: list[list[MessageExtBrokerInner]] = []
    for i in range(6):
        body = bytes([i]) * (100 + 37 * i)
        puts += [
            [_broker_inner(f"TAGS\x01tag{i}\x02KEYS\x01k{i} x{i}\x02UNIQ_KEY\x01U{i}\x02")],
            [MessageExtBrokerInner(topic="T", queue_id=1, body=body, properties={"TAGS": "a", "KEYS": "k"},
                                   born_host=("::1", 7), born_timestamp=now)],
            # The string is what is stored, even when the dict says otherwise.
            [MessageExtBrokerInner(topic="T", queue_id=2, body=body, properties={"TAGS": "dict"},
                                   properties_string="TAGS\x01string\x02", born_timestamp=now)],
            # Not canonical: stored as is; dispatch sees the tolerant parse of it.
            [MessageExtBrokerInner(topic="T", queue_id=2, body=body, properties_string="\x02TAGS\x01a\x02x\x02KEYS\x01k",
                                   born_timestamp=now)],
            [MessageExtBrokerInner(topic="Tö", queue_id=0, body=body, flag=3, reconsume_times=2, born_timestamp=now)],
            [MessageExtBrokerInner(topic="T", queue_id=0, body=body, sys_flag=sysflag.TRANSACTION_PREPARED_TYPE,
                                   prepared_transaction_offset=0, properties={"TAGS": "p", "TRAN_MSG": "true"})],
            [MessageExtBrokerInner(topic="T", queue_id=0, body=body, sys_flag=sysflag.TRANSACTION_ROLLBACK_TYPE,
                                   prepared_transaction_offset=1234, properties={"TAGS": "r"})],
            [MessageExtBrokerInner(topic="T", queue_id=0, body=body, sys_flag=sysflag.TRANSACTION_COMMIT_TYPE,
                                   prepared_transaction_offset=1234, properties={"TAGS": "c"})],
            # Delayed: the redirect hook rewrites topic and string (parsed_properties goes stale).
            [_broker_inner(f"TAGS\x01d{i}\x02DELAY\x01{1 + i % 3}\x02UNIQ_KEY\x01D{i}\x02", queue_id=3)],
            [MessageExtBrokerInner(topic="T", queue_id=4, body=body, store_host=("10.9.9.9", 1),
                                   properties={"KEYS": "foreign"})],
            # A batch of the send processor's kind, and one through the general path.
            [_broker_inner(f"TAGS\x01b\x02KEYS\x01bk{j}\x02", queue_id=5, body=bytes([j]) * (300 + j))
             for j in range(12 + i)],
            [MessageExtBrokerInner(topic="T", queue_id=6, body=bytes([j]) * 150, properties={"TAGS": f"g{j}"})
             for j in range(5)],
        ]
    return puts


async def _start(tmp_path) -> MessageStore:
    s = MessageStore(_config(tmp_path))
    levels = DelayLevelTable()
    s.set_delivery_time_function(levels.compute_deliver_timestamp)
    await s.start()
    s.add_put_message_hook(DelayRedirect(levels, lambda: int(time.time() * 1000)))
    await s.reput_service.shutdown()  # the test drives do_reput itself
    return s


async def _put(s: MessageStore, msgs: list[MessageExtBrokerInner]) -> None:
    r = await (s.put_message(msgs[0]) if len(msgs) == 1 else s.put_messages(msgs))
    assert r.status is PutMessageStatus.PUT_OK, r


def _decode_at(s: MessageStore, offset: int) -> DispatchRequest:
    cl = s.commit_log
    mf = cl.mapped_file_queue.find_mapped_file_by_offset(offset)
    return cl.check_message_and_return_size(mf.mm, offset - mf.file_from_offset, mf.wrote_position, True, offset)


def _decode_all(s: MessageStore) -> list[DispatchRequest]:
    """Every record of the log, decoded as the reput service does without a hand-off."""
    cl = s.commit_log
    out = []
    for mf in cl.mapped_file_queue.mapped_files:
        pos = 0
        while pos < mf.wrote_position:
            req = cl.check_message_and_return_size(mf.mm, pos, mf.wrote_position, True)
            assert req.success
            if req.msg_size == 0:
                break
            out.append(req)
            pos += req.msg_size
    return out


def _same(a: DispatchRequest, b: DispatchRequest) -> None:
    for name in DispatchRequest.__slots__:
        assert getattr(a, name) == getattr(b, name), (name, a, b)
    assert list(a.properties.items()) == list(b.properties.items())


async def test_handed_off_requests_equal_the_decoded_records(tmp_path):
    s = await _start(tmp_path)
    try:
        handed: list[DispatchRequest] = []
        for msgs in _mixed_messages(int(time.time() * 1000)):
            await _put(s, msgs)
            handed += list(s.commit_log.handoff)
            s.reput_service.do_reput()
            assert not s.commit_log.handoff
        decoded = _decode_all(s)
        assert len(s.commit_log.mapped_file_queue.mapped_files) > 3  # batches crossed segment ends
        assert len(handed) == len(decoded) > 100
        for h, d in zip(handed, decoded, strict=True):
            _same(h, _decode_at(s, h.commit_log_offset))
            _same(h, d)
        kinds = {(d.topic, d.sys_flag & 0xC, bool(d.keys), d.tags_code != 0) for d in decoded}
        assert (RMQ_SYS_SCHEDULE_TOPIC, 0, False, True) in kinds
        assert any(d.topic == RMQ_SYS_SCHEDULE_TOPIC and d.tags_code > d.store_timestamp for d in decoded)
        assert {d.sys_flag & 0xC for d in decoded} == {0, 4, 8, 0xC}
    finally:
        await s.shutdown()


def _cq_entries(s: MessageStore) -> dict[tuple[str, int], list[tuple[int, int, int]]]:
    out = {}
    for cq in s.consume_queues():
        entries = []
        for mf in cq.mapped_file_queue.mapped_files:
            entries += list(CQ_ENTRY.iter_unpack(mf.mm[:mf.wrote_position]))
        out[(cq.topic, cq.queue_id)] = entries
    return out


@pytest.mark.parametrize("handoff_max", [16384, 7])
async def test_reput_dispatches_what_decoding_would(tmp_path, monkeypatch, handoff_max):
    """Dispatchers and listeners get, in log order, exactly the decoded records; a full hand-off
    (gaps), stale entries and a bounded reput turn change nothing."""
    monkeypatch.setattr(commit_log_module, "HANDOFF_MAX", handoff_max)
    s = await _start(tmp_path)
    try:
        seen: list[DispatchRequest] = []
        arrivals: list[tuple] = []
        s.add_dispatcher(seen.append)
        s.add_arrival_listener(lambda *a: arrivals.append(a))
        puts = _mixed_messages(int(time.time() * 1000))
        for n, msgs in enumerate(puts):
            await _put(s, msgs)
            if n % 5 == 0:
                # A stale entry (behind reput_from_offset) is dropped, never dispatched.
                s.commit_log.handoff.appendleft(DispatchRequest("stale", 0, -1, 10, 0, 0, 0))
            if n % 3 == 2:
                while s.reput_service.do_reput(max_records=4):
                    pass
        s.reput_service.do_reput()
        decoded = _decode_all(s)
        assert len(seen) == len(decoded)
        for a, b in zip(seen, decoded, strict=True):
            _same(a, b)
        expected_arrivals = [(d.topic, d.queue_id, d.consume_queue_offset + 1, d.tags_code, d.store_timestamp,
                              d.properties) for d in decoded if d.sys_flag & 0xC in (0, 8)]
        assert arrivals == expected_arrivals
        cq = _cq_entries(s)
        expected_cq: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        for d in decoded:
            if d.sys_flag & 0xC in (0, 8):
                expected_cq.setdefault((d.topic, d.queue_id), []).append(
                    (d.commit_log_offset, d.msg_size, d.tags_code))
        assert {k: v for k, v in cq.items() if v} == expected_cq
    finally:
        await s.shutdown()


async def test_new_inner_message_stores_the_exact_string_and_keeps_the_parse_apart():
    broker = object.__new__(BrokerController)
    wire = "TAGS\x01a\x02KEYS\x01k\x02"
    props, exact = parse_properties_exact(wire)
    for copy in (True, False):
        inner = broker.new_inner_message(topic="T", queue_id=0, body=b"x", flag=0, properties=dict(props),
                                         sys_flag=0, born_timestamp=1, born_host="1.2.3.4:5", reconsume_times=0,
                                         copy_properties=copy, properties_string=wire)
        assert inner.properties_string is wire and inner.properties == props
        assert inner.parsed_properties[0] is wire and inner.parsed_properties[1] == props
        # Hooks may change the message's dict: dispatch keeps the parse of what is stored.
        assert inner.parsed_properties[1] is not inner.properties
    assert exact and properties_to_string(props) == wire


def test_new_inner_message_fills_the_same_fields_as_keywords():
    """new_inner_message builds the message positionally: every field lands where it belongs."""
    broker = object.__new__(BrokerController)
    wire = "TAGS\x01t\x02"
    props, _ = parse_properties_exact(wire)
    inner = broker.new_inner_message(topic="T", queue_id=3, body=b"body", flag=7, properties=props, sys_flag=9,
                                     born_timestamp=11, born_host="1.2.3.4:5", reconsume_times=13,
                                     copy_properties=False, properties_string=wire)
    expected = MessageExtBrokerInner(topic="T", queue_id=3, body=b"body", flag=7, properties=props,
                                     properties_string=wire, tags_code=inner.tags_code, born_timestamp=11,
                                     born_host=("1.2.3.4", 5), store_host=None, reconsume_times=13, sys_flag=9,
                                     prepared_transaction_offset=0, store_timestamp=0, body_crc=0,
                                     parsed_properties=(wire, props))
    assert inner == expected and inner.tags_code != 0


def test_batch_inner_messages_equal_one_by_one_construction():
    broker = object.__new__(BrokerController)
    items = []
    for i, wire in enumerate(("TAGS\x01t\x02KEYS\x01k\x02", "KEYS\x01k\x02", "", "TAGS\x01a\x02TAGS\x01b\x02")):
        props, exact = parse_properties_exact(wire)
        items.append((i, bytes([i]) * 3, props, wire if exact and props else None))
    batch = broker.new_batch_inner_messages(topic="T", queue_id=2, sys_flag=4, born_timestamp=9,
                                            born_host="[::1]:77", reconsume_times=1, items=items)
    for (flag, body, props, wire), inner in zip(items, batch, strict=True):
        one = broker.new_inner_message(topic="T", queue_id=2, body=body, flag=flag, properties=props, sys_flag=4,
                                       born_timestamp=9, born_host="[::1]:77", reconsume_times=1,
                                       copy_properties=False, properties_string=wire)
        assert inner == one and inner.properties is props
