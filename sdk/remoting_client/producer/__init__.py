"""Producers of the Remoting client: DefaultMQProducer, TransactionMQProducer, queue selectors."""

from orbitmq.remoting_client.producer.producer import (
    DEFAULT_PRODUCER_GROUP,
    RETRY_RESPONSE_CODES,
    AsyncDefaultMQProducer,
    DefaultMQProducer,
    SendCallback,
)
from orbitmq.remoting_client.producer.selector import (
    MessageQueueSelector,
    select_message_queue_by_hash,
    select_message_queue_by_random,
)
from orbitmq.remoting_client.producer.transaction import (
    AsyncTransactionMQProducer,
    LocalTransactionState,
    TransactionListener,
    TransactionMQProducer,
    TransactionSendResult,
)

__all__ = [
    "DEFAULT_PRODUCER_GROUP", "RETRY_RESPONSE_CODES", "AsyncDefaultMQProducer", "AsyncTransactionMQProducer",
    "DefaultMQProducer", "LocalTransactionState", "MessageQueueSelector", "SendCallback", "TransactionListener",
    "TransactionMQProducer", "TransactionSendResult", "select_message_queue_by_hash",
    "select_message_queue_by_random",
]
