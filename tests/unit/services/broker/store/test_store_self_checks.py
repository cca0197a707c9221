"""The store's self-checks: DefaultMessageStore#checkSelf over the CommitLog's and the
ConsumeQueues' segments, and CommitLog's warning for an append that held the put lock > 500 ms."""

from __future__ import annotations

import logging
import time

import pytest

import orbitmq.broker.store.commit_log as cl_mod
from orbitmq.broker.store.message_store import CHECK_SELF_INITIAL_DELAY_S, CHECK_SELF_INTERVAL_S, MessageStore
from tests.unit.services.broker.store.test_store_engine import make_config, msg, settle


@pytest.fixture
async def store(tmp_path):
    s = MessageStore(make_config(tmp_path))
    await s.start()
    yield s
    await s.shutdown()


async def test_check_self_passes_on_a_whole_store_and_names_a_gap(store, caplog: pytest.LogCaptureFixture) -> None:
    assert (CHECK_SELF_INITIAL_DELAY_S, CHECK_SELF_INTERVAL_S) == (60.0, 600.0)  # upstream's 1 and 10 minutes
    for _ in range(300):  # several 8 KiB CommitLog segments, and ConsumeQueue segments of 50 entries
        await store.put_message(msg(body=b"x" * 200))
    await settle(store)
    files = store.commit_log.mapped_file_queue.mapped_files
    assert len(files) >= 3
    assert store.check_self()
    with caplog.at_level(logging.ERROR):
        missing = files.pop(1)  # a segment gone from the middle (lost, or deleted by hand)
        before, after = files[0].path, files[1].path
        try:
            assert not store.check_self()
        finally:
            files.insert(1, missing)
    assert any("[BUG]The mappedFile queue's data is damaged" in r.getMessage()
               and f"pre file {before}, cur file {after}" in r.getMessage() for r in caplog.records)
    cq = next(iter(store.consume_queues()))
    cq_files = cq.mapped_file_queue.mapped_files
    assert len(cq_files) >= 2
    last = cq_files.pop()
    cq_files.insert(0, last)  # out of order
    try:
        assert not store.check_self()
    finally:
        cq_files.remove(last)
        cq_files.append(last)
    assert store.check_self()


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
async def test_a_slow_append_is_warned_about(store, monkeypatch, caplog: pytest.LogCaptureFixture, batch: bool) -> None:
    real = time.time_ns
    calls = {"n": 0}

    def slow_clock() -> int:  # every later reading of the clock is 600 ms on
        calls["n"] += 1
        return real() + (0 if calls["n"] == 1 else 600_000_000)

    # The locked paths: a batch, and one message the general path appends (the lock-free path for
    # single puts is not timed: commit_log.py says why).
    await store.put_message(msg())
    monkeypatch.setattr(cl_mod.time, "time_ns", slow_clock)
    with caplog.at_level(logging.WARNING, logger=cl_mod.log.name):
        if batch:
            await store.put_messages([msg(body=b"a" * 10), msg(body=b"b" * 30, tags="B")])
        else:
            await store.put_messages([msg(body=b"y" * 123)])
    warned = [r.getMessage() for r in caplog.records if "putMessage in lock cost time" in r.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("[NOTIFYME]putMessage in lock cost time(ms)=6")
    assert f"bodyLength={40 if batch else 123}" in warned[0]


async def test_the_lock_free_path_is_not_timed(store, monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    await store.put_message(msg())
    real = time.time_ns
    monkeypatch.setattr(cl_mod.time, "time_ns", lambda: real() + 600_000_000)
    with caplog.at_level(logging.WARNING, logger=cl_mod.log.name):
        await store.put_message(msg())
    assert not [r for r in caplog.records if "putMessage in lock" in r.getMessage()]


async def test_a_quick_append_is_not_warned_about(store, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=cl_mod.log.name):
        for _ in range(20):
            await store.put_message(msg())
    assert not [r for r in caplog.records if "putMessage in lock" in r.getMessage()]
