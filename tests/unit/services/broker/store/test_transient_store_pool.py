"""Transient store pool (transientStorePoolEnable): buffers, commit, read bounds, flow control, recovery."""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from orbitmq.broker.store.config import ASYNC_MASTER, SLAVE, SYNC_FLUSH, MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner, PutMessageStatus
from orbitmq.broker.store.transient_store_pool import TransientStorePool
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

CL_SIZE = 8192
# Never on its own: tests commit by hand (mfq.commit) or at shutdown.
STALLED = dict(commit_interval_commit_log=3_600_000, commit_commit_log_thorough_interval=3_600_000,
               commit_commit_log_least_pages=10_000)


def make_config(tmp_path, **kw) -> MessageStoreConfig:
    base = dict(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=CL_SIZE,
                mapped_file_size_consume_queue=20 * 50, message_index_enable=False,
                transient_store_pool_enable=True, transient_store_pool_size=3,
                warm_commit_log_ahead_enable=False)
    base.update(kw)
    return MessageStoreConfig(**base)


def msg(i: int = 0, qid: int = 0, size: int = 100) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic="T", queue_id=qid, body=bytes([i % 251]) * size, properties={"TAGS": "A"},
                                 born_timestamp=int(time.time() * 1000), born_host=("10.1.2.3", 4000))


def bodies(store: MessageStore, qid: int = 0) -> list[bytes]:
    from orbitmq.common.message_codec import decode_record

    out, offset = [], 0
    while True:
        r = store.get_message("g", "T", qid, offset)
        if r.status is not GetMessageStatus.FOUND:
            return out
        out.extend(decode_record(b).body for b in r.message_buffer_list)
        offset = r.next_begin_offset


async def settle(store: MessageStore) -> None:
    for _ in range(500):
        if store.dispatch_behind_bytes() == 0:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("reput did not catch up")


def test_config_keys_and_upstream_defaults():
    cfg = MessageStoreConfig.from_mapping({"transientStorePoolEnable": "true", "transientStorePoolSize": "2",
                                           "commitIntervalCommitLog": "50", "commitCommitLogLeastPages": "1",
                                           "commitCommitLogThoroughInterval": "100"})
    assert (cfg.transient_store_pool_enable, cfg.transient_store_pool_size, cfg.commit_interval_commit_log,
            cfg.commit_commit_log_least_pages, cfg.commit_commit_log_thorough_interval) == (True, 2, 50, 1, 100)
    d = MessageStoreConfig()
    assert (d.transient_store_pool_enable, d.transient_store_pool_size, d.commit_interval_commit_log,
            d.commit_commit_log_least_pages, d.commit_commit_log_thorough_interval) == (False, 5, 200, 4, 200)
    with pytest.raises(ValueError, match="transientStorePoolSize"):
        MessageStoreConfig(transient_store_pool_enable=True, transient_store_pool_size=0)


def test_effective_as_rocketmq_5_decides():
    """DefaultMessageStore#isTransientStorePoolEnable: any flush type, not a SLAVE outside controller mode."""
    assert MessageStoreConfig(transient_store_pool_enable=True, broker_role=ASYNC_MASTER).transient_store_pool_effective()
    assert MessageStoreConfig(transient_store_pool_enable=True, flush_disk_type=SYNC_FLUSH).transient_store_pool_effective()
    slave = MessageStoreConfig(transient_store_pool_enable=True, broker_role=SLAVE)
    assert not slave.transient_store_pool_effective()
    assert slave.transient_store_pool_effective(enable_controller_mode=True)
    assert not MessageStoreConfig().transient_store_pool_effective()


def test_pool_borrow_and_return():
    pool = TransientStorePool(2, 4096)
    pool.init()
    try:
        a, b = pool.borrow_buffer(), pool.borrow_buffer()
        assert a is not None and b is not None and a is not b and len(a) == 4096
        assert pool.borrow_buffer() is None and pool.available_buffer_nums() == 0
        pool.return_buffer(a)
        assert pool.available_buffer_nums() == 1 and pool.borrow_buffer() is a
    finally:
        pool.destroy()


