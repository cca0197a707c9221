"""The OrbitMQ producer: automatic batching, FIFO, delay and transactional messages."""

from orbitmq.producer.producer import (
    AsyncProducer,
    AsyncTransaction,
    Producer,
    Transaction,
    TransactionChecker,
    TransactionResolution,
)

__all__ = ["AsyncProducer", "AsyncTransaction", "Producer", "Transaction", "TransactionChecker",
           "TransactionResolution"]
