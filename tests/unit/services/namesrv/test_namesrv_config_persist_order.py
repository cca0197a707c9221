"""UPDATE_NAMESRV_CONFIG writes on a worker thread, and the newest config always ends on disk."""

from __future__ import annotations

import asyncio

from orbitmq.common import atomic_file
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.controller import NamesrvController
from tests.support.slow_write import SlowFirstCall


async def test_a_slow_older_write_never_overwrites_a_newer_config(tmp_path, monkeypatch) -> None:
    path = tmp_path / "namesrv.properties"
    config = NamesrvConfig(kv_config_path=str(tmp_path / "kvConfig.json"), config_store_path=str(path))
    controller = NamesrvController(config)
    slow = SlowFirstCall(atomic_file.write_file_atomically)
    monkeypatch.setattr(atomic_file, "write_file_atomically", slow)
    config.scan_not_active_broker_interval = 1111
    older = asyncio.create_task(controller.persist_config())
    await asyncio.to_thread(slow.started.wait, 5)
    config.scan_not_active_broker_interval = 2222
    newer = asyncio.create_task(controller.persist_config())
    await asyncio.sleep(0.05)
    slow.release.set()
    await asyncio.gather(older, newer)
    assert "scanNotActiveBrokerInterval=2222" in path.read_text()


async def test_kv_config_write_of_a_cancelled_request_cannot_overwrite_a_newer_table(tmp_path, monkeypatch) -> None:
    """A closed connection cancels its PUT_KV_CONFIG handler while the write still runs on its thread."""
    from orbitmq.namesrv.kvconfig import KVConfigManager

    path = tmp_path / "kvConfig.json"
    manager = KVConfigManager(str(path))
    slow = SlowFirstCall(atomic_file.write_file_atomically)
    monkeypatch.setattr(atomic_file, "write_file_atomically", slow)
    manager.put_kv_config("NS", "k", "old")
    handler = asyncio.create_task(manager.persist())
    await asyncio.to_thread(slow.started.wait, 5)
    handler.cancel()  # the thread keeps writing the old table
    manager.put_kv_config("NS", "k", "new")
    newer = asyncio.create_task(manager.persist())
    await asyncio.sleep(0.05)
    slow.release.set()
    await newer
    await asyncio.sleep(0.05)  # let the old thread finish (or be dropped)
    reloaded = KVConfigManager(str(path))
    await asyncio.to_thread(reloaded.load)
    assert reloaded.get_kv_config("NS", "k") == "new"
