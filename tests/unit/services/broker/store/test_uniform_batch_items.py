"""SEND_BATCH_MESSAGE's batch appended from its decoded tuples (CommitLog.put_uniform_items,
MessageStore.put_uniform_batch, BrokerController.put_batch) gives exactly what the general path
gives for the MessageExtBrokerInners new_batch_inner_messages builds from the same tuples: the
same bytes, results, queue offsets and hand-off DispatchRequests; and the put hooks that may
matter still run."""

from __future__ import annotations

import os
import time
import types
from collections import deque
from dataclasses import astuple

import pytest

from orbitmq.broker.controller import BrokerController
from orbitmq.broker.schedule.delay_levels import DelayLevelTable
from orbitmq.broker.schedule.redirect import DelayRedirect
from orbitmq.broker.store import commit_log as commit_log_module
from orbitmq.broker.store.checkpoint import StoreCheckpoint
from orbitmq.broker.store.commit_log import CommitLog
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import PutMessageStatus
from orbitmq.common import sysflag
from orbitmq.common.message import parse_properties_exact, properties_to_string

CL_SIZE = 16384


def _commit_log(root: str, store_host: tuple[str, int]) -> CommitLog:
    cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=CL_SIZE,
                             allocate_mapped_file_enable=False)
    cl = CommitLog(cfg, store_host, StoreCheckpoint(os.path.join(root, "checkpoint")))
    cl.load()
    cl.handoff = deque()
    return cl


def _items(i: int, n: int, kind: str, flag=None, body_size=None) -> list[tuple]:
    """(flag, body, properties, properties_string) as SendMessageProcessor._send_batch builds them."""
    out = []
    for j in range(n):
        if kind == "odd" and j % 2:
            wire = f"KEYS\x01a\x02KEYS\x01k{j}\x02TAGS\x01t\x02"  # a repeated name: not exact
        elif kind == "empty" and j % 3 == 0:
            wire = ""
        else:
            props = {"TAGS": f"tag{j % 3}", "KEYS": f"k{i}-{j} other", "UNIQ_KEY": f"UNIQ{i:06d}{j:04d}"}
            if j % 4 == 3:
                props.pop("TAGS")
            if j % 5 == 1:
                props["WAIT"] = "false"
            wire = properties_to_string(props)
        props, exact = parse_properties_exact(wire)
        body = bytes([j % 251]) * (body_size if body_size is not None else 40 + 13 * j + i % 7)
        out.append((j if flag is None else flag, body, props, wire if exact and props else None))
    return out


SCENARIOS = [
    dict(),
    dict(kind="odd"),
    dict(kind="empty"),
    dict(queue_id=3, born_host=("2001:db8::1", 7)),
    dict(sys_flag=sysflag.TRANSACTION_PREPARED_TYPE),
    dict(sys_flag=sysflag.TRANSACTION_ROLLBACK_TYPE),
    dict(sys_flag=sysflag.TRANSACTION_COMMIT_TYPE | sysflag.MULTI_TAGS_FLAG),
    dict(topic="Tö"),
    dict(flag=1 << 31),  # does not fit an int: the general path refuses it
    dict(body_size=CL_SIZE),  # larger than a segment: refused
    dict(born_host=("10.0.0.8", 70000)),  # port out of range: refused
]


def _inners(items, topic, queue_id, sys_flag, born_ts, born_host):
    broker = object.__new__(BrokerController)
    host = f"[{born_host[0]}]:{born_host[1]}" if ":" in born_host[0] else f"{born_host[0]}:{born_host[1]}"
    return broker.new_batch_inner_messages(topic=topic, queue_id=queue_id, sys_flag=sys_flag, born_timestamp=born_ts,
                                           born_host=host, reconsume_times=0, items=items)


def _state(cl: CommitLog, result):
    ar = result.append_message_result
    res = (result.status, None if ar is None else (ar.status, ar.wrote_offset, ar.wrote_bytes, ar.msg_id,
                                                   ar.store_timestamp, ar.logics_offset, ar.msg_num, ar.offsets))
    handed = [astuple(r) for r in cl.handoff]
    cl.handoff.clear()
    return res, handed, dict(cl.topic_queue_table)


@pytest.mark.parametrize("store_host", [("127.0.0.1", 10911), ("::1", 10911)])
def test_items_match_the_general_path(tmp_path, monkeypatch, store_host):
    ticks = iter(range(1_800_000_000_000, 1_800_000_000_000 + 100_000, 3))
    clock = {"now": 0}
    monkeypatch.setattr(commit_log_module, "_now_ms", lambda: clock["now"])
    fast = _commit_log(str(tmp_path / "fast"), store_host)
    slow = _commit_log(str(tmp_path / "slow"), store_host)
    slow._put_uniform = lambda msgs: None  # the general path only
    taken = []
    try:
        for i in range(40):
            for k, sc in enumerate(SCENARIOS):
                sc = dict(sc)
                clock["now"] = next(ticks)
                n = 1 + (i * 4 + k) % 9
                topic, queue_id = sc.pop("topic", "T"), sc.pop("queue_id", 1)
                sys_flag, born_host = sc.pop("sys_flag", 0), sc.pop("born_host", ("10.0.0.7", 5555))
                born_ts = 1_700_000_000_000 + i
                items = _items(i, n, sc.pop("kind", "plain"), **sc)
                # The general path first registers a new topic or born host, as in the store.
                ra = fast.put_uniform_items(topic, queue_id, sys_flag, born_ts, born_host, 0, items)
                taken.append(ra is not None)
                if ra is None:
                    ra = fast.put_messages(_inners(items, topic, queue_id, sys_flag, born_ts, born_host))
                rb = slow.put_messages(_inners(items, topic, queue_id, sys_flag, born_ts, born_host))
                assert _state(fast, ra) == _state(slow, rb), (i, k)
        files = [[bytes(mf.mm[:mf.wrote_position]) for mf in cl.mapped_file_queue.mapped_files] for cl in (fast, slow)]
        assert files[0] == files[1]
        assert len(fast.mapped_file_queue.mapped_files) > 3
        assert any(taken) and not all(taken)
        assert fast.put_message_times_total == slow.put_message_times_total
        assert fast.put_message_size_total == slow.put_message_size_total
    finally:
        fast.shutdown()
        slow.shutdown()


