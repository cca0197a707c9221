"""An in-process BrokerController on a loopback port, for tests that drive its processors directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.controller import BrokerController
from orbitmq.broker.store.config import MessageStoreConfig

from .services import broker_conf


@asynccontextmanager
async def in_process_broker(store_root: Path, cluster: str, name: str,
                            **keys: object) -> AsyncIterator[BrokerController]:
    """Started with no NameServer and 4 MiB CommitLog segments (``broker_conf``, ``keys`` on top) on
    a port the kernel picks; shut down (store flushed) on exit."""
    values = broker_conf(0, store_root, brokerClusterName=cluster, brokerName=name, **keys)
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
