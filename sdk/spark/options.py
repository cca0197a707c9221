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
from collections.abc import Mapping
from dataclasses import dataclass, field

from orbitmq.clientcore.config import ClientConfig, Credentials, parse_endpoints

EARLIEST, LATEST = -2, -1

# Lower-case (Spark hands Python data sources a case-insensitive dict) -> spelling in messages.
_COMMON = {"endpoints": "endpoints", "topic": "topic", "accesskey": "accessKey", "secretkey": "secretKey",
           "tls": "tls", "tlscafile": "tlsCaFile", "tlscertfile": "tlsCertFile", "tlskeyfile": "tlsKeyFile",
           "requesttimeout": "requestTimeout"}
READ_OPTIONS = {**_COMMON, "filterexpression": "filterExpression", "startingoffsets": "startingOffsets",
                "startingtimestamp": "startingTimestamp", "failondataloss": "failOnDataLoss"}
BATCH_READ_OPTIONS = {**READ_OPTIONS, "endingoffsets": "endingOffsets", "endingtimestamp": "endingTimestamp"}
STREAM_READ_OPTIONS = {**READ_OPTIONS, "maxmessagespertrigger": "maxMessagesPerTrigger",
                       "consumergroup": "consumerGroup"}
WRITE_OPTIONS = {**_COMMON, "deterministicmessageids": "deterministicMessageIds"}
# What Spark itself may pass along with the user's options (writeStream's checkpoint).
_SPARK_OWN = {"checkpointlocation"}

# The group PullMessage names when the query commits no offsets (brokers create it on first use
# with autoCreateSubscriptionGroup=true, RocketMQ's default; otherwise create it or set consumerGroup).
DEFAULT_PULL_GROUP = "orbitmq-spark-source"

Offsets = dict[str, dict[str, dict[str, int]]]


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
    fail_on_data_loss: bool = True
    consumer_group: str | None = None
    streaming: bool = False
    given: set[str] = field(default_factory=set)

    @property
    def pull_group(self) -> str:
        return self.consumer_group or DEFAULT_PULL_GROUP


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


def parse_offsets(raw: str, name: str, topics: list[str], allow_earliest: bool) -> str | Offsets:
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
        if topic not in topics:
            raise _fail(f"option {name} names topic {topic!r}, which is not in option topic ({', '.join(topics)})")
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


def parse_read(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    known = STREAM_READ_OPTIONS if streaming else BATCH_READ_OPTIONS
    opts = _check_known(options, known, "a streaming read" if streaming else "a batch read")
    conn = _connection(opts)
    topics = _topics(opts, required=True)
    ro = ReadOptions(conn, topics, streaming=streaming, given=set(opts))
    expr = opts.get("filterexpression")
    if expr is not None:
        if not str(expr).strip():
            raise _fail("option filterExpression cannot be blank (use '*' for every message)")
        ro.filter_expression = str(expr).strip()
    ro.starting = "latest" if streaming else "earliest"
    if "startingoffsets" in opts:
        ro.starting = parse_offsets(opts["startingoffsets"], "startingOffsets", topics, True)
    ro.starting_timestamp = _int(opts, "startingtimestamp", "startingTimestamp", 0)
    if ro.starting_timestamp is not None and "startingoffsets" in opts:
        raise _fail("options startingOffsets and startingTimestamp exclude each other")
    if not streaming:
        if "endingoffsets" in opts:
            ro.ending = parse_offsets(opts["endingoffsets"], "endingOffsets", topics, False)
        ro.ending_timestamp = _int(opts, "endingtimestamp", "endingTimestamp", 0)
        if ro.ending_timestamp is not None and "endingoffsets" in opts:
            raise _fail("options endingOffsets and endingTimestamp exclude each other")
    else:
        ro.max_messages_per_trigger = _int(opts, "maxmessagespertrigger", "maxMessagesPerTrigger", 1)
        group = opts.get("consumergroup")
        if group is not None:
            if not str(group).strip():
                raise _fail("option consumerGroup cannot be blank")
            ro.consumer_group = str(group).strip()
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
