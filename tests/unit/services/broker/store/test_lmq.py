"""Light Message Queue (RIP-28) in the store: offsets assigned at put, entries at dispatch,
offsets recovered after a restart or a crash, the maxLmqConsumeQueueNum refusal."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.config import load_properties
from orbitmq.common.constants import split_lmq_names, topic_allows_lmq
from orbitmq.common.message import MessageConst, string_to_properties
from orbitmq.common.message_codec import decode_record

MULTI = MessageConst.INNER_MULTI_DISPATCH
OFFSETS = MessageConst.INNER_MULTI_QUEUE_OFFSET


def make_config(tmp_path: Path, **kw) -> MessageStoreConfig:
    base = dict(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=64 * 1024,
                mapped_file_size_consume_queue=20 * 50, message_index_enable=False,
                enable_lmq=True, enable_multi_dispatch=True)
    base.update(kw)
    return MessageStoreConfig(**base)


def msg(topic: str = "T", qid: int = 1, lmq: str | None = None, body: bytes = b"x" * 50) -> MessageExtBrokerInner:
    props = {"TAGS": "A"}
    if lmq is not None:
        props[MULTI] = lmq
    return MessageExtBrokerInner(topic=topic, queue_id=qid, body=body, properties=props,
                                 born_timestamp=int(time.time() * 1000), born_host=("10.1.2.3", 4000))


async def settle(s: MessageStore) -> None:
    for _ in range(500):
        if s.dispatch_behind_bytes() == 0:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("reput did not catch up")


def bodies(s: MessageStore, topic: str, qid: int = 0, offset: int = 0) -> list[bytes]:
    r = s.get_message("g", topic, qid, offset, max_msg_nums=64)
    return [decode_record(b).body for b in r.message_buffer_list]


def test_split_follows_java_string_split():
    assert split_lmq_names("a,b") == ["a", "b"]
    assert split_lmq_names("3,") == ["3"]
    assert split_lmq_names(",3") == ["", "3"]
    assert split_lmq_names("") == [""]
    assert split_lmq_names(",,") == []
    assert not topic_allows_lmq("%RETRY%g") and not topic_allows_lmq("rmq_sys_x")
    assert not topic_allows_lmq("SCHEDULE_TOPIC_XXXX") and topic_allows_lmq("T")


def test_keys_read_from_broker_conf(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("enableLmq=true\nenableMultiDispatch=true\nmaxLmqConsumeQueueNum=7\n")
    cfg = MessageStoreConfig.from_mapping(load_properties(conf))
    assert (cfg.enable_lmq, cfg.enable_multi_dispatch, cfg.max_lmq_consume_queue_num) == (True, True, 7)
    default = MessageStoreConfig()
    assert (default.enable_lmq, default.enable_multi_dispatch, default.max_lmq_consume_queue_num) == (False, False, 20000)


async def test_offsets_assigned_at_put_and_entries_dispatched(tmp_path):
    s = MessageStore(make_config(tmp_path))
    await s.start()
    try:
        phys = []
        for i in range(3):
            r = await s.put_message(msg(lmq="%LMQ%a,%LMQ%b", body=b"m%d" % i))
            assert r.status is PutMessageStatus.PUT_OK
            phys.append(r.append_message_result.wrote_offset)
        r = await s.put_message(msg(lmq="%LMQ%b", body=b"only-b"))
        phys.append(r.append_message_result.wrote_offset)
        await settle(s)
        # The stored record carries one offset per named queue, in the names' order.
        for i, phy in enumerate(phys[:3]):
            props = decode_record(s.commit_log.get_record(phy)).properties
            assert props[MULTI] == "%LMQ%a,%LMQ%b"
            assert props[OFFSETS] == f"{i},{i}"
        assert decode_record(s.commit_log.get_record(phys[3])).properties[OFFSETS] == "3"
        assert bodies(s, "T", 1) == [b"m0", b"m1", b"m2", b"only-b"]
        assert bodies(s, "%LMQ%a") == [b"m0", b"m1", b"m2"]
        assert bodies(s, "%LMQ%b") == [b"m0", b"m1", b"m2", b"only-b"]
        # Same file layout as any topic: consumequeue/<name>/0/<20 digits>.
        assert os.listdir(os.path.join(s.config.consume_queue_dir, "%LMQ%a", "0")) == ["0" * 20]
        assert s.get_max_offset_in_queue("%LMQ%a", 0) == 3 and s.get_max_offset_in_queue("%LMQ%b", 0) == 4
        assert s.commit_log.lmq_topic_queue_table == {("%LMQ%a", 0): 3, ("%LMQ%b", 0): 4}
    finally:
        await s.shutdown()


async def test_non_lmq_names_get_empty_offsets_as_upstream(tmp_path):
    s = MessageStore(make_config(tmp_path))
    await s.start()
    try:
        # "plain" is no LMQ: its offset item is empty; as the last item Java's split drops it, the
        # counts differ and upstream dispatches none of the names.
        r = await s.put_message(msg(lmq="%LMQ%a,plain", body=b"tail-plain"))
        r2 = await s.put_message(msg(lmq="plain,%LMQ%a", body=b"head-plain"))
        await settle(s)
        assert decode_record(s.commit_log.get_record(r.append_message_result.wrote_offset)).properties[OFFSETS] == "0,"
        assert decode_record(s.commit_log.get_record(r2.append_message_result.wrote_offset)).properties[OFFSETS] == ",1"
        # The second record's %LMQ%a entry is the queue's first, at offset 1 (upstream's empty
        # item for "plain" fails to parse; OrbitMQ skips that name).
        assert s.get_min_offset_in_queue("%LMQ%a", 0) == 1
        assert bodies(s, "%LMQ%a", 0, 1) == [b"head-plain"]
        assert s.get_consume_queue("plain", 1) is None
        # The offset moved on for both records, the first one's entry was never written.
        assert s.commit_log.lmq_topic_queue_table[("%LMQ%a", 0)] == 2
    finally:
        await s.shutdown()


async def test_excluded_topics_and_path_separator(tmp_path):
    s = MessageStore(make_config(tmp_path))
    await s.start()
    try:
        for topic in ("%RETRY%g", "rmq_sys_x", "SCHEDULE_TOPIC_XXXX"):
            r = await s.put_message(msg(topic=topic, qid=0, lmq="%LMQ%a"))
            assert r.status is PutMessageStatus.PUT_OK
            assert OFFSETS not in decode_record(s.commit_log.get_record(r.append_message_result.wrote_offset)).properties
        r = await s.put_message(msg(lmq="%LMQ%x/../y,%LMQ%ok", body=b"sep"))
        await settle(s)
        assert s.get_consume_queue("%LMQ%a", 0) is None
        assert bodies(s, "%LMQ%ok") == [b"sep"]
        assert s.get_consume_queue("%LMQ%x/../y", 0) is None
        assert not await asyncio.to_thread(os.path.exists, os.path.join(s.config.consume_queue_dir, "%LMQ%x"))
        assert r.status is PutMessageStatus.PUT_OK
    finally:
        await s.shutdown()


async def test_switches(tmp_path):
    # enableLmq off: no offsets at put, so nothing to dispatch.
    s = MessageStore(make_config(tmp_path / "a", enable_lmq=False))
    await s.start()
    try:
        r = await s.put_message(msg(lmq="%LMQ%a"))
        await settle(s)
        assert OFFSETS not in decode_record(s.commit_log.get_record(r.append_message_result.wrote_offset)).properties
        assert s.get_consume_queue("%LMQ%a", 0) is None
    finally:
        await s.shutdown()
    # enableMultiDispatch off: offsets stored, no entries.
    s = MessageStore(make_config(tmp_path / "b", enable_multi_dispatch=False))
    await s.start()
    try:
        r = await s.put_message(msg(lmq="%LMQ%a"))
        await settle(s)
        assert decode_record(s.commit_log.get_record(r.append_message_result.wrote_offset)).properties[OFFSETS] == "0"
        assert s.get_consume_queue("%LMQ%a", 0) is None
    finally:
        await s.shutdown()


async def test_offsets_survive_restart_and_crash(tmp_path):
    cfg = make_config(tmp_path)
    s = MessageStore(cfg)
    await s.start()
    for i in range(5):
        await s.put_message(msg(lmq="%LMQ%a,%LMQ%b", body=b"m%d" % i))
    await s.shutdown()
    s = MessageStore(cfg)
    await s.start()
    try:
        assert s.last_exit_ok
        assert s.commit_log.lmq_topic_queue_table == {("%LMQ%a", 0): 5, ("%LMQ%b", 0): 5}
        r = await s.put_message(msg(lmq="%LMQ%a", body=b"m5"))
        assert decode_record(s.commit_log.get_record(r.append_message_result.wrote_offset)).properties[OFFSETS] == "5"
        await settle(s)
        assert bodies(s, "%LMQ%a", 0, 4) == [b"m4", b"m5"]
    finally:
        await s.shutdown()
    # A crash that lost the LMQ queues' files: recovery dispatches the CommitLog again.
    await asyncio.to_thread(shutil.rmtree, os.path.join(cfg.consume_queue_dir, "%LMQ%b"))
    await asyncio.to_thread(shutil.rmtree, os.path.join(cfg.consume_queue_dir, "T"))
    await asyncio.to_thread(Path(cfg.abort_path).touch)
    s = MessageStore(cfg)
    await s.start()
    try:
        assert not s.last_exit_ok
        assert s.commit_log.lmq_topic_queue_table == {("%LMQ%a", 0): 6, ("%LMQ%b", 0): 5}
        assert bodies(s, "%LMQ%b") == [b"m%d" % i for i in range(5)]
        assert bodies(s, "%LMQ%a") == [b"m%d" % i for i in range(6)]
        r = await s.put_message(msg(lmq="%LMQ%b", body=b"b5"))
        assert decode_record(s.commit_log.get_record(r.append_message_result.wrote_offset)).properties[OFFSETS] == "5"
    finally:
        await s.shutdown()


async def test_max_lmq_consume_queue_num(tmp_path):
    s = MessageStore(make_config(tmp_path, max_lmq_consume_queue_num=2))
    await s.start()
    try:
        r = await s.put_message(msg(lmq="%LMQ%a,%LMQ%b,%LMQ%c"))
        assert r.status is PutMessageStatus.PUT_OK  # 0 queues before it: not over 2
        r = await s.put_message(msg(lmq="%LMQ%a"))
        assert r.status is PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED
        assert r.append_message_result is None
        r = await s.put_message(msg())  # no multi-dispatch: not refused
        assert r.status is PutMessageStatus.PUT_OK
        # unused-topic cleaning never takes LMQ queues
        await settle(s)
        assert s.unused_topics([], lambda t: False) == ["T"]
    finally:
        await s.shutdown()


async def test_long_poll_listeners_hear_each_lmq(tmp_path):
    s = MessageStore(make_config(tmp_path))
    heard: list[tuple[str, int, int]] = []
    s.add_arrival_listener(lambda topic, qid, offset, *rest: heard.append((topic, qid, offset)))
    await s.start()
    try:
        await s.put_message(msg(lmq="%LMQ%a,%LMQ%b"))
        await s.put_message(msg(lmq="%LMQ%b"))
        await settle(s)
        assert heard == [("T", 1, 1), ("%LMQ%a", 0, 1), ("%LMQ%b", 0, 1), ("T", 1, 2), ("%LMQ%b", 0, 2)]
    finally:
        await s.shutdown()


@pytest.mark.parametrize("names", ["%LMQ%a", "%LMQ%a,%LMQ%b"])
async def test_rewritten_properties_string(tmp_path, names):
    s = MessageStore(make_config(tmp_path))
    await s.start()
    try:
        m = msg(lmq=names)
        r = await s.put_message(m)
        record = s.commit_log.get_record(r.append_message_result.wrote_offset)
        # The record's properties string is exactly the dict, INNER_MULTI_QUEUE_OFFSET added.
        assert string_to_properties(m.properties_string) == decode_record(record).properties
        assert m.properties_string.endswith(f"{OFFSETS}\x01{','.join(['0'] * len(names.split(',')))}\x02")
    finally:
        await s.shutdown()
