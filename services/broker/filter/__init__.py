"""SQL92 consumer filters on the broker (RocketMQ's broker filter package).

ConsumerFilterManager keeps the SQL92 subscriptions consumers register in heartbeats, each with
its bloom filter positions (persisted as config/consumerFilter.json); CommitLogDispatcherCalcBitMap
computes each message's filter bit map at dispatch (enableCalcFilterBitMap), stored in the
ConsumeQueue extension (enableConsumeQueueExt); ExpressionMessageFilter skips the entries whose
bit map says the consumer's expression did not match, before the CommitLog is read, and
ExpressionForRetryMessageFilter (filterSupportRetry) applies a group's expression of the real
topic to its retry topic's messages.
"""

from orbitmq.broker.filter.consumer_filter_manager import ConsumerFilterData, ConsumerFilterManager
from orbitmq.broker.filter.expression_filter import (
    CommitLogDispatcherCalcBitMap,
    ExpressionForRetryMessageFilter,
    ExpressionMessageFilter,
)

__all__ = [
    "CommitLogDispatcherCalcBitMap",
    "ConsumerFilterData",
    "ConsumerFilterManager",
    "ExpressionForRetryMessageFilter",
    "ExpressionMessageFilter",
]
