"""MQClientAPI (the SDK's high-level Remoting client) against the running NameServer and broker."""

from __future__ import annotations

import asyncio
import time

from orbitmq.client import MessageQueueRef, MQBrokerError, PullStatus, TopicRouteCache
from orbitmq.common.message import Message
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode
from tests.interop.harness import Cluster, unique


def test_client_api_calls(cluster: Cluster) -> None:
    topic, group = unique("ApiT"), unique("ApiG")
    broker = cluster.broker

    async def scenario(api) -> None:
        await api.create_topic(broker, TopicConfig(topic, 2, 2, attributes={"message.type": "NORMAL"}))
        await api.create_subscription_group(broker, SubscriptionGroupConfig(group, retry_max_times=5))
        assert (await api.get_topic_config(broker, topic)).read_queue_nums == 2
        assert (await api.get_subscription_group_config(broker, group)).retry_max_times == 5
        assert topic in await api.get_all_topic_config(broker)
        assert group in await api.get_all_subscription_group_config(broker)

        routes = TopicRouteCache(api, ["127.0.0.1:1", cluster.namesrv])  # a dead NameServer is skipped
        deadline = time.monotonic() + 5
        while True:
            try:
                route = await routes.get(topic)
                break
            except Exception:
                assert time.monotonic() < deadline
                await api.remoting.close_channel("127.0.0.1:1")
                routes.invalidate(topic)
        assert [q.broker_name for q in route.queue_datas] == ["broker-a"]
        info = await routes.cluster_info()
        assert info.broker_addr_table["broker-a"].master_addr == broker

        msgs = [Message(topic, f"b{i}".encode(), properties={"UNIQ_KEY": create_uniq_id(), "KEYS": f"key{i}"})
                for i in range(3)]
        single = await api.send_message(broker, "broker-a", msgs[0], "PG", 0)
        assert (single.queue_id, single.queue_offset, single.msg_id) == (0, 0, msgs[0].uniq_key)
        batch = await api.send_batch(broker, "broker-a", msgs[1:], "PG", 1)
        assert batch.queue_offset == 0 and batch.msg_id == ",".join(m.uniq_key for m in msgs[1:])

        assert await api.get_max_offset(broker, topic, 1) == 2
        assert await api.get_min_offset(broker, topic, 1) == 0
        assert await api.search_offset(broker, topic, 1, 0) == 0
        assert await api.get_earliest_msg_store_time(broker, topic, 1) > 0
        pulled = await api.pull_message(broker, h.PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=1, queue_offset=0, max_msg_nums=32,
            sys_flag=build_pull_sys_flag(False, False, True, False), commit_offset=0, suspend_timeout_millis=0,
            subscription="*", sub_version=0, expression_type="TAG"))
        assert pulled.status == PullStatus.FOUND
        assert [m.body for m in pulled.messages] == [b"b1", b"b2"]

        viewed = await api.view_message_by_id(single.offset_msg_id)
        assert viewed.body == b"b0"
        found = []
        for _ in range(30):
            found = await api.query_message(broker, topic, "key1", 10, 0, int(time.time() * 1000) + 1000)
            if found:
                break
            await asyncio.sleep(0.1)
        assert [m.body for m in found] == [b"b1"]

        await api.update_consumer_offset(broker, group, topic, 1, 2)
        assert await api.query_consumer_offset(broker, group, topic, 1) == 2
        stats = await api.get_topic_stats(broker, topic)
        assert len(stats["offsetTable"]) == 2
        consume = await api.get_consume_stats(broker, group, topic)
        assert "offsetTable" in consume
        assert (await api.get_broker_runtime_info(broker))

        mq = MessageQueueRef(topic, "broker-a", 0)
        assert await api.lock_batch_mq(broker, group, "client-1", [mq]) == {mq}
        assert await api.lock_batch_mq(broker, group, "client-2", [mq]) == set()
        await api.unlock_batch_mq(broker, group, "client-1", [mq])
        assert await api.lock_batch_mq(broker, group, "client-2", [mq]) == {mq}

        await api.delete_subscription_group(broker, group)
        assert await api.get_subscription_group_config(broker, group) is None
        await api.delete_topic_in_broker(broker, topic)
        try:
            await api.send_message(broker, "broker-a", msgs[0], "PG", 0)
            raise AssertionError("send to a deleted topic (auto-create off) must fail")
        except MQBrokerError as exc:
            assert exc.code == ResponseCode.TOPIC_NOT_EXIST

    cluster.api_call(scenario)
