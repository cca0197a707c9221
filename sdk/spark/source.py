"""The PySpark data source "rocketmq": batch and streaming reads and writes through the Proxy.

Reads plan fixed offset ranges per queue (``{"topic": {"broker": {"queueId": offset}}}`` offsets,
Spark checkpoints them), and a task reads exactly its range with PullMessage, so a replayed
micro-batch reads the same messages: exactly-once with an idempotent or transactional sink.
Admission control (Spark >= 4.2): ``maxMessagesPerTrigger`` (alias ``maxOffsetsPerTrigger``) is the
default ReadLimit and is split across queues in proportion to their backlog; ``minOffsetsPerTrigger``
with ``maxTriggerDelay`` skips triggers as Kafka's KafkaMicroBatchStream.delayBatch does;
Trigger.AvailableNow stops at the offsets present when the query started. Writes send each
partition's rows with the SDK's batching producer.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from orbitmq.clientcore.errors import ClientError
from orbitmq.clientcore.message import Message, MessageQueue, ReceivedMessage
from orbitmq.spark import clients
from orbitmq.spark.options import (
    DEFAULT_MAX_RECORDS_PER_PARTITION,
    EARLIEST,
    LATEST,
    Offsets,
    ReadOptions,
    RocketMQOptionError,
    Timestamps,
    WriteOptions,
    parse_read,
    parse_write,
    plan_ranges,
    queue_key,
    split_limit,
)

log = logging.getLogger("orbitmq.spark")

SCHEMA = ("topic string, broker string, queueId int, queueOffset long, messageId string, tag string, "
          "keys array<string>, body binary, properties map<string,string>, messageGroup string, "
          "bornTimestamp timestamp, storeTimestamp timestamp")
# includeProperties=false (Kafka's includeHeaders): the same columns without the properties map.
SCHEMA_WITHOUT_PROPERTIES = SCHEMA.replace(" properties map<string,string>,", "")
_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("broker", pa.string()), ("queueId", pa.int32()), ("queueOffset", pa.int64()),
    ("messageId", pa.string()), ("tag", pa.string()), ("keys", pa.list_(pa.string())), ("body", pa.binary()),
    ("properties", pa.map_(pa.string(), pa.string())), ("messageGroup", pa.string()),
    ("bornTimestamp", _TS), ("storeTimestamp", _TS)])
ARROW_SCHEMA_WITHOUT_PROPERTIES = ARROW_SCHEMA.remove(ARROW_SCHEMA.get_field_index("properties"))
# Kept for readers of this module: the default of maxRecordsPerPartition.
MAX_PARTITION_MESSAGES = DEFAULT_MAX_RECORDS_PER_PARTITION


def _micros(seconds: float | None) -> int | None:
    return None if seconds is None else int(round(seconds * 1000)) * 1000


def to_arrow(messages: list[ReceivedMessage], broker: str, include_properties: bool = True) -> pa.RecordBatch:
    cols = [
        [m.topic for m in messages], [broker] * len(messages), [m.queue_id for m in messages],
        [m.queue_offset for m in messages], [m.message_id for m in messages], [m.tag for m in messages],
        [m.keys for m in messages], [m.body for m in messages]]
    if include_properties:
        cols.append([list(m.properties.items()) for m in messages])
    cols += [[m.message_group for m in messages], [_micros(m.born_timestamp) for m in messages],
             [_micros(m.store_timestamp) for m in messages]]
    schema = ARROW_SCHEMA if include_properties else ARROW_SCHEMA_WITHOUT_PROPERTIES
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)],
                                      schema=schema)


# ---- offsets --------------------------------------------------------------------------------------


def _queue(topic: str, broker: str, qid: str) -> MessageQueue:
    return MessageQueue(topic, broker, int(qid))


def to_offsets(positions: dict[MessageQueue, int]) -> Offsets:
    """{topic: {broker: {queueId: offset}}} in a fixed order (Spark compares offsets as JSON)."""
    out: Offsets = {}
    for mq in sorted(positions, key=lambda q: (q.topic, q.broker, q.queue_id)):
        out.setdefault(mq.topic, {}).setdefault(mq.broker, {})[str(mq.queue_id)] = int(positions[mq])
    return out


def from_offsets(offsets: Offsets) -> dict[MessageQueue, int]:
    return {_queue(t, b, q): int(o) for t, brokers in offsets.items() for b, qs in brokers.items()
            for q, o in qs.items()}


@dataclass
class RocketMQPartition(InputPartition):
    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    def __init__(self, topic: str, broker: str, queue_id: int, start: int, end: int) -> None:
        super().__init__((topic, broker, queue_id, start, end))
        self.topic, self.broker, self.queue_id, self.start, self.end = topic, broker, queue_id, start, end


class _Planner:
    """Offsets and partitions: what the batch and the stream reader share (runs on the driver side)."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.conn = opts.conn

    def _run(self, coro):
        return clients.run(coro, self.conn)

    @property
    def client(self):
        return clients.consumer(self.conn, self.opts.pull_group)

    def queues(self) -> list[MessageQueue]:
        """The queues of option topic, or of every topic topicPattern matches now (listed again at
        each call, so a stream picks up new matching topics at its next micro-batch)."""
        if self.opts.topic_pattern is None:
            return self._run(clients.queues(self.client, self.opts.topics))
        names = self._run(clients.list_topics(self.opts.namesrv_addr, self.conn))
        return self._run(clients.pattern_queues(self.client, [t for t in names if self.opts.topic_allowed(t)]))

    def offsets(self, mqs: list[MessageQueue], which: str, timestamp_ms: int | None = None) -> dict[MessageQueue, int]:
        if not mqs:
            return {}
        return self._run(clients.offsets_of(self.client, mqs, which, timestamp_ms))

    def by_timestamp(self, mqs: list[MessageQueue], stamps: dict[MessageQueue, int]) -> dict[MessageQueue, int]:
        """First offset stored at/after each queue's timestamp (QueryOffset, policy TIMESTAMP: the
        broker's SEARCH_OFFSET_BY_TIMESTAMP), the queue's max offset when none is."""
        async def go() -> dict[MessageQueue, int]:
            found = {}
            for mq in mqs:
                found[mq] = await self.client.offset_for_timestamp(mq, stamps[mq] / 1000)
            return found
        return self._run(go()) if mqs else {}

    def _timestamps(self, spec: Timestamps, mqs: list[MessageQueue], name: str) -> dict[MessageQueue, int]:
        """The per-queue timestamps of ``spec``: every queue named must exist, and (Kafka's rule for
        starting/endingOffsetsByTimestamp) every queue of the subscribed topics must be named."""
        by_topic: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_topic.setdefault(mq.topic, []).append(mq)
        out: dict[MessageQueue, int] = {}
        for topic, queues in spec.items():
            if topic not in by_topic:
                raise RocketMQOptionError(f"rocketmq: option {name} names topic {topic!r}, which has no readable "
                                          f"queue (known: {', '.join(sorted(by_topic)) or 'none'})")
            known = {queue_key(mq.broker, mq.queue_id): mq for mq in by_topic[topic]}
            for key, ts in queues.items():
                mq = known.get(key)
                if mq is None:
                    raise RocketMQOptionError(
                        f"rocketmq: option {name} names queue {key} of topic {topic}, which has no such readable "
                        f"queue (its queues: {', '.join(sorted(known))})")
                out[mq] = ts
        missing = [mq for mq in mqs if mq not in out]
        if missing:
            names = ", ".join(f"{mq.topic} {queue_key(mq.broker, mq.queue_id)}" for mq in missing[:8])
            raise RocketMQOptionError(f"rocketmq: option {name} gives no timestamp for {names}"
                                      f"{' ...' if len(missing) > 8 else ''}: name every queue of the subscribed "
                                      f"topics (as Kafka asks of every partition)")
        return out

    def _start_by_timestamp(self, mqs: list[MessageQueue], stamps: dict[MessageQueue, int],
                            name: str) -> dict[MessageQueue, int]:
        found = self.by_timestamp(mqs, stamps)
        latest = self.offsets(mqs, "latest")  # after the search: a queue grown meanwhile still matches
        for mq in mqs:
            if found[mq] < latest[mq]:
                continue
            strategy = self.opts.starting_by_timestamp_strategy or ("latest" if name == "startingTimestamp" else "error")
            if strategy == "error":
                raise RocketMQOptionError(
                    f"rocketmq: option {name}: no message of topic {mq.topic} queue {queue_key(mq.broker, mq.queue_id)}"
                    f" was stored at or after {stamps[mq]} (startingOffsetsByTimestampStrategy=error; set it to "
                    f"latest to start such queues at their end)")
            found[mq] = latest[mq]
        return found

    def resolve(self, spec, timestamp_ms: int | None, mqs: list[MessageQueue], name: str,
                by_timestamp: Timestamps | None = None) -> dict[MessageQueue, int]:
        """startingOffsets/endingOffsets (or the timestamps) as an offset of every queue."""
        starting = name.startswith("starting")
        if by_timestamp is not None:
            tname = f"{name}ByTimestamp"
            stamps = self._timestamps(by_timestamp, mqs, tname)
            # endingOffsetsByTimestamp without a match ends at latest, as Kafka's does.
            return self._start_by_timestamp(mqs, stamps, tname) if starting else self.by_timestamp(mqs, stamps)
        if timestamp_ms is not None:
            tname = "startingTimestamp" if starting else "endingTimestamp"
            if starting:
                return self._start_by_timestamp(mqs, dict.fromkeys(mqs, timestamp_ms), tname)
            return self.offsets(mqs, "timestamp", timestamp_ms)
        if isinstance(spec, str):
            return self.offsets(mqs, spec)
        given = from_offsets(spec)
        unknown = [mq for mq in given if mq not in mqs]
        if unknown:
            mq = unknown[0]
            raise RocketMQOptionError(f"rocketmq: option {name} names queue {mq.broker}/{mq.queue_id} of topic "
                                      f"{mq.topic}, which has no such readable queue")
        earliest = self.offsets(mqs, "earliest")
        latest = self.offsets(mqs, "latest")
        out = {}
        for mq in mqs:
            value = given.get(mq, EARLIEST if starting else LATEST)
            out[mq] = earliest[mq] if value == EARLIEST else latest[mq] if value == LATEST else value
        return out

    def check_loss(self, starts: dict[MessageQueue, int]) -> dict[MessageQueue, int]:
        """Starts below a queue's minimum: fail (failOnDataLoss) or move them up to it."""
        minimum = self.offsets(list(starts), "earliest")
        out = dict(starts)
        for mq, start in starts.items():
            if start < minimum[mq]:
                if self.opts.fail_on_data_loss:
                    raise clients.RocketMQReadError(clients._data_loss(mq, start, minimum[mq], minimum[mq]))
                log.warning("data loss: skipped offsets [%d, %d) of %s/%s/%d (failOnDataLoss=false)", start,
                            minimum[mq], mq.topic, mq.broker, mq.queue_id)
                out[mq] = minimum[mq]
        return out

    def partitions(self, starts: dict[MessageQueue, int], ends: dict[MessageQueue, int]) -> list[RocketMQPartition]:
        """Each queue's [start, end) as one or more contiguous offset slices (maxRecordsPerPartition,
        minPartitions): a task reads exactly its slice, so no message is read twice or skipped."""
        todo = {mq: starts[mq] for mq in ends if ends[mq] > starts[mq]}
        if not todo:
            return []
        todo = self.check_loss(todo)
        ranges = {mq: (start, ends[mq]) for mq, start in todo.items() if start < ends[mq]}  # else all lost
        max_records = self.opts.max_records_per_partition or DEFAULT_MAX_RECORDS_PER_PARTITION
        return [RocketMQPartition(mq.topic, mq.broker, mq.queue_id, lo, hi)
                for mq, lo, hi in plan_ranges(ranges, self.opts.min_partitions, max_records)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RocketMQPartition):
            return  # Spark runs one empty partition when partitions() planned none
        mq = MessageQueue(partition.topic, partition.broker, partition.queue_id)
        offset = partition.start
        client = clients.consumer(self.conn, self.opts.pull_group)
        while offset < partition.end:
            messages, offset = self._run(clients.read_chunk(client, mq, offset, partition.end,
                                                            self.opts.filter_expression, self.opts.fail_on_data_loss))
            if messages:
                yield to_arrow(messages, mq.broker, self.opts.include_properties)


