"""The single-put append path writes exactly the record the reference encoder builds."""

import time

import pytest

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus
from orbitmq.common import sysflag
from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import encode_record

CL_SIZE = 8192


def _config(tmp_path) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=CL_SIZE,
                              mapped_file_size_consume_queue=20 * 50, message_index_enable=False)


def _expected(m: MessageExtBrokerInner, store_host, phy: int, qoff: int, store_ts: int) -> bytes:
    return encode_record(
        topic=m.topic, queue_id=m.queue_id, body=m.body, flag=m.flag, queue_offset=qoff, physical_offset=phy,
        sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host, store_timestamp=store_ts,
        store_host=store_host, reconsume_times=m.reconsume_times,
        prepared_transaction_offset=m.prepared_transaction_offset, properties=properties_to_string(m.properties),
    )


@pytest.mark.parametrize("store_host", [("127.0.0.1", 10911), ("2001:db8::9", 10911)])
async def test_single_puts_match_reference_encoding(tmp_path, store_host):
    s = MessageStore(_config(tmp_path), store_host=store_host)
    await s.start()
    try:
        now = int(time.time() * 1000)
        variants = [
            dict(topic="T", queue_id=0, properties={"TAGS": "a", "UNIQ_KEY": "U1"}, properties_string="TAGS\x01a\x02UNIQ_KEY\x01U1\x02"),
            dict(topic="T", queue_id=1, properties={"KEYS": "k1 k2"}, born_host=("::1", 7)),  # string built here
            dict(topic="Tö", queue_id=0, flag=3, reconsume_times=2, born_host=("10.0.0.1", 65535)),
            dict(topic="T", queue_id=0, sys_flag=sysflag.TRANSACTION_PREPARED_TYPE, prepared_transaction_offset=5),
            dict(topic="T", queue_id=0, sys_flag=sysflag.TRANSACTION_ROLLBACK_TYPE, properties={"TAGS": "r"}),
            dict(topic="T", queue_id=0, sys_flag=sysflag.TRANSACTION_COMMIT_TYPE, properties={"TAGS": "c"}),
        ]
        seen: list[tuple[int, bytes]] = []
        queue_next = {}
        # Enough rounds to cross several 8 KiB segments (the rollover path writes these too).
        for i in range(30):
            for v in variants:
                kw = dict(v)
                kw.setdefault("born_host", ("192.168.1.2", 4000))
                m = MessageExtBrokerInner(body=bytes([i]) * (50 + 7 * i), born_timestamp=now + i, **kw)
                r = await s.put_message(m)
                assert r.status is PutMessageStatus.PUT_OK
                ar = r.append_message_result
                tran = m.sys_flag & sysflag.TRANSACTION_ROLLBACK_TYPE
                key = (m.topic, m.queue_id)
                if tran in (sysflag.TRANSACTION_PREPARED_TYPE, sysflag.TRANSACTION_ROLLBACK_TYPE):
                    assert ar.logics_offset == 0
                else:
                    assert ar.logics_offset == queue_next.get(key, 0)
                    queue_next[key] = ar.logics_offset + 1
                assert m.store_timestamp == ar.store_timestamp and m.body_crc != 0
                want = _expected(m, store_host, ar.wrote_offset, ar.logics_offset, ar.store_timestamp)
                # At a segment rollover wrote_bytes also counts the blank filler before the record.
                assert ar.wrote_bytes == len(want) or ar.wrote_offset % CL_SIZE == 0
                assert ar.msg_id == s.commit_log.offset_msg_id(ar.wrote_offset)
                seen.append((ar.wrote_offset, want))
        assert len(s.commit_log.mapped_file_queue.mapped_files) > 3
        for phy, want in seen:
            assert s.commit_log.get_record(phy) == want
    finally:
        await s.shutdown()


async def test_fast_path_refusals_write_nothing(tmp_path):
    s = MessageStore(_config(tmp_path))
    await s.start()
    try:
        before = s.commit_log.get_max_offset()
        bad = [
            MessageExtBrokerInner(topic="T", queue_id=-1, body=b"x"),
            MessageExtBrokerInner(topic="T", queue_id=0, body=b"x", flag=1 << 40),
            MessageExtBrokerInner(topic="T", queue_id=0, body=b"x", born_host=("not-an-ip", 1)),
            MessageExtBrokerInner(topic="", queue_id=0, body=b"x"),
            MessageExtBrokerInner(topic="T", queue_id=0, body=b"x" * CL_SIZE),
        ]
        for m in bad:
            r = await s.put_message(m)
            assert r.status is PutMessageStatus.MESSAGE_ILLEGAL, m
        assert s.commit_log.get_max_offset() == before
        assert s.commit_log.topic_queue_table.get(("T", 0), 0) == 0
    finally:
        await s.shutdown()
