"""TopicPublishInfo and the route -> queue conversions of MQClientInstance.

topicRouteData2TopicPublishInfo: writable queues of broker groups that have a master, sorted by
broker name (or orderTopicConf's "brokerName:count;..." for an ordered topic);
topicRouteData2TopicSubscribeInfo: readable queues of every broker group.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.constants import is_readable, is_writeable
from orbitmq.common.route import TopicRouteData

MASTER_ID = 0  # MixAll.MASTER_ID

QueueFilter = Callable[[MessageQueueRef], bool]


class SendWhichQueue:
    """ThreadLocalIndex: a counter starting at a random value (one per TopicPublishInfo here: the
    asyncio client has one thread)."""

    def __init__(self) -> None:
        self.value = random.randrange(1 << 31)

    def increment_and_get(self) -> int:
        self.value = (self.value + 1) & 0x7FFFFFFF
        return self.value

    def reset(self) -> None:
        self.value = random.randrange(1 << 31)


@dataclass
class TopicPublishInfo:
    order_topic: bool = False
    have_topic_router_info: bool = False
    message_queue_list: list[MessageQueueRef] = field(default_factory=list)
    send_which_queue: SendWhichQueue = field(default_factory=SendWhichQueue)
    route: TopicRouteData | None = None

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def reset_index(self) -> None:
        self.send_which_queue.reset()

    def select_one_message_queue(self, *filters: QueueFilter) -> MessageQueueRef | None:
        """TopicPublishInfo#selectOneMessageQueue(QueueFilter...): round robin from the counter; with
        filters, the first queue (of one lap) all of them accept, else None."""
        queues = self.message_queue_list
        if not queues:
            return None
        if filters:
            for _ in range(len(queues)):
                mq = queues[self.send_which_queue.increment_and_get() % len(queues)]
                if all(f(mq) for f in filters):
                    return mq
            return None
        return queues[self.send_which_queue.increment_and_get() % len(queues)]


def route_to_publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """MQClientInstance#topicRouteData2TopicPublishInfo."""
    info = TopicPublishInfo(route=route)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            name, _, count = item.partition(":")
            if name and count.strip().isdigit():
                info.message_queue_list += [MessageQueueRef(topic, name, i) for i in range(int(count))]
        info.order_topic = True
    else:
        brokers = {bd.broker_name: bd for bd in route.broker_datas}
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not is_writeable(qd.perm):
                continue
            bd = brokers.get(qd.broker_name)
            if bd is None or MASTER_ID not in bd.broker_addrs:
                continue
            info.message_queue_list += [MessageQueueRef(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
    info.have_topic_router_info = True
    return info


def route_to_subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueueRef]:
    """MQClientInstance#topicRouteData2TopicSubscribeInfo: the readable queues."""
    queues: list[MessageQueueRef] = []
    for qd in route.queue_datas:
        if is_readable(qd.perm):
            queues += [MessageQueueRef(topic, qd.broker_name, i) for i in range(qd.read_queue_nums)]
    return queues
