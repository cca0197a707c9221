"""Fixtures of the integration tests (on top of tests/conftest.py's ``procs`` and ``namesrv``).

``broker_cluster`` starts a NameServer and one broker process with the test's own broker.conf
keys (``await broker_cluster(brokerName=..., messageDelayLevel=...)``, see
tests/support/services.py's ``broker_conf``); ``mq_api`` is an ``MQClientAPI`` closed after
the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from orbitmq.client import MQClientAPI
from tests.support import BrokerCluster, ProcessRunner, astart_namesrv


@pytest.fixture
def broker_cluster(procs: ProcessRunner, tmp_path: Path) -> Callable[..., Awaitable[BrokerCluster]]:
    """``await broker_cluster(**keys)``: a NameServer, then a broker registered with it whose
    conf and store are in the test's tmp_path; ``procs`` stops both."""
    async def start(**keys: object) -> BrokerCluster:
        _proc, namesrv = await astart_namesrv(procs)
        cluster = BrokerCluster(procs, tmp_path, namesrv, **keys)
        await cluster.start_broker()
        return cluster
    return start


@pytest.fixture
async def mq_api() -> AsyncIterator[MQClientAPI]:
    api = MQClientAPI(timeout=5.0)
    try:
        yield api
    finally:
        await api.close()
