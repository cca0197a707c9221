"""A promoted master's POP offsets, raised to what the replicated checkpoints prove was popped.

A slave learns the master's consumer offsets only from SlaveSynchronize's periodic copy
(ha/slave_synchronize.py, every ~10 s), so a slave promoted by the controller would start every
POP queue where the master was at the last copy and deliver again everything popped since.
The checkpoints are better evidence: PopMessageProcessor appends one to the revive log before it
moves a queue's pop offset, and the append waits for the replicas like any put, so every batch a
dead master handed out is in the new master's revive log. Raising each (group, topic, queue)
pop offset to the end of its newest checkpoint loses nothing: what those checkpoints hold is
either acked (the ack is in the revive log too) or revived by the new master's revive service,
which re-reads the revive log from its own (equally old) revive offset.

Upstream's ReplicasManager#changeToMaster keeps the copied offsets as they are and redelivers;
this is OrbitMQ's addition (docs/controller-ha.md). Orderly pops write no checkpoint, and an
orderly group's offsets are never raised (a checkpoint of it comes from a concurrent pop, whose
un-acked messages would come back through the retry topic after later ones): it resumes from
the copied offset (duplicates, in order, never a gap).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from orbitmq.common.message_codec import RecordError

from .checkpoint import PopCheckPoint, RevivePayloadError
from .constants import CK_TAG, REVIVE_GROUP
from .revive import READ_SIZE, record_tag_and_body

if TYPE_CHECKING:
    from .interfaces import RevivePop

log = logging.getLogger(__name__)

# Revive-log entries read per store call while walking a revive queue back from its end.
CHUNK = 256
# A checkpoint's pop time is taken before its append, which waits for the replicas (up to
# slaveTimeout) and only then moves the offset: checkpoints this much older than the last
# offset copy may still be missing from it.
COPY_MARGIN_MS = 10_000

QueueKey = tuple[str, str, int]  # (group, topic, queueId)


def checkpoint_end(ck: PopCheckPoint) -> int:
    """The queue offset after the last message of a checkpoint's batch."""
    last = ck.queue_offset_diff[-1] if ck.queue_offset_diff else ck.num - 1
    return ck.start_offset + last + 1


async def _read(pop: RevivePop, queue_id: int, start: int, end: int) -> list[bytes]:
    """The revive-log records of ``queue_id`` at queue offsets [start, end)."""
    broker = pop.broker
    records: list[bytes] = []
    offset = start
    while offset < end:
        result = await broker.get_message(REVIVE_GROUP, pop.revive_topic, queue_id, offset, end - offset, READ_SIZE,
                                          None)
        if result is None or result.message_count == 0:
            if result is None or result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset  # a hole (an expired file): skip it
            continue
        records.extend(bytes(r) for r, o in zip(result.message_buffer_list, result.message_queue_offset,
                                                 strict=True) if o < end)
        offset = result.next_begin_offset
    return records


def _scan(records: list[bytes], ends: dict[QueueKey, int]) -> int | None:
    """Folds the checkpoints among ``records`` into ``ends``; returns the oldest pop time seen."""
    oldest: int | None = None
    for record in records:
        try:
            tag, body = record_tag_and_body(record)
            if tag != CK_TAG:
                continue
            ck = PopCheckPoint.from_json(body)
        except (RecordError, RevivePayloadError, UnicodeDecodeError):
            continue  # the revive service logs bad records; here they prove nothing
        if ck.num <= 0:
            continue
        key = (ck.cid, ck.topic, ck.queue_id)
        end = checkpoint_end(ck)
        if end > ends.get(key, -1):
            ends[key] = end
        if oldest is None or ck.pop_time < oldest:
            oldest = ck.pop_time
    return oldest


async def newest_checkpoint_ends(pop: RevivePop, copied_at_ms: int | None) -> dict[QueueKey, int]:
    """Per (group, topic, queue): the end of the newest checkpoint in the revive log.

    Each revive queue is read back from its end, a chunk at a time, down to its revive offset,
    or (when the offsets were copied at ``copied_at_ms``) to the first chunk holding a checkpoint
    popped COPY_MARGIN_MS before the copy: older ones are in the copied offsets already.
    """
    broker = pop.broker
    store = broker.message_store
    com = broker.consumer_offset_manager
    cutoff = None if copied_at_ms is None else copied_at_ms - COPY_MARGIN_MS
    ends: dict[QueueKey, int] = {}
    for queue_id in range(pop.revive_queue_num()):
        low = max(com.query_offset(REVIVE_GROUP, pop.revive_topic, queue_id),
                  store.get_min_offset_in_queue(pop.revive_topic, queue_id), 0)
        high = store.get_max_offset_in_queue(pop.revive_topic, queue_id)
        while high > low:
            start = max(low, high - CHUNK)
            oldest = _scan(await _read(pop, queue_id, start, high), ends)
            if cutoff is not None and oldest is not None and oldest < cutoff:
                break
            high = start
            await asyncio.sleep(0)  # reads and parsing are synchronous: let the loop breathe
    return ends


async def raise_pop_offsets(pop: RevivePop, copied_at_ms: int | None) -> int:
    """Raises every pop offset below its newest checkpoint's end; returns how many moved."""
    broker = pop.broker
    store = broker.message_store
    com = broker.consumer_offset_manager
    groups = broker.subscription_group_manager
    raised = 0
    for (group, topic, queue_id), end in (await newest_checkpoint_ends(pop, copied_at_ms)).items():
        config = groups.get(group)
        if config is not None and config.consume_message_orderly:
            # A concurrent pop of an orderly group (before a switch, or a client asking so): its
            # messages would come back only through the retry topic, after later ones.
            continue
        end = min(end, store.get_max_offset_in_queue(topic, queue_id))
        current = com.query_offset(group, topic, queue_id)
        if end > current and not com.has_offset_reset(group, topic, queue_id):
            com.commit_offset(group, topic, queue_id, end, "PopOffsetRecovery")
            log.debug("pop offset of %s@%s:%d raised from %d to %d", topic, group, queue_id, current, end)
            raised += 1
    if raised:
        log.info("%d pop offsets raised to the ends of the replicated checkpoints", raised)
    return raised
