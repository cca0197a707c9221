"""PullConsumer: offset-addressed reads of chosen queues (Kafka's consumer model over RocketMQ).

The application assigns queues, or subscribes to topics: the instances of a group that subscribe
share the topic's queues, each reading its QueryAssignment share (the proxies divide the queues over
the group's live PULL_CONSUMER clients connected to any of them, AllocateMessageQueueAveragely;
services/proxy/pull_assignment.py), asked again every ASSIGNMENT_REFRESH_S; a queue that moves away
is committed before it is let go, so its next owner starts where this one stopped. It seeks (offset, earliest,
latest, timestamp), polls batches and commits offsets to the consumer group on the brokers, where
``orbitmq admin consumerProgress`` shows them.
Each queue has at most one PullMessage in flight, long-polled; results wait in a buffer until
``poll`` hands them out, so polling many queues does not wait for the slowest.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterable, Mapping
from datetime import datetime

from orbitmq.clientcore import loop as bg
from orbitmq.clientcore.config import ClientConfig
from orbitmq.clientcore.errors import BadRequestError, ClientError, Code, check_status, is_retriable
from orbitmq.clientcore.message import MessageQueue, ReceivedMessage
from orbitmq.clientcore.session import ClientSession, duration
from orbitmq.consumer.common import FilterExpression, subscription_settings, validate_group
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb

log = logging.getLogger("orbitmq.consumer.pull")

# How often a subscription asks for its share again (upstream's 5.x PushConsumerImpl#scanAssignments
# period): a join or a leave is applied within two scans, under one heartbeat period.
ASSIGNMENT_REFRESH_S = 5.0
# Re-asks in a row after releasing queues, before the next scan takes over.
_RELEASE_ROUNDS = 3
_RETRY_PAUSE_S = 0.5
RESET_POLICIES = ("earliest", "latest", "none")


class OffsetOutOfRangeError(BadRequestError):
    """A position below the queue's minimum (retention removed it) or above its maximum."""

    def __init__(self, queue: MessageQueue, offset: int, message: str) -> None:
        self.queue = queue
        self.offset = offset
        super().__init__(Code.ILLEGAL_OFFSET, f"{queue.topic}/{queue.broker}/{queue.queue_id} offset {offset}: "
                                              f"{message}")


def _epoch_ms(value: float | datetime) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1000)
    raise TypeError(f"timestamp must be a datetime or epoch seconds, not {type(value).__name__}")


