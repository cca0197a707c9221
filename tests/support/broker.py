"""An in-process BrokerController on a loopback port, for tests that drive its processors directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.controller import BrokerController
from orbitmq.broker.store.config import MessageStoreConfig


@asynccontextmanager
async def in_process_broker(store_root: Path, cluster: str, name: str) -> AsyncIterator[BrokerController]:
    """Started with no NameServer and 4 MiB CommitLog segments; shut down (store flushed) on exit."""
    values = {"brokerClusterName": cluster, "brokerName": name, "brokerIP1": "127.0.0.1", "listenPort": "0",
              "storePathRootDir": str(store_root), "namesrvAddr": "", "mappedFileSizeCommitLog": str(4 * 1024 * 1024)}
    controller = BrokerController(BrokerConfig.from_mapping(values), MessageStoreConfig.from_mapping(values),
                                  listen_host="127.0.0.1")
    try:
        await controller.start()
    except BaseException:
        await controller.abort_start()
        raise
    try:
        yield controller
    finally:
        await controller.shutdown()
