"""effective_settings keeps its merge until the client's Settings or its group's config object change."""

from __future__ import annotations

import asyncio

from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.client_manager import ClientManager, GrpcClient
from orbitmq.proxy.config import ProxyConfig


class _Cluster:
    def __init__(self) -> None:
        self.groups: dict[str, SubscriptionGroupConfig | None] = {}

    async def group_config(self, group: str) -> SubscriptionGroupConfig | None:
        return self.groups.get(group)


def _consumer_settings(group: str = "G") -> pb.Settings:
    settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER)
    settings.subscription.group.name = group
    settings.request_timeout.seconds = 3
    return settings


def test_cached_merge_equals_fresh_merge_and_follows_changes() -> None:
    async def run() -> None:
        cluster = _Cluster()
        clients = ClientManager(ProxyConfig(), cluster)  # type: ignore[arg-type]
        client = GrpcClient("c1", "PYTHON", "5.0.0", settings=_consumer_settings())
        clients.clients["c1"] = client
        first = await clients.effective_settings("c1")
        assert first == await clients.merge_settings(client.settings)
        assert await clients.effective_settings("c1") is first  # same inputs: the merge is reused

        group = SubscriptionGroupConfig("G")
        group.retry_max_times = 3
        group.consume_message_orderly = True
        cluster.groups["G"] = group  # the group's config object is replaced: merged again
        second = await clients.effective_settings("c1")
        assert second is not first
        assert second == await clients.merge_settings(client.settings)
        assert second.backoff_policy.max_attempts == 4 and second.subscription.fifo
        assert await clients.consumer_policy("c1", "G") == (True, 4)
        assert await clients.consumer_policy_of(second, "G") == (True, 4)

        client.settings = _consumer_settings()  # new Settings from the client: merged again
        third = await clients.effective_settings("c1")
        assert third is not second and third == second

        producer = pb.Settings(client_type=pb.ClientType.PRODUCER)
        producer.publishing.topics.add(name="T")
        client.settings = producer
        merged = await clients.effective_settings("c1")
        assert merged == await clients.merge_settings(producer)
        assert merged.publishing.max_body_size == ProxyConfig().max_message_size
        assert await clients.effective_settings("nobody") is None

    asyncio.run(run())


def test_consumer_settings_carry_the_lite_quota_and_topic_size() -> None:
    """GrpcClientSettingsManager#mergeSubscriptionData (5.5.0): the group's lite.sub.client.quota
    (2000 unless set) and the proxy's maxLiteTopicSize."""
    async def run() -> None:
        cluster = _Cluster()
        clients = ClientManager(ProxyConfig(max_lite_topic_size=32), cluster)  # type: ignore[arg-type]
        merged = await clients.merge_settings(_consumer_settings())
        assert (merged.subscription.lite_subscription_quota, merged.subscription.max_lite_topic_size) == (2000, 32)
        cluster.groups["G"] = SubscriptionGroupConfig("G", attributes={"lite.sub.client.quota": "7"})
        assert (await clients.merge_settings(_consumer_settings())).subscription.lite_subscription_quota == 7
        cluster.groups["G"] = SubscriptionGroupConfig("G", attributes={"lite.sub.client.quota": "many"})
        assert (await clients.merge_settings(_consumer_settings())).subscription.lite_subscription_quota == 2000

    asyncio.run(run())
