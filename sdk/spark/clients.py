"""SDK clients of the "rocketmq" data source, and the reads and sends it does with them.

Spark runs the data source's methods in Python worker processes (planning, the streaming source
runner, tasks) that it reuses, so clients are cached per process and connection. Reads go through
``AsyncPullConsumer.pull`` (PullMessage of a fixed offset range: no Telemetry session needed),
offsets through QueryOffset/GetOffset/UpdateOffset, sends through the SDK's batching Producer.
Everything runs on the SDK's background event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from orbitmq.auth.client import install_signing
from orbitmq.client import MQClientAPI
from orbitmq.clientcore import loop as bg
from orbitmq.clientcore.errors import ClientError, Code, NotFoundError, TransportError
from orbitmq.clientcore.message import MessageQueue, ReceivedMessage
from orbitmq.common import constants
from orbitmq.common.validators import is_system_topic
from orbitmq.consumer.pull import AsyncPullConsumer, OffsetOutOfRangeError
from orbitmq.producer import Producer
from orbitmq.spark.options import Connection, RocketMQOptionError

log = logging.getLogger("orbitmq.spark")

PULL_BATCH = 32  # the proxy's (and RocketMQ's) most messages per PullMessage
PULLS_IN_FLIGHT = 16  # PullMessage requests of one range outstanding at once
CHUNK = 4096  # messages per Arrow batch handed to Spark

_lock = threading.Lock()
_consumers: dict[tuple, AsyncPullConsumer] = {}
_producers: dict[tuple, Producer] = {}


class RocketMQReadError(RuntimeError):
    """A read that cannot go on (data loss with failOnDataLoss=true, a queue that lost messages...)."""


def consumer(conn: Connection, group: str) -> AsyncPullConsumer:
    key = (*conn.key(), group)
    with _lock:
        c = _consumers.get(key)
        if c is None:
            async def make() -> AsyncPullConsumer:
                return AsyncPullConsumer(conn.client_config(), group)

            c = _consumers[key] = bg.run(make())
        return c


def close_consumer(conn: Connection, group: str) -> None:
    with _lock:
        c = _consumers.pop((*conn.key(), group), None)
    if c is not None and c.running:
        try:
            bg.run(c.shutdown())
        except ClientError as exc:
            log.debug("shutdown of the %s consumer: %s", group, exc)


def producer(conn: Connection) -> Producer:
    key = conn.key()
    with _lock:
        p = _producers.get(key)
        if p is None:
            # The Spark task hands rows over as fast as it can: large batches, a short linger.
            p = Producer(conn.client_config(), linger=0.005, max_batch_messages=512, max_in_flight=16).start()
            _producers[key] = p
        return p


def describe(exc: BaseException, conn: Connection) -> str:
    if isinstance(exc, TransportError):
        tried = ", ".join(exc.endpoints) or conn.endpoints
        return f"no proxy reachable (endpoints tried: {tried}): {exc.message}"
    return str(exc)


def run(coro, conn: Connection):
    """Run ``coro`` on the SDK loop; a proxy that cannot be reached says which endpoints were tried."""
    try:
        return bg.run(coro)
    except TransportError as exc:
        raise ConnectionError(f"rocketmq: {describe(exc, conn)}") from exc


async def queues(c: AsyncPullConsumer, topics: list[str]) -> list[MessageQueue]:
    """Every readable queue of ``topics``, sorted; a missing topic fails naming it."""
    out: list[MessageQueue] = []
    for topic in topics:
        try:
            found = await c.queues(topic)
            c.invalidate_route(topic)  # the next call sees new queues at once
        except NotFoundError as exc:
            raise RocketMQOptionError(f"rocketmq: option topic: topic {topic!r} does not exist ({exc.message})"
                                      ) from None
        out += found
    return sorted(out, key=lambda q: (q.topic, q.broker, q.queue_id))


def is_user_topic(topic: str) -> bool:
    """Not a retry, DLQ or system topic (RocketMQ's TopicValidator.isSystemTopic): what
    topicPattern may match, as Kafka's subscribePattern leaves internal topics out."""
    return not (is_system_topic(topic) or topic.startswith(constants.RETRY_GROUP_TOPIC_PREFIX)
                or topic.startswith(constants.DLQ_GROUP_TOPIC_PREFIX) or topic in constants.NOT_ALLOWED_SEND_TOPIC_SET)


async def list_topics(namesrv_addr: str, conn: Connection) -> list[str]:
    """Every user topic the NameServers know (GET_ALL_TOPIC_LIST_FROM_NAMESERVER, the first that answers):
    the proxy's gRPC API (MessagingService) has no topic listing. Signed with accessKey/secretKey."""
    api = MQClientAPI(timeout=conn.request_timeout)
    install_signing(api.remoting, (conn.access_key, conn.secret_key) if conn.access_key else None)
    errors = []
    try:
        for addr in namesrv_addr.split(";"):
            try:
                topics = await api.get_all_topic_list(addr)
                # The topics RocketMQ's brokers name after their cluster and themselves
                # (clusterTopicEnable, brokerTopicEnable) carry no user messages.
                info = await api.get_cluster_info(addr)
                own = set(info.cluster_addr_table) | set(info.broker_addr_table)
                return [t for t in topics if is_user_topic(t) and t not in own]
            except Exception as exc:  # noqa: BLE001 -- any failure: try the next NameServer
                errors.append(f"{addr}: {exc}")
    finally:
        await api.close()
    raise ConnectionError(f"rocketmq: option namesrvAddr: no NameServer answered the topic list ({'; '.join(errors)})")


async def pattern_queues(c: AsyncPullConsumer, topics: list[str]) -> list[MessageQueue]:
    """The queues of the topics topicPattern matched; a topic deleted since the listing is left out."""
    out: list[MessageQueue] = []
    for topic in topics:
        try:
            out += await c.queues(topic)
            c.invalidate_route(topic)
        except NotFoundError:
            log.info("topic %s matched topicPattern but has no route (deleted?): left out", topic)
    return sorted(out, key=lambda q: (q.topic, q.broker, q.queue_id))


async def offsets_of(c: AsyncPullConsumer, mqs: list[MessageQueue], which: str,
                     timestamp_ms: int | None = None) -> dict[MessageQueue, int]:
    """min ("earliest"), max ("latest") or first offset at/after ``timestamp_ms`` ("timestamp") of each queue."""
    async def one(mq: MessageQueue) -> int:
        if which == "earliest":
            return await c.min_offset(mq)
        if which == "latest":
            return await c.max_offset(mq)
        return await c.offset_for_timestamp(mq, timestamp_ms / 1000)

    values = await asyncio.gather(*(one(mq) for mq in mqs))
    return dict(zip(mqs, values, strict=True))


async def commit(c: AsyncPullConsumer, offsets: dict[MessageQueue, int]) -> None:
    if not c.running:
        await c.start()
    await c.commit(offsets)


def _data_loss(mq: MessageQueue, wanted: int, minimum: int, end: int) -> str:
    return (f"rocketmq: data loss in topic {mq.topic} queue {mq.broker}/{mq.queue_id}: offsets "
            f"[{wanted}, {min(minimum, end)}) are no longer available (the queue now starts at {minimum}; retention "
            f"removed them). Set failOnDataLoss=false to skip them.")


async def read_chunk(c: AsyncPullConsumer, mq: MessageQueue, start: int, end: int, expression: str,
                     fail_on_data_loss: bool) -> tuple[list[ReceivedMessage], int]:
    """Messages of ``mq`` with offsets in [start, min(end, start + CHUNK)) and the offset to go on
    from. Without a filter, offsets are contiguous, so up to PULLS_IN_FLIGHT PullMessage requests
    of consecutive 32-message slices run at once; a slice that came back short ends the chunk there."""
    stop = min(end, start + CHUNK)
    offset = start
    attempts = 0
    while True:
        try:
            if expression == "*":
                starts = list(range(offset, stop, PULL_BATCH))
                results: list = []
                for i in range(0, len(starts), PULLS_IN_FLIGHT):
                    group = starts[i:i + PULLS_IN_FLIGHT]
                    results += await asyncio.gather(*(c.pull(mq, s, min(PULL_BATCH, stop - s)) for s in group))
                messages: list[ReceivedMessage] = []
                nxt = offset
                for s, (got, next_offset) in zip(starts, results, strict=True):
                    if s != nxt:
                        break
                    # Without a filter a queue's offsets are contiguous: only the run of messages
                    # starting at s counts, and the read goes on right after it, whatever next
                    # offset the server named. A gap is retried below and fails loudly if it stays,
                    # never skipped (retention's removals come back as OffsetOutOfRangeError).
                    run = 0
                    while run < len(got) and got[run].queue_offset == s + run:
                        run += 1
                    if run < len(got) or (run < min(PULL_BATCH, stop - s) and next_offset > s + run):
                        log.warning("PullMessage of %s/%s/%d at %d: offsets %s, next offset %d; reading on from %d",
                                    mq.topic, mq.broker, mq.queue_id, s, [m.queue_offset for m in got][:8],
                                    next_offset, s + run)
                    messages += [m for m in got[:run] if m.queue_offset < end]
                    nxt = s + run
                    if run < min(PULL_BATCH, stop - s):
                        break
            else:
                got, next_offset = await c.pull(mq, offset, PULL_BATCH, 0.0, expression)
                messages = [m for m in got if m.queue_offset < end]
                nxt = next_offset
        except OffsetOutOfRangeError:
            minimum = await c.min_offset(mq)
            if offset >= minimum:
                raise
            if fail_on_data_loss:
                raise RocketMQReadError(_data_loss(mq, offset, minimum, end)) from None
            log.warning("%s: skipped offsets [%d, %d) of %s/%s/%d (failOnDataLoss=false)",
                        "data loss", offset, min(minimum, end), mq.topic, mq.broker, mq.queue_id)
            if minimum >= end:
                return [], end
            offset = minimum
            stop = min(end, offset + CHUNK)
            continue
        if messages or nxt > offset:
            return messages, min(nxt, end)
        # Nothing where the plan saw messages: a slave catching up, or the queue was truncated.
        attempts += 1
        if attempts > 20:
            maximum = await c.max_offset(mq)
            raise RocketMQReadError(f"rocketmq: topic {mq.topic} queue {mq.broker}/{mq.queue_id} has no message at "
                                    f"offset {offset} (planned range [{start}, {end}), queue max {maximum})")
        await asyncio.sleep(0.1)


def is_missing_group(exc: BaseException) -> bool:
    return isinstance(exc, ClientError) and exc.code in (Code.CONSUMER_GROUP_NOT_FOUND, Code.NOT_FOUND) \
        and "group" in exc.message.lower()
