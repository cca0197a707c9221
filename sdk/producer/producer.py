"""Producer: sends with automatic batching, FIFO per message group, delay, transactions.

Batching works like Kafka's producer: messages of one topic, type and message group wait up to
``linger`` seconds (or until ``max_batch_messages`` / ``max_batch_bytes``) and then travel in one
SendMessage request; the response has one entry per message, so every caller still gets its own
receipt or error. A batch the server refuses for what one message contains (a reserved property
key, a bad tag...) is split and resent message by message, so only the bad message fails.
Batches of one message group go one at a time, in order, so FIFO order holds.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import enum
import functools
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from orbitmq.clientcore import loop as bg
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.errors import (
    BadRequestError,
    ClientError,
    Code,
    TooManyRequestsError,
    TransportError,
    check_status,
    error_of,
    is_retriable,
)
from orbitmq.clientcore.message import Message, ReceivedMessage, SendReceipt
from orbitmq.clientcore.session import ClientSession, RetryPolicy
from orbitmq.common.protowire import varint as _varint
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb

log = logging.getLogger("orbitmq.producer")

DEFAULT_RETRY = RetryPolicy(max_attempts=3, initial=0.01, maximum=1.0, multiplier=2.0)
# A refusal of one batch that may be due to a single message: resend one by one to find it.
_PER_MESSAGE_CODES = frozenset({
    Code.BAD_REQUEST, Code.ILLEGAL_MESSAGE_TAG, Code.ILLEGAL_MESSAGE_KEY, Code.ILLEGAL_MESSAGE_GROUP,
    Code.ILLEGAL_MESSAGE_PROPERTY_KEY, Code.ILLEGAL_MESSAGE_ID, Code.ILLEGAL_DELIVERY_TIME,
    Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, Code.MESSAGE_CORRUPTED, Code.PAYLOAD_TOO_LARGE,
    Code.MESSAGE_BODY_TOO_LARGE, Code.MESSAGE_BODY_EMPTY, Code.MESSAGE_PROPERTIES_TOO_LARGE,
    Code.REQUEST_HEADER_FIELDS_TOO_LARGE,
})


def _request_bytes(serialized: Sequence[bytes]) -> bytes:
    """SendMessageRequest{messages: ...} in wire format from already serialized Messages (field 1)."""
    parts: list[bytes] = []
    for raw in serialized:
        parts += (b"\x0a", _varint(len(raw)), raw)
    return b"".join(parts)


class TransactionResolution(enum.IntEnum):
    """What a transaction checker answers for a half message (UNKNOWN: ask again later)."""

    UNKNOWN = 0
    COMMIT = pb.TransactionResolution.COMMIT
    ROLLBACK = pb.TransactionResolution.ROLLBACK


TransactionChecker = Callable[[ReceivedMessage], "TransactionResolution | Awaitable[TransactionResolution]"]


@dataclass
class _Pending:
    raw: bytes
    message_id: str
    future: asyncio.Future


@dataclass
class _Batch:
    items: list[_Pending] = field(default_factory=list)
    size: int = 0
    timer: asyncio.TimerHandle | asyncio.Handle | None = None


class AsyncProducer(ClientSession):
    """asyncio producer. ``topics`` are checked at start (unknown ones raise NotFoundError) and
    announced to the server; other topics may still be sent to.

    ``linger``: seconds a batch waits for more messages (0: only messages sent in the same loop
    pass are batched). ``max_batch_messages`` / ``max_batch_bytes`` close a batch early.
    ``max_in_flight``: SendMessage requests outstanding at once (per message group: one).
    ``transaction_checker``: answers the server's check-backs of unresolved transactions.
    """

    client_type = pb.ClientType.PRODUCER

    def __init__(self, config: ClientConfig, topics: Iterable[str] = (), *, linger: float = 0.005,
                 max_batch_messages: int = 256, max_batch_bytes: int = 1024 * 1024, max_in_flight: int = 8,
                 transaction_checker: TransactionChecker | None = None) -> None:
        super().__init__(config)
        if isinstance(topics, str):
            topics = [topics]
        self.topics = list(topics)
        for t in self.topics:
            if not isinstance(t, str) or not t.strip():
                raise TypeError(f"topics must be non-blank str, got {t!r}")
        if not isinstance(linger, (int, float)) or linger < 0:
            raise ValueError(f"linger must be >= 0 seconds, not {linger!r}")
        if not isinstance(max_batch_messages, int) or max_batch_messages < 1:
            raise ValueError(f"max_batch_messages must be an int >= 1, not {max_batch_messages!r}")
        if not isinstance(max_batch_bytes, int) or max_batch_bytes < 1:
            raise ValueError(f"max_batch_bytes must be an int >= 1, not {max_batch_bytes!r}")
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be an int >= 1, not {max_in_flight!r}")
        if transaction_checker is not None and not callable(transaction_checker):
            raise TypeError("transaction_checker must be callable")
        self.linger = float(linger)
        self.max_batch_messages = max_batch_messages
        self.max_batch_bytes = max_batch_bytes
        self.max_in_flight = max_in_flight
        self.transaction_checker = transaction_checker
        self.retry_policy = DEFAULT_RETRY
        self.max_body_size = 4 * 1024 * 1024
        self._batches: dict[tuple[str, int, str | None], _Batch] = {}
        self._in_flight: asyncio.Semaphore | None = None
        self._group_locks: dict[tuple[str, int, str | None], asyncio.Lock] = {}
        self._group_waiting: dict[tuple[str, int, str | None], int] = {}
        self._sending: set[asyncio.Task] = set()
        # SendMessage requests made and messages they carried (retries and splits included).
        self.requests_sent = 0
        self.messages_sent = 0

    # ---- settings ----------------------------------------------------------------------------

    def client_settings(self) -> pb.Settings:
        s = self._base_settings()
        s.publishing.topics.extend(pb.Resource(name=t, resource_namespace=self.config.namespace)
                                   for t in self.topics)
        s.backoff_policy.max_attempts = DEFAULT_RETRY.max_attempts
        s.backoff_policy.exponential_backoff.initial.FromMilliseconds(int(DEFAULT_RETRY.initial * 1000))
        s.backoff_policy.exponential_backoff.max.FromMilliseconds(int(DEFAULT_RETRY.maximum * 1000))
        s.backoff_policy.exponential_backoff.multiplier = DEFAULT_RETRY.multiplier
        return s

    def apply_settings(self, settings: pb.Settings) -> None:
        self.retry_policy = RetryPolicy.of(settings.backoff_policy, DEFAULT_RETRY)
        if settings.HasField("publishing") and settings.publishing.max_body_size > 0:
            self.max_body_size = settings.publishing.max_body_size

    def topics_to_check(self) -> list[str]:
        return self.topics

    async def start(self) -> None:
        self._in_flight = asyncio.Semaphore(self.max_in_flight)
        await super().start()

    # ---- sending -----------------------------------------------------------------------------

    def send_nowait(self, message: Message) -> asyncio.Future[SendReceipt]:
        """Queue ``message`` into its batch; the future resolves to its receipt or its own error.

        Local checks (types, empty body, size, tag) raise here, before anything is queued.
        """
        self.ensure_running()
        if not isinstance(message, Message):
            raise TypeError(f"expected an orbitmq.Message, not {type(message).__name__}")
        message.validate(self.max_body_size)
        raw, message_id, message_type = message.encode(self.config.namespace)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SendReceipt] = loop.create_future()
        key = (message.topic, message_type, message.message_group)
        batch = self._batches.get(key)
        if batch is not None and (batch.size + len(raw) > self.max_batch_bytes):
            self._dispatch(key)
            batch = None
        if batch is None:
            batch = self._batches[key] = _Batch()
            batch.timer = (loop.call_later(self.linger, self._dispatch, key) if self.linger > 0
                           else loop.call_soon(self._dispatch, key))
        batch.items.append(_Pending(raw, message_id, future))
        batch.size += len(raw)
        if len(batch.items) >= self.max_batch_messages or batch.size >= self.max_batch_bytes:
            self._dispatch(key)
        return future

    async def send(self, message: Message) -> SendReceipt:
        """Send one message (batched with others sent meanwhile); its receipt or its error."""
        return await self.send_nowait(message)

    def send_async(self, message: Message) -> asyncio.Future[SendReceipt]:
        """Alias of send_nowait: a future for the receipt."""
        return self.send_nowait(message)

    async def send_many(self, messages: Iterable[Message], return_exceptions: bool = False
                        ) -> list[SendReceipt | BaseException]:
        """Send several messages (batched); receipts in order. With ``return_exceptions`` a failed
        message's slot holds its exception instead of raising the first one."""
        futures: list[asyncio.Future] = []
        for m in messages:
            if return_exceptions:
                try:
                    futures.append(self.send_nowait(m))
                except (ClientError, TypeError, ValueError) as exc:
                    f = asyncio.get_running_loop().create_future()
                    f.set_exception(exc)
                    futures.append(f)
            else:
                futures.append(self.send_nowait(m))
        return list(await asyncio.gather(*futures, return_exceptions=return_exceptions))

    def _dispatch(self, key: tuple[str, int, str | None]) -> None:
        batch = self._batches.pop(key, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._send_batch(key, batch.items))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send_batch(self, key: tuple[str, int, str | None], items: list[_Pending]) -> None:
        ordered = key[2] is not None
        try:
            if ordered:
                lock = self._group_locks.get(key)
                if lock is None:
                    lock = self._group_locks[key] = asyncio.Lock()
                self._group_waiting[key] = self._group_waiting.get(key, 0) + 1
                try:
                    async with lock:
                        results = await self._send_with_retry(key[0], items, ordered)
                finally:
                    # Forget the group's lock once nothing of the group is pending (groups may be many).
                    self._group_waiting[key] -= 1
                    if not self._group_waiting[key]:
                        del self._group_waiting[key]
                        del self._group_locks[key]
            else:
                assert self._in_flight is not None
                async with self._in_flight:
                    results = await self._send_with_retry(key[0], items, ordered)
        except BaseException as exc:  # noqa: BLE001 -- every waiting caller must hear of it
            if isinstance(exc, asyncio.CancelledError):
                exc = ClientError(Code.INTERNAL_ERROR, "producer shut down before the send completed")
            results = [exc] * len(items)
        for item, result in zip(items, results, strict=True):
            if item.future.done():
                continue
            if isinstance(result, BaseException):
                item.future.set_exception(result)
            else:
                item.future.set_result(result)

    async def _send_with_retry(self, topic: str, items: list[_Pending], ordered: bool
                               ) -> list[SendReceipt | BaseException]:
        payload = _request_bytes([i.raw for i in items])
        attempt = 1
        while True:
            self.requests_sent += 1
            self.messages_sent += len(items)
            try:
                response: spb.SendMessageResponse = await self.rpc.unary(
                    "SendMessage", payload, response_cls=spb.SendMessageResponse)
                if response.status.code == Code.OK:
                    return self._results(response, items)
                err: ClientError = error_of(response.status.code, response.status.message)
                if len(response.entries) == len(items) and any(e.status.code == Code.OK for e in response.entries):
                    return self._results(response, items)
            except TransportError as exc:
                err = exc
                self.rpc.rotate()
            if err.code == Code.TOPIC_NOT_FOUND:
                self.invalidate_route(topic)
            if is_retriable(err) and attempt < self.retry_policy.max_attempts:
                await asyncio.sleep(self.retry_policy.delay(attempt) if isinstance(err, TooManyRequestsError)
                                    else 0)
                attempt += 1
                continue
            if len(items) > 1 and err.code in _PER_MESSAGE_CODES:
                # Find the culprit(s): every message on its own (in order for a message group).
                if ordered:
                    out: list[SendReceipt | BaseException] = []
                    for item in items:
                        out += await self._send_with_retry(topic, [item], ordered)
                    return out
                parts = await asyncio.gather(*(self._send_with_retry(topic, [i], ordered) for i in items))
                return [r for part in parts for r in part]
            return [err] * len(items)

    @staticmethod
    def _results(response: spb.SendMessageResponse, items: list[_Pending]) -> list[SendReceipt | BaseException]:
        entries = response.entries
        if len(entries) != len(items):
            err = ClientError(Code.INTERNAL_ERROR, f"{len(entries)} send results for {len(items)} messages")
            return [err] * len(items)
        out: list[SendReceipt | BaseException] = []
        for e in entries:
            if e.status.code == Code.OK:
                out.append(SendReceipt(e.message_id, e.offset, e.transaction_id, e.recall_handle))
            else:
                out.append(error_of(e.status.code, e.status.message))
        return out

    async def flush(self) -> None:
        """Send every open batch now and wait until all sends so far have completed."""
        for key in list(self._batches):
            self._dispatch(key)
        while self._sending:
            await asyncio.gather(*list(self._sending), return_exceptions=True)

    async def shutdown(self) -> None:
        if self.running:
            await self.flush()
        await super().shutdown()

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ---- transactions ------------------------------------------------------------------------

    def begin_transaction(self) -> AsyncTransaction:
        """A transaction: its messages stay invisible until commit (rollback discards them)."""
        self.ensure_running()
        if self.transaction_checker is None:
            raise BadRequestError(Code.BAD_REQUEST, "a transaction needs a transaction_checker on the producer")
        return AsyncTransaction(self)

    async def send_half(self, message: Message) -> tuple[pb.Message, SendReceipt]:
        """One transactional (half) message, unbatched; retries only on transport failure."""
        self.ensure_running()
        if not isinstance(message, Message):
            raise TypeError(f"expected an orbitmq.Message, not {type(message).__name__}")
        message.validate(self.max_body_size)
        if message.message_group is not None or message.delivery_timestamp is not None:
            raise BadRequestError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                                  "a transactional message cannot have a message group or delivery timestamp")
        proto = message.to_proto(self.config.namespace, pb.MessageType.TRANSACTION)
        response = await self.rpc.unary("SendMessage", spb.SendMessageRequest(messages=[proto]))
        check_status(response.status)
        entry = response.entries[0]
        check_status(entry.status)
        return proto, SendReceipt(entry.message_id, entry.offset, entry.transaction_id, entry.recall_handle)

    async def end_transaction(self, topic: str, message_id: str, transaction_id: str, resolution: int,
                              source: int = pb.TransactionSource.SOURCE_CLIENT, endpoint: str | None = None) -> None:
        request = spb.EndTransactionRequest(topic=pb.Resource(name=topic, resource_namespace=self.config.namespace),
                                            message_id=message_id, transaction_id=transaction_id,
                                            resolution=resolution, source=source)
        response = await self.rpc.unary("EndTransaction", request, endpoint=endpoint)
        check_status(response.status)

    async def on_recover_orphaned_transaction(self, endpoint: str, command: spb.RecoverOrphanedTransactionCommand
                                              ) -> None:
        """A check-back: ask the checker, answer COMMIT/ROLLBACK with EndTransaction (UNKNOWN: stay silent)."""
        message = ReceivedMessage.of(command.message)
        if self.transaction_checker is None:
            log.warning("transaction check-back for %s without a checker", message.message_id)
            return
        try:
            answer = self.transaction_checker(message)
            if inspect.isawaitable(answer):
                answer = await answer
            resolution = TransactionResolution(answer)
        except Exception:  # the server asks again later
            log.exception("transaction checker failed for %s", message.message_id)
            return
        if resolution == TransactionResolution.UNKNOWN:
            return
        try:
            await self.end_transaction(message.topic, message.message_id, command.transaction_id, int(resolution),
                                       pb.TransactionSource.SOURCE_SERVER_CHECK, endpoint)
        except ClientError as exc:
            log.warning("answering check-back of %s failed: %s", message.message_id, exc)


