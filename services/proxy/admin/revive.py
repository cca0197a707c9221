"""POP in-flight messages read from the brokers' revive logs.

A POP consumer moves its group's consume offset when it pops, not when it acks, so
GET_CONSUME_STATS says nothing of messages popped and not yet acked (upstream's dashboard shows
their lag as unknown). The broker keeps them as checkpoints in ``rmq_sys_REVIVE_LOG_<cluster>``:
every checkpoint (tag ``ck``) after the revive service's committed offset (the consumer offset of
CID_RMQ_SYS_REVIVE_GROUP) is still invisible, and the acks (``ack``, ``bAck``) written after it
clear its messages. Reading that part of the log (PULL_MESSAGE, nothing committed) counts them,
as PopReviveService#consumeReviveMessage replays it; the fields are PopCheckPoint's and AckMsg's
fastjson short names. A checkpoint the broker keeps only in memory (enablePopBufferMerge) is not
seen until it is written.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from orbitmq.client import MQBrokerError
from orbitmq.common.constants import REVIVE_GROUP, TOOLS_CONSUMER_GROUP, revive_topic
from orbitmq.common.extra_info import parse_normal_topic
from orbitmq.proxy.admin.common import AdminParts, masters
from orbitmq.remoting import headers as h

log = logging.getLogger("orbitmq.proxy.admin")

CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"  # PopAckConstants
PULL_BATCH = 256  # the broker may hand fewer (maxTransferCountOnMessageInMemory)
# Records read per revive queue at most: a revive log far behind is counted from its newest part.
MAX_RECORDS_PER_QUEUE = 100_000
_PULL_SYS_FLAG_SUBSCRIPTION = 0x4


def _ck_key(d: dict[str, Any]) -> tuple[Any, ...]:
    return (d.get("t"), d.get("c"), d.get("q"), d.get("so"), d.get("pt"), d.get("bn", ""))


class InFlight:
    """Outstanding popped offsets of one group, per checkpoint, from the records fed in order."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.pending: dict[tuple[Any, ...], set[int]] = {}

    def feed(self, tag: str | None, body: bytes) -> None:
        if tag not in (CK_TAG, ACK_TAG, BATCH_ACK_TAG):
            return
        try:
            d = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return
        if not isinstance(d, dict) or d.get("c") != self.group:
            return
        key = _ck_key(d)
        if tag == CK_TAG:
            start, diff = int(d.get("so", 0)), d.get("d") or []
            offsets = {start + int(x) for x in diff} if diff else {start + i for i in range(int(d.get("n", 0)))}
            self.pending.setdefault(key, set()).update(offsets)
            return
        entry = self.pending.get(key)
        if entry is None:
            return  # its checkpoint was revived before the committed offset (a late ack)
        acked: Iterable[Any] = [d.get("ao")] if tag == ACK_TAG else (d.get("aol") or [])
        for offset in acked:
            if isinstance(offset, int):
                entry.discard(offset)
        if not entry:
            del self.pending[key]

    def by_topic(self) -> dict[str, int]:
        """Messages in flight per topic the group subscribes (a POP retry topic counts for its topic)."""
        out: dict[str, int] = {}
        for key, offsets in self.pending.items():
            topic = parse_normal_topic(str(key[0]), self.group)
            out[topic] = out.get(topic, 0) + len(offsets)
        return out


async def pop_in_flight(parts: AdminParts, group: str) -> dict[str, int]:
    """Messages popped by ``group`` and neither acked nor revived yet, per topic, over every master."""
    api = parts.api
    info = await parts.cluster.routes.cluster_info()
    cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    counter = InFlight(group)
    for broker_name, addr in await masters(parts):
        topic = revive_topic(cluster_of.get(broker_name, parts.config.rocket_mq_cluster_name))
        config = await api.get_topic_config(addr, topic)
        if config is None:
            continue  # a broker that never popped has no revive log
        for queue_id in range(config.read_queue_nums):
            await _read_queue(parts, addr, topic, queue_id, counter)
    return counter.by_topic()


async def _read_queue(parts: AdminParts, addr: str, topic: str, queue_id: int, counter: InFlight) -> None:
    api = parts.api
    end = await api.get_max_offset(addr, topic, queue_id)
    try:
        offset = await api.query_consumer_offset(addr, REVIVE_GROUP, topic, queue_id)
    except MQBrokerError:  # the revive service never committed: from the start of the queue
        offset = await api.get_min_offset(addr, topic, queue_id)
    offset = max(offset, end - MAX_RECORDS_PER_QUEUE, 0)
    while offset < end:
        header = h.PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP, topic=topic, queue_id=queue_id, queue_offset=offset,
            max_msg_nums=PULL_BATCH, sys_flag=_PULL_SYS_FLAG_SUBSCRIPTION, commit_offset=0,
            suspend_timeout_millis=0, subscription="*", sub_version=int(time.time() * 1000))
        result = await api.pull_message(addr, header)
        for msg in result.messages:
            counter.feed(msg.tags, msg.body)
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset
