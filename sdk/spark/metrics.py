"""Kafka's source metrics for the "rocketmq" source, computed from a StreamingQueryProgress.

Spark's Kafka source reports ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` in ``StreamingQueryProgress.sources[i].metrics`` through the JVM
interface ReportsSourceMetrics. pyspark's Python streaming DataSource API (4.2/4.3) has no such hook:
the JVM side of a Python source (PythonMicroBatchStream) does not implement ReportsSourceMetrics,
so a Python source's ``metrics`` map stays empty. What the progress does carry is the source's
``endOffset`` (what this batch read up to) and ``latestOffset`` (what the queues held when the
batch was planned: the source's reportLatestOffset). ``lag`` computes the same numbers from those
two, per queue, as KafkaMicroBatchStream.metrics does from the same two offsets.

``estimatedTotalBytesBehindLatest`` needs message sizes, which offsets do not give (RocketMQ's
ConsumeQueue knows each message's size, but the proxy's gRPC API does not expose it): with
``options`` (the read's connection options), ``lag`` pulls a few messages at each lagging queue's
next offset and multiplies their mean size (body, tag, keys and properties) by the messages behind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orbitmq.clientcore.message import MessageQueue, ReceivedMessage
from orbitmq.spark import clients
from orbitmq.spark.options import DEFAULT_PULL_GROUP, _connection

SAMPLE = 16  # messages pulled per lagging queue to estimate its message size


def _as_dict(progress: Any) -> dict:
    if isinstance(progress, str):
        return json.loads(progress)
    if isinstance(progress, Mapping):
        return dict(progress)
    if hasattr(progress, "json"):  # pyspark's StreamingQueryProgress
        return json.loads(progress.json())
    raise TypeError(f"lag() takes a StreamingQueryProgress, its dict or its JSON, not {type(progress).__name__}")


def _offsets(value: Any) -> dict[MessageQueue, int] | None:
    """{topic: {broker: {queueId: offset}}} as queues, or None when ``value`` is not of that shape."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, Mapping):
        return None
    out: dict[MessageQueue, int] = {}
    for topic, brokers in value.items():
        if not isinstance(brokers, Mapping):
            return None
        for broker, queues in brokers.items():
            if not isinstance(queues, Mapping):
                return None
            for qid, offset in queues.items():
                if not str(qid).isdigit() or not isinstance(offset, int):
                    return None
                out[MessageQueue(topic, broker, int(qid))] = offset
    return out


def offsets_behind_latest(progress: Any, source: int | None = None) -> dict[MessageQueue, int]:
    """Messages each queue held beyond what the batch read: latestOffset - endOffset (per queue
    of the latestOffset; a queue not yet in endOffset counts from 0). ``source`` is the index in
    ``progress["sources"]``; by default the first source whose offsets have the rocketmq shape."""
    sources = _as_dict(progress).get("sources") or []
    picked = [sources[source]] if source is not None else sources
    for sp in picked:
        end, latest = _offsets(sp.get("endOffset")), _offsets(sp.get("latestOffset"))
        if end is not None and latest is not None:
            return {mq: max(0, offset - end.get(mq, 0)) for mq, offset in latest.items()}
    return {}


def message_size(m: ReceivedMessage) -> int:
    """Bytes of a message as a reader gets them: body, tag, keys and user properties."""
    props = sum(len(k) + len(v) for k, v in (m.properties or {}).items())
    return len(m.body) + len(m.tag or "") + sum(len(k) for k in (m.keys or [])) + props


def lag(progress: Any, options: Mapping[str, str] | None = None, source: int | None = None) -> dict[str, Any]:
    """Kafka's source metrics of a progress: minOffsetsBehindLatest, maxOffsetsBehindLatest,
    avgOffsetsBehindLatest (as KafkaMicroBatchStream.metrics), and with ``options`` (endpoints and
    the other connection options of the read) estimatedTotalBytesBehindLatest. Empty when the
    progress has no rocketmq source with a latestOffset (before the first batch)."""
    behind = offsets_behind_latest(progress, source)
    if not behind:
        return {}
    values = list(behind.values())
    out: dict[str, Any] = {"minOffsetsBehindLatest": min(values), "maxOffsetsBehindLatest": max(values),
                           "avgOffsetsBehindLatest": sum(values) / len(values)}
    if options is not None:
        out["estimatedTotalBytesBehindLatest"] = _estimated_bytes(progress, behind, options, source)
    return out


def _estimated_bytes(progress: Any, behind: dict[MessageQueue, int], options: Mapping[str, str],
                     source: int | None) -> int:
    # The read's own options may be passed whole: only the connection ones are used here.
    conn = _connection({str(k).lower(): v for k, v in options.items()})
    sources = _as_dict(progress).get("sources") or []
    end: dict[MessageQueue, int] = {}
    for sp in ([sources[source]] if source is not None else sources):
        found = _offsets(sp.get("endOffset"))
        if found is not None and _offsets(sp.get("latestOffset")) is not None:
            end = found
            break
    c = clients.consumer(conn, DEFAULT_PULL_GROUP)

    async def go() -> int:
        total = 0
        for mq, n in behind.items():
            if n <= 0:
                continue
            offset = max(end.get(mq, 0), await c.min_offset(mq))
            got, _next = await c.pull(mq, offset, min(SAMPLE, n))
            if got:
                total += round(n * sum(message_size(m) for m in got) / len(got))
        return total

    return clients.run(go(), conn)
