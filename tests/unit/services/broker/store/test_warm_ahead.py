"""Pre-faulting CommitLog pages ahead of the writer: MappedFile.populate and WarmAheadService.

Page presence is read from /proc/self/pagemap (bit 63: the page is mapped in this process), so
the tests see exactly what the writer on the event loop would find: a mapped page or a fault.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import mmap
import os
import resource
import threading
import time

import pytest

from orbitmq.broker.store import mapped_file as mapped_file_mod
from orbitmq.broker.store.allocate import AllocateMappedFileService, WarmAheadService
from orbitmq.broker.store.config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from orbitmq.broker.store.mapped_file import OS_PAGE_SIZE, MappedFile, offset_to_file_name
from orbitmq.broker.store.mapped_file_queue import MappedFileQueue
from orbitmq.broker.store.message_store import MessageStore

PAGE = OS_PAGE_SIZE
KIB = 1024


def _pagemap_readable() -> bool:
    try:
        with open("/proc/self/pagemap", "rb") as f:
            return len(f.read(8)) == 8
    except OSError:
        return False


pytestmark = pytest.mark.skipif(
    not (mapped_file_mod._populate_supported and _pagemap_readable()),
    reason="needs Linux 5.14+ (MADV_POPULATE_WRITE) and /proc/self/pagemap",
)


def present(mf: MappedFile, start: int, end: int) -> list[bool]:
    """For each page of [start, end) of the segment: is it mapped in this process?"""
    view = ctypes.c_char.from_buffer(mf.mm)
    try:
        base = ctypes.addressof(view)
    finally:
        del view
    first, last = (base + start) // PAGE, (base + end + PAGE - 1) // PAGE
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        raw = f.read((last - first) * 8)
    return [bool(int.from_bytes(raw[i : i + 8], "little") >> 63) for i in range(0, len(raw), 8)]


def thread_minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def wait_until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def new_queue(tmp_path, size: int, allocate: AllocateMappedFileService | None = None) -> MappedFileQueue:
    return MappedFileQueue(str(tmp_path / "commitlog"), size, allocate)


def test_populate_maps_pages_without_changing_them(tmp_path):
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 64 * PAGE)
    try:
        data = os.urandom(3 * PAGE + 100)
        assert mf.append(data)
        assert not any(present(mf, 8 * PAGE, 64 * PAGE))
        assert mf.populate(mf.wrote_position, 24 * PAGE)
        pages = present(mf, 0, 64 * PAGE)
        assert all(pages[3:24]) and not any(pages[24:])
        assert mf.mm[: len(data)] == data
        assert mf.mm[len(data) : 24 * PAGE] == bytes(24 * PAGE - len(data))
        # Clamped to the segment; an empty range is refused.
        assert mf.populate(60 * PAGE, 100 * PAGE)
        assert all(present(mf, 60 * PAGE, 64 * PAGE))
        assert not mf.populate(64 * PAGE, 65 * PAGE)
    finally:
        mf.destroy(0)


def test_populate_refuses_a_destroyed_segment(tmp_path):
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 16 * PAGE)
    assert mf.destroy(0)
    assert not mf.populate(0, 16 * PAGE)
    assert not os.path.exists(mf.path)


def test_populate_holds_the_segment_so_destroy_waits(tmp_path, monkeypatch):
    """A segment destroyed while being populated is unmapped and deleted only afterwards."""
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), 16 * PAGE)
    inside = threading.Event()
    proceed = threading.Event()
    real = mapped_file_mod._madvise

    def slow_madvise(addr, length, advice):
        inside.set()
        proceed.wait(10)
        return real(addr, length, advice)

    monkeypatch.setattr(mapped_file_mod, "_madvise", slow_madvise)
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(mf.populate(0, 16 * PAGE)))
    t.start()
    assert inside.wait(10)
    assert not mf.destroy(0)  # held: not unmapped under the kernel call
    assert not mf.is_cleanup_over() and not mf.mm.closed
    proceed.set()
    t.join()
    assert result == [True]
    assert mf.is_cleanup_over() and mf.mm.closed  # the populate's release finished the cleanup
    assert mf.destroy(0) and not os.path.exists(mf.path)


def test_warm_once_populates_the_window_ahead_of_the_write_position(tmp_path):
    q = new_queue(tmp_path, 256 * PAGE)
    mf = q.get_last_mapped_file_or_create(0)
    assert mf.append(os.urandom(10 * KIB))
    warmer = WarmAheadService(q, None, max_window=32 * PAGE, interval_ms=10, min_window=32 * PAGE)
    warmer.FULL_PASS_S = float("inf")  # no periodic full pass in between, however slow the machine
    assert warmer.warm_once() == 32 * PAGE
    pages = present(mf, 0, 256 * PAGE)
    first = mf.wrote_position // PAGE
    assert all(pages[first : first + 32]) and not any(pages[first + 32 :])
    # Nothing moved, nothing flushed: the next pass has nothing to do.
    assert warmer.warm_once() == 0
    # The writer moves on: only the pages newly inside the window are asked for.
    assert mf.append(os.urandom(8 * PAGE))
    assert warmer.warm_once() == 8 * PAGE
    first = mf.wrote_position // PAGE
    assert all(present(mf, first * PAGE, (first + 32) * PAGE))
    q.shutdown(0)


def test_window_follows_the_write_rate(tmp_path):
    q = new_queue(tmp_path, 1024 * PAGE)
    q.get_last_mapped_file_or_create(0)
    warmer = WarmAheadService(q, None, max_window=256 * PAGE, interval_ms=10, min_window=16 * PAGE)
    assert warmer.window() == 16 * PAGE  # idle: the minimum
    warmer._rate = 10**9
    assert warmer.window() == 256 * PAGE  # fast: capped
    warmer._rate = 100 * PAGE / warmer.AHEAD_SECONDS
    assert warmer.window() == 100 * PAGE
    q.shutdown(0)


def test_appends_into_the_warmed_window_take_no_faults_even_after_a_flush(tmp_path):
    q = new_queue(tmp_path, 256 * PAGE)
    mf = q.get_last_mapped_file_or_create(0)
    warmer = WarmAheadService(q, None, max_window=128 * PAGE, interval_ms=10, min_window=128 * PAGE)
    record = os.urandom(KIB)
    assert mf.append(record)
    warmer.warm_once()
    # Writeback write-protects the populated (dirty) pages; the next pass notices the flush.
    mf.flush(0)
    assert warmer.warm_once() > 0
    before = thread_minor_faults()
    for _ in range(64 * PAGE // KIB):
        mf.append(record)
    faults = thread_minor_faults() - before
    assert faults < 8, f"{faults} faults writing 64 warmed pages"
    q.shutdown(0)


def test_window_continues_into_the_prepared_next_segment(tmp_path):
    size = 64 * PAGE
    allocate = AllocateMappedFileService()
    q = new_queue(tmp_path, size, allocate)
    mf = q.get_last_mapped_file_or_create(0)  # also starts preparing the next segment
    assert mf.append(os.urandom(size - 4 * PAGE))
    nxt_path = os.path.join(q.store_path, offset_to_file_name(size))
    wait_until(lambda: allocate.peek(nxt_path, size) is not None)
    nxt = allocate.peek(nxt_path, size)
    warmer = WarmAheadService(q, allocate, max_window=16 * PAGE, interval_ms=10, min_window=16 * PAGE)
    warmer.warm_once()
    assert all(present(mf, size - 4 * PAGE, size))
    pages = present(nxt, 0, size)
    assert all(pages[:12]) and not any(pages[12:])
    # Rolling over hands the same (already warm) object to the writer.
    assert mf.append(os.urandom(4 * PAGE))
    assert q.get_last_mapped_file_or_create(0) is nxt
    allocate.shutdown()
    q.shutdown(0)


def test_warmer_never_races_segment_deletion(tmp_path, caplog):
    """Segments created, truncated and deleted under a busy warmer are all unmapped and gone."""
    size = 64 * PAGE
    allocate = AllocateMappedFileService()
    q = new_queue(tmp_path, size, allocate)
    warmer = WarmAheadService(q, allocate, max_window=96 * PAGE, interval_ms=1, min_window=96 * PAGE)
    warmer.start()
    seen: list[MappedFile] = []
    with caplog.at_level(logging.WARNING):
        for i in range(150):
            mf = q.get_last_mapped_file_or_create(0)
            seen.append(mf)
            mf.append(os.urandom(PAGE * (1 + i % 40)))
            if i % 3 == 0:
                q.truncate_dirty_files(0)  # recovery: drop everything
            elif i % 3 == 1:
                q.delete_last_mapped_file()
            else:
                mf.append(bytes(size - mf.wrote_position))  # fill it: the next loop rolls over
            if i % 10 == 0:
                time.sleep(0.002)
        wait_until(lambda: warmer.passes > 0)
        warmer.shutdown()
        q.destroy()
        allocate.shutdown()
    for mf in seen:
        # destroy() may have been refused while the warmer held the file; it retries as retention does.
        mf.destroy(0)
        assert mf.is_cleanup_over() and mf.mm.closed
        assert not os.path.exists(mf.path)
    assert "exported buffers" not in caplog.text
    assert "pass failed" not in caplog.text


def test_shutdown_joins_the_thread(tmp_path):
    q = new_queue(tmp_path, 64 * PAGE)
    q.get_last_mapped_file_or_create(0)
    warmer = WarmAheadService(q, None, max_window=16 * PAGE, interval_ms=1)
    warmer.start()
    thread = warmer._thread
    assert thread is not None and thread.is_alive()
    wait_until(lambda: warmer.passes > 0)
    warmer.shutdown()
    assert not thread.is_alive() and warmer._thread is None
    warmer.shutdown()  # idempotent
    q.shutdown(0)


def test_warmer_runs_with_the_async_flush_service(tmp_path):
    async def run(flush: str, enable: bool) -> None:
        cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / f"{flush}-{enable}"), flush_disk_type=flush,
                                 mapped_file_size_commit_log=64 * PAGE, message_index_enable=False,
                                 warm_commit_log_ahead_enable=enable)
        store = MessageStore(cfg)
        await store.start()
        warmer = getattr(store._flush_service, "warm_service", None)
        if enable and flush == ASYNC_FLUSH:
            thread = warmer._thread
            assert thread.is_alive()
            wait_until(lambda: warmer.passes > 0)
        else:
            assert warmer is None
        await store.shutdown()
        if warmer is not None:
            assert not thread.is_alive()

    asyncio.run(run(ASYNC_FLUSH, True))
    asyncio.run(run(ASYNC_FLUSH, False))
    asyncio.run(run(SYNC_FLUSH, True))


def test_config_keys():
    cfg = MessageStoreConfig.from_mapping({
        "warmCommitLogAheadEnable": "false", "warmCommitLogAheadMaxSize": "1048576",
        "warmCommitLogAheadInterval": "20", "flushLeastPagesWhenWarmMapedFile": "256",
    })
    assert cfg.warm_commit_log_ahead_enable is False
    assert cfg.warm_commit_log_ahead_max_size == 1 << 20
    assert cfg.warm_commit_log_ahead_interval == 20
    assert cfg.flush_least_pages_when_warm_maped_file == 256
    assert MessageStoreConfig().warm_commit_log_ahead_enable is True


def test_warm_segment_is_zeros_synced_in_steps(tmp_path, monkeypatch):
    syncs: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(mapped_file_mod.os, "fdatasync", lambda fd: (syncs.append(fd), real(fd))[1])
    size = 4 << 20
    mf = MappedFile(str(tmp_path / offset_to_file_name(0)), size, warm=True, warm_flush_least_pages=256)
    try:
        assert len(syncs) >= 4  # every 1 MiB, plus the final one
        assert os.path.getsize(mf.path) == size
        assert mf.mm[:] == bytes(size)
        assert mf.mm.size() == size and isinstance(mf.mm, mmap.mmap)
    finally:
        mf.destroy(0)
