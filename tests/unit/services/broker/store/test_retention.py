"""Retention: CommitLog segments by age/hour/disk pressure, DISK_FULL, CQ and index behind min offset."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from types import SimpleNamespace

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.consume_queue import ConsumeQueue
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.index_service import IndexService
from orbitmq.broker.store.mapped_file_queue import MappedFileQueue
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import GetMessageStatus, MessageExtBrokerInner, PutMessageStatus
from orbitmq.broker.store.retention import (
    RetentionService,
    disk_partition_used_ratio,
    is_it_time_to_do,
)
from orbitmq.broker.store.running_flags import RunningFlags

SEG = 4096
HOUR_MS = 3600 * 1000


class Usage:
    """A disk_usage_provider the test turns like a knob."""

    def __init__(self, ratio: float = 0.10) -> None:
        self.ratio = ratio
        self.paths: list[str] = []

    def __call__(self, path: str) -> float:
        self.paths.append(path)
        return self.ratio


def _config(tmp_path, **kw) -> MessageStoreConfig:
    base = dict(
        store_path_root_dir=str(tmp_path),
        mapped_file_size_commit_log=SEG,
        mapped_file_size_consume_queue=5 * 20,
        file_reserved_time=1,
        delete_when="04",
        delete_commit_log_files_interval=0,
        delete_consume_queue_files_interval=0,
        destroy_maped_file_interval_forcibly=0,
        max_hash_slot_num=8,
        max_index_num=4,
    )
    base.update(kw)
    return MessageStoreConfig(**base)


def _commit_log(cfg, segments: int, old: int) -> MappedFileQueue:
    """`segments` full segments; the first `old` were last modified two hours ago."""
    q = MappedFileQueue(cfg.commit_log_dir, SEG)
    for _ in range(segments):
        mf = q.get_last_mapped_file_or_create(0)
        assert mf.append(b"\x01" * SEG)
    now = time.time()
    for i, mf in enumerate(q.mapped_files):
        age = 2 * 3600 if i < old else 60
        os.utime(mf.path, (now - age, now - age))
    return q


def _hour_clock(hour: int):
    """A clock whose local hour is `hour` (the day does not matter)."""
    t = time.localtime()
    stamp = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1))
    return lambda: stamp


def _offsets(q: MappedFileQueue) -> list[int]:
    return [mf.file_from_offset for mf in q.mapped_files]


def test_delete_when_parsing():
    assert is_it_time_to_do("04", 4)
    assert is_it_time_to_do("01;04", 1) and is_it_time_to_do("01;04", 4)
    assert not is_it_time_to_do("01;04", 5)
    assert not is_it_time_to_do("x;", 4)  # bad entries are logged and ignored


def test_real_disk_usage_is_a_ratio(tmp_path):
    r = disk_partition_used_ratio(str(tmp_path / "not" / "yet"))
    assert 0.0 <= r <= 1.0


async def test_nothing_deleted_outside_delete_when_and_below_thresholds(tmp_path):
    cfg = _config(tmp_path)
    q = _commit_log(cfg, 4, old=2)
    svc = RetentionService(cfg, q, RunningFlags(), disk_usage_provider=Usage(0.10), clock=_hour_clock(10))
    res = await svc.run_once()
    assert res.commit_log_files == 0 and _offsets(q) == [0, SEG, 2 * SEG, 3 * SEG]


async def test_expired_segments_deleted_at_delete_when_hour(tmp_path):
    cfg = _config(tmp_path, delete_when="01;10")
    q = _commit_log(cfg, 4, old=2)
    usage = Usage(0.10)
    svc = RetentionService(cfg, q, RunningFlags(), disk_usage_provider=usage, clock=_hour_clock(10))
    res = await svc.run_once()
    assert res.commit_log_files == 2
    assert _offsets(q) == [2 * SEG, 3 * SEG]  # young segments stay
    assert sorted(os.listdir(cfg.commit_log_dir)) == [f"{2 * SEG:020d}", f"{3 * SEG:020d}"]
    assert cfg.commit_log_dir in usage.paths and cfg.consume_queue_dir in usage.paths


async def test_expired_segments_deleted_when_usage_over_max_used_ratio(tmp_path):
    cfg = _config(tmp_path)
    q = _commit_log(cfg, 4, old=1)
    flags = RunningFlags()
    svc = RetentionService(cfg, q, flags, disk_usage_provider=Usage(0.80), clock=_hour_clock(10))
    assert (await svc.run_once()).commit_log_files == 1
    assert _offsets(q) == [SEG, 2 * SEG, 3 * SEG]
    assert not flags.is_disk_full()


async def test_clean_immediately_at_forcible_ratio_deletes_unexpired_oldest_first(tmp_path):
    cfg = _config(tmp_path)
    q = _commit_log(cfg, 4, old=0)  # nothing has expired
    flags = RunningFlags()
    svc = RetentionService(cfg, q, flags, disk_usage_provider=Usage(0.86), clock=_hour_clock(10))
    assert (await svc.run_once()).commit_log_files == 3
    assert _offsets(q) == [3 * SEG]  # the segment being written is never deleted
    assert not flags.is_disk_full() and flags.is_writeable()

    # cleanFileForciblyEnable=false: the same pressure only removes expired segments.
    cfg2 = _config(tmp_path / "b", clean_file_forcibly_enable=False)
    q2 = _commit_log(cfg2, 3, old=1)
    svc2 = RetentionService(cfg2, q2, RunningFlags(), disk_usage_provider=Usage(0.86), clock=_hour_clock(10))
    assert (await svc2.run_once()).commit_log_files == 1


async def test_disk_full_at_warning_ratio_refuses_writes_until_space_returns(tmp_path):
    cfg = _config(tmp_path)
    q = _commit_log(cfg, 3, old=0)
    flags = RunningFlags()
    usage = Usage(0.95)
    svc = RetentionService(cfg, q, flags, disk_usage_provider=usage, clock=_hour_clock(10))
    await svc.run_once()
    assert svc.is_disk_full() and flags.is_disk_full()
    assert not flags.is_writeable()  # the put path's check
    assert _offsets(q) == [2 * SEG]  # and it cleaned immediately
    usage.ratio = 0.40
    await svc.run_once()
    assert not svc.is_disk_full() and flags.is_writeable()


async def test_manual_delete_ignores_hour_and_usage(tmp_path):
    cfg = _config(tmp_path)
    q = _commit_log(cfg, 3, old=2)
    svc = RetentionService(cfg, q, RunningFlags(), disk_usage_provider=Usage(0.10), clock=_hour_clock(10))
    svc.execute_delete_files_manually()
    assert (await svc.run_once()).commit_log_files == 2
    assert svc.clean_commit_log.manual_delete_file_several_times == 19


def _index_req(offset: int, key: str) -> DispatchRequest:
    return DispatchRequest(
        topic="T", queue_id=0, commit_log_offset=offset, msg_size=100, tags_code=0,
        store_timestamp=1_700_000_000_000 + offset, consume_queue_offset=0, keys=key,
    )


async def test_consume_queue_and_index_cleaned_behind_commit_log_min_offset(tmp_path):
    cfg = _config(tmp_path, delete_when="10")
    q = _commit_log(cfg, 4, old=2)
    cq = ConsumeQueue("T", 0, cfg.consume_queue_dir, cfg.mapped_file_size_consume_queue)
    # 16 records of 1 KiB: four per CommitLog segment; 5 entries per CQ segment.
    for i in range(16):
        cq.put_message_position_info(i * 1024, 1024, 0, i)
    index = IndexService(cfg)
    index.load(True)
    for i in range(16):
        index.build_index(_index_req(i * 1024, f"k{i}"))
    assert len(index.files) == 6  # 3 keys per tiny index file
    assert [mf.file_from_offset for mf in cq.mapped_file_queue.mapped_files] == [0, 100, 200, 300]

    svc = RetentionService(
        cfg, q, RunningFlags(), consume_queues=lambda: [cq], index_service=index,
        disk_usage_provider=Usage(0.10), clock=_hour_clock(10),
    )
    res = await svc.run_once()
    assert res.commit_log_files == 2
    min_phy = 2 * SEG  # 8192: records 0..7 are gone
    # CQ segment 0 holds records 0-4 (all < 8192), segment 1 holds 5-9 (9 is still there).
    assert res.consume_queue_files == 1
    assert [mf.file_from_offset for mf in cq.mapped_file_queue.mapped_files] == [100, 200, 300]
    assert cq.get_min_offset_in_queue() == 8  # first entry whose record still exists
    assert cq.get_entry(7) is None and cq.get_entry(8)[0] == min_phy
    # Index files ending below 8192: [0,1,2] and [3,4,5]; [6,7,8] ends at 8192 and stays.
    assert res.index_files == 2
    assert index.query_offset("T", "k1", 10, 0, 2**62).phy_offsets == []
    assert index.query_offset("T", "k9", 10, 0, 2**62).phy_offsets == [9 * 1024]
    # A second pass with an unchanged min offset does nothing.
    assert await svc.run_once() == type(res)(0, 0, 0)
    index.shutdown()


async def test_service_runs_periodically_and_stops(tmp_path):
    cfg = _config(tmp_path, clean_resource_interval=20)
    q = _commit_log(cfg, 3, old=0)
    flags = RunningFlags()
    svc = RetentionService(cfg, q, flags, disk_usage_provider=Usage(0.95), clock=_hour_clock(10))
    svc.start()
    for _ in range(500):
        if flags.is_disk_full() and len(q.mapped_files) == 1:
            break
        await asyncio.sleep(0.01)
    await svc.shutdown()
    assert flags.is_disk_full() and _offsets(q) == [2 * SEG]


# ---- with the real store ------------------------------------------------------------------
def _msg(i: int) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(
        topic="T", queue_id=0, body=bytes([i % 251]) * 300, properties={"KEYS": f"k{i}"},
        born_timestamp=int(time.time() * 1000), born_host=("10.0.0.1", 4000),
    )


async def _settle(store: MessageStore) -> None:
    for _ in range(1000):
        if store.dispatch_behind_bytes() == 0:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("reput did not catch up")


async def test_store_retention_moves_readers_to_new_min_and_disk_full_refuses_puts(tmp_path):
    cfg = _config(
        tmp_path, mapped_file_size_commit_log=8192, mapped_file_size_consume_queue=10 * 20,
        message_index_enable=True, max_hash_slot_num=16, max_index_num=8,
    )
    store = MessageStore(cfg)
    await store.start()
    try:
        offsets = []
        for i in range(100):
            r = await store.put_message(_msg(i))
            assert r.status is PutMessageStatus.PUT_OK
            offsets.append(r.append_message_result.wrote_offset)
        await _settle(store)
        clq = store.commit_log.mapped_file_queue
        assert len(clq.mapped_files) >= 5
        now = time.time()
        for mf in clq.mapped_files[:3]:
            os.utime(mf.path, (now - 7200, now - 7200))
        usage = Usage(0.80)  # over diskMaxUsedSpaceRatio: expired segments go
        retention = RetentionService(
            cfg, clq, store.running_flags, consume_queues=store.consume_queues,
            index_service=store.index_service, min_commit_log_offset=store.commit_log.get_min_offset,
            disk_usage_provider=usage, clock=_hour_clock(10),
        )
        res = await retention.run_once()
        assert res.commit_log_files == 3
        new_min_phy = 3 * 8192
        assert store.get_min_phy_offset() == new_min_phy
        first_alive = next(i for i, off in enumerate(offsets) if off >= new_min_phy)
        assert res.consume_queue_files >= 1 and res.index_files >= 1
        assert store.get_min_offset_in_queue("T", 0) == first_alive

        # A pull below the new minimum is told where the queue now starts.
        r = store.get_message("g", "T", 0, 0)
        assert r.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert r.min_offset == first_alive and r.next_begin_offset == first_alive
        r = store.get_message("g", "T", 0, first_alive, max_msg_nums=1)
        assert r.status is GetMessageStatus.FOUND and r.message_queue_offset == [first_alive]
        # Keys of deleted records are gone from the index; live ones still resolve.
        assert store.index_service.query_offset("T", "k0", 10, 0, 2**62).phy_offsets == []
        assert store.index_service.query_offset("T", "k99", 10, 0, 2**62).phy_offsets == [offsets[99]]

        # Over diskSpaceWarningLevelRatio the store refuses writes with DISK_FULL ...
        usage.ratio = 0.95
        await retention.run_once()
        r = await store.put_message(_msg(100))
        assert r.status is PutMessageStatus.DISK_FULL and not r.is_ok()
        # ... and takes them again once space is back.
        usage.ratio = 0.40
        await retention.run_once()
        r = await store.put_message(_msg(101))
        assert r.status is PutMessageStatus.PUT_OK
    finally:
        await store.shutdown()


def test_disk_usage_counts_reserved_blocks_as_free_as_java_does(tmp_path, monkeypatch):
    """UtilAll's (getTotalSpace - getFreeSpace) / getTotalSpace: f_bfree, not f_bavail. A disk
    with a large root reservation (22 % used, 16 % available to users) must not read as 84 %
    full: past diskSpaceCleanForciblyRatio the broker would delete unexpired CommitLog files."""
    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(f_blocks=1000, f_bfree=780, f_bavail=160,
                                                                     f_frsize=4096))
    assert disk_partition_used_ratio(str(tmp_path)) == 0.22


def _msg_to(topic: str, queue_id: int, i: int) -> MessageExtBrokerInner:
    msg = _msg(i)
    msg.topic, msg.queue_id = topic, queue_id
    return msg


async def test_clean_expired_consume_queues_drops_only_queues_wholly_below_the_min_offset(tmp_path):
    """CLEAN_EXPIRED_CONSUMEQUEUE: a queue whose every message retention removed goes (files too);
    a queue with a live message and SCHEDULE_TOPIC_XXXX's stay."""
    cfg = _config(tmp_path, mapped_file_size_commit_log=8192, mapped_file_size_consume_queue=10 * 20)
    store = MessageStore(cfg)
    await store.start()
    try:
        for i in range(30):  # old: queue Old/0 and SCHEDULE_TOPIC_XXXX/1, then Mixed/0 in both eras
            for topic, qid in (("Old", 0), ("SCHEDULE_TOPIC_XXXX", 1), ("Mixed", 0)):
                assert (await store.put_message(_msg_to(topic, qid, i))).status is PutMessageStatus.PUT_OK
        for i in range(60):  # new: Mixed/0 only, more than a segment of it
            assert (await store.put_message(_msg_to("Mixed", 0, i))).status is PutMessageStatus.PUT_OK
        await _settle(store)
        clq = store.commit_log.mapped_file_queue
        now = time.time()
        for mf in clq.mapped_files[:-1]:  # every segment but the last has expired
            os.utime(mf.path, (now - 7200, now - 7200))
        retention = RetentionService(cfg, clq, store.running_flags, consume_queues=store.consume_queues,
                                     index_service=None, min_commit_log_offset=store.commit_log.get_min_offset,
                                     disk_usage_provider=Usage(0.80), clock=_hour_clock(10))
        await retention.run_once()
        old_end = store.get_consume_queue("Old", 0).max_physic_offset
        assert store.commit_log.get_min_offset() >= old_end  # every Old message is gone
        assert store.get_consume_queue("Mixed", 0).max_physic_offset > store.commit_log.get_min_offset()
        old_dir = Path(cfg.consume_queue_dir) / "Old"
        assert old_dir.is_dir()

        assert await store.clean_expired_consume_queues() == 1
        assert store.get_consume_queue("Old", 0) is None and not old_dir.exists()
        assert store.get_consume_queue("SCHEDULE_TOPIC_XXXX", 1) is not None  # the delay service's progress
        assert store.get_consume_queue("Mixed", 0) is not None  # it still has live messages
        assert await store.clean_expired_consume_queues() == 0
        # A new message to the dropped queue starts it again from offset 0.
        r = await store.put_message(_msg_to("Old", 0, 1))
        assert r.status is PutMessageStatus.PUT_OK and r.append_message_result.logics_offset == 0
    finally:
        await store.shutdown()


