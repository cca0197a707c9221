"""DescribeGroupAccumulation: a group's backlog (mqadmin consumerProgress), POP groups included.

Per queue the brokers' GET_CONSUME_STATS gives the newest offset, the group's consume offset and
its pull offset. Ready messages are those past both offsets; in flight are those pulled and not
yet committed (Remoting push/pull consumers) plus, for POP consumption, which moves the consume
offset at pop time, the popped messages neither acked nor revived yet, counted from the revive
log (revive.py). A POP retry topic (``%RETRY%group_topic``) counts for its topic. The deliver
delay is the age of the oldest ready message (rocketmq_consumer_queueing_latency's figure).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from orbitmq.common.constants import RETRY_GROUP_TOPIC_PREFIX, TOOLS_CONSUMER_GROUP
from orbitmq.common.extra_info import build_pop_retry_topic, parse_normal_topic
from orbitmq.common.fastjson import message_queue_pairs
from orbitmq.common.namespace import NAMESPACE_SEPARATOR
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.pool import Duration
from orbitmq.proxy import errors
from orbitmq.proxy.admin.common import AdminParts, group_name, masters, require_group, route_of, topic_name
from orbitmq.proxy.admin.revive import pop_in_flight
from orbitmq.remoting import headers as h

Accumulation = apb.DescribeGroupAccumulationResponse.GroupAccumulation
_PULL_SYS_FLAG_SUBSCRIPTION = 0x4


@dataclass
class QueueRow:
    """One queue of GET_CONSUME_STATS's offsetTable, with the master that answered it."""

    topic: str
    broker_name: str
    addr: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int


async def consume_rows(parts: AdminParts, group: str, topics: list[str] | None) -> list[QueueRow]:
    """GET_CONSUME_STATS of ``group`` on every master: for the given topics (each asked for), else
    every topic the group holds offsets of (retry topics included)."""
    rows: list[QueueRow] = []
    for broker_name, addr in await masters(parts):
        for topic in topics if topics is not None else [None]:
            stats = await parts.api.get_consume_stats(addr, group, topic)
            for mq, value in message_queue_pairs(stats.get("offsetTable")):
                value = value or {}
                consumer = int(value.get("consumerOffset", 0))
                rows.append(QueueRow(
                    topic=str(mq.get("topic", topic or "")), broker_name=str(mq.get("brokerName", broker_name)),
                    addr=addr, queue_id=int(mq.get("queueId", 0)), broker_offset=int(value.get("brokerOffset", 0)),
                    consumer_offset=consumer, pull_offset=max(int(value.get("pullOffset", 0)), consumer),
                    last_timestamp=int(value.get("lastTimestamp", 0) or 0)))
    return rows


async def store_time_at(parts: AdminParts, addr: str, topic: str, queue_id: int, offset: int) -> int:
    """The store time of the message at a queue offset (one PULL, nothing committed); 0 if none."""
    header = h.PullMessageRequestHeader(
        consumer_group=TOOLS_CONSUMER_GROUP, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=1,
        sys_flag=_PULL_SYS_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
        sub_version=int(time.time() * 1000))
    result = await parts.api.pull_message(addr, header)
    return result.messages[0].store_timestamp if result.messages else 0


class _Sum:
    def __init__(self) -> None:
        self.ready = self.inflight = self.last_consume = 0
        self.oldest_ready = 0  # store time of the oldest ready message

    def add_ready(self, count: int, oldest: int) -> None:
        self.ready += count
        if oldest and (not self.oldest_ready or oldest < self.oldest_ready):
            self.oldest_ready = oldest

    def merge(self, other: _Sum) -> None:
        self.ready += other.ready
        self.inflight += other.inflight
        self.last_consume = max(self.last_consume, other.last_consume)
        if other.oldest_ready and (not self.oldest_ready or other.oldest_ready < self.oldest_ready):
            self.oldest_ready = other.oldest_ready

    def proto(self, now_ms: int) -> Any:
        delay = Duration()
        delay.FromMilliseconds(max(now_ms - self.oldest_ready, 0) if self.oldest_ready else 0)
        return Accumulation(inflight_messages=self.inflight, ready_messages=self.ready,
                            accumulation=self.inflight + self.ready, deliver_delay_time=delay,
                            last_consume_timestamp=self.last_consume)


async def describe_group_accumulation(parts: AdminParts, request: apb.DescribeGroupAccumulationRequest
                                      ) -> apb.DescribeGroupAccumulationResponse:
    group = group_name(request.group)
    asked = [topic_name(t) for t in request.topics]
    for topic in asked:
        await route_of(parts, topic)  # TOPIC_NOT_FOUND for a topic nobody routes
    await require_group(parts, group)
    rows = await consume_rows(parts, group, _with_retry_topics(asked, group) if asked else None)
    if not asked:
        # A POP retry topic the group has not popped from yet holds no offset of it, so the broker
        # does not list it: ask for those of the group's topics by name.
        listed = {row.topic for row in rows}
        bases = sorted({row.topic for row in rows if not row.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)})
        unlisted = [t for t in _with_retry_topics(bases, group) if t not in listed and t not in bases]
        if unlisted:
            rows += await consume_rows(parts, group, unlisted)
    per_topic: dict[str, _Sum] = {}
    for row in rows:
        topic = parse_normal_topic(row.topic, group)
        if asked and topic not in asked:
            continue
        acc = per_topic.setdefault(topic, _Sum())
        acc.inflight += max(min(row.pull_offset, row.broker_offset) - row.consumer_offset, 0)
        ready = max(row.broker_offset - row.pull_offset, 0)
        oldest = await store_time_at(parts, row.addr, row.topic, row.queue_id, row.pull_offset) if ready else 0
        acc.add_ready(ready, oldest)
        acc.last_consume = max(acc.last_consume, row.last_timestamp)
    for topic, count in (await pop_in_flight(parts, group)).items():
        if not asked or topic in asked:
            per_topic.setdefault(topic, _Sum()).inflight += count
    now = int(time.time() * 1000)
    total = _Sum()
    for acc in per_topic.values():
        total.merge(acc)
    namespace = request.group.resource_namespace
    response = apb.DescribeGroupAccumulationResponse(status=errors.ok(), accumulation=total.proto(now))
    for topic, acc in sorted(per_topic.items()):
        if not asked and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            key = topic  # the group's own retry topic (Remoting consumers): counted as itself
        else:
            key = _without_namespace(topic, namespace)
        response.topic_accumulation[key].CopyFrom(acc.proto(now))
    # OrbitMQ serves no lite topics (SyncLiteSubscription), so lite_topic_accumulation stays empty.
    return response


def _with_retry_topics(topics: list[str], group: str) -> list[str]:
    """The topics asked for, with the POP retry topics their redeliveries wait in."""
    out = list(topics)
    for topic in topics:
        out += [build_pop_retry_topic(topic, group), build_pop_retry_topic(topic, group, v2=True)]
    return out


def _without_namespace(topic: str, namespace: str) -> str:
    prefix = namespace + NAMESPACE_SEPARATOR if namespace else ""
    return topic[len(prefix):] if prefix and topic.startswith(prefix) else topic
