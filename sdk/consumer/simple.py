"""SimpleConsumer: the application receives, acks and postpones messages itself (POP)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from orbitmq.clientcore import loop as bg
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.errors import BadRequestError, Code, check_status
from orbitmq.clientcore.message import ReceivedMessage
from orbitmq.clientcore.session import ClientSession, duration
from orbitmq.consumer.common import (
    FilterExpression,
    SubscriptionsArg,
    normalize_subscriptions,
    subscription_settings,
    validate_group,
)
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb


class ReceivingConsumer(ClientSession):
    """The POP side shared by Simple and Push consumers: receive, ack, change invisibility, DLQ."""

    def __init__(self, config: ClientConfig, group: str, subscriptions: SubscriptionsArg = None,
                 long_polling_timeout: float | None = None) -> None:
        super().__init__(config)
        self.consumer_group = validate_group(group)
        self.subscriptions = normalize_subscriptions(subscriptions)
        if long_polling_timeout is not None and (not isinstance(long_polling_timeout, (int, float))
                                                 or long_polling_timeout < 0):
            raise ValueError(f"long_polling_timeout must be >= 0 seconds, not {long_polling_timeout!r}")
        self.long_polling_timeout = long_polling_timeout
        self.receive_batch_size = 32
        self.fifo = False
        self.max_delivery_attempts = 17
        self._server_polling: float = 20.0
        self._topic_cycle = itertools.count()

    def group(self) -> str | None:
        return self.consumer_group

    def topics_to_check(self) -> list[str]:
        return list(self.subscriptions)

    def client_settings(self) -> pb.Settings:
        s = self._base_settings()
        subscription_settings(s, self.consumer_group, self.config.namespace, self.subscriptions)
        return s

    def apply_settings(self, settings: pb.Settings) -> None:
        sub = settings.subscription
        if sub.HasField("receive_batch_size") and sub.receive_batch_size > 0:
            self.receive_batch_size = sub.receive_batch_size
        if sub.HasField("long_polling_timeout"):
            self._server_polling = sub.long_polling_timeout.ToMilliseconds() / 1000
        self.fifo = sub.fifo
        if settings.backoff_policy.max_attempts > 0:
            self.max_delivery_attempts = settings.backoff_policy.max_attempts

    async def subscribe(self, topic: str, expression: str | FilterExpression = "*") -> None:
        """Add (or change) a subscription; the topic must exist."""
        expr = normalize_subscriptions({topic: expression})[topic]
        if self.running:
            await self.route(topic)
        self.subscriptions[topic] = expr
        if self.running:
            self.resend_settings()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self.running:
            self.resend_settings()

    @property
    def polling_timeout(self) -> float:
        return self._server_polling if self.long_polling_timeout is None else self.long_polling_timeout

    async def receive_from(self, topic: str, max_messages: int, invisible_duration: float | None,
                           auto_renew: bool = False) -> list[ReceivedMessage]:
        expr = self.subscriptions[topic]
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=self.consumer_group, resource_namespace=self.config.namespace),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=topic, resource_namespace=self.config.namespace),
                                          id=-1, broker=pb.Broker(name="")),
            filter_expression=expr.to_proto(), batch_size=max_messages, auto_renew=auto_renew,
            long_polling_timeout=duration(self.polling_timeout))
        if invisible_duration is not None:
            request.invisible_duration.CopyFrom(duration(invisible_duration))
        responses = await self.rpc.server_stream("ReceiveMessage", request,
                                                 self.polling_timeout + self.config.request_timeout)
        out: list[ReceivedMessage] = []
        for r in responses:
            which = r.WhichOneof("content")
            if which == "status":
                if r.status.code == Code.TOPIC_NOT_FOUND:
                    self.invalidate_route(topic)
                check_status(r.status, allowed=(Code.MESSAGE_NOT_FOUND,))
            elif which == "message":
                out.append(ReceivedMessage.of(r.message))
        return out

    def _next_topic(self) -> str:
        if not self.subscriptions:
            raise BadRequestError(Code.BAD_REQUEST, "no subscription: subscribe to a topic first")
        topics = list(self.subscriptions)
        return topics[next(self._topic_cycle) % len(topics)]

    async def ack(self, message: ReceivedMessage) -> None:
        """Acknowledge one received message (through any proxy)."""
        await self.ack_many([message])

    async def ack_many(self, messages: Iterable[ReceivedMessage]) -> None:
        """Acknowledge several messages; raises the first per-message failure."""
        by_topic: dict[str, list[ReceivedMessage]] = {}
        for m in messages:
            if not isinstance(m, ReceivedMessage) or not m.receipt_handle:
                raise TypeError("ack takes messages returned by receive (with a receipt handle)")
            by_topic.setdefault(m.topic, []).append(m)
        for topic, msgs in by_topic.items():
            request = spb.AckMessageRequest(
                group=pb.Resource(name=self.consumer_group, resource_namespace=self.config.namespace),
                topic=pb.Resource(name=topic, resource_namespace=self.config.namespace),
                entries=[spb.AckMessageEntry(message_id=m.message_id, receipt_handle=m.receipt_handle or "")
                         for m in msgs])
            response = await self.rpc.unary("AckMessage", request)
            for entry in response.entries:
                check_status(entry.status)
            check_status(response.status)

    async def change_invisible_duration(self, message: ReceivedMessage, invisible_duration: float) -> None:
        """Make the message visible again after ``invisible_duration`` seconds; its receipt handle is
        replaced by the new one the server returns (ack with the updated message)."""
        if not isinstance(message, ReceivedMessage) or not message.receipt_handle:
            raise TypeError("change_invisible_duration takes a message returned by receive")
        if not isinstance(invisible_duration, (int, float)) or invisible_duration < 0:
            raise ValueError(f"invisible_duration must be >= 0 seconds, not {invisible_duration!r}")
        request = spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=self.consumer_group, resource_namespace=self.config.namespace),
            topic=pb.Resource(name=message.topic, resource_namespace=self.config.namespace),
            receipt_handle=message.receipt_handle, invisible_duration=duration(invisible_duration),
            message_id=message.message_id)
        response = await self.rpc.unary("ChangeInvisibleDuration", request)
        check_status(response.status)
        message.receipt_handle = response.receipt_handle

    async def forward_to_dead_letter_queue(self, message: ReceivedMessage) -> None:
        request = spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=self.consumer_group, resource_namespace=self.config.namespace),
            topic=pb.Resource(name=message.topic, resource_namespace=self.config.namespace),
            receipt_handle=message.receipt_handle or "", message_id=message.message_id,
            delivery_attempt=message.delivery_attempt, max_delivery_attempts=self.max_delivery_attempts)
        response = await self.rpc.unary("ForwardMessageToDeadLetterQueue", request)
        check_status(response.status)


class AsyncSimpleConsumer(ReceivingConsumer):
    """asyncio SimpleConsumer: ``receive`` long-polls one subscribed topic (round robin)."""

    client_type = pb.ClientType.SIMPLE_CONSUMER

    async def receive(self, max_messages: int = 16, invisible_duration: float = 30.0) -> list[ReceivedMessage]:
        """Up to ``max_messages`` messages, invisible to others for ``invisible_duration`` seconds."""
        self.ensure_running()
        if not isinstance(max_messages, int) or isinstance(max_messages, bool) or max_messages < 1:
            raise ValueError(f"max_messages must be an int >= 1, not {max_messages!r}")
        if not isinstance(invisible_duration, (int, float)) or invisible_duration <= 0:
            raise ValueError(f"invisible_duration must be > 0 seconds, not {invisible_duration!r}")
        return await self.receive_from(self._next_topic(), max_messages, invisible_duration)

    async def __aenter__(self) -> AsyncSimpleConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()


class SimpleConsumer:
    """Synchronous SimpleConsumer (the asyncio one runs on a background loop)."""

    def __init__(self, config: ClientConfig, group: str, subscriptions: SubscriptionsArg = None,
                 long_polling_timeout: float | None = None) -> None:
        async def make() -> AsyncSimpleConsumer:
            return AsyncSimpleConsumer(config, group, subscriptions, long_polling_timeout)

        self._c = bg.run(make())

    @property
    def client_id(self) -> str:
        return self._c.client_id

    def start(self) -> SimpleConsumer:
        bg.run(self._c.start())
        return self

    def subscribe(self, topic: str, expression: str | FilterExpression = "*") -> None:
        bg.run(self._c.subscribe(topic, expression))

    def unsubscribe(self, topic: str) -> None:
        async def go() -> None:
            self._c.unsubscribe(topic)

        bg.run(go())

    def receive(self, max_messages: int = 16, invisible_duration: float = 30.0) -> list[ReceivedMessage]:
        return bg.run(self._c.receive(max_messages, invisible_duration))

    def ack(self, message: ReceivedMessage) -> None:
        bg.run(self._c.ack(message))

    def ack_many(self, messages: Iterable[ReceivedMessage]) -> None:
        bg.run(self._c.ack_many(list(messages)))

    def change_invisible_duration(self, message: ReceivedMessage, invisible_duration: float) -> None:
        bg.run(self._c.change_invisible_duration(message, invisible_duration))

    def shutdown(self) -> None:
        bg.run(self._c.shutdown())

    def __enter__(self) -> SimpleConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["AsyncSimpleConsumer", "ReceivingConsumer", "SimpleConsumer"]
