"""CommitLog._put_uniform (one SEND_BATCH_MESSAGE's records written straight from the messages)
gives exactly what the general put_messages path gives: the same bytes, results, queue offsets,
hand-off DispatchRequests and message fields, and the same refusals."""

from __future__ import annotations

import os
from collections import deque
from dataclasses import astuple

import pytest

from orbitmq.broker.store import commit_log as commit_log_module
from orbitmq.broker.store.checkpoint import StoreCheckpoint
from orbitmq.broker.store.commit_log import CommitLog
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.model import MessageExtBrokerInner
from orbitmq.common import sysflag
from orbitmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC
from orbitmq.common.message import properties_to_string, string_to_properties

CL_SIZE = 16384


def _commit_log(root: str, store_host: tuple[str, int], uniform: bool) -> CommitLog:
    cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=CL_SIZE,
                             allocate_mapped_file_enable=False)
    cl = CommitLog(cfg, store_host, StoreCheckpoint(os.path.join(root, "checkpoint")))
    cl.load()
    cl.handoff = deque()
    cl.delivery_time_of = lambda level, ts: ts + 1000 * level
    if not uniform:
        cl._put_uniform = lambda msgs: None  # the general path only
    return cl


def _batch(i: int, n: int, *, topic: str = "T", queue_id: int = 1, sys_flag: int = 0, born_host=("10.0.0.7", 5555),
           props_kind: str = "parsed", shared: bool = True, flag=None, body_size=None) -> list[MessageExtBrokerInner]:
    """Messages as new_batch_inner_messages builds them: the shared fields are the same objects."""
    born_ts = 1_700_000_000_000 + i
    reconsume = 0
    out = []
    for j in range(n):
        props = {"TAGS": f"tag{j % 3}", "KEYS": f"k{i}-{j} other", "UNIQ_KEY": f"UNIQ{i:06d}{j:04d}", "WAIT": "true"}
        if props_kind == "delay":
            props["DELAY"] = str(1 + j % 3)
        if j % 4 == 3:
            props.pop("TAGS")
        s = properties_to_string(props)
        kw = {}
        if props_kind in ("parsed", "delay"):
            kw = dict(properties_string=s, parsed_properties=(s, string_to_properties(s)))
        elif props_kind == "string":
            kw = dict(properties_string=s)
        out.append(MessageExtBrokerInner(
            topic, queue_id, bytes([j % 251]) * (body_size if body_size is not None else 40 + 13 * j + i % 7),
            (j if flag is None else flag), props, tags_code=0,
            born_timestamp=born_ts, born_host=born_host, reconsume_times=reconsume,
            sys_flag=sys_flag, **kw))
    if not shared:
        for m in out:
            m.born_timestamp = int(str(born_ts))  # equal values, distinct objects
    return out


def _state(cl: CommitLog, msgs, result):
    ar = result.append_message_result
    res = (result.status, None if ar is None else (ar.status, ar.wrote_offset, ar.wrote_bytes, ar.msg_id,
                                                   ar.store_timestamp, ar.logics_offset, ar.msg_num, ar.offsets))
    handed = [astuple(r) for r in cl.handoff]
    cl.handoff.clear()
    return res, handed, [(m.body_crc, m.store_timestamp) for m in msgs], dict(cl.topic_queue_table)


def _files(cl: CommitLog) -> list[bytes]:
    return [bytes(mf.mm[:mf.wrote_position]) for mf in cl.mapped_file_queue.mapped_files]


SCENARIOS = [
    dict(),
    dict(props_kind="string"),
    dict(props_kind="dict"),
    dict(queue_id=3, born_host=("2001:db8::1", 7)),
    dict(sys_flag=sysflag.TRANSACTION_PREPARED_TYPE),
    dict(sys_flag=sysflag.TRANSACTION_ROLLBACK_TYPE),
    dict(sys_flag=sysflag.TRANSACTION_COMMIT_TYPE | sysflag.MULTI_TAGS_FLAG),
    dict(topic=RMQ_SYS_SCHEDULE_TOPIC, props_kind="delay"),
    dict(topic="Tö"),
    dict(shared=False),
    dict(flag=1 << 31),  # does not fit an int: refused
    dict(flag=True),
    dict(body_size=CL_SIZE),  # larger than a segment: refused
    dict(born_host=("10.0.0.8", 70000)),  # port out of range: refused
]


@pytest.mark.parametrize("store_host", [("127.0.0.1", 10911), ("::1", 10911)])
def test_uniform_batches_match_the_general_path(tmp_path, monkeypatch, store_host):
    ticks = iter(range(1_800_000_000_000, 1_800_000_000_000 + 100_000, 3))
    clock = {"now": 0}
    monkeypatch.setattr(commit_log_module, "_now_ms", lambda: clock["now"])
    fast = _commit_log(str(tmp_path / "fast"), store_host, uniform=True)
    slow = _commit_log(str(tmp_path / "slow"), store_host, uniform=False)
    taken = []
    real = fast._put_uniform
    fast._put_uniform = lambda msgs: _count(taken, real, msgs)
    try:
        # Enough rounds to roll over several segments (rolling batches take the general path).
        for i in range(40):
            for k, sc in enumerate(SCENARIOS):
                clock["now"] = next(ticks)
                n = 1 + (i * 4 + k) % 9  # every scenario sees every size from 1 to 9
                a, b = _batch(i, n, **sc), _batch(i, n, **sc)
                ra, rb = fast.put_messages(a), slow.put_messages(b)
                assert _state(fast, a, ra) == _state(slow, b, rb), (i, sc)
        assert _files(fast) == _files(slow)
        assert len(fast.mapped_file_queue.mapped_files) > 3
        assert any(taken) and not all(taken)
        assert fast.put_message_times_total == slow.put_message_times_total
        assert fast.put_message_size_total == slow.put_message_size_total
    finally:
        fast.shutdown()
        slow.shutdown()


def _count(taken: list[bool], real, msgs):
    result = real(msgs)
    taken.append(result is not None)
    return result


def test_store_time_never_goes_backwards(tmp_path, monkeypatch):
    clock = {"now": 5_000}
    monkeypatch.setattr(commit_log_module, "_now_ms", lambda: clock["now"])
    cl = _commit_log(str(tmp_path / "c"), ("127.0.0.1", 10911), uniform=True)
    try:
        first = cl.put_messages(_batch(0, 3))
        clock["now"] = 4_000
        second = cl.put_messages(_batch(1, 3))
        assert second.append_message_result.store_timestamp == first.append_message_result.store_timestamp == 5_000
    finally:
        cl.shutdown()
