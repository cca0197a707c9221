"""OrbitMQ consumers: SimpleConsumer (receive/ack), PushConsumer (listener), PullConsumer (offsets)."""

from orbitmq.consumer.common import ConsumeResult, FilterExpression
from orbitmq.consumer.pull import AsyncPullConsumer, OffsetOutOfRangeError, PullConsumer
from orbitmq.consumer.push import AsyncPushConsumer, PushConsumer
from orbitmq.consumer.simple import AsyncSimpleConsumer, SimpleConsumer

__all__ = ["AsyncPullConsumer", "AsyncPushConsumer", "AsyncSimpleConsumer", "ConsumeResult", "FilterExpression",
           "OffsetOutOfRangeError", "PullConsumer", "PushConsumer", "SimpleConsumer"]