async def test_reads_stop_at_the_committed_position(tmp_path):
    store = MessageStore(make_config(tmp_path, **STALLED))
    await store.start()
    try:
        cl = store.commit_log
        mfq = cl.mapped_file_queue
        mf = mfq.get_last_mapped_file()
        assert mf.write_buffer is not None and mf.wbuf is mf.write_buffer
        results = [await store.put_message(msg(i)) for i in range(5)]
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        first = results[0].append_message_result
        # Written into the buffer only: no reader sees it, the file holds zeros there.
        assert mfq.get_max_wrote_position() > 0 and cl.get_max_offset() == 0 == store.get_max_phy_offset()
        assert bytes(mf.mm[:64]) == bytes(64)
        store.reput_service.do_reput(notify=False)
        assert store.get_max_offset_in_queue("T", 0) == 0
        assert store.get_message("g", "T", 0, 0).status is not GetMessageStatus.FOUND
        assert store.select_one_message_by_offset(first.wrote_offset, first.wrote_bytes) is None
        assert cl.get_message(first.wrote_offset, first.wrote_bytes) is None
        # One commit makes all of it readable, and dispatch catches up.
        assert not mfq.commit(0)
        assert cl.get_max_offset() == mfq.get_max_wrote_position() == mfq.committed_where
        store.reput_service.wakeup()
        await settle(store)
        assert bodies(store) == [bytes([i]) * 100 for i in range(5)]
        # The flusher flushes what was committed, never more.
        mfq.flush(0)
        assert mfq.flushed_where == mfq.committed_where
        # More appends: dispatch takes the committed ones only, the hand-off keeps the rest.
        more = [await store.put_message(msg(10 + i)) for i in range(3)]
        store.reput_service.do_reput(notify=False)
        assert store.get_max_offset_in_queue("T", 0) == 5
        mfq.commit(0)
        store.reput_service.do_reput(notify=False)
        assert store.get_max_offset_in_queue("T", 0) == 8
        assert more[-1].append_message_result.logics_offset == 7
    finally:
        await store.shutdown()


async def test_commit_service_commits_and_full_segments_give_their_buffer_back(tmp_path):
    store = MessageStore(make_config(tmp_path, commit_interval_commit_log=5, commit_commit_log_thorough_interval=10))
    await store.start()
    try:
        pool = store.transient_store_pool
        for i in range(100):  # ~12 segments of 8 KiB
            assert (await store.put_message(msg(i, size=500))).status is PutMessageStatus.PUT_OK
            if i % 8 == 7:
                await asyncio.sleep(0.02)  # let the commit service keep up: the pool never runs dry
        mfq = store.commit_log.mapped_file_queue
        for _ in range(500):
            if mfq.committed_where == mfq.get_max_wrote_position() and pool.available_buffer_nums() == 2:
                break
            await asyncio.sleep(0.005)
        assert mfq.committed_where == mfq.get_max_wrote_position()
        # Only the active segment still holds one; every full one gave its buffer back.
        assert pool.available_buffer_nums() == 2
        files = mfq.mapped_files
        assert len(files) > 6 and all(f.write_buffer is None for f in files[:-1])
        assert all(f.transient_store_pool is pool for f in files)
        assert files[-1].write_buffer is not None
        await settle(store)
        assert bodies(store) == [bytes([i]) * 500 for i in range(100)]
        assert store.runtime_info()["remainTransientStoreBufferNumbs"] == "2"
    finally:
        await store.shutdown()


async def test_exhausted_pool_is_deficient_and_new_segments_write_through(tmp_path):
    store = MessageStore(make_config(tmp_path, transient_store_pool_size=2, **STALLED))
    await store.start()
    try:
        assert not store.is_transient_store_pool_deficient()
        for i in range(40):  # several rollovers; nothing is committed, so no buffer comes back
            assert (await store.put_message(msg(i, size=500))).status is PutMessageStatus.PUT_OK
        assert store.is_transient_store_pool_deficient()
        assert store.remain_transient_store_buffer_numbs() == 0
        files = store.commit_log.mapped_file_queue.mapped_files
        assert [f.write_buffer is not None for f in files[:3]] == [True, True, False]
        assert files[-1].transient_store_pool is None  # written through its mapping, readable at once
        store.commit_log.mapped_file_queue.commit_all()
        assert not store.is_transient_store_pool_deficient()
        await settle(store)
        assert bodies(store) == [bytes([i]) * 500 for i in range(40)]
    finally:
        await store.shutdown()
    assert MessageStore(make_config(tmp_path, transient_store_pool_enable=False)).remain_transient_store_buffer_numbs() \
        == 2**31 - 1


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE_V2, RequestCode.CONSUMER_SEND_MSG_BACK])
async def test_a_deficient_pool_makes_the_broker_refuse_sends(code):
    """SendMessageProcessor#rejectRequest → SYSTEM_BUSY "[REJECTREQUEST]…" (NettyRemotingAbstract)."""
    from orbitmq.broker.processors.send import SendMessageProcessor
    from orbitmq.broker.processors.send_back import SendBackProcessor

    store = SimpleNamespace(is_transient_store_pool_deficient=lambda: True)
    broker = SimpleNamespace(message_store=store, config=SimpleNamespace())
    cls = SendMessageProcessor if code == RequestCode.SEND_MESSAGE_V2 else SendBackProcessor
    proc = cls.__new__(cls)
    proc.broker = broker
    resp = await proc.process(RemotingCommand.request(code, {"a": "T"}), None)
    assert resp.code == ResponseCode.SYSTEM_BUSY
    assert resp.remark == "[REJECTREQUEST]system busy, start flow control for a while"