def _start_positions(planner: _Planner, mqs: list[MessageQueue]) -> dict[MessageQueue, int]:
    o = planner.opts
    return planner.resolve(o.starting, o.starting_timestamp, mqs, "startingOffsets", o.starting_by_timestamp)


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.planner = _Planner(opts)
        mqs = self.planner.queues()  # checks the proxies and the topics before anything is read
        self.starts = _start_positions(self.planner, mqs)
        self.ends = self.planner.resolve(opts.ending, opts.ending_timestamp, mqs, "endingOffsets",
                                         opts.ending_by_timestamp)

    def partitions(self) -> list[RocketMQPartition]:
        return self.planner.partitions(self.starts, self.ends)

    def read(self, partition: RocketMQPartition) -> Iterator[pa.RecordBatch]:
        return self.planner.read(partition)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.planner = _Planner(opts)
        self.planner.queues()  # checks the proxies and the topics before the query starts
        self._target: dict[MessageQueue, int] | None = None  # Trigger.AvailableNow's end
        self._latest: dict[MessageQueue, int] | None = None
        self._committed: dict | None = None
        # KafkaMicroBatchStream.lastTriggerMillis: 0, so the first trigger is never delayed.
        self._last_trigger_ms = 0

    def initialOffset(self) -> dict:
        return to_offsets(_start_positions(self.planner, self.planner.queues()))

    def getDefaultReadLimit(self) -> ReadLimit:
        # pyspark's ReadLimit registry has no CompositeReadLimit: with both bounds the default is the
        # upper one and latestOffset applies minOffsetsPerTrigger from the options itself.
        n, low = self.opts.max_messages_per_trigger, self.opts.min_messages_per_trigger
        if n:
            return ReadMaxRows(n)
        return ReadMinRows(low) if low else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.planner.offsets(self.planner.queues(), "latest")

    def _delay(self, limit: ReadLimit, available: int) -> bool:
        """Skip this trigger? (KafkaMicroBatchStream.delayBatch): while fewer than
        minOffsetsPerTrigger messages are available and maxTriggerDelay has not passed since the
        last batch. ReadAllAvailable (Trigger.Once) and Trigger.AvailableNow never wait: nothing
        arrives past the AvailableNow target, so waiting could only hang the query."""
        if isinstance(limit, ReadAllAvailable) or self._target is not None:
            return False
        low = limit.min_rows if isinstance(limit, ReadMinRows) else self.opts.min_messages_per_trigger
        if not low:
            return False
        now = int(time.time() * 1000)
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        if available < low:
            return True
        self._last_trigger_ms = now
        return False

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # Spark plans the next batch once the one ending at ``start`` has completed (its commit log
        # written): commit ``start`` to the group now, not a trigger later when Spark calls commit(),
        # so the lag shows the last batch too when the query then idles or ends (AvailableNow).
        self.commit(start)
        starts = from_offsets(start)
        mqs = self.planner.queues()
        new = [mq for mq in mqs if mq not in starts]
        if new:  # topic expanded, a new broker set, a new topic matching topicPattern: from the earliest
            earliest = self.planner.offsets(new, "earliest")
            log.info("new queues %s start at their earliest offsets", ", ".join(map(str, new)))
            starts.update(earliest)
        latest = self.planner.offsets(mqs, "latest")
        self._latest = dict(latest)
        if self._target is not None:
            latest = {mq: min(v, self._target.get(mq, starts[mq])) for mq, v in latest.items()}
        ends = dict(starts)
        backlog = {mq: max(0, latest[mq] - starts[mq]) for mq in mqs}
        if self._delay(limit, sum(backlog.values())):
            log.debug("trigger skipped: %d messages available, minOffsetsPerTrigger not reached",
                      sum(backlog.values()))
            return start
        if isinstance(limit, ReadMaxRows):
            shares = split_limit(limit.max_rows, backlog)
        else:
            shares = backlog
        for mq, n in shares.items():
            ends[mq] = starts[mq] + n
        return to_offsets(ends)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_offsets(self._latest)

    def partitions(self, start: dict, end: dict) -> list[RocketMQPartition]:
        starts, ends = from_offsets(start), from_offsets(end)
        missing = [mq for mq in ends if mq not in starts]
        if missing:
            starts.update(self.planner.offsets(missing, "earliest"))
        return self.planner.partitions(starts, ends)

    def read(self, partition: RocketMQPartition) -> Iterator[pa.RecordBatch]:
        return self.planner.read(partition)

    def commit(self, end: dict) -> None:
        if self.opts.consumer_group and end != self._committed:
            self._committed = end
            offsets = from_offsets(end)
            client = clients.consumer(self.opts.conn, self.opts.consumer_group)
            try:
                clients.run(clients.commit(client, offsets), self.opts.conn)
            except ClientError as exc:  # the query goes on; the lag shows the last committed offsets
                log.warning("committing offsets to group %s failed: %s", self.opts.consumer_group, exc)

    def stop(self) -> None:
        """The query ended: the committing client (a Telemetry session) says goodbye to the proxies."""
        if self.opts.consumer_group:
            clients.close_consumer(self.opts.conn, self.opts.consumer_group)


