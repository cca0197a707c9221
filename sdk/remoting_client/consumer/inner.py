"""MQConsumerInner: what MQClientInstance asks of every consumer it holds, for heartbeats, route
updates and the broker's offset queries. The push and lite pull consumers answer these alike
(DefaultMQPushConsumerImpl and DefaultLitePullConsumerImpl repeat each other here); the rest of
the interface (do_rebalance, persist_consumer_offset, running info, reset_offset) differs and
stays with each consumer.
"""

from __future__ import annotations

from typing import ClassVar

from orbitmq.client.api import ConsumerData, MessageQueueRef
from orbitmq.remoting_client.consumer.offset_store import OffsetStore
from orbitmq.remoting_client.consumer.rebalance import RebalanceImpl


class ConsumerInnerMixin:
    """The shared part of MQConsumerInner, over the consumer's rebalance and offset store."""

    CONSUME_TYPE: ClassVar[str]  # ConsumeType: CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)
    consumer_group: str
    message_model: str
    consume_from_where: str
    rebalance: RebalanceImpl
    offset_store: OffsetStore

    def consumer_data(self) -> ConsumerData:
        """The group's entry in a heartbeat (HeartbeatData#consumerDataSet)."""
        return ConsumerData(group_name=self.consumer_group,
                            subscriptions=list(self.rebalance.subscription_inner.values()),
                            consume_type=self.CONSUME_TYPE, message_model=self.message_model,
                            consume_from_where=self.consume_from_where)

    def update_topic_subscribe_info(self, topic: str, queues: set[MessageQueueRef]) -> None:
        if topic in self.rebalance.subscription_inner:
            self.rebalance.topic_subscribe_info_table[topic] = set(queues)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return topic in self.rebalance.subscription_inner and \
            topic not in self.rebalance.topic_subscribe_info_table

    def offset_table(self, topic: str) -> dict[MessageQueueRef, int]:
        return self.offset_store.clone_offset_table(topic)