async def test_uniform_batches_and_batches_across_segments_go_through_the_buffer(tmp_path):
    store = MessageStore(make_config(tmp_path, transient_store_pool_size=8, **STALLED))
    await store.start()
    try:
        born = int(time.time() * 1000)
        sent = []
        for n in range(12):
            batch = [MessageExtBrokerInner(topic="T", queue_id=1, body=bytes([n, k]) * 150, properties={"TAGS": "B"},
                                           born_timestamp=born, born_host=("10.1.2.3", 4000)) for k in range(8)]
            for m in batch[1:]:  # the same objects: the uniform (compiled where built) path
                m.topic, m.born_host, m.born_timestamp = batch[0].topic, batch[0].born_host, batch[0].born_timestamp
            assert (await store.put_messages(batch)).status is PutMessageStatus.PUT_OK
            sent.extend(m.body for m in batch)
        # A pass may commit full segments (isAbleToCommit: always when full), never the active one.
        assert store.commit_log.get_max_offset() < store.commit_log.mapped_file_queue.get_max_wrote_position()
        store.commit_log.mapped_file_queue.commit_all()
        store.reput_service.wakeup()
        await settle(store)
        assert bodies(store, 1) == sent
    finally:
        await store.shutdown()


async def test_shutdown_commits_then_flushes_everything(tmp_path):
    store = MessageStore(make_config(tmp_path, transient_store_pool_size=8, **STALLED))
    await store.start()
    for i in range(30):
        await store.put_message(msg(i, size=400))
    assert store.commit_log.get_max_offset() < store.commit_log.mapped_file_queue.get_max_wrote_position()
    await store.shutdown()
    again = MessageStore(make_config(tmp_path, transient_store_pool_enable=False))
    await again.start()
    try:
        assert again.last_exit_ok
        await settle(again)
        assert bodies(again) == [bytes([i]) * 400 for i in range(30)]
    finally:
        await again.shutdown()


async def test_sync_flush_waits_for_the_commit_service(tmp_path):
    store = MessageStore(make_config(tmp_path, flush_disk_type=SYNC_FLUSH, commit_commit_log_thorough_interval=20,
                                     commit_interval_commit_log=10))
    await store.start()
    try:
        for i in range(5):
            r = await store.put_message(msg(i))
            assert r.status is PutMessageStatus.PUT_OK
            ar = r.append_message_result
            assert store.commit_log.mapped_file_queue.flushed_where >= ar.wrote_offset + ar.wrote_bytes
    finally:
        await store.shutdown()


def test_a_replicas_raw_appends_into_a_pooled_segment_are_readable_at_once(tmp_path):
    from orbitmq.broker.store.mapped_file import MappedFile

    pool = TransientStorePool(1, 4096)
    pool.init()
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 4096)
    try:
        assert mf.attach_write_buffer(pool)
        mf.append(b"a" * 100)
        assert mf.read_position == 100 and mf.read(0, 100) == b"a" * 100
        mf.wbuf[100:200] = b"b" * 100  # a record written as a master, not committed yet
        mf.wrote_position = 200
        mf.append(b"c" * 50)
        assert mf.read_position == 100
        assert mf.commit(0) == 250 and mf.read(0, 250) == b"a" * 100 + b"b" * 100 + b"c" * 50
    finally:
        mf.destroy(0)
        pool.destroy()
    assert pool.available_buffer_nums() == 0  # destroyed; the buffer came back before


_CRASHER = textwrap.dedent("""
    import asyncio, os, signal, sys, time
    from orbitmq.broker.store.config import MessageStoreConfig
    from orbitmq.broker.store.message_store import MessageStore
    from orbitmq.broker.store.model import MessageExtBrokerInner

    def msg(i):
        return MessageExtBrokerInner(topic="T", queue_id=0, body=bytes([i % 251]) * 300, properties={"TAGS": "A"},
                                     born_timestamp=int(time.time() * 1000), born_host=("10.1.2.3", 4000))

    async def main():
        cfg = MessageStoreConfig(store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=8192,
                                 mapped_file_size_consume_queue=1000, message_index_enable=False,
                                 transient_store_pool_enable=True, transient_store_pool_size=3,
                                 commit_interval_commit_log=3_600_000, commit_commit_log_thorough_interval=3_600_000,
                                 commit_commit_log_least_pages=10_000)
        store = MessageStore(cfg)
        await store.start()
        for i in range(int(sys.argv[2])):
            await store.put_message(msg(i))
        store.commit_log.mapped_file_queue.commit_all()   # committed: in the page cache
        for i in range(int(sys.argv[2]), int(sys.argv[3])):
            await store.put_message(msg(i))                # acknowledged, only in the buffer
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
""")