class AsyncTransaction:
    """Messages sent in one transaction; ``commit()`` or ``rollback()`` ends them all."""

    def __init__(self, producer: AsyncProducer) -> None:
        self.producer = producer
        self._half: list[tuple[str, str, str]] = []  # (topic, message id, transaction id)
        self.ended = False

    async def send(self, message: Message) -> SendReceipt:
        if self.ended:
            raise BadRequestError(Code.BAD_REQUEST, "transaction already ended")
        proto, receipt = await self.producer.send_half(message)
        self._half.append((proto.topic.name, receipt.message_id, receipt.transaction_id))
        return receipt

    async def _end(self, resolution: int) -> None:
        if self.ended:
            raise BadRequestError(Code.BAD_REQUEST, "transaction already ended")
        self.ended = True
        for topic, message_id, transaction_id in self._half:
            await self.producer.end_transaction(topic, message_id, transaction_id, resolution)

    async def commit(self) -> None:
        await self._end(pb.TransactionResolution.COMMIT)

    async def rollback(self) -> None:
        await self._end(pb.TransactionResolution.ROLLBACK)


# ---- synchronous wrappers ----------------------------------------------------------------------


class Producer:
    """Synchronous Producer for scripts: the AsyncProducer runs on a background event loop.

    ``send`` blocks for the receipt; ``send_async`` returns a concurrent.futures.Future, so many
    sends in a row are batched exactly as in the asyncio producer.
    """

    def __init__(self, config: ClientConfig, topics: Iterable[str] = (), **options: object) -> None:
        async def make() -> AsyncProducer:
            return AsyncProducer(config, topics, **options)  # type: ignore[arg-type]

        self._p = bg.run(make())
        # send_async hands messages to the loop through this inbox: one wakeup for many messages.
        self._inbox: collections.deque[tuple[Message, concurrent.futures.Future]] = collections.deque()
        self._inbox_lock = threading.Lock()
        self._drain_scheduled = False

    @property
    def client_id(self) -> str:
        return self._p.client_id

    def start(self) -> Producer:
        bg.run(self._p.start())
        return self

    def send(self, message: Message, timeout: float | None = None) -> SendReceipt:
        return bg.run(self._p.send(message), timeout)

    def send_async(self, message: Message) -> concurrent.futures.Future[SendReceipt]:
        """A concurrent.futures.Future of the receipt; messages sent in a row share batches."""
        result: concurrent.futures.Future[SendReceipt] = concurrent.futures.Future()
        with self._inbox_lock:
            self._inbox.append((message, result))
            if self._drain_scheduled:
                return result
            self._drain_scheduled = True
        bg.background_loop().call_soon_threadsafe(self._drain_inbox)
        return result

    def _drain_inbox(self) -> None:
        """On the loop: queue every message handed over since the last pass."""
        with self._inbox_lock:
            items = list(self._inbox)
            self._inbox.clear()
            self._drain_scheduled = False
        for message, result in items:
            try:
                future = self._p.send_nowait(message)
            except BaseException as exc:  # noqa: BLE001 -- the caller's future carries it
                result.set_exception(exc)
                continue
            future.add_done_callback(functools.partial(_settle, result))

    def send_many(self, messages: Iterable[Message], return_exceptions: bool = False
                  ) -> list[SendReceipt | BaseException]:
        return bg.run(self._p.send_many(list(messages), return_exceptions))

    def flush(self) -> None:
        bg.run(self._p.flush())

    def begin_transaction(self) -> Transaction:
        return Transaction(self._p.begin_transaction())

    def shutdown(self) -> None:
        bg.run(self._p.shutdown())

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _settle(target: concurrent.futures.Future, source: asyncio.Future) -> None:
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())
    else:
        target.set_result(source.result())


class Transaction:
    """Synchronous view of an AsyncTransaction."""

    def __init__(self, tx: AsyncTransaction) -> None:
        self._tx = tx

    def send(self, message: Message) -> SendReceipt:
        return bg.run(self._tx.send(message))

    def commit(self) -> None:
        bg.run(self._tx.commit())

    def rollback(self) -> None:
        bg.run(self._tx.rollback())


__all__ = ["AsyncProducer", "AsyncTransaction", "Producer", "Transaction",
           "TransactionChecker", "TransactionResolution"]