# ---- writes ---------------------------------------------------------------------------------------

_WRITE_COLUMNS = {
    "body": ((BinaryType, StringType), "binary or string"),
    "topic": ((StringType,), "string"),
    "tag": ((StringType,), "string"),
    "keys": ((ArrayType, StringType), "array<string> or string"),
    "properties": ((MapType,), "map<string,string>"),
    "messageGroup": ((StringType,), "string"),
    "deliveryTimestamp": ((TimestampType, LongType), "timestamp or long (epoch milliseconds)"),
}


def check_write_schema(schema: StructType, opts: WriteOptions) -> None:
    fields = {f.name: f for f in schema.fields}
    if "body" not in fields:
        raise RocketMQOptionError(f"rocketmq: the DataFrame to write needs a column body (binary or string); it "
                                  f"has {', '.join(fields) or 'no columns'}")
    if opts.topic is None and "topic" not in fields:
        raise RocketMQOptionError("rocketmq: set option topic or give the DataFrame a topic column")
    for name, (types, text) in _WRITE_COLUMNS.items():
        f = fields.get(name)
        if f is None:
            continue
        dt = f.dataType
        ok = isinstance(dt, types)
        if isinstance(dt, ArrayType):
            ok = ok and isinstance(dt.elementType, StringType)
        if isinstance(dt, MapType):
            ok = isinstance(dt.keyType, StringType) and isinstance(dt.valueType, StringType)
        if not ok:
            raise RocketMQOptionError(f"rocketmq: column {name} must be {text}, not {dt.simpleString()}")


