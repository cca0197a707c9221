"""Interop test harness: a NameServer, a broker and two proxies as real processes, plus helpers.

Starting the cluster costs seconds, so it is session-scoped; every test uses topic and group
names of its own. Topics and groups are created over Remoting (UPDATE_AND_CREATE_TOPIC,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP): the broker runs with auto-creation off so that
TOPIC_NOT_FOUND and CONSUMER_GROUP_NOT_FOUND can be observed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import time
from pathlib import Path

import grpc

from orbitmq.client import MQClientAPI
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.support import ProcessRunner, free_port, start_broker

# The cluster broker's keys on top of tests/support's broker_conf: topics and groups exist only
# once a test creates them, 64 MiB CommitLog segments, asynchronous flush.
CLUSTER_BROKER_KEYS = {"autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "false",
                       "mappedFileSizeCommitLog": 64 * 1024 * 1024, "flushDiskType": "ASYNC_FLUSH"}

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}_{int(time.time() * 1000) % 10_000_000}_{next(_names)}"


def _run(coro):
    """Run a coroutine to completion from sync or async test code alike (own loop, own thread)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class Cluster:
    def __init__(self, runner: ProcessRunner, namesrv: str, broker: str, proxies: list[str]) -> None:
        self.runner = runner
        self.namesrv = namesrv
        self.broker = broker
        self.proxies = proxies

    @property
    def proxy(self) -> str:
        return self.proxies[0]

    def create_topic(self, name: str, queues: int = 4, message_type: str | None = None, perm: int = 6) -> str:
        """Create a topic (``perm`` as PermName: 6 read and write, 4 read-only) and wait for its route."""
        attrs = {"message.type": message_type} if message_type else {}

        async def go() -> None:
            api = MQClientAPI(timeout=5)
            try:
                await api.create_topic(self.broker, TopicConfig(name, queues, queues, perm=perm, attributes=attrs))
                # The broker tells the NameServer at once; wait until the route shows it.
                deadline = time.monotonic() + 10
                while True:
                    try:
                        await api.get_topic_route(self.namesrv, name)
                        return
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.1)
            finally:
                await api.close()

        _run(go())
        return name

    def create_group(self, name: str, orderly: bool = False, retry_max_times: int = 16,
                     retry_next_ms: list[int] | None = None) -> str:
        """Create a consumer group; ``retry_next_ms`` sets a CUSTOMIZED groupRetryPolicy."""
        extra = {}
        if retry_next_ms:
            extra["groupRetryPolicy"] = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": retry_next_ms}}

        async def go() -> None:
            api = MQClientAPI(timeout=5)
            try:
                await api.create_subscription_group(self.broker, SubscriptionGroupConfig(
                    name, consume_message_orderly=orderly, retry_max_times=retry_max_times, extra=extra))
            finally:
                await api.close()

        _run(go())
        return name

    def api_call(self, fn):
        """Run ``fn(api)`` (a coroutine function) against the cluster and return its result."""
        async def go():
            api = MQClientAPI(timeout=10)
            try:
                return await fn(api)
            finally:
                await api.close()

        return _run(go())

    def stub(self, proxy: str | None = None) -> tuple[grpc.Channel, sgrpc.MessagingServiceStub]:
        channel = grpc.insecure_channel(proxy or self.proxy, options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024)])
        return channel, sgrpc.MessagingServiceStub(channel)


def start_cluster(workdir: Path, proxies: int = 2, broker_extra: dict[str, str] | None = None,
                  proxy_extra: dict[str, str] | None = None) -> Cluster:
    runner = ProcessRunner(workdir)
    ns_port = free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    runner.start("namesrv", [f"listenPort={ns_port}"], ready_port=ns_port, name="namesrv")
    keys = {**CLUSTER_BROKER_KEYS, "enablePropertyFilter": "true", **(broker_extra or {})}
    _broker, broker = start_broker(runner, workdir, namesrv, **keys)
    addrs = []
    for index in range(proxies):
        port = free_port()
        # Shorter floors than RocketMQ's defaults (5 s polling, 10 s invisibility) keep tests quick.
        runner.start("proxy", ["-n", namesrv, "--port", str(port), "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                               "grpcClientConsumerMaxLongPollingTimeoutMillis=3000",
                               "minInvisibleTimeMillsForRecv=1000", "defaultInvisibleTimeMills=3000",
                               "renewAheadTimeMillis=1500", "renewSchedulePeriodMillis=300",
                               *(f"{k}={v}" for k, v in (proxy_extra or {}).items())], ready_port=port, name=f"proxy-{index}")
        addrs.append(f"127.0.0.1:{port}")
    return Cluster(runner, namesrv, broker, addrs)