async def test_kill_9_keeps_what_was_committed_and_recovers(tmp_path):
    root = tmp_path / "store"
    env = dict(os.environ)
    proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", _CRASHER, str(root), "20", "35"],
                                   capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "ready" in proc.stdout
    store = MessageStore(make_config(tmp_path, **STALLED))
    await store.start()
    try:
        assert not store.last_exit_ok
        await settle(store)
        # The committed 20 survive the process; the 15 only in its buffer died with it.
        assert bodies(store) == [bytes([i]) * 300 for i in range(20)]
        r = await store.put_message(msg(99, size=300))
        assert r.status is PutMessageStatus.PUT_OK and r.append_message_result.logics_offset == 20
        store.commit_log.mapped_file_queue.commit_all()
        store.reput_service.wakeup()
        await settle(store)
        assert bodies(store)[-1] == bytes([99]) * 300
    finally:
        await store.shutdown()


def test_a_warmed_segment_is_mlocked_where_the_os_allows(tmp_path):
    """warmMapedFileEnable: DefaultMappedFile#warmMappedFile ends with mlock; munlock on unmap."""
    from orbitmq.broker.store import transient_store_pool
    from orbitmq.broker.store.mapped_file import MappedFile

    mf = MappedFile(str(tmp_path / f"{0:020d}"), 64 * 1024, warm=True)
    try:
        probe = TransientStorePool(1, 64 * 1024)
        probe.init()
        allowed = bool(probe._locked)  # what this machine's RLIMIT_MEMLOCK lets through
        probe.destroy()
        assert mf._mlocked is allowed
    finally:
        mf.destroy(0)
    assert not mf._mlocked
    # Refused by the OS (here: a closed mapping, then more than any RLIMIT_MEMLOCK): False, no raise.
    assert transient_store_pool.mlock(mf.mm, 4096) is False
    import mmap

    big = mmap.mmap(-1, 4096)
    try:
        assert transient_store_pool.mlock(big, 1 << 46) is False
    finally:
        big.close()


async def test_truncating_a_log_with_records_still_in_the_buffer(tmp_path):
    """A controller-mode master turned replica: the records in its buffer go into the file before
    the truncation to the new master's offset (AutoSwitchHAService#changeToSlave's commit wait)."""
    store = MessageStore(make_config(tmp_path, **STALLED))
    await store.start()
    try:
        results = [await store.put_message(msg(i)) for i in range(5)]
        cut = results[2].append_message_result.wrote_offset
        mfq = store.commit_log.mapped_file_queue
        assert store.commit_log.get_max_offset() == 0 < cut
        assert store.replication.truncate_files(cut)
        assert store.commit_log.get_max_offset() == mfq.get_max_wrote_position() == cut
        store.reput_service.wakeup()
        await settle(store)
        assert bodies(store) == [bytes([0]) * 100, bytes([1]) * 100]
        store.replication.recover_topic_queue_table()  # what a new master does before its first put
        assert (await store.put_message(msg(7))).append_message_result.logics_offset == 2
    finally:
        await store.shutdown()


class _Writer:
    """Collects what an AutoSwitchHAConnection writes to its slave."""

    def __init__(self) -> None:
        self.data = bytearray()

    def get_extra_info(self, name: str):
        return ("127.0.0.1", 1)

    def write(self, b: bytes) -> None:
        self.data += b

    async def drain(self) -> None:
        return None


async def test_ha_transfer_sends_committed_bytes_only(tmp_path):
    """AutoSwitchHAConnection: a slave is sent the committed part of the log, never more."""
    from orbitmq.broker.ha.epoch_file import EpochEntry
    from orbitmq.broker.ha.ha_connection import AutoSwitchHAConnection

    store = MessageStore(make_config(tmp_path, **STALLED))
    await store.start()
    try:
        service = SimpleNamespace(store=store, store_config=store.config)
        conn = AutoSwitchHAConnection(service, None, _Writer())
        conn.next_transfer_from_where = 0
        epoch = EpochEntry(1, 0)
        r = await store.put_message(msg(1))
        assert not await conn._transfer_once(epoch, None)  # in the buffer only: nothing to send
        assert conn.writer.data == b""
        store.commit_log.mapped_file_queue.commit(0)
        await store.put_message(msg(2))  # not committed: stays behind
        assert await conn._transfer_once(epoch, None)
        end = r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes
        assert conn.next_transfer_from_where == end
        assert conn.writer.data.endswith(bytes(store.commit_log.get_message(0, end)))
        assert not await conn._transfer_once(epoch, None)
    finally:
        await store.shutdown()
