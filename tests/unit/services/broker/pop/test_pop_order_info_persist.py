"""consumerOrderInfo.json is written off the loop without ever going back in time."""

from __future__ import annotations

import asyncio
import json
import os

from orbitmq.broker.pop import order_info as order_info_module
from orbitmq.broker.pop.order_info import FILE_NAME, ConsumerOrderInfoManager
from tests.support.slow_write import SlowFirstCall


def _exists(tmp_path) -> bool:
    return os.path.exists(os.path.join(tmp_path, FILE_NAME))


def _on_disk(tmp_path) -> dict:
    with open(os.path.join(tmp_path, FILE_NAME), encoding="utf-8") as f:
        return json.load(f)["table"]


async def test_persist_async_writes_only_when_changed_or_forced(tmp_path) -> None:
    manager = ConsumerOrderInfoManager(str(tmp_path))
    await manager.persist_async()
    assert not _exists(tmp_path)  # nothing changed yet
    manager.update(None, "T", "G", 0, pop_time=1, invisible_time=10, offsets=[3])
    await manager.persist_async()
    assert list(_on_disk(tmp_path)) == ["T@G"]
    manager.clear_block("T", "G", 0)
    await manager.persist_async()
    assert _on_disk(tmp_path) == {"T@G": {}}
    await asyncio.to_thread(os.unlink, os.path.join(tmp_path, FILE_NAME))
    await manager.persist_async(force=True)
    assert _on_disk(tmp_path) == {"T@G": {}}


async def test_an_older_snapshot_finishing_late_never_overwrites_a_newer_one(tmp_path, monkeypatch) -> None:
    """A periodic write cancelled at shutdown keeps running on its thread; the final write wins."""
    manager = ConsumerOrderInfoManager(str(tmp_path))
    slow = SlowFirstCall(order_info_module.write_json_atomic)
    monkeypatch.setattr(order_info_module, "write_json_atomic", slow)
    manager.update(None, "OLD", "G", 0, pop_time=1, invisible_time=10, offsets=[1])
    old_write = asyncio.create_task(manager.persist_async())
    await asyncio.to_thread(slow.started.wait, 5)
    manager.update(None, "NEW", "G", 0, pop_time=2, invisible_time=10, offsets=[2])
    new_write = asyncio.create_task(manager.persist_async(force=True))
    await asyncio.sleep(0.05)  # the newer write is queued behind the older one's write lock
    slow.release.set()
    await asyncio.gather(old_write, new_write)
    assert set(_on_disk(tmp_path)) == {"OLD@G", "NEW@G"}

    # And the other order: the newer snapshot lands first, the older one is then dropped.
    manager.update(None, "NEWER", "G", 0, pop_time=3, invisible_time=10, offsets=[3])
    older = manager._snapshot(force=True)
    manager.update(None, "NEWEST", "G", 0, pop_time=4, invisible_time=10, offsets=[4])
    await manager.persist_async()
    assert older is not None
    await asyncio.to_thread(manager._write, *older)
    assert "NEWEST@G" in _on_disk(tmp_path)
