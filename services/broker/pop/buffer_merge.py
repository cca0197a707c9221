"""PopBufferMergeService: non-orderly checkpoints held in memory, acks matched there by bit.

With ``enablePopBufferMerge`` a pop's checkpoint is not written to the revive topic at once. It
waits in this buffer, and acks (single and batch) and the ack half of a changeInvisibleTime set
its bits here. A checkpoint whose every message is acked is dropped without ever touching the
revive topic; one that stays past ``popCkStayBufferTime`` (or whose revive time comes within
``popCkStayBufferTimeOut``) is written there, followed by its buffered acks (one AckMsg each, or
one BatchAckMsg with ``enablePopBatchAck``), and revive proceeds as for any checkpoint. A pop that
finds the buffer full (``popCkMaxBufferSize``), its queue's offset queue long
(``popCkOffsetMaxQueueSize``) or its revive time too close writes its checkpoint at once.

Crash safety, as upstream's: while buffer merge is on, a pop does not commit the queue's pop
offset. Each topic@group@queueId keeps its checkpoints in pop order (an offset queue), and the
offset is committed (PopBufferMergeService#scanCommitOffset) only up to the first checkpoint that
is neither fully acked nor written with all its acks. After a kill -9 the pop offset is at most
where nothing behind it is in memory only: buffered batches are popped again (at-least-once), and
nothing is lost. Between commits the pop path reads the queue's next offset from here
(#getLatestOffset), so consecutive pops do not hand out the same messages twice.

The keys are read from BrokerConfig at each use, as upstream's are, so updateBrokerConfig takes
effect at once; switched off, the service still writes (or drops) what it holds, and the queues
it holds checkpoints of keep their offsets behind them until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orbitmq.broker.store.config import SLAVE
from orbitmq.common.aio import cancel_and_wait

from .checkpoint import AckMsg, BatchAckMsg, PopCheckPoint
from .constants import build_lock_key

if TYPE_CHECKING:
    from .interfaces import BufferMergePop

log = logging.getLogger(__name__)

# PopBufferMergeService's scan period (its `interval`, 5 ms).
SCAN_INTERVAL_MS = 5
# A checkpoint or ack this close (ms) to a limit is not buffered (upstream's 1500 ms margin).
ADD_MARGIN_MS = 1500
# Every offset queue is looked at this often even when nothing marked it (ms).
FULL_COMMIT_SCAN_MS = 1000
# Offset queues unused this long are dropped (PopBufferMergeService#scanGarbage's 5 minutes).
GARBAGE_AGE_MS = 5 * 60 * 1000
GARBAGE_SCAN_MS = 30_000
# How long shutdown waits for a scan in progress; how often a slave looks at its role again; the
# pause after a failed scan (upstream's 3 s).
SHUTDOWN_WAIT_SECONDS = 10.0
SLAVE_CHECK_SECONDS = 1.0
# The scan period while buffer merge is off and nothing is left in the buffer (it may be switched
# on by updateBrokerConfig).
IDLE_WAIT_SECONDS = 0.5
ERROR_PAUSE_SECONDS = 3.0
# Not stored yet / its put in flight (PopCheckPointWrapper#reviveQueueOffset: -1, Long.MAX_VALUE).
NOT_STORED = -1
STORING = 2**63 - 1

MergeKey = tuple[str, str, int, int, int, str]  # topic, group, queue id, start offset, pop time, broker


def merge_key(topic: str, group: str, queue_id: int, start_offset: int, pop_time: int, broker_name: str) -> MergeKey:
    """PopCheckPointWrapper#getMergeKey: what an ack names of its checkpoint."""
    return topic, group, queue_id, start_offset, pop_time, broker_name


