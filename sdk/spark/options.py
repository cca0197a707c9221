"""The options of the "rocketmq" data source: parsed and checked before anything is read or sent.

Pure Python (no pyspark import), so the checks are unit-testable and run wherever Spark first
builds the reader or writer: on the driver side, before any task starts. Every error names the
option (``RocketMQOptionError``); an option that does not apply to the way the source is used
(``endingOffsets`` on a stream, ``maxMessagesPerTrigger`` on a batch) is refused, not ignored.

Offsets everywhere have the shape of rocketmq-spark's: ``{"topic": {"broker": {"queueId": offset}}}``
with string keys (Spark keeps offsets as JSON); in ``startingOffsets`` -2 means earliest and -1
latest, as in Kafka's and rocketmq-spark's options.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from orbitmq.clientcore.config import ClientConfig, Credentials, parse_endpoints

EARLIEST, LATEST = -2, -1

# Lower-case (Spark hands Python data sources a case-insensitive dict) -> spelling in messages.
_COMMON = {"endpoints": "endpoints", "topic": "topic", "accesskey": "accessKey", "secretkey": "secretKey",
           "tls": "tls", "tlscafile": "tlsCaFile", "tlscertfile": "tlsCertFile", "tlskeyfile": "tlsKeyFile",
           "requesttimeout": "requestTimeout"}
READ_OPTIONS = {**_COMMON, "filterexpression": "filterExpression", "startingoffsets": "startingOffsets",
                "startingtimestamp": "startingTimestamp", "failondataloss": "failOnDataLoss",
                "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
                "startingoffsetsbytimestampstrategy": "startingOffsetsByTimestampStrategy",
                "topicpattern": "topicPattern", "namesrvaddr": "namesrvAddr",
                "minpartitions": "minPartitions", "maxrecordsperpartition": "maxRecordsPerPartition",
                "includeproperties": "includeProperties"}
BATCH_READ_OPTIONS = {**READ_OPTIONS, "endingoffsets": "endingOffsets", "endingtimestamp": "endingTimestamp",
                      "endingoffsetsbytimestamp": "endingOffsetsByTimestamp"}
STREAM_READ_OPTIONS = {**READ_OPTIONS, "maxmessagespertrigger": "maxMessagesPerTrigger",
                       "maxoffsetspertrigger": "maxOffsetsPerTrigger", "minoffsetspertrigger": "minOffsetsPerTrigger",
                       "maxtriggerdelay": "maxTriggerDelay", "consumergroup": "consumerGroup"}
WRITE_OPTIONS = {**_COMMON, "deterministicmessageids": "deterministicMessageIds"}
# What Spark itself may pass along with the user's options: writeStream's checkpoint, and the
# name DataStreamWriter.queryName keeps among the writer's options (a Declarative Pipeline's sink
# flow, SinkWrite, names its query after the flow).
_SPARK_OWN = {"checkpointlocation", "queryname"}

# The group PullMessage names when the query commits no offsets (brokers create it on first use
# with autoCreateSubscriptionGroup=true, RocketMQ's default; otherwise create it or set consumerGroup).
DEFAULT_PULL_GROUP = "orbitmq-spark-source"

Offsets = dict[str, dict[str, dict[str, int]]]
# startingOffsetsByTimestamp / endingOffsetsByTimestamp: {"topic": {"broker/queueId": epoch ms}}
Timestamps = dict[str, dict[str, int]]

# Kafka's maxTriggerDelay default (KafkaSourceProvider.DEFAULT_MAX_TRIGGER_DELAY).
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
# A queue range longer than this is read by several tasks unless maxRecordsPerPartition says
# otherwise, so a large backlog keeps every core busy to the end.
DEFAULT_MAX_RECORDS_PER_PARTITION = 20_000


class RocketMQOptionError(ValueError):
    """A bad option (or column) of the "rocketmq" data source, named in the message."""


def _fail(message: str) -> RocketMQOptionError:
    return RocketMQOptionError(f"rocketmq: {message}")


@dataclass
class Connection:
    """What every client of one query needs: picklable, so it travels to the executors."""

    endpoints: str
    access_key: str | None = None
    secret_key: str | None = None
    tls: bool = False
    request_timeout: float = 10.0
    # PEM files, read where the client runs (the driver and every executor): the CA the proxy's
    # certificate is checked against, and the client certificate and key of mutual TLS.
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    def client_config(self) -> ClientConfig:
        creds = Credentials(self.access_key, self.secret_key) if self.access_key else None
        return ClientConfig(self.endpoints, credentials=creds, tls=self.tls, request_timeout=self.request_timeout,
                            ca_file=self.tls_ca_file, cert_file=self.tls_cert_file, key_file=self.tls_key_file)

    def key(self) -> tuple:
        return (self.endpoints, self.access_key, self.secret_key, self.tls, self.request_timeout, self.tls_ca_file,
                self.tls_cert_file, self.tls_key_file)


@dataclass
class ReadOptions:
    conn: Connection
    topics: list[str]
    filter_expression: str = "*"
    starting: str | Offsets = "latest"  # "earliest" | "latest" | offsets JSON
    starting_timestamp: int | None = None
    ending: str | Offsets = "latest"
    ending_timestamp: int | None = None
    max_messages_per_trigger: int | None = None
    min_messages_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    starting_by_timestamp: Timestamps | None = None
    # "error" | "latest"; None: error for startingOffsetsByTimestamp (Kafka's default), latest for
    # startingTimestamp (its behaviour before the strategy option existed).
    starting_by_timestamp_strategy: str | None = None
    ending_by_timestamp: Timestamps | None = None
    topic_pattern: re.Pattern | None = None
    namesrv_addr: str | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_properties: bool = True
    fail_on_data_loss: bool = True
    consumer_group: str | None = None
    streaming: bool = False
    given: set[str] = field(default_factory=set)

    @property
    def pull_group(self) -> str:
        return self.consumer_group or DEFAULT_PULL_GROUP

    def topic_allowed(self, topic: str) -> bool:
        """Is ``topic`` one this read subscribes to (the list, or a full match of topicPattern)?"""
        if self.topic_pattern is not None:
            return self.topic_pattern.fullmatch(topic) is not None
        return topic in self.topics


@dataclass
class WriteOptions:
    conn: Connection
    topic: str | None = None
    deterministic_message_ids: bool = False


def _check_known(options: Mapping[str, str], known: dict[str, str], what: str) -> dict[str, str]:
    lowered = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(k for k in lowered if k not in known and k not in _SPARK_OWN)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        elsewhere = [k for k in unknown if k in BATCH_READ_OPTIONS or k in STREAM_READ_OPTIONS or k in WRITE_OPTIONS]
        hint = f" ({', '.join(elsewhere)} does not apply to {what})" if elsewhere else ""
        raise _fail(f"unknown option {names} for {what}{hint}; known options: {', '.join(sorted(known.values()))}")
    return lowered


def _bool(opts: dict[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise _fail(f"option {name} must be true or false, not {raw!r}")
    return value == "true"


def _int(opts: dict[str, str], key: str, name: str, minimum: int) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise _fail(f"option {name} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise _fail(f"option {name} must be >= {minimum}, not {value}")
    return value


def _connection(opts: dict[str, str]) -> Connection:
    endpoints = opts.get("endpoints")
    if not endpoints or not str(endpoints).strip():
        raise _fail("option endpoints is required: the proxies as 'host:port[;host:port...]'")
    try:
        parse_endpoints(str(endpoints))
    except (TypeError, ValueError) as exc:
        raise _fail(f"option endpoints: {exc}") from None
    ak, sk = opts.get("accesskey"), opts.get("secretkey")
    if bool(ak) != bool(sk):
        raise _fail("options accessKey and secretKey must be given together")
    timeout = opts.get("requesttimeout")
    seconds = 10.0
    if timeout is not None:
        try:
            seconds = float(timeout)
        except ValueError:
            raise _fail(f"option requestTimeout must be seconds, not {timeout!r}") from None
        if seconds <= 0:
            raise _fail(f"option requestTimeout must be > 0, not {timeout!r}")
    ca, cert, key = (str(opts[k]).strip() if opts.get(k) is not None else None
                     for k in ("tlscafile", "tlscertfile", "tlskeyfile"))
    for name, value in (("tlsCaFile", ca), ("tlsCertFile", cert), ("tlsKeyFile", key)):
        if value == "":
            raise _fail(f"option {name} is blank: give a PEM file's path or leave it out")
    if bool(cert) != bool(key):
        raise _fail("options tlsCertFile and tlsKeyFile must be given together (the client certificate and its key)")
    tls = _bool(opts, "tls", "tls", False)
    if (ca or cert) and opts.get("tls") is not None and not tls:
        raise _fail("options tlsCaFile/tlsCertFile/tlsKeyFile need TLS: leave tls out or set it to true")
    return Connection(str(endpoints), ak or None, sk or None, tls or bool(ca or cert), seconds, ca, cert, key)


def _topics(opts: dict[str, str], required: bool) -> list[str]:
    raw = opts.get("topic")
    if raw is None:
        if required:
            raise _fail("option topic is required (one topic or a comma list)")
        return []
    topics = [t.strip() for t in str(raw).split(",")]
    if not all(topics):
        raise _fail(f"option topic has a blank name: {raw!r}")
    return list(dict.fromkeys(topics))


def _subscription(opts: dict[str, str]) -> tuple[list[str], re.Pattern | None, str | None]:
    """Exactly one of topic (a list) and topicPattern (a regex, Kafka's subscribePattern), the
    NameServer topicPattern lists topics from (the proxy's gRPC API has no topic listing)."""
    has_topic, has_pattern = "topic" in opts, "topicpattern" in opts
    if has_topic and has_pattern:
        raise _fail("options topic and topicPattern exclude each other: give exactly one")
    namesrv = opts.get("namesrvaddr")
    if not has_pattern:
        if namesrv is not None:
            raise _fail("option namesrvAddr is only used with topicPattern (to list the cluster's topics)")
        if not has_topic:
            raise _fail("option topic is required (one topic or a comma list), or topicPattern (a regex)")
        return _topics(opts, required=True), None, None
    raw = str(opts["topicpattern"])
    if not raw.strip():
        raise _fail("option topicPattern cannot be blank")
    try:
        pattern = re.compile(raw)
    except re.error as exc:
        raise _fail(f"option topicPattern is not a valid regular expression ({exc}): {raw!r}") from None
    if namesrv is None or not str(namesrv).strip():
        raise _fail("option topicPattern needs option namesrvAddr (host:port[;host:port...] of the NameServers): "
                    "the topics are listed there")
    addrs = [a.strip() for a in str(namesrv).split(";") if a.strip()]
    for addr in addrs:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit():
            raise _fail(f"option namesrvAddr: bad address {addr!r}, expected host:port")
    return [], pattern, ";".join(addrs)


def _subscribed_text(topics: list[str], pattern: re.Pattern | None) -> str:
    return f"option topicPattern ({pattern.pattern})" if pattern is not None else f"option topic ({', '.join(topics)})"


def _check_topic_name(name: str, topic: str, topics: list[str], pattern: re.Pattern | None) -> None:
    ok = pattern.fullmatch(topic) is not None if pattern is not None else topic in topics
    if not ok:
        raise _fail(f"option {name} names topic {topic!r}, which is not in {_subscribed_text(topics, pattern)}")


def parse_offsets(raw: str, name: str, topics: list[str], allow_earliest: bool,
                  pattern: re.Pattern | None = None) -> str | Offsets:
    """"earliest" | "latest" | {"topic": {"broker": {"queueId": offset}}} (checked shape)."""
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        if text.lower() == "earliest" and not allow_earliest:
            raise _fail(f"option {name} cannot be 'earliest'")
        return text.lower()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"option {name} is neither 'earliest', 'latest' nor valid JSON ({exc.msg} at char {exc.pos}): "
                    f"{text!r}; expected e.g. {{\"{topics[0] if topics else 'topic'}\": {{\"broker-a\": {{\"0\": 42}}}}}}"
                    ) from None
    if not isinstance(value, dict) or not value:
        raise _fail(f"option {name} must be a JSON object {{topic: {{broker: {{queueId: offset}}}}}}, not {text!r}")
    out: Offsets = {}
    lowest = EARLIEST if allow_earliest else LATEST
    for topic, brokers in value.items():
        _check_topic_name(name, topic, topics, pattern)
        if not isinstance(brokers, dict):
            raise _fail(f"option {name}: {topic!r} must map broker names to {{queueId: offset}}, not {brokers!r}")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise _fail(f"option {name}: {topic}/{broker} must map queue ids to offsets, not {queues!r}")
            for qid, offset in queues.items():
                if not str(qid).isdigit():
                    raise _fail(f"option {name}: queue id {qid!r} of {topic}/{broker} is not a number")
                if not isinstance(offset, int) or isinstance(offset, bool) or offset < lowest:
                    raise _fail(f"option {name}: offset {offset!r} of {topic}/{broker}/{qid} must be an integer "
                                f">= {lowest}")
                out.setdefault(topic, {}).setdefault(broker, {})[str(int(qid))] = offset
    return out


def queue_key(broker: str, queue_id: int) -> str:
    """The queue key of the ByTimestamp options: "<brokerName>/<queueId>" (Kafka's partition number)."""
    return f"{broker}/{queue_id}"


def parse_queue_key(key: str) -> tuple[str, int] | None:
    broker, sep, qid = str(key).rpartition("/")
    if not sep or not broker or not qid.isdigit():
        return None
    return broker, int(qid)


def parse_timestamps(raw: str, name: str, topics: list[str], pattern: re.Pattern | None = None) -> Timestamps:
    """{"topic": {"broker/queueId": epoch ms}}: Kafka's {"topic": {"partition": ts}} with RocketMQ's
    queue key (a queue is named by its broker and its id)."""
    text = str(raw).strip()
    example = f'{{"{topics[0] if topics else "topic"}": {{"broker-a/0": 1700000000000}}}}'
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"option {name} is not valid JSON ({exc.msg} at char {exc.pos}): {text!r}; expected e.g. "
                    f"{example}") from None
    if not isinstance(value, dict) or not value:
        raise _fail(f"option {name} must be a JSON object {{topic: {{\"broker/queueId\": epoch ms}}}}, e.g. {example}, "
                    f"not {text!r}")
    out: Timestamps = {}
    for topic, queues in value.items():
        _check_topic_name(name, topic, topics, pattern)
        if not isinstance(queues, dict) or not queues:
            raise _fail(f"option {name}: {topic!r} must map queue keys \"broker/queueId\" to epoch ms, not {queues!r}")
        for key, ts in queues.items():
            parsed = parse_queue_key(key)
            if parsed is None:
                raise _fail(f"option {name}: queue key {key!r} of topic {topic} is not \"<brokerName>/<queueId>\" "
                            f"(e.g. \"broker-a/0\")")
            if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
                raise _fail(f"option {name}: timestamp {ts!r} of {topic} {key} must be epoch milliseconds >= 0")
            out.setdefault(topic, {})[queue_key(*parsed)] = ts
    return out