async def test_clean_unused_topics_keeps_configured_and_system_topics(tmp_path):
    """CLEAN_UNUSED_TOPIC: queues of topics without a config go; configured and system topics stay."""
    store = MessageStore(_config(tmp_path))
    await store.start()
    try:
        for topic in ("Kept", "Gone", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC"):
            assert (await store.put_message(_msg_to(topic, 0, 1))).status is PutMessageStatus.PUT_OK
        await _settle(store)
        from orbitmq.common.validators import is_system_topic

        assert store.unused_topics({"Kept"}, is_system_topic) == ["Gone"]
        assert await store.delete_topics(store.unused_topics({"Kept"}, is_system_topic)) == 1
        assert store.get_consume_queue("Gone", 0) is None
        for topic in ("Kept", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC"):
            assert store.get_consume_queue(topic, 0) is not None, topic
        assert not (Path(store.config.consume_queue_dir) / "Gone").exists()
    finally:
        await store.shutdown()


async def test_a_queue_made_again_while_the_old_one_is_deleted_keeps_its_files(tmp_path):
    """Dropped queues' files are deleted on a thread. A message dispatched to the same queue in the
    meantime starts new files at the same path; the deletion must not touch them."""
    import threading

    store = MessageStore(_config(tmp_path))
    await store.start()
    try:
        assert (await store.put_message(_msg_to("Again", 0, 1))).status is PutMessageStatus.PUT_OK
        await _settle(store)
        release = threading.Event()
        destroy = store._destroy_detached

        def held_destroy(detached):  # the deletion thread waits until the queue exists again
            assert release.wait(10)
            destroy(detached)

        store._destroy_detached = held_destroy
        dropping = asyncio.create_task(store.delete_topics(["Again"]))
        await asyncio.sleep(0.05)  # the queue has left the tables; its deletion waits
        assert store.get_consume_queue("Again", 0) is None
        r = await store.put_message(_msg_to("Again", 0, 2))
        assert r.status is PutMessageStatus.PUT_OK and r.append_message_result.logics_offset == 0
        await _settle(store)
        release.set()
        assert await dropping == 1
        got = store.get_message("g", "Again", 0, 0)
        assert got.status is GetMessageStatus.FOUND and got.message_queue_offset == [0]
        assert (Path(store.config.consume_queue_dir) / "Again" / "0").is_dir()
    finally:
        await store.shutdown()
