"""A RocketMQ Remoting client: producers and consumers that talk to NameServers and brokers
directly (no proxy), with upstream's names (DefaultMQProducer, TransactionMQProducer, ...).

``Async*`` classes are asyncio; the others wrap them for threads. See docs/remoting-client.md.
"""

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.request_reply import RequestTimeoutError
from orbitmq.client.results import SendResult, SendStatus
from orbitmq.common.message import Message, MessageExt
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import (
    AsyncDefaultLitePullConsumer,
    AsyncDefaultMQPushConsumer,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    DefaultLitePullConsumer,
    DefaultMQPushConsumer,
)
from orbitmq.remoting_client.instance import MQClientInstance, get_or_create_instance
from orbitmq.remoting_client.producer import (
    AsyncDefaultMQProducer,
    AsyncTransactionMQProducer,
    DefaultMQProducer,
    LocalTransactionState,
    TransactionMQProducer,
    TransactionSendResult,
    select_message_queue_by_hash,
    select_message_queue_by_random,
)
from orbitmq.remoting_client.request_reply import create_reply_message

__all__ = [
    "AsyncDefaultLitePullConsumer", "AsyncDefaultMQPushConsumer", "ConsumeConcurrentlyStatus", "ConsumeOrderlyStatus",
    "DefaultLitePullConsumer", "DefaultMQPushConsumer",
    "AsyncDefaultMQProducer", "AsyncTransactionMQProducer", "DefaultMQProducer", "LocalTransactionState",
    "MQBrokerError", "MQClientError", "MQClientInstance", "Message", "MessageExt", "MessageQueueRef",
    "RemotingClientConfig", "RequestTimeoutError", "SendResult", "SendStatus", "TransactionMQProducer",
    "TransactionSendResult", "create_reply_message", "get_or_create_instance", "select_message_queue_by_hash",
    "select_message_queue_by_random",
]