_DURATION = re.compile(r"(-?[0-9]+)([a-z]+)?")
# Spark's JavaUtils.timeStringAsMs units (a bare number is milliseconds).
_UNITS_MS = {None: 1, "us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
             "d": 86_400_000}


def parse_duration_ms(raw: str, name: str) -> int:
    """A Spark duration ("15m", "30s", "100ms", "2h", "1d"; a bare number is ms) as milliseconds."""
    text = str(raw).strip().lower()
    match = _DURATION.fullmatch(text)
    if match is None or match.group(2) not in _UNITS_MS:
        raise _fail(f"option {name} must be a duration such as '15m', '30s', '500ms', '2h' or '1d', not {raw!r}")
    value = int(match.group(1))
    if value < 0:
        raise _fail(f"option {name} cannot be negative: {raw!r}")
    return int(value * _UNITS_MS[match.group(2)])


def parse_read(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    known = STREAM_READ_OPTIONS if streaming else BATCH_READ_OPTIONS
    opts = _check_known(options, known, "a streaming read" if streaming else "a batch read")
    conn = _connection(opts)
    topics, pattern, namesrv = _subscription(opts)
    ro = ReadOptions(conn, topics, streaming=streaming, given=set(opts), topic_pattern=pattern, namesrv_addr=namesrv)
    expr = opts.get("filterexpression")
    if expr is not None:
        if not str(expr).strip():
            raise _fail("option filterExpression cannot be blank (use '*' for every message)")
        ro.filter_expression = str(expr).strip()
    ro.starting = "latest" if streaming else "earliest"
    starts = [n for k, n in (("startingoffsets", "startingOffsets"), ("startingtimestamp", "startingTimestamp"),
                             ("startingoffsetsbytimestamp", "startingOffsetsByTimestamp")) if k in opts]
    if len(starts) > 1:
        raise _fail(f"options {' and '.join(starts)} exclude each other")
    if "startingoffsets" in opts:
        ro.starting = parse_offsets(opts["startingoffsets"], "startingOffsets", topics, True, pattern)
    ro.starting_timestamp = _int(opts, "startingtimestamp", "startingTimestamp", 0)
    if "startingoffsetsbytimestamp" in opts:
        ro.starting_by_timestamp = parse_timestamps(opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp",
                                                    topics, pattern)
    strategy = opts.get("startingoffsetsbytimestampstrategy")
    if strategy is not None:
        ro.starting_by_timestamp_strategy = str(strategy).strip().lower()
        if ro.starting_by_timestamp_strategy not in ("error", "latest"):
            raise _fail(f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}")
        if ro.starting_by_timestamp is None and ro.starting_timestamp is None:
            raise _fail("option startingOffsetsByTimestampStrategy applies to startingOffsetsByTimestamp or "
                        "startingTimestamp: give one of them")
    if not streaming:
        ends = [n for k, n in (("endingoffsets", "endingOffsets"), ("endingtimestamp", "endingTimestamp"),
                               ("endingoffsetsbytimestamp", "endingOffsetsByTimestamp")) if k in opts]
        if len(ends) > 1:
            raise _fail(f"options {' and '.join(ends)} exclude each other")
        if "endingoffsets" in opts:
            ro.ending = parse_offsets(opts["endingoffsets"], "endingOffsets", topics, False, pattern)
        ro.ending_timestamp = _int(opts, "endingtimestamp", "endingTimestamp", 0)
        if "endingoffsetsbytimestamp" in opts:
            ro.ending_by_timestamp = parse_timestamps(opts["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp",
                                                      topics, pattern)
    else:
        if "maxmessagespertrigger" in opts and "maxoffsetspertrigger" in opts:
            raise _fail("options maxMessagesPerTrigger and maxOffsetsPerTrigger are the same limit: give one")
        ro.max_messages_per_trigger = (_int(opts, "maxmessagespertrigger", "maxMessagesPerTrigger", 1)
                                       or _int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger", 1))
        ro.min_messages_per_trigger = _int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger", 1)
        if "maxtriggerdelay" in opts:
            if ro.min_messages_per_trigger is None:
                raise _fail("option maxTriggerDelay bounds the wait of minOffsetsPerTrigger: give minOffsetsPerTrigger too")
            ro.max_trigger_delay_ms = parse_duration_ms(opts["maxtriggerdelay"], "maxTriggerDelay")
        if ro.min_messages_per_trigger is not None and ro.max_messages_per_trigger is not None \
                and ro.min_messages_per_trigger > ro.max_messages_per_trigger:
            limit_name = "maxOffsetsPerTrigger" if "maxoffsetspertrigger" in opts else "maxMessagesPerTrigger"
            raise _fail(f"option minOffsetsPerTrigger ({ro.min_messages_per_trigger}) is greater than {limit_name} "
                        f"({ro.max_messages_per_trigger})")
        group = opts.get("consumergroup")
        if group is not None:
            if not str(group).strip():
                raise _fail("option consumerGroup cannot be blank")
            ro.consumer_group = str(group).strip()
    if "minpartitions" in opts:
        ro.min_partitions = _int(opts, "minpartitions", "minPartitions", -(2**63))
        if ro.min_partitions <= 0:
            raise _fail(f"option minPartitions must be a positive integer, not {opts['minpartitions']!r}")
    if "maxrecordsperpartition" in opts:
        ro.max_records_per_partition = _int(opts, "maxrecordsperpartition", "maxRecordsPerPartition", -(2**63))
        if ro.max_records_per_partition <= 0:
            raise _fail(f"option maxRecordsPerPartition must be a positive integer, not "
                        f"{opts['maxrecordsperpartition']!r}")
    ro.include_properties = _bool(opts, "includeproperties", "includeProperties", True)
    ro.fail_on_data_loss = _bool(opts, "failondataloss", "failOnDataLoss", True)
    return ro


def parse_write(options: Mapping[str, str]) -> WriteOptions:
    opts = _check_known(options, WRITE_OPTIONS, "a write")
    conn = _connection(opts)
    topics = _topics(opts, required=False)
    if len(topics) > 1:
        raise _fail(f"option topic of a write names one topic, not {len(topics)}: {', '.join(topics)}")
    return WriteOptions(conn, topics[0] if topics else None,
                        _bool(opts, "deterministicmessageids", "deterministicMessageIds", False))


def split_limit(limit: int, backlogs: dict[object, int]) -> dict[object, int]:
    """``limit`` messages shared by queues in proportion to their backlog (Kafka's maxOffsetsPerTrigger
    rule), the rounding remainder to the largest fractions: the shares add up to
    min(limit, total backlog) and none exceeds its queue's backlog."""
    total = sum(b for b in backlogs.values() if b > 0)
    if total <= limit:
        return {k: max(b, 0) for k, b in backlogs.items()}
    shares: dict[object, int] = {}
    fractions = []
    for k, b in backlogs.items():
        exact = limit * max(b, 0) / total
        shares[k] = int(exact)
        fractions.append((exact - int(exact), k))
    left = limit - sum(shares.values())
    for _, k in sorted(fractions, key=lambda f: -f[0]):
        if left <= 0:
            break
        if shares[k] < backlogs[k]:
            shares[k] += 1
            left -= 1
    return shares


def _divide(start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """[start, end) in ``parts`` contiguous slices as equal as integers allow (Kafka's
    KafkaOffsetRangeCalculator.getDividedPartition: the last slices take the remainder)."""
    parts = max(1, min(parts, end - start))
    out, lo, remaining = [], start, end - start
    for i in range(parts):
        size = remaining // (parts - i)
        out.append((lo, lo + size))
        lo += size
        remaining -= size
    return out


def plan_ranges(ranges: dict[object, tuple[int, int]], min_partitions: int | None,
                max_records: int | None) -> list[tuple[object, int, int]]:
    """Spark partitions of queue ranges: each queue's [start, end) cut into slices of at most
    ``max_records`` messages, then, while fewer than ``min_partitions``, every queue cut into a
    share of ``min_partitions`` in proportion to its size, rounded half up as Scala's math.round
    (KafkaOffsetRangeCalculator's rule).
    The slices of a queue are contiguous, in order, and cover its range exactly."""
    todo = [(k, s, e) for k, (s, e) in ranges.items() if e > s]
    if max_records is not None:
        todo = [(k, lo, hi) for k, s, e in todo for lo, hi in _divide(s, e, -(-(e - s) // max_records))]
    if min_partitions is not None and len(todo) < min_partitions:
        total = sum(e - s for _, s, e in todo)
        todo = [(k, lo, hi) for k, s, e in todo
                for lo, hi in _divide(s, e, max(1, math.floor((e - s) / total * min_partitions + 0.5)))]
    return todo
