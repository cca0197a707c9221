"""Remoting clients wrap names themselves (ClientConfig.withNamespace): a broker takes topics and
groups named ``{namespace}%{name}`` like any other, for topic creation, send, pull, offsets,
heartbeats and the group's retry topic (``%RETRY%{namespace}%{group}``)."""

from __future__ import annotations

import asyncio
import time

from orbitmq.client import ConsumerData, MQClientAPI, ProducerData
from orbitmq.common.filter import SubscriptionData
from orbitmq.common.message import Message
from orbitmq.common.namespace import wrap_namespace, wrap_namespace_and_retry
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h

BROKER_NAME = "broker-ns"


async def _pull(api: MQClientAPI, addr: str, group: str, topic: str) -> list[bytes]:
    header = h.PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=0, queue_offset=0,
                                        max_msg_nums=32, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                                        subscription="*", sub_version=0)
    return [m.body for m in (await api.pull_message(addr, header)).messages]


async def test_broker_takes_wrapped_names(broker_cluster, mq_api: MQClientAPI) -> None:
    cluster = await broker_cluster(brokerClusterName="NsCluster", brokerName=BROKER_NAME,
                                   autoCreateSubscriptionGroup="false", messageDelayLevel=" ".join(["1s"] * 8))
    addr = cluster.addr
    topics = {ns: wrap_namespace(ns, "Orders") for ns in ("tenant-a", "tenant_b")}
    groups = {ns: wrap_namespace(ns, "Billing") for ns in topics}
    for ns, topic in topics.items():
        await mq_api.create_topic(addr, TopicConfig(topic, 1, 1))
        await mq_api.create_subscription_group(addr, SubscriptionGroupConfig(groups[ns], retry_max_times=3))
        await mq_api.send_message(addr, BROKER_NAME, Message(topic, ns.encode()), wrap_namespace(ns, "PG"), 0)
    deadline = time.monotonic() + 10
    while True:  # registered with the NameServer under the wrapped names
        try:
            routes = [await mq_api.get_topic_route(cluster.namesrv, topic) for topic in topics.values()]
            break
        except Exception:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
    assert all(r.queue_datas[0].broker_name == BROKER_NAME for r in routes)

    for ns, topic in topics.items():
        assert await _pull(mq_api, addr, groups[ns], topic) == [ns.encode()]
        await mq_api.update_consumer_offset(addr, groups[ns], topic, 0, 1)
        assert await mq_api.query_consumer_offset(addr, groups[ns], topic, 0) == 1
        await mq_api.heartbeat(addr, f"client-{ns}", [ProducerData(wrap_namespace(ns, "PG"))], [
            ConsumerData(groups[ns], [SubscriptionData(topic=topic)])])
        assert await mq_api.get_consumer_list(addr, groups[ns]) == [f"client-{ns}"]

    # a message sent back lands in the group's own retry topic, as the 4.x client names it
    ns = "tenant-a"
    header = h.PullMessageRequestHeader(consumer_group=groups[ns], topic=topics[ns], queue_id=0, queue_offset=0,
                                        max_msg_nums=1, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                                        subscription="*", sub_version=0)
    (msg,) = (await mq_api.pull_message(addr, header)).messages
    await mq_api.consumer_send_msg_back(addr, groups[ns], msg.commit_log_offset, 0, msg.msg_id, topics[ns])
    retry = wrap_namespace_and_retry(ns, "Billing")
    assert retry == "%RETRY%tenant-a%Billing"
    deadline = time.monotonic() + 15
    while not await _pull(mq_api, addr, groups[ns], retry):
        assert time.monotonic() < deadline, f"nothing in {retry}"
        await asyncio.sleep(0.2)
    assert await _pull(mq_api, addr, groups["tenant_b"], wrap_namespace_and_retry("tenant_b", "Billing")) == []
