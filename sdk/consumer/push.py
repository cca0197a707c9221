"""PushConsumer: the client receives and calls a listener; acks, retries and dead-letters by the
server's policy.

A listener returns ConsumeResult.SUCCESS (or True/None) to ack, FAILURE (False or an exception)
to retry: the message becomes visible again after the server's backoff delay for its delivery
attempt, and goes to the dead-letter queue once the group's max attempts are used. For a FIFO
group (the server's Settings say so) messages of one message group are handed to the listener
one at a time in order, and a failure is retried in place (with the backoff) before the next.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Awaitable, Callable

from orbitmq.clientcore import loop as bg
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.errors import ClientError, Code
from orbitmq.clientcore.message import ReceivedMessage
from orbitmq.clientcore.session import RetryPolicy
from orbitmq.consumer.common import ConsumeResult, SubscriptionsArg
from orbitmq.consumer.simple import ReceivingConsumer
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb

log = logging.getLogger("orbitmq.consumer.push")

MessageListener = Callable[[ReceivedMessage], "ConsumeResult | bool | None | Awaitable[ConsumeResult | bool | None]"]
DEFAULT_RETRY = RetryPolicy(max_attempts=17, initial=1.0, maximum=60.0, multiplier=2.0)
_ERROR_PAUSE_S = 1.0


def _succeeded(result: object) -> bool:
    if result is None or result is True or result == ConsumeResult.SUCCESS:
        return True
    if result is False or result == ConsumeResult.FAILURE:
        return False
    raise TypeError(f"listener returned {result!r}: expected ConsumeResult, bool or None")


class AsyncPushConsumer(ReceivingConsumer):
    """asyncio PushConsumer. ``concurrency``: listener calls at once (sync listeners run in a thread
    pool of that size). ``max_cached_messages``: received but not yet consumed messages.

    ``invisible_duration``: None (the default) receives with ``auto_renew``, as RocketMQ's own push
    consumers do: the proxy keeps a message invisible while the client holds it (its
    defaultInvisibleTimeMills, renewed ahead of expiry up to renewMaxTimeMillis) and makes it
    visible again soon after the client goes away, so a slow listener, a FIFO retry's backoff or a
    full cache never lets it be delivered twice. Seconds: a fixed invisible time, not renewed (a
    listener that takes longer sees the message delivered again).
    """

    client_type = pb.ClientType.PUSH_CONSUMER

    def __init__(self, config: ClientConfig, group: str, subscriptions: SubscriptionsArg,
                 listener: MessageListener, *, concurrency: int = 16, max_cached_messages: int = 1024,
                 invisible_duration: float | None = None, long_polling_timeout: float | None = None) -> None:
        super().__init__(config, group, subscriptions, long_polling_timeout)
        if not callable(listener):
            raise TypeError("listener must be callable")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1, not {concurrency!r}")
        if not isinstance(max_cached_messages, int) or max_cached_messages < 1:
            raise ValueError(f"max_cached_messages must be an int >= 1, not {max_cached_messages!r}")
        if invisible_duration is not None and (isinstance(invisible_duration, bool)
                                               or not isinstance(invisible_duration, (int, float))
                                               or invisible_duration <= 0):
            raise ValueError(f"invisible_duration must be None (auto-renew) or positive seconds, "
                             f"not {invisible_duration!r}")
        self.listener = listener
        self.concurrency = concurrency
        self.max_cached_messages = max_cached_messages
        self.invisible_duration = invisible_duration
        self.retry_policy = DEFAULT_RETRY
        self._slots: asyncio.Semaphore | None = None
        self._cached: asyncio.Semaphore | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            type(listener).__call__)
        self._receivers: list[asyncio.Task] = []

    def apply_settings(self, settings: pb.Settings) -> None:
        super().apply_settings(settings)
        self.retry_policy = RetryPolicy.of(settings.backoff_policy, DEFAULT_RETRY)

    async def start(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)
        self._cached = asyncio.Semaphore(self.max_cached_messages)
        if not self._is_async:
            self._executor = concurrent.futures.ThreadPoolExecutor(self.concurrency,
                                                                   thread_name_prefix="orbitmq-consume")
        await super().start()
        for topic in list(self.subscriptions):
            self._receivers.append(self.spawn(self._receive_loop(topic)))

    async def subscribe(self, topic: str, expression: str = "*") -> None:
        new = topic not in self.subscriptions
        await super().subscribe(topic, expression)
        if new and self.running:
            self._receivers.append(self.spawn(self._receive_loop(topic)))

    async def shutdown(self) -> None:
        for t in self._receivers:
            t.cancel()
        await super().shutdown()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def on_verify_message(self, message: pb.Message) -> pb.Status:
        """``queryMsgById -g -d``: the listener consumes the message once more, outside the
        receive flow (nothing is acked or retried); FIFO groups refuse, as a message consumed out
        of its group's order would break the order the listener relies on."""
        if self.fifo:
            return pb.Status(code=Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED,
                             message="a FIFO consumer does not consume messages out of order")
        ok = await self._call_listener(ReceivedMessage.of(message))
        return pb.Status(code=Code.OK if ok else Code.FAILED_TO_CONSUME_MESSAGE)

    # ---- receive and dispatch ----------------------------------------------------------------

    async def _receive_loop(self, topic: str) -> None:
        assert self._cached is not None
        while self.running and topic in self.subscriptions:
            # Wait for room for a whole batch (at least one message) before asking for more.
            await self._cached.acquire()
            try:
                batch = await self.receive_from(topic, self.receive_batch_size, self.invisible_duration,
                                                auto_renew=self.invisible_duration is None)
            except asyncio.CancelledError:
                self._cached.release()
                raise
            except ClientError as exc:
                self._cached.release()
                log.warning("%s: receive from %s failed: %s", self.consumer_group, topic, exc)
                await asyncio.sleep(_ERROR_PAUSE_S)
                continue
            self._cached.release()
            if not batch:
                continue
            for _ in batch:
                await self._cached.acquire()
            if self.fifo:
                # In order per message group; the next batch waits for this one (the server hands a
                # FIFO queue's next messages only after these are acked).
                groups: dict[str | None, list[ReceivedMessage]] = {}
                for m in batch:
                    groups.setdefault(m.message_group, []).append(m)
                await asyncio.gather(*(self._consume_in_order(msgs) for msgs in groups.values()))
            else:
                for m in batch:
                    self.spawn(self._consume_one(m))

    async def _call_listener(self, message: ReceivedMessage) -> bool:
        assert self._slots is not None
        async with self._slots:
            try:
                if self._is_async:
                    result = await self.listener(message)  # type: ignore[misc]
                else:
                    result = await asyncio.get_running_loop().run_in_executor(self._executor, self.listener, message)
                    if inspect.isawaitable(result):
                        result = await result
                return _succeeded(result)
            except Exception:
                log.exception("listener failed on message %s", message.message_id)
                return False

    async def _consume_one(self, message: ReceivedMessage) -> None:
        assert self._cached is not None
        try:
            ok = await self._call_listener(message)
            try:
                if ok:
                    await self.ack(message)
                elif message.delivery_attempt >= self.max_delivery_attempts:
                    await self.forward_to_dead_letter_queue(message)
                else:
                    # Visible again after the policy's delay for this attempt: the server redelivers.
                    await self.change_invisible_duration(message, self.retry_policy.delay(max(message.delivery_attempt,
                                                                                              1)))
            except ClientError as exc:
                log.warning("settling message %s failed: %s", message.message_id, exc)
        finally:
            self._cached.release()

    async def _consume_in_order(self, messages: list[ReceivedMessage]) -> None:
        assert self._cached is not None
        for message in messages:
            try:
                attempt = max(message.delivery_attempt, 1)
                while True:
                    ok = await self._call_listener(message)
                    if ok or attempt >= self.max_delivery_attempts or not self.running:
                        break
                    await asyncio.sleep(self.retry_policy.delay(attempt))
                    attempt += 1
                    message.delivery_attempt = attempt
                try:
                    if ok:
                        await self.ack(message)
                    else:
                        await self.forward_to_dead_letter_queue(message)
                except ClientError as exc:
                    log.warning("settling message %s failed: %s", message.message_id, exc)
            finally:
                self._cached.release()


class PushConsumer:
    """Synchronous PushConsumer: start() returns at once; the listener runs in worker threads."""

    def __init__(self, config: ClientConfig, group: str, subscriptions: SubscriptionsArg,
                 listener: MessageListener, **options: object) -> None:
        async def make() -> AsyncPushConsumer:
            return AsyncPushConsumer(config, group, subscriptions, listener, **options)  # type: ignore[arg-type]

        self._c = bg.run(make())

    @property
    def client_id(self) -> str:
        return self._c.client_id

    def start(self) -> PushConsumer:
        bg.run(self._c.start())
        return self

    def subscribe(self, topic: str, expression: str = "*") -> None:
        bg.run(self._c.subscribe(topic, expression))

    def shutdown(self) -> None:
        bg.run(self._c.shutdown())

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["AsyncPushConsumer", "ConsumeResult", "MessageListener", "PushConsumer"]
