"""ResetGroupOffset and QueryTimeSpan: moving a group's offsets to a time (mqadmin
resetOffsetByTime) and the time span of each queue it consumes (queryConsumeTimeSpan)."""

from __future__ import annotations

import time

from orbitmq.common.fastjson import message_queue_pairs
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy import errors
from orbitmq.proxy.admin.accumulation import consume_rows, store_time_at
from orbitmq.proxy.admin.common import (
    AdminParts,
    group_name,
    require_group,
    resource_of,
    route_masters,
    route_of,
    timestamp_ms,
    topic_name,
)
from orbitmq.proxy.errors import ProxyError

Code = pb.Code


async def reset_group_offset(parts: AdminParts, request: apb.ResetGroupOffsetRequest) -> apb.ResetGroupOffsetResponse:
    """INVOKE_BROKER_TO_RESET_OFFSET on every master of the topic (forced, as resetOffsetByTime
    -f true): each queue's offset becomes the first message stored at or after the time, and the
    group's online Remoting consumers are told (RESET_CONSUMER_CLIENT_OFFSET)."""
    group = group_name(request.group)
    topic = topic_name(request.topic)
    if not request.HasField("reset_timestamp"):
        raise ProxyError(Code.BAD_REQUEST, "reset_timestamp is required")
    when = timestamp_ms(request.reset_timestamp, 0)
    if when < 0:
        raise ProxyError(Code.BAD_REQUEST, f"reset_timestamp {when} is before the epoch")
    route = await route_of(parts, topic)
    await require_group(parts, group)
    queues = 0
    for _name, addr in route_masters(route):
        body = await parts.api.reset_offset(addr, group, topic, when, force=True)
        queues += len(message_queue_pairs(body.get("offsetTable")))
    return apb.ResetGroupOffsetResponse(status=errors.status(Code.OK, f"OK: {queues} queue(s) of {topic} reset"))


async def query_time_span(parts: AdminParts, request: apb.QueryTimeSpanRequest) -> apb.QueryTimeSpanResponse:
    """Per queue of the group's topics (every topic it holds offsets of when none is given), as
    AdminBrokerProcessor#queryConsumeTimeSpan: the earliest and newest store times, the store time
    of the last consumed message (the earliest one when nothing was consumed), and how long the
    next message to consume has waited."""
    group = group_name(request.group)
    topics = [topic_name(t) for t in request.topics]
    for topic in topics:
        await route_of(parts, topic)
    await require_group(parts, group)
    rows = await consume_rows(parts, group, topics or None)
    api = parts.api
    now = int(time.time() * 1000)
    newest: dict[tuple[str, str], dict[int, int]] = {}
    response = apb.QueryTimeSpanResponse(status=errors.ok())
    for row in sorted(rows, key=lambda r: (r.topic, r.broker_name, r.queue_id)):
        key = (row.addr, row.topic)
        if key not in newest:
            stats = await api.get_topic_stats(row.addr, row.topic)
            newest[key] = {int(mq.get("queueId", 0)): int((v or {}).get("lastUpdateTimestamp", 0) or 0)
                           for mq, v in message_queue_pairs(stats.get("offsetTable"))}
        earliest = await api.get_earliest_msg_store_time(row.addr, row.topic, row.queue_id) \
            if row.broker_offset > 0 else 0
        consumed = row.last_timestamp if row.consumer_offset > 0 else earliest
        delay = 0
        if row.consumer_offset < row.broker_offset:
            next_time = await store_time_at(parts, row.addr, row.topic, row.queue_id, row.consumer_offset)
            delay = max(now - next_time, 0) if next_time else 0
        response.queue_time_span_list.add(
            message_queue=pb.MessageQueue(topic=resource_of(row.topic), id=row.queue_id,
                                          permission=pb.Permission.READ_WRITE, broker=pb.Broker(name=row.broker_name)),
            min_timestamp=earliest, max_timestamp=newest[key].get(row.queue_id, 0), consume_timestamp=consumed,
            delay_time_ms=delay)
    return response