class AsyncPullConsumer(ClientSession):
    """asyncio PullConsumer of ``group``.

    ``auto_offset_reset``: where a queue without a committed offset (or whose position fell out of
    range) starts: "earliest", "latest" or "none" (raise OffsetOutOfRangeError).
    ``prefetch_batches``: batches of ``batch_size`` pulled at once from a queue with a backlog.
    """

    client_type = pb.ClientType.PULL_CONSUMER

    def __init__(self, config: ClientConfig, group: str, *, batch_size: int = 32,
                 long_polling_timeout: float = 5.0, auto_offset_reset: str = "earliest",
                 prefetch_batches: int = 8) -> None:
        super().__init__(config)
        self.consumer_group = validate_group(group)
        if not isinstance(batch_size, int) or not 1 <= batch_size <= 32:
            raise ValueError(f"batch_size must be an int in [1, 32], not {batch_size!r}")
        if auto_offset_reset not in RESET_POLICIES:
            raise ValueError(f"auto_offset_reset must be one of {RESET_POLICIES}, not {auto_offset_reset!r}")
        if not isinstance(prefetch_batches, int) or prefetch_batches < 1:
            raise ValueError(f"prefetch_batches must be an int >= 1, not {prefetch_batches!r}")
        self.batch_size = batch_size
        self.prefetch_batches = prefetch_batches
        self.long_polling_timeout = float(long_polling_timeout)
        self.auto_offset_reset = auto_offset_reset
        self._subscribed: dict[str, FilterExpression] = {}
        self._assigned: dict[MessageQueue, FilterExpression] = {}
        self._positions: dict[MessageQueue, int] = {}
        self._buffers: dict[MessageQueue, collections.deque[ReceivedMessage]] = {}
        self._buffer_next: dict[MessageQueue, int] = {}
        self._fetches: dict[MessageQueue, asyncio.Task] = {}
        self._generation: dict[MessageQueue, int] = collections.defaultdict(int)
        self._errors: dict[MessageQueue, ClientError] = {}
        self._wakeup = asyncio.Event()
        # Queues whose last pull came back full: worth pulling several batches ahead.
        self._backlog: dict[MessageQueue, bool] = {}
        self._rr = 0
        # One rebalance at a time (its second QueryAssignment tells the proxy the lost queues are
        # released), and no commit racing the commit of a released queue.
        self._rebalance_lock = asyncio.Lock()
        self._commit_lock = asyncio.Lock()
        self._scan_task: asyncio.Task | None = None

    def group(self) -> str | None:
        return self.consumer_group

    def client_settings(self) -> pb.Settings:
        s = self._base_settings()
        topics = {**{mq.topic: expr for mq, expr in self._assigned.items()}, **self._subscribed}
        return subscription_settings(s, self.consumer_group, self.config.namespace, topics)

    # ---- queues and assignment ---------------------------------------------------------------

    async def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (NotFoundError when it does not exist)."""
        readable = (pb.Permission.READ, pb.Permission.READ_WRITE)
        return [MessageQueue.of(mq) for mq in await self.route(topic) if mq.permission in readable]

    async def assign(self, queues: Iterable[MessageQueue], expression: str | FilterExpression = "*") -> None:
        """Read exactly these queues (replaces any subscription); positions start at the committed
        offset, else per ``auto_offset_reset``."""
        self.ensure_running()
        expr = expression if isinstance(expression, FilterExpression) else FilterExpression(expression)
        queues = list(queues)
        for q in queues:
            if not isinstance(q, MessageQueue):
                raise TypeError(f"assign takes MessageQueue objects, not {type(q).__name__}")
        self._subscribed.clear()
        for mq in list(self._assigned):
            if mq not in queues:
                self._drop(mq)
        for q in queues:
            self._assigned[q] = expr
        self.resend_settings()

    async def subscribe(self, topic: str, expression: str | FilterExpression = "*") -> None:
        """Read this instance's share of ``topic``'s queues, shared with the group's other subscribed
        instances and following them (and new queues) as they come and go."""
        self.ensure_running()
        expr = expression if isinstance(expression, FilterExpression) else FilterExpression(expression)
        await self._query_assignment(topic)  # NotFoundError for an unknown topic, before anything changes
        self._subscribed[topic] = expr
        await self._announce_settings()
        await self._rebalance(topic)
        if self._scan_task is None:
            self._scan_task = self.spawn(self._scan_assignments())

    def unsubscribe(self, topic: str) -> None:
        """Stop reading ``topic``; its positions are committed, then the proxy is told (Settings)."""
        if self._subscribed.pop(topic, None) is None:
            for mq in [q for q in self._assigned if q.topic == topic]:
                self._drop(mq)
            return
        positions = self._stop([q for q in self._assigned if q.topic == topic])
        if self.running:
            self.spawn(self._commit_released(positions, resend=True))

    def assignment(self) -> list[MessageQueue]:
        return list(self._assigned)

    def _drop(self, mq: MessageQueue) -> None:
        self._assigned.pop(mq, None)
        self._positions.pop(mq, None)
        self._reset_fetch(mq)

    def _reset_fetch(self, mq: MessageQueue) -> None:
        self._generation[mq] += 1
        task = self._fetches.pop(mq, None)
        if task is not None:
            task.cancel()
        self._buffers.pop(mq, None)
        self._buffer_next.pop(mq, None)
        self._errors.pop(mq, None)

    # ---- group coordination of subscriptions -------------------------------------------------

    async def _announce_settings(self) -> None:
        """Re-send Settings and wait (up to request_timeout) until every proxy answered: the proxy
        counts a client in a topic's group only once its Settings name the topic."""
        sessions = list(self._telemetry.values())
        for session in sessions:
            session.settled.clear()
        self.resend_settings()
        waits = [asyncio.ensure_future(session.settled.wait()) for session in sessions]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=self.config.request_timeout)
            for w in pending:
                w.cancel()

    async def _query_assignment(self, topic: str) -> set[MessageQueue]:
        ns = self.config.namespace
        response = await self.rpc.unary("QueryAssignment", spb.QueryAssignmentRequest(
            topic=pb.Resource(name=topic, resource_namespace=ns),
            group=pb.Resource(name=self.consumer_group, resource_namespace=ns),
            endpoints=self._base_settings().access_point))
        check_status(response.status)
        return {MessageQueue.of(a.message_queue) for a in response.assignments}

    async def _rebalance(self, topic: str) -> None:
        """Apply this instance's share of ``topic``: queues it lost are stopped and committed, then
        the share is asked again (that request is what frees them for their next owner, see
        services/proxy/pull_assignment.py); queues it gained start at the group's committed offset."""
        async with self._rebalance_lock:
            for _ in range(_RELEASE_ROUNDS):
                expr = self._subscribed.get(topic)
                if expr is None:
                    return
                share = await self._query_assignment(topic)
                if topic not in self._subscribed:
                    return
                lost = [mq for mq in self._assigned if mq.topic == topic and mq not in share]
                for mq in share:
                    self._assigned[mq] = expr
                if not lost:
                    return
                await self._commit_released(self._stop(lost))

    def _stop(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        """Stop reading ``queues`` at once (nothing more is polled from them): their positions."""
        positions = {mq: self._positions[mq] for mq in queues if mq in self._positions}
        for mq in list(queues):
            self._drop(mq)
        return positions

    async def _commit_released(self, positions: Mapping[MessageQueue, int], resend: bool = False) -> None:
        """Commit the positions of released queues (RebalanceImpl#removeUnnecessaryMessageQueue
        persists a queue's offset before dropping it). A committed offset is never moved back: a
        larger one was committed by the queue's next owner."""
        async with self._commit_lock:
            for mq, offset in positions.items():
                try:
                    committed = await self.committed(mq)
                    if committed is None or offset > committed:
                        await self._update_offset(mq, offset)
                except ClientError as exc:
                    log.warning("offset %d of released %s not committed: %s", offset, mq, exc)
        if resend:
            self.resend_settings()

    async def _scan_assignments(self) -> None:
        while True:
            await asyncio.sleep(ASSIGNMENT_REFRESH_S)
            for topic in list(self._subscribed):
                try:
                    await self._rebalance(topic)
                except ClientError as exc:  # the share stays as it is until the next scan
                    log.warning("assignment of %s not refreshed: %s", topic, exc)

    # ---- offsets -----------------------------------------------------------------------------

    async def _query_offset(self, mq: MessageQueue, policy: int, timestamp_ms: int | None = None) -> int:
        request = spb.QueryOffsetRequest(message_queue=mq.to_proto(), query_offset_policy=policy)
        if timestamp_ms is not None:
            request.timestamp.FromMilliseconds(timestamp_ms)
        response = await self.rpc.unary("QueryOffset", request)
        check_status(response.status)
        return response.offset

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._query_offset(mq, pb.QueryOffsetPolicy.BEGINNING)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The offset the next message stored in ``mq`` will get."""
        return await self._query_offset(mq, pb.QueryOffsetPolicy.END)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp: float | datetime) -> int:
        """The first offset whose message was stored at or after ``timestamp`` (epoch s or datetime)."""
        return await self._query_offset(mq, pb.QueryOffsetPolicy.TIMESTAMP, _epoch_ms(timestamp))

    async def committed(self, mq: MessageQueue) -> int | None:
        """The group's committed offset of ``mq`` (None when it never committed one)."""
        response = await self.rpc.unary("GetOffset", spb.GetOffsetRequest(
            group=pb.Resource(name=self.consumer_group, resource_namespace=self.config.namespace),
            message_queue=mq.to_proto()))
        if response.status.code == Code.OFFSET_NOT_FOUND:
            return None
        check_status(response.status)
        return response.offset

    async def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Store offsets with the group (default: the current position of every assigned queue,
        i.e. everything polled so far counts as consumed)."""
        self.ensure_running()
        todo = None if offsets is None else dict(offsets)
        for mq, offset in (todo or {}).items():
            if not isinstance(offset, int) or offset < 0:
                raise ValueError(f"offset of {mq} must be an int >= 0, not {offset!r}")
            if mq.topic in self._subscribed and mq not in self._assigned:
                raise BadRequestError(Code.BAD_REQUEST, f"{mq} moved to another instance of group "
                                                        f"{self.consumer_group}: its offset is not this one's to commit")
        async with self._commit_lock:
            # the positions when the lock is held: a queue released meanwhile is committed already
            for mq, offset in (dict(self._positions) if todo is None else todo).items():
                await self._update_offset(mq, offset)

    async def _update_offset(self, mq: MessageQueue, offset: int) -> None:
        response = await self.rpc.unary("UpdateOffset", spb.UpdateOffsetRequest(
            group=pb.Resource(name=self.consumer_group, resource_namespace=self.config.namespace),
            message_queue=mq.to_proto(), offset=offset))
        check_status(response.status)

    def _require_assigned(self, mq: MessageQueue) -> None:
        if mq not in self._assigned:
            raise BadRequestError(Code.BAD_REQUEST, f"{mq} is not assigned to this consumer")

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """The next poll of ``mq`` starts at ``offset``."""
        self._require_assigned(mq)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, not {offset!r}")
        self._reset_fetch(mq)
        self._positions[mq] = offset
        self._wakeup.set()

    def _targets(self, queues: Iterable[MessageQueue] | None) -> list[MessageQueue]:
        targets = list(self._assigned) if queues is None else list(queues)
        for mq in targets:
            self._require_assigned(mq)
        return targets

    async def seek_to_beginning(self, queues: Iterable[MessageQueue] | None = None) -> None:
        for mq in self._targets(queues):
            await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, queues: Iterable[MessageQueue] | None = None) -> None:
        for mq in self._targets(queues):
            await self.seek(mq, await self.max_offset(mq))

    async def seek_to_timestamp(self, timestamp: float | datetime,
                                queues: Iterable[MessageQueue] | None = None) -> None:
        for mq in self._targets(queues):
            await self.seek(mq, await self.offset_for_timestamp(mq, timestamp))

    async def position(self, mq: MessageQueue) -> int:
        """The offset the next poll of ``mq`` starts from (resolved now if not yet known)."""
        self._require_assigned(mq)
        if mq not in self._positions:
            self._positions[mq] = await self._initial_position(mq)
        return self._positions[mq]

    async def _initial_position(self, mq: MessageQueue) -> int:
        committed = await self.committed(mq)
        if committed is not None:
            return committed
        return await self._reset_position(mq, None)

    async def _reset_position(self, mq: MessageQueue, bad: int | None) -> int:
        if self.auto_offset_reset == "earliest":
            return await self.min_offset(mq)
        if self.auto_offset_reset == "latest":
            return await self.max_offset(mq)
        raise OffsetOutOfRangeError(mq, -1 if bad is None else bad,
                                    "no committed offset" if bad is None else "out of range")

    # ---- polling -----------------------------------------------------------------------------

    async def pull(self, mq: MessageQueue, offset: int, max_messages: int | None = None,
                   long_polling_timeout: float = 0.0, expression: str | FilterExpression = "*"
                   ) -> tuple[list[ReceivedMessage], int]:
        """One PullMessage of ``mq`` from ``offset``: (messages, next offset). Stateless: needs no
        assignment (what a Spark task reading a fixed offset range uses)."""
        expr = expression if isinstance(expression, FilterExpression) else FilterExpression(expression)
        request = spb.PullMessageRequest(
            group=pb.Resource(name=self.consumer_group, resource_namespace=self.config.namespace),
            message_queue=mq.to_proto(), offset=offset, batch_size=max_messages or self.batch_size,
            filter_expression=expr.to_proto(), long_polling_timeout=duration(long_polling_timeout))
        responses = await self.rpc.server_stream("PullMessage", request,
                                                 long_polling_timeout + self.config.request_timeout)
        messages: list[ReceivedMessage] = []
        next_offset = offset
        for r in responses:
            which = r.WhichOneof("content")
            if which == "status":
                if r.status.code == Code.ILLEGAL_OFFSET:
                    raise OffsetOutOfRangeError(mq, offset, r.status.message)
                if r.status.code == Code.TOPIC_NOT_FOUND:
                    self.invalidate_route(mq.topic)
                check_status(r.status, allowed=(Code.MESSAGE_NOT_FOUND,))
            elif which == "message":
                m = ReceivedMessage.of(r.message, broker=mq.broker)
                m.queue_id = mq.queue_id
                messages.append(m)
            elif which == "next_offset":
                next_offset = r.next_offset
        return messages, next_offset

    def _start_fetches(self, long_polling: float) -> None:
        for mq in self._assigned:
            if mq in self._fetches or self._buffers.get(mq) or mq in self._errors:
                continue
            self._fetches[mq] = asyncio.get_running_loop().create_task(
                self._fetch(mq, self._generation[mq], long_polling))

    async def _fetch(self, mq: MessageQueue, generation: int, long_polling: float) -> None:
        try:
            if mq not in self._positions:
                self._positions[mq] = await self._initial_position(mq)
            offset = self._positions[mq]
            try:
                messages, next_offset = await self._pull_ahead(mq, offset, long_polling)
            except OffsetOutOfRangeError:
                if self.auto_offset_reset == "none":
                    raise
                position = await self._reset_position(mq, offset)
                log.warning("%s offset %d out of range: reset to %d (%s)", mq, offset, position,
                            self.auto_offset_reset)
                if self._generation[mq] == generation:
                    self._positions[mq] = position
                return
            if self._generation[mq] == generation:
                if messages:
                    self._buffers[mq] = collections.deque(messages)
                    self._buffer_next[mq] = next_offset
                elif next_offset > offset:
                    self._positions[mq] = next_offset  # filtered-out messages skipped
        except asyncio.CancelledError:
            raise
        except ClientError as exc:
            if self._generation[mq] == generation:
                if is_retriable(exc):
                    log.warning("pull of %s failed, retrying: %s", mq, exc)
                    await asyncio.sleep(_RETRY_PAUSE_S)
                else:
                    self._errors[mq] = exc
        finally:
            if self._generation[mq] == generation:
                self._fetches.pop(mq, None)
            self._wakeup.set()

    async def _pull_ahead(self, mq: MessageQueue, offset: int, long_polling: float
                          ) -> tuple[list[ReceivedMessage], int]:
        """Pull ``mq`` from ``offset``; while it has a backlog and no filter, ``prefetch_batches``
        consecutive batches are pulled at once (offsets are contiguous then), so a drain is not
        bound by one round trip per 32 messages. A speculative batch counts only if every batch
        before it was full and ended exactly where it starts."""
        expr = self._assigned.get(mq, FilterExpression())
        depth = self.prefetch_batches if self._backlog.get(mq) and expr.expression == "*" else 1
        if depth == 1:
            messages, next_offset = await self.pull(mq, offset, self.batch_size, long_polling, expr)
        else:
            starts = [offset + i * self.batch_size for i in range(depth)]
            results = await asyncio.gather(*(self.pull(mq, start, self.batch_size, 0.0, expr) for start in starts),
                                           return_exceptions=True)
            first = results[0]
            if isinstance(first, BaseException):
                raise first
            messages, next_offset = list(first[0]), first[1]
            for start, result in zip(starts[1:], results[1:], strict=True):
                if isinstance(result, BaseException) or next_offset != start or not result[0]:
                    break
                if len(messages) % self.batch_size:
                    break  # the batch before was not full: the end was reached
                messages += result[0]
                next_offset = result[1]
        self._backlog[mq] = len(messages) >= self.batch_size
        return messages, next_offset

    def _drain(self, max_messages: int) -> list[ReceivedMessage]:
        out: list[ReceivedMessage] = []
        queues = [mq for mq in self._assigned if self._buffers.get(mq)]
        if not queues:
            return out
        self._rr = (self._rr + 1) % len(queues)
        for mq in queues[self._rr:] + queues[:self._rr]:
            buf = self._buffers[mq]
            while buf and len(out) < max_messages:
                m = buf.popleft()
                out.append(m)
                self._positions[mq] = m.queue_offset + 1
            if not buf:
                self._buffers.pop(mq, None)
                nxt = self._buffer_next.pop(mq, None)
                if nxt is not None:
                    self._positions[mq] = max(self._positions[mq], nxt)
            if len(out) >= max_messages:
                break
        return out

    async def poll(self, timeout: float = 1.0, max_messages: int = 1024) -> list[ReceivedMessage]:  # noqa: ASYNC109
        """Messages of the assigned queues from their positions, waiting up to ``timeout`` seconds
        for the first; positions advance past what is returned. Raises a queue's non-transient
        error (e.g. OffsetOutOfRangeError with ``auto_offset_reset="none"``) once."""
        self.ensure_running()
        if not isinstance(max_messages, int) or max_messages < 1:
            raise ValueError(f"max_messages must be an int >= 1, not {max_messages!r}")
        if not self._assigned and not self._subscribed:
            raise BadRequestError(Code.BAD_REQUEST, "nothing assigned: call assign() or subscribe() first")
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            out = self._drain(max_messages)
            if out:
                return out
            for mq, exc in list(self._errors.items()):
                del self._errors[mq]
                raise exc
            remaining = deadline - time.monotonic()
            self._start_fetches(max(0.0, min(remaining, self.long_polling_timeout)))
            if remaining <= 0:
                return []
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except TimeoutError:
                pass

    async def shutdown(self) -> None:
        """Leave the group gracefully: the subscribed queues' positions are committed before the
        proxy hears of the termination, so their next owners read nothing twice."""
        if self._scan_task is not None:
            self._scan_task.cancel()
            self._scan_task = None
        if self.running and self._subscribed:
            async with self._rebalance_lock:
                positions = self._stop([mq for mq in self._assigned if mq.topic in self._subscribed])
            await self._commit_released(positions)
        for mq in list(self._fetches):
            self._reset_fetch(mq)
        await super().shutdown()

    async def __aenter__(self) -> AsyncPullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()


class PullConsumer:
    """Synchronous PullConsumer (the asyncio one runs on a background loop)."""

    def __init__(self, config: ClientConfig, group: str, **options: object) -> None:
        async def make() -> AsyncPullConsumer:
            return AsyncPullConsumer(config, group, **options)  # type: ignore[arg-type]

        self._c = bg.run(make())

    @property
    def client_id(self) -> str:
        return self._c.client_id

    def start(self) -> PullConsumer:
        bg.run(self._c.start())
        return self

    def queues(self, topic: str) -> list[MessageQueue]:
        return bg.run(self._c.queues(topic))

    def assign(self, queues: Iterable[MessageQueue], expression: str | FilterExpression = "*") -> None:
        bg.run(self._c.assign(list(queues), expression))

    def subscribe(self, topic: str, expression: str | FilterExpression = "*") -> None:
        bg.run(self._c.subscribe(topic, expression))

    def assignment(self) -> list[MessageQueue]:
        return self._c.assignment()

    def seek(self, mq: MessageQueue, offset: int) -> None:
        bg.run(self._c.seek(mq, offset))

    def seek_to_beginning(self, queues: Iterable[MessageQueue] | None = None) -> None:
        bg.run(self._c.seek_to_beginning(queues))

    def seek_to_end(self, queues: Iterable[MessageQueue] | None = None) -> None:
        bg.run(self._c.seek_to_end(queues))

    def seek_to_timestamp(self, timestamp: float | datetime, queues: Iterable[MessageQueue] | None = None) -> None:
        bg.run(self._c.seek_to_timestamp(timestamp, queues))

    def position(self, mq: MessageQueue) -> int:
        return bg.run(self._c.position(mq))

    def committed(self, mq: MessageQueue) -> int | None:
        return bg.run(self._c.committed(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return bg.run(self._c.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return bg.run(self._c.max_offset(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp: float | datetime) -> int:
        return bg.run(self._c.offset_for_timestamp(mq, timestamp))

    def pull(self, mq: MessageQueue, offset: int, max_messages: int | None = None,
             long_polling_timeout: float = 0.0, expression: str | FilterExpression = "*"
             ) -> tuple[list[ReceivedMessage], int]:
        return bg.run(self._c.pull(mq, offset, max_messages, long_polling_timeout, expression))

    def poll(self, timeout: float = 1.0, max_messages: int = 1024) -> list[ReceivedMessage]:
        return bg.run(self._c.poll(timeout, max_messages))

    def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        bg.run(self._c.commit(offsets))

    def shutdown(self) -> None:
        bg.run(self._c.shutdown())

    def __enter__(self) -> PullConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["AsyncPullConsumer", "OffsetOutOfRangeError", "PullConsumer"]