def test_dispatch_gets_the_parsed_dict_itself(tmp_path):
    cl = _commit_log(str(tmp_path / "c"), ("127.0.0.1", 10911))
    try:
        items = _items(0, 4, "plain")
        assert cl.put_messages(_inners(items, "T", 1, 0, 1, ("10.0.0.7", 5555))).status is PutMessageStatus.PUT_OK
        cl.handoff.clear()
        assert cl.put_uniform_items("T", 1, 0, 1, ("10.0.0.7", 5555), 0, items) is not None
        assert [r.properties for r in cl.handoff] == [props for _, _, props, _ in items]
        assert all(r.properties is props for r, (_, _, props, _) in zip(cl.handoff, items, strict=True))
    finally:
        cl.shutdown()


def _broker(store: MessageStore) -> types.SimpleNamespace:
    broker = types.SimpleNamespace(message_store=store, puts=[], metrics=None)
    broker.stats = types.SimpleNamespace(on_put=lambda topic, n, size: broker.puts.append((topic, n, size)))
    broker.new_batch_inner_messages = BrokerController.new_batch_inner_messages.__get__(broker)
    broker.put_messages = BrokerController.put_messages.__get__(broker)
    broker.put_batch = BrokerController.put_batch.__get__(broker)
    return broker


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_put_batch_matches_put_messages(tmp_path, flush):
    """Two stores with the delay redirect hook: one fed through put_batch, one through the
    messages new_batch_inner_messages builds; both end with the same CommitLog bytes."""
    stores = []
    for name in ("a", "b"):
        cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / name), flush_disk_type=flush,
                                 message_index_enable=False)
        s = MessageStore(cfg)
        await s.start()
        s.add_put_message_hook(DelayRedirect(DelayLevelTable(), lambda: int(time.time() * 1000)))
        stores.append(s)
    a, b = (_broker(s) for s in stores)
    calls = []
    real = stores[0].commit_log.put_uniform_items

    def spy(*args):
        result = real(*args)
        calls.append(result is not None)
        return result

    stores[0].commit_log.put_uniform_items = spy
    try:
        for i in range(6):
            items = _items(i, 5, "odd" if i % 2 else "plain")
            kw = dict(topic="T", queue_id=2, sys_flag=0, born_timestamp=7 + i, born_host="10.1.2.3:4567",
                      reconsume_times=0)
            ra = await a.put_batch(items=items, **kw)
            rb = await b.put_messages(b.new_batch_inner_messages(items=items, **kw))
            assert ra.status is rb.status is PutMessageStatus.PUT_OK
            ara, arb = ra.append_message_result, rb.append_message_result
            assert (ara.wrote_offset, ara.wrote_bytes, ara.logics_offset, ara.msg_num, ara.offsets) == \
                   (arb.wrote_offset, arb.wrote_bytes, arb.logics_offset, arb.msg_num, arb.offsets)
        assert any(calls) and a.puts == b.puts
        data = [bytearray(s.commit_log.mapped_file_queue.mapped_files[0].mm[:ara.wrote_offset + ara.wrote_bytes])
                for s in stores]
        # Only the store timestamps may differ (the clock ran between the puts): compare the
        # records with them blanked out.
        for buf in data:
            pos = 0
            while pos < len(buf):
                total = int.from_bytes(buf[pos:pos + 4], "big")
                host_len = 8 if (int.from_bytes(buf[pos + 36:pos + 40], "big") & sysflag.BORNHOST_V6_FLAG) == 0 else 20
                st = pos + 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + host_len
                buf[st:st + 8] = bytes(8)
                pos += total
        assert data[0] == data[1]
    finally:
        for s in stores:
            await s.shutdown()


async def test_other_put_hooks_still_run(tmp_path):
    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / "s"), message_index_enable=False)
    store = MessageStore(cfg)
    await store.start()
    seen = []

    def hook(msg):
        seen.append(msg.topic)
        msg.topic = "Other"
        msg.properties_string = ""  # the properties changed with it, as a hook must say so
        return None

    store.add_put_message_hook(DelayRedirect(DelayLevelTable(), lambda: int(time.time() * 1000)))
    store.add_put_message_hook(hook)
    broker = _broker(store)
    try:
        items = _items(0, 3, "plain")
        r = await broker.put_batch(topic="T", queue_id=0, sys_flag=0, born_timestamp=1, born_host="1.2.3.4:5",
                                   reconsume_times=0, items=items)
        assert r.status is PutMessageStatus.PUT_OK and seen == ["T"] * 3
        assert broker.puts == [("Other", 3, r.append_message_result.wrote_bytes)]
    finally:
        await store.shutdown()