@dataclass(slots=True, eq=False)
class PopCheckPointWrapper:
    """One checkpoint in the buffer or the offset queue, with its acked and written bits."""

    revive_qid: int
    ck: PopCheckPoint
    next_begin_offset: int
    lock_key: str
    just_offset: bool = False  # written to the revive topic by the pop; here only for the offset order
    revive_offset: int = NOT_STORED
    ck_stored: bool = False
    bits: int = 0  # message i acked
    to_store_bits: int = 0  # message i's ack written to the revive topic
    deadline: int = 0  # when it is written to the revive topic unless fully acked first

    @property
    def key(self) -> MergeKey:
        ck = self.ck
        return merge_key(ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name)

    def all_acked(self) -> bool:
        """PopBufferMergeService#isCkDone."""
        mask = (1 << self.ck.num) - 1
        return self.bits & mask == mask

    def acks_written(self) -> bool:
        """#isCkDoneForFinish: every buffered ack is in the revive topic."""
        mask = (1 << self.ck.num) - 1
        return (self.bits ^ self.to_store_bits) & mask == 0

    def finished(self) -> bool:
        """Nothing left to write: acked in full before its checkpoint was, or written with its acks."""
        return (self.revive_offset == NOT_STORED and self.all_acked()) or (self.ck_stored and self.acks_written())

    def committable(self) -> bool:
        """The offset after this checkpoint may be committed: nothing of it lives only here."""
        return (self.just_offset and self.ck_stored) or self.all_acked() or (self.acks_written() and self.ck_stored)


@dataclass(slots=True)
class OffsetQueue:
    """PopBufferMergeService.QueueWithTime: one queue's checkpoints in pop order."""

    items: deque[PopCheckPointWrapper] = field(default_factory=deque)
    time: int = 0  # pop time of the newest