@dataclass
class SentMessages(WriterCommitMessage):
    count: int
    partition: int


class _Sender:
    """What the batch and the stream writer share: rows of Arrow batches -> SDK Messages -> Producer."""

    WINDOW = 20_000  # sends outstanding before the task waits for the oldest

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.opts = opts
        self.columns = [f.name for f in schema.fields if f.name in _WRITE_COLUMNS]
        self.write_id = uuid.uuid4().hex  # stable across task retries of one batch write

    def _ids(self) -> tuple[str, str, int]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        query = tc.getLocalProperty("sql.streaming.queryId") if tc else None
        batch = tc.getLocalProperty("streaming.sql.batchId") if tc else None
        return query or self.write_id, batch or "0", tc.partitionId() if tc else 0

    def send(self, batches: Iterator[pa.RecordBatch]) -> SentMessages:
        opts = self.opts
        query, batch_id, partition = self._ids()
        producer = None
        pending: list = []
        row = 0
        checked_topics: set[str] = set()
        for rb in batches:
            if rb.num_rows == 0:
                continue
            cols = {name: rb.column(name).to_pylist() for name in self.columns if name in rb.schema.names}
            messages = self._messages(cols, rb.num_rows, row, query, batch_id, partition)
            if producer is None:
                producer = clients.producer(opts.conn)
            for topic in {m.topic for m in messages} - checked_topics:
                try:
                    clients.run(producer._p.route(topic), opts.conn)
                except ClientError as exc:
                    raise RocketMQOptionError(f"rocketmq: topic {topic!r} cannot be written: {exc}") from None
                checked_topics.add(topic)
            for m in messages:
                pending.append((producer.send_async(m), m))
                if len(pending) >= self.WINDOW:
                    self._wait(pending[: self.WINDOW // 2])
                    del pending[: self.WINDOW // 2]
            row += rb.num_rows
        self._wait(pending)
        return SentMessages(row, partition)

    @staticmethod
    def _wait(pending: list) -> None:
        for future, m in pending:
            try:
                future.result()
            except ClientError as exc:
                raise RuntimeError(f"rocketmq: sending to topic {m.topic} failed: {exc.code_name} "
                                   f"({exc.code}): {exc.message}") from exc

    def _messages(self, cols: dict[str, list], n: int, first_row: int, query: str, batch_id: str,
                  partition: int) -> list[Message]:
        """Every row of one Arrow batch as a Message, all checked before any is sent."""
        opts = self.opts
        bodies = cols["body"]
        topics = cols.get("topic")
        out = []
        for i in range(n):
            body = bodies[i]
            if body is None:
                raise RocketMQOptionError(f"rocketmq: column body is null in row {first_row + i} of partition "
                                          f"{partition}: every message needs a body")
            if len(body) == 0:
                raise RocketMQOptionError(f"rocketmq: column body is empty in row {first_row + i} of partition "
                                          f"{partition}: RocketMQ refuses empty messages")
            topic = opts.topic or (topics[i] if topics else None)
            if not topic:
                raise RocketMQOptionError(f"rocketmq: column topic is null in row {first_row + i} of partition "
                                          f"{partition} and option topic is not set")
            keys = cols["keys"][i] if "keys" in cols else None
            props = cols["properties"][i] if "properties" in cols else None
            delivery = cols["deliveryTimestamp"][i] if "deliveryTimestamp" in cols else None
            if delivery is not None:
                delivery = delivery.timestamp() if hasattr(delivery, "timestamp") else delivery / 1000
            mid = None
            if opts.deterministic_message_ids:
                raw = f"{query}/{batch_id}/{partition}/{first_row + i}".encode()
                mid = hashlib.md5(raw, usedforsecurity=False).hexdigest().upper()
            m = Message(topic, body, tag=cols["tag"][i] if "tag" in cols else None,
                        keys=[k for k in keys if k is not None] if isinstance(keys, list) else keys,
                        properties=dict(props) if props else None,
                        message_group=cols["messageGroup"][i] if "messageGroup" in cols else None,
                        delivery_timestamp=delivery, message_id=mid)
            try:
                m.validate()
            except (ClientError, TypeError) as exc:
                raise RocketMQOptionError(f"rocketmq: row {first_row + i} of partition {partition}: {exc}") from None
            out.append(m)
        return out


class RocketMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.sender = _Sender(opts, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        return self.sender.send(iterator)


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once like Kafka's sink; deterministicMessageIds makes a replayed batch resend the same ids."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        self.sender = _Sender(opts, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentMessages:
        return self.sender.send(iterator)

    def commit(self, messages: list, batchId: int) -> None:  # noqa: N803 -- Spark's name
        log.info("batch %d: %d messages sent", batchId, sum(m.count for m in messages if m is not None))

    def abort(self, messages: list, batchId: int) -> None:  # noqa: N803
        log.warning("batch %d aborted: messages already sent stay (at-least-once)", batchId)


def _check_topic(opts: WriteOptions) -> None:
    if opts.topic is None:
        return
    c = clients.consumer(opts.conn, "orbitmq-spark-sink")
    clients.run(clients.queues(c, [opts.topic]), opts.conn)


class RocketMQDataSource(DataSource):
    """``spark.read/readStream.format("rocketmq")`` and ``df.write/writeStream.format("rocketmq")``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        """The columns; without properties when includeProperties=false (checked again, with every
        other option, when the reader is built)."""
        lowered = {str(k).lower(): v for k, v in self.options.items()}
        raw = lowered.get("includeproperties")
        if raw is not None and str(raw).strip().lower() not in ("true", "false"):
            raise RocketMQOptionError(f"rocketmq: option includeProperties must be true or false, not {raw!r}")
        return SCHEMA_WITHOUT_PROPERTIES if str(raw).strip().lower() == "false" else SCHEMA

    def reader(self, schema: StructType) -> RocketMQBatchReader:
        return RocketMQBatchReader(parse_read(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:
        return RocketMQStreamReader(parse_read(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQBatchWriter:
        opts = parse_write(self.options)
        check_write_schema(schema, opts)
        _check_topic(opts)
        return RocketMQBatchWriter(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        opts = parse_write(self.options)
        check_write_schema(schema, opts)
        _check_topic(opts)
        return RocketMQStreamWriter(opts, schema)
