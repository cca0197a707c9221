"""Remoting consumers: the push consumer (DefaultMQPushConsumer) and the lite pull consumer
(DefaultLitePullConsumer), with their rebalance, ProcessQueue, offset stores and consume services."""

from orbitmq.remoting_client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from orbitmq.remoting_client.consumer.lite_pull_consumer import (
    AsyncDefaultLitePullConsumer,
    DefaultLitePullConsumer,
)
from orbitmq.remoting_client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from orbitmq.remoting_client.consumer.process_queue import ProcessQueue
from orbitmq.remoting_client.consumer.push_consumer import (
    BROADCASTING,
    CLUSTERING,
    AsyncDefaultMQPushConsumer,
    DefaultMQPushConsumer,
)

__all__ = [
    "BROADCASTING", "CLUSTERING", "AsyncDefaultLitePullConsumer", "AsyncDefaultMQPushConsumer", "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus", "ConsumeOrderlyContext", "ConsumeOrderlyStatus", "DefaultLitePullConsumer", "DefaultMQPushConsumer",
    "LocalFileOffsetStore", "OffsetStore", "ProcessQueue", "ReadOffsetType", "RemoteBrokerOffsetStore",
]