class PopBufferMergeService:
    def __init__(self, pop: BufferMergePop) -> None:
        self.pop = pop
        self.broker = pop.broker
        # BrokerConfig itself when it has the keys: upstream reads them on every call, so an
        # updateBrokerConfig applies at once; PopConfig's copy for a broker view without them.
        self._live = hasattr(pop.broker.config, "enable_pop_buffer_merge")
        self.buffer: dict[MergeKey, PopCheckPointWrapper] = {}
        self.commit_offsets: dict[str, OffsetQueue] = {}
        # (deadline, sequence, wrapper): the next checkpoints to write, earliest first
        self._deadlines: list[tuple[int, int, PopCheckPointWrapper]] = []
        self._seq = itertools.count()
        # past their deadline, waiting for their checkpoint or acks to be written
        self._flushing: dict[MergeKey, PopCheckPointWrapper] = {}
        self._dirty: set[str] = set()
        self._next_full_scan = 0
        self._next_garbage_scan = 0
        self.serving = True
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()

    @property
    def config(self) -> Any:
        """Where enablePopBufferMerge and the popCk* limits are read, at each use."""
        return self.pop.broker.config if self._live else self.pop.config

    @property
    def enabled(self) -> bool:
        return self.config.enable_pop_buffer_merge

    def tracks(self, topic: str, group: str, queue_id: int) -> bool:
        """Whether a pop of this queue leaves its offset to this service: buffer merge is on, or
        was until lately and checkpoints of the queue still wait here (switched off at run time)."""
        if self.config.enable_pop_buffer_merge:
            return True
        queue = self.commit_offsets.get(build_lock_key(topic, group, queue_id))
        return queue is not None and bool(queue.items)

    def _busy(self) -> bool:
        return self.enabled or bool(self.buffer) or any(q.items for q in self.commit_offsets.values())

    # ---- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._task is not None:
            return
        self.serving = True
        self._stopping = False
        self._kick = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="PopBufferMergeService")

    async def shutdown(self) -> None:
        """Stop buffering, write every checkpoint still open with its acks, commit the offsets
        (PopBufferMergeService#run after it stopped serving), before the broker persists them."""
        if self._task is None:
            return
        # Let a scan in progress finish its puts rather than cancel one half done.
        self._stopping = True
        self._kick.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), SHUTDOWN_WAIT_SECONDS)
        except TimeoutError:
            await cancel_and_wait(self._task)
        self._task = None
        self.serving = False
        for wrapper in self.buffer.values():
            if wrapper.revive_offset == STORING and not wrapper.ck_stored:
                wrapper.revive_offset = NOT_STORED  # its put was cancelled: written again (revive dedups)
        if not self._is_master():
            self.clear()
            return
        for _ in range(3):  # a failed put is retried; a store that keeps refusing is given up on
            self._next_full_scan = 0
            await self.scan()
            if not self.buffer and self.offset_total_size() == 0:
                break
        if self.buffer or self.offset_total_size():
            log.warning("[PopBuffer] shutdown with %d checkpoints and %d offsets not written",
                        len(self.buffer), self.offset_total_size())

    def clear(self) -> None:
        self.buffer.clear()
        self.commit_offsets.clear()
        self._deadlines.clear()
        self._flushing.clear()
        self._dirty.clear()

    def _is_master(self) -> bool:
        """#isShouldRunning: a slave keeps nothing (its master's pops are not its own)."""
        store_config = getattr(self.broker, "store_config", None)
        return store_config is None or getattr(store_config, "broker_role", "") != SLAVE

    async def _run(self) -> None:
        interval = SCAN_INTERVAL_MS / 1000.0
        while not self._stopping:
            wait = interval if self._busy() else IDLE_WAIT_SECONDS
            try:
                if self._is_master():
                    await self.scan()
                else:
                    self.clear()
                    wait = SLAVE_CHECK_SECONDS
            except Exception:
                log.exception("PopBufferMergeService scan failed")
                wait = ERROR_PAUSE_SECONDS
            if self._stopping:
                break
            self._kick.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), wait)

    # ---- the pop path -----------------------------------------------------------------------

    def latest_offset(self, topic: str, group: str, queue_id: int) -> int:
        """#getLatestOffset: the next offset after the newest uncommitted checkpoint, -1 if none."""
        queue = self.commit_offsets.get(build_lock_key(topic, group, queue_id))
        if queue is None or not queue.items:
            return -1
        return queue.items[-1].next_begin_offset

    def add_ck(self, ck: PopCheckPoint, revive_qid: int, next_begin_offset: int) -> bool:
        """#addCk: buffer a pop's checkpoint; False when it must be written at once instead."""
        if not self.enabled or not self.serving:
            return False
        cfg = self.config
        now = self.broker.now_ms()
        if ck.revive_time - now < cfg.pop_ck_stay_buffer_time_out + ADD_MARGIN_MS:
            self._pop_log("[PopBuffer] add ck, timeout, %s", ck)
            return False
        if len(self.buffer) >= cfg.pop_ck_max_buffer_size:
            log.warning("[PopBuffer] add ck, max size %d reached, %s", len(self.buffer), ck.unique_id())
            return False
        lock_key = build_lock_key(ck.topic, ck.cid, ck.queue_id)
        queue = self.commit_offsets.get(lock_key)
        if queue is not None and len(queue.items) >= cfg.pop_ck_offset_max_queue_size:
            return False
        wrapper = PopCheckPointWrapper(revive_qid, ck, next_begin_offset, lock_key)
        key = wrapper.key
        if key in self.buffer or key in self._flushing:
            log.warning("[PopBuffer] merge key conflict when adding ck %s", ck.unique_id())
            return False
        wrapper.deadline = min(ck.pop_time + cfg.pop_ck_stay_buffer_time,
                               ck.revive_time - cfg.pop_ck_stay_buffer_time_out)
        self._offer(wrapper)
        self.buffer[key] = wrapper
        heapq.heappush(self._deadlines, (wrapper.deadline, next(self._seq), wrapper))
        self._pop_log("[PopBuffer] add ck, %s", ck)
        return True

    def add_ck_just_offset(self, ck: PopCheckPoint, revive_qid: int, next_begin_offset: int, client: str) -> None:
        """#addCkJustOffset: a checkpoint the pop wrote to the revive topic itself; its offset still
        waits for the checkpoints before it, or is committed now when there are none."""
        self._add_offset_only(ck, revive_qid, next_begin_offset, client)

    def add_ck_mock(self, group: str, topic: str, queue_id: int, start_offset: int, invisible_time: int,
                    pop_time: int, revive_qid: int, next_begin_offset: int, broker_name: str, client: str) -> None:
        """#addCkMock: a pop that found nothing it wants before ``next_begin_offset`` moves the offset
        past it, in order behind the buffered checkpoints."""
        ck = PopCheckPoint(start_offset=start_offset, pop_time=pop_time, invisible_time=invisible_time, num=0,
                           queue_id=queue_id, topic=topic, cid=group, broker_name=broker_name)
        self._add_offset_only(ck, revive_qid, next_begin_offset, client)

    def _add_offset_only(self, ck: PopCheckPoint, revive_qid: int, next_begin_offset: int, client: str) -> None:
        lock_key = build_lock_key(ck.topic, ck.cid, ck.queue_id)
        queue = self.commit_offsets.get(lock_key)
        if queue is None or not queue.items:
            # Nothing before it is in memory only: the pop (holding the queue lock) commits it.
            self.broker.consumer_offset_manager.commit_offset(ck.cid, ck.topic, ck.queue_id, next_begin_offset, client)
            return
        wrapper = PopCheckPointWrapper(revive_qid, ck, next_begin_offset, lock_key, just_offset=True,
                                       revive_offset=0, ck_stored=True)
        self._offer(wrapper)
        self._pop_log("[PopBuffer] add ck just offset, %s", ck)

    def _offer(self, wrapper: PopCheckPointWrapper) -> None:
        queue = self.commit_offsets.get(wrapper.lock_key)
        if queue is None:
            queue = self.commit_offsets[wrapper.lock_key] = OffsetQueue()
        queue.time = wrapper.ck.pop_time
        queue.items.append(wrapper)

    def clear_offset_queue(self, topic: str, group: str, queue_id: int) -> None:
        """#clearOffsetQueue: a server-side reset of the pop offset wins over what was buffered."""
        self.commit_offsets.pop(build_lock_key(topic, group, queue_id), None)

    # ---- the ack paths ----------------------------------------------------------------------

    def add_ack(self, revive_qid: int, ack: AckMsg) -> bool:
        """#addAk: mark an ack (or a BatchAckMsg's acks) on its buffered checkpoint; False when
        the ack must be written to the revive topic (no buffered checkpoint, or it is written).

        Unlike upstream, an ack of a checkpoint not yet written is always merged here, even in
        the last 1.5 s before the checkpoint's flush or while shutting down: written on its own it
        could reach the revive topic before its checkpoint, where the revive service would not
        match it (and would revive an acked message). For the same reason it is merged when buffer
        merge was switched off since its checkpoint was buffered.
        """
        if not self.buffer:
            return False
        key = merge_key(ack.topic, ack.consumer_group, ack.queue_id, ack.start_offset, ack.pop_time, ack.broker_name)
        wrapper = self.buffer.get(key)
        if wrapper is None or wrapper.just_offset or wrapper.ck_stored:
            self._pop_log("[PopBuffer] add ack fail, rqId=%d, no buffered ck, %s", revive_qid, ack)
            return False
        ck = wrapper.ck
        for offset in ack.offsets():
            index = ck.index_of_ack(offset)
            if index < 0:
                log.error("[PopBuffer] invalid index of ack, rqId=%d, %s, %s", revive_qid, ack.unique_id(),
                          ck.unique_id())
                continue
            wrapper.bits |= 1 << index
        self._pop_log("[PopBuffer] add ack, rqId=%d, %s", revive_qid, ack)
        if wrapper.all_acked() and wrapper.revive_offset == NOT_STORED:
            # Done before its checkpoint was written: it never reaches the revive topic.
            del self.buffer[key]
            self._flushing.pop(key, None)
            self._dirty.add(wrapper.lock_key)
            self._kick.set()
        return True

    # ---- the scan ---------------------------------------------------------------------------

    async def scan(self) -> None:
        """#scan: write what is due (everything once not serving), then commit offsets."""
        now = self.broker.now_ms()
        deadlines = self._deadlines
        while deadlines and (not self.serving or deadlines[0][0] <= now):
            _deadline, _seq, wrapper = heapq.heappop(deadlines)
            key = wrapper.key
            if self.buffer.get(key) is wrapper:
                self._flushing[key] = wrapper
        for key, wrapper in list(self._flushing.items()):
            if self.buffer.get(key) is not wrapper:
                self._flushing.pop(key, None)
                continue
            await self._flush(wrapper)
            if wrapper.finished():
                self._pop_log("[PopBuffer] ck finish, %s", wrapper.ck)
                self.buffer.pop(key, None)
                self._flushing.pop(key, None)
                self._dirty.add(wrapper.lock_key)
        self.scan_commit_offset(now)
        if now >= self._next_garbage_scan:
            self._next_garbage_scan = now + GARBAGE_SCAN_MS
            self._scan_garbage(now)

    async def _flush(self, wrapper: PopCheckPointWrapper) -> None:
        """Write the checkpoint (once) and then its buffered acks not written yet."""
        if wrapper.all_acked() and wrapper.revive_offset == NOT_STORED:
            return  # acked in full meanwhile: add_ack dropped it
        if wrapper.revive_offset == NOT_STORED:
            wrapper.revive_offset = STORING
            ok = await self.pop.revive_log.append_checkpoint(wrapper.ck, wrapper.revive_qid)
            if not ok:
                wrapper.revive_offset = NOT_STORED  # retried by the next scan
                return
            wrapper.revive_offset = 0
            wrapper.ck_stored = True
            self._pop_log("[PopBuffer] put ck to store ok, %s", wrapper.ck)
        if not wrapper.ck_stored:
            return
        ck = wrapper.ck
        pending = [i for i in range(ck.num) if wrapper.bits >> i & 1 and not wrapper.to_store_bits >> i & 1]
        if not pending:
            return
        invisible_time = ck.invisible_time
        if self.config.enable_pop_batch_ack:
            acks: list[tuple[AckMsg, int, int]] = [(BatchAckMsg(
                -1, ck.start_offset, ck.cid, ck.topic, ck.queue_id, ck.pop_time, ck.broker_name,
                [ck.ack_offset_by_index(i) for i in pending]), wrapper.revive_qid, invisible_time)]
        else:
            acks = [(AckMsg(ck.ack_offset_by_index(i), ck.start_offset, ck.cid, ck.topic, ck.queue_id, ck.pop_time,
                            ck.broker_name), wrapper.revive_qid, invisible_time) for i in pending]
        if await self.pop.revive_log.append_acks(acks):
            for i in pending:
                wrapper.to_store_bits |= 1 << i
            self._pop_log("[PopBuffer] put %d acks to store ok, %s", len(pending), ck)

    def scan_commit_offset(self, now: int | None = None) -> int:
        """#scanCommitOffset: commit each queue's offset up to its first checkpoint that still lives
        only here; returns how many checkpoints wait in the offset queues."""
        now = self.broker.now_ms() if now is None else now
        if now >= self._next_full_scan:
            self._next_full_scan = now + FULL_COMMIT_SCAN_MS
            keys: list[str] = list(self.commit_offsets)
        else:
            keys = list(self._dirty)
        self._dirty.clear()
        for lock_key in keys:
            queue = self.commit_offsets.get(lock_key)
            if queue is None:
                continue
            items = queue.items
            while items and items[0].committable():
                if not self._commit_offset(items[0]):
                    self._dirty.add(lock_key)  # its queue is being popped: next scan
                    break
                items.popleft()
            if items and now - items[0].ck.pop_time > self.config.pop_ck_stay_buffer_time * 2:
                self._pop_log("[PopBuffer] ck offset long time not commit, %s", items[0].ck)
        return self.offset_total_size()

    def _commit_offset(self, wrapper: PopCheckPointWrapper) -> bool:
        """#commitOffset: not while a pop holds the queue (it reads the offset); never backwards."""
        if wrapper.next_begin_offset < 0:
            return True
        if self.pop.queue_locks.is_locked(wrapper.lock_key):
            return False
        ck = wrapper.ck
        com = self.broker.consumer_offset_manager
        if wrapper.next_begin_offset > com.query_offset(ck.cid, ck.topic, ck.queue_id):
            com.commit_offset(ck.cid, ck.topic, ck.queue_id, wrapper.next_begin_offset, "PopBufferMergeService")
            self._pop_log("[PopBuffer] commit offset %d of %s", wrapper.next_begin_offset, wrapper.lock_key)
        return True

    def _scan_garbage(self, now: int) -> None:
        """#scanGarbage: offset queues of deleted topics, or empty and unused for 5 minutes.

        Upstream also drops a queue of a deleted group, or one unused for 5 minutes whatever it
        holds; a queue with checkpoints is kept here, since dropping it would let the next pop
        start below them and hand their messages out again.
        """
        tcm = self.broker.topic_config_manager
        for lock_key, queue in list(self.commit_offsets.items()):
            topic = lock_key.rsplit("@", 2)[0]
            if tcm.select_topic_config(topic) is None or (not queue.items and now - queue.time > GARBAGE_AGE_MS):
                del self.commit_offsets[lock_key]

    def offset_total_size(self) -> int:
        """#getOffsetTotalSize."""
        return sum(len(q.items) for q in self.commit_offsets.values())

    def buffered_ck_size(self) -> int:
        """#getBufferedCKSize."""
        return len(self.buffer)

    def _pop_log(self, fmt: str, *args: object) -> None:
        if self.config.enable_pop_log:
            log.info(fmt, *args)
