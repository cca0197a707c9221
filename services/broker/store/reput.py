"""ReputMessageService: turns new CommitLog records into ConsumeQueue/index entries and wake-ups.

It runs as a task on the store's event loop, woken by every append (and by a 1 ms fallback
timer), and dispatches a bounded number of records per turn so it never starves the loop.
``reput_from_offset`` is the CommitLog offset up to which readers can see messages.

Appends on this loop hand over the DispatchRequests of the records they write (CommitLog.handoff),
so the records this broker just stored are not decoded again; a request is used only when its
offset is exactly ``reput_from_offset``. Everything else (recovery, a gap left by a full
hand-off, a segment's blank end) is decoded from the CommitLog as before.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from collections.abc import Callable

from orbitmq.broker.store.commit_log import CommitLog
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.common import speedups
from orbitmq.common.message_codec import MESSAGE_MAGIC_CODE, SIZE_MAGIC

log = logging.getLogger(__name__)

Dispatcher = Callable[[DispatchRequest], None]
# The run form of a dispatcher: fn(requests, failed) does what calling the dispatcher for each
# request in order does, calling failed(req) inside the handler of an exception it raised.
RunDispatcher = Callable[[list[DispatchRequest], Callable[[DispatchRequest], None]], None]
ArrivalListener = Callable[[str, int, int, int, int, dict], None]

BATCH_RECORDS = 4096
# Appends wake the service directly; the timer only catches data that arrived another way
# (e.g. replication into a slave's CommitLog): 1 ms while records flow, 10 ms once idle.
FALLBACK_INTERVAL_S = 0.001
IDLE_FALLBACK_INTERVAL_S = 0.010
IDLE_AFTER_S = 1.0


class ReputMessageService:
    def __init__(self, commit_log: CommitLog) -> None:
        self.commit_log = commit_log
        self.reput_from_offset = 0
        self.dispatchers: list[Dispatcher] = []
        # Run forms of dispatchers (the IndexService's); used for the last dispatcher only, so
        # that every dispatcher still sees each record after those before it in the list.
        self.run_dispatchers: dict[Dispatcher, RunDispatcher] = {}
        self.arrival_listeners: list[ArrivalListener] = []
        self._task: asyncio.Task | None = None
        self._waiter: asyncio.Future | None = None
        self._stopped = False
        self._handoff: deque[DispatchRequest] = deque()
        commit_log.handoff = self._handoff
        # Replication gating (ReputMessageService#getReputEndOffset): when set, records are
        # dispatched only if they end at or before this offset (the store's confirm offset,
        # StoreReplication.get_confirm_offset); None: up to the CommitLog max.
        self.end_offset_fn: Callable[[], int] | None = None
        # Where a dispatcher asked dispatch to start again (a ConsumeQueue met a record whose
        # queue offset lies past its end: request_redispatch); None when nobody did.
        self._redispatch_from: int | None = None

    def request_redispatch(self, offset: int) -> None:
        """Dispatch again from the record boundary ``offset`` (at or before the current reput
        offset) once the record being dispatched is done. Records already in a ConsumeQueue or
        the index are recognised and skipped there."""
        pending = self._redispatch_from
        if pending is None or offset < pending:
            self._redispatch_from = offset

    def end_offset(self) -> int:
        """Where dispatch may go up to now: the CommitLog max, or the confirm offset if lower."""
        return self._end_and_gated()[0]

    def caught_up(self) -> bool:
        """Nothing more can be dispatched now: the next record (if any) ends past end_offset()
        (a confirm offset inside a record: acks count bytes, not records)."""
        end = self.end_offset()
        offset = self.reput_from_offset
        if offset >= end:
            return True
        mf = self.commit_log.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return True
        pos = offset - mf.file_from_offset
        if pos + 8 > mf.read_position:
            return mf.read_position < mf.file_size
        total, magic = SIZE_MAGIC.unpack_from(mf.mm, pos)
        if magic != MESSAGE_MAGIC_CODE:
            return False  # a blank end (rolled over) or something reput reports and skips
        return offset + total > end

    def behind(self) -> int:
        """Bytes left to dispatch up to end_offset() (DefaultMessageStore.dispatchBehindBytes)."""
        return max(0, self.end_offset() - self.reput_from_offset)

    def _take_handed_off(self, offset: int) -> DispatchRequest | None:
        """The handed-off record at exactly ``offset``, dropping stale ones behind it; None when
        the queue is empty or its head lies past ``offset`` (a gap to decode from the log)."""
        handoff = self._handoff
        while handoff:
            at = handoff[0].commit_log_offset
            if at == offset:
                return handoff.popleft()
            if at > offset:
                return None
            handoff.popleft()
        return None

    def do_reput(self, max_records: int | None = None, notify: bool = True) -> int:
        """Dispatch records from reput_from_offset; returns how many were dispatched.

        Each turn dispatches one stretch, the way ReputMessageService#doReput reads one
        SelectMappedBufferResult at a time: the records below the confirm offset one by one
        (gated), or a run of handed-off records, or the records of one segment decoded from the
        log; until the end (getReputEndOffset), ``max_records``, or data still to come.
        """
        if max_records is None:
            max_records = sys.maxsize
        self._skip_to_min_offset()
        done = 0
        while True:
            self._rewind_if_asked()
            end, gated = self._end_and_gated()
            if self.reput_from_offset >= end or done >= max_records:
                break
            if gated:
                n = self._reput_gated(end, max_records - done, notify)
                done += n
                if n == 0:
                    break
                continue
            if self._handoff:
                start = self.reput_from_offset
                done = self._reput_handed_off(done, max_records, notify)
                if self.reput_from_offset != start:
                    continue
                # The head of the hand-off lies past reput_from_offset: a gap, decoded first.
            done, more = self._reput_segment(done, max_records, notify)
            if not more:
                break
        return done

    def _skip_to_min_offset(self) -> None:
        """Retention removed the segment dispatch was in: go on from the CommitLog's min."""
        min_offset = self.commit_log.get_min_offset()
        if 0 <= self.reput_from_offset < min_offset:
            log.warning("reput offset %d below the CommitLog min %d; skipping ahead", self.reput_from_offset, min_offset)
            self.reput_from_offset = min_offset

    def _rewind_if_asked(self) -> None:
        """Go back to where request_redispatch asked dispatch to start again, if it did."""
        rewind = self._redispatch_from
        if rewind is not None:
            self._redispatch_from = None
            if rewind < self.reput_from_offset:
                log.warning("dispatching again from CommitLog offset %d (was at %d)", rewind, self.reput_from_offset)
                self.reput_from_offset = rewind

    def _end_and_gated(self) -> tuple[int, bool]:
        """end_offset(), and whether the confirm offset (lower than the CommitLog max) sets it."""
        cl = self.commit_log
        end = cl.get_max_offset()
        fn = self.end_offset_fn
        if fn is not None:
            confirm = fn()
            if confirm < end:
                return confirm, True
        # With a transient store pool the end is the committed one and the appends hand off
        # records beyond it: the gated walk takes only those that end by it.
        if cl.transient_store_pool is not None and end < cl.mapped_file_queue.get_max_wrote_position():
            return end, True
        return end, False

    def _reput_handed_off(self, done: int, max_records: int, notify: bool) -> int:
        """Dispatch the records handed off by the appends from reput_from_offset on, in log
        order, with no decoding; returns the new ``done``. An entry behind reput_from_offset is
        stale (e.g. reput skipped ahead) and dropped; one past it stops the run (a gap)."""
        offset = self.reput_from_offset
        dispatchers = self.dispatchers
        last = dispatchers[-1] if dispatchers else None
        run_form = self._run_form(last)
        if run_form is None:
            take = self._take_handed_off
            dispatch = self._dispatch
            while done < max_records and (req := take(offset)) is not None:
                dispatch(req, notify)
                offset += req.msg_size
                self.reput_from_offset = offset
                done += 1
            return done
        # The last dispatcher takes the whole run at once, after the others (and the arrival
        # listeners, which do not read what it writes) saw each record.
        listeners = self.arrival_listeners if notify else None
        run: list[DispatchRequest] = []
        _, done = dispatch_handed_off(self, offset, done, max_records, dispatchers[:-1], listeners, run)
        if run:
            def failed(req: DispatchRequest, last: Dispatcher = last) -> None:
                log.exception("dispatcher %r failed for CommitLog offset %d", last, req.commit_log_offset)
            try:
                run_form(run, failed)
            except Exception:
                log.exception("dispatcher %r failed for CommitLog offsets %d..%d", last,
                              run[0].commit_log_offset, run[-1].commit_log_offset)
        return done

    def _run_form(self, last: Dispatcher | None) -> RunDispatcher | None:
        """The run form of the last dispatcher, if it has one (the IndexService's)."""
        if last is None or not self.run_dispatchers:
            return None
        try:
            return self.run_dispatchers.get(last)
        except TypeError:  # an unhashable dispatcher has no run form
            return None

    def _reput_segment(self, done: int, max_records: int, notify: bool) -> tuple[int, bool]:
        """Decode and dispatch records of the segment holding reput_from_offset, up to its
        written end or the next handed-off record; (the new ``done``, whether to go on: False
        when no more data is there yet, or a record's bytes are still arriving)."""
        cl = self.commit_log
        handoff = self._handoff
        mf = cl.mapped_file_queue.find_mapped_file_by_offset(self.reput_from_offset)
        if mf is None:
            return done, False
        pos = self.reput_from_offset - mf.file_from_offset
        limit = mf.read_position
        if pos >= limit:
            if limit >= mf.file_size:
                self.reput_from_offset = cl.roll_next_file(self.reput_from_offset)
                return done, True
            return done, False
        mm = mf.mm
        while pos < limit and done < max_records:
            if handoff and handoff[0].commit_log_offset <= self.reput_from_offset:
                break  # handed off from here on (or stale entries to drop)
            req = cl.check_message_and_return_size(mm, pos, limit, False)
            size = req.msg_size
            if req.success and size > 0:
                self._dispatch(req, notify)
                pos += size
                self.reput_from_offset += size
                done += 1
            elif req.success:
                self.reput_from_offset = cl.roll_next_file(self.reput_from_offset)
                break
            elif size > 0:
                log.error("[BUG] read total count not equals msg total size at %d", self.reput_from_offset)
                pos += size
                self.reput_from_offset += size
            elif limit < mf.file_size and _incomplete_record(mm, pos, limit, mf.file_size):
                # A record whose bytes are still arriving (a replica appends the master's
                # batches, which end anywhere): dispatched once it is whole. Skipping it would
                # leave the reput offset inside it and lose every record after it. Go on only
                # if a dispatcher asked for a redispatch meanwhile.
                return done, self._redispatch_from is not None
            else:
                log.error("[BUG] dispatch to consume queue failed at CommitLog offset %d; skipping the "
                          "rest of segment %s", self.reput_from_offset, mf.file_name)
                self.reput_from_offset += limit - pos
                break
        return done, True

    def _reput_gated(self, end: int, max_records: int, notify: bool) -> int:
        """Dispatch records ending at or before ``end`` (< the CommitLog max); how many."""
        cl = self.commit_log
        mfq = cl.mapped_file_queue
        done = 0
        while done < max_records and self.reput_from_offset < end:
            offset = self.reput_from_offset
            req = self._take_handed_off(offset)
            handed_off = req is not None
            if req is None:
                mf = mfq.find_mapped_file_by_offset(offset)
                if mf is None:
                    break
                pos = offset - mf.file_from_offset
                limit = mf.read_position
                if pos >= limit:
                    if limit >= mf.file_size:
                        self.reput_from_offset = cl.roll_next_file(offset)
                        continue
                    break
                req = cl.check_message_and_return_size(mf.mm, pos, limit, False)
                if req.success and req.msg_size == 0:
                    self.reput_from_offset = cl.roll_next_file(offset)
                    continue
                if not req.success:
                    if limit < mf.file_size and _incomplete_record(mf.mm, pos, limit, mf.file_size):
                        break  # the rest of it is still to come
                    log.error("[BUG] undecodable record at CommitLog offset %d below the confirm offset", offset)
                    break
            if offset + req.msg_size > end:
                if handed_off:
                    self._handoff.appendleft(req)  # dispatched once the confirm offset passes it
                break
            self._dispatch(req, notify)
            self.reput_from_offset = offset + req.msg_size
            done += 1
        return done

    def _dispatch(self, req: DispatchRequest, notify: bool) -> None:
        for dispatcher in self.dispatchers:
            try:
                dispatcher(req)
            except Exception:
                log.exception("dispatcher %r failed for CommitLog offset %d", dispatcher, req.commit_log_offset)
        if notify and self.arrival_listeners and req.consume_queue_offset >= 0 and _has_cq_entry(req.sys_flag):
            self._notify(req)

    def _notify(self, req: DispatchRequest) -> None:
        for listener in self.arrival_listeners:
            try:
                listener(req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code,
                         req.store_timestamp, req.properties)
            except Exception:
                log.exception("message arrival listener %r failed", listener)

    # --- task ----------------------------------------------------------------------------
    def start(self) -> None:
        self._stopped = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ReputMessageService")

    def wakeup(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last_active = loop.time()
        while not self._stopped:
            try:
                n = self.do_reput(BATCH_RECORDS)
            except Exception:
                log.exception("reput failed")
                n = 0
            if n >= BATCH_RECORDS:
                await asyncio.sleep(0)
                continue
            now = loop.time()
            if n:
                last_active = now
            idle = now - last_active > IDLE_AFTER_S
            waiter = loop.create_future()
            self._waiter = waiter
            handle = loop.call_later(IDLE_FALLBACK_INTERVAL_S if idle else FALLBACK_INTERVAL_S, _wake, waiter)
            try:
                await waiter
            finally:
                handle.cancel()
                self._waiter = None

    async def shutdown(self) -> None:
        """Stop after dispatching everything already appended."""
        self._stopped = True
        self.wakeup()
        if self._task is not None:
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        self.do_reput()


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


# Compiled twin: _speedups_dispatch.dispatch_handed_off (same calls, same order).
def dispatch_handed_off(service: ReputMessageService, offset: int, done: int, max_records: int,
                        head: list[Dispatcher], listeners: list[ArrivalListener] | None,
                        run: list[DispatchRequest]) -> tuple[int, int]:
    """The handed-off records from ``offset`` on (at most ``max_records - done``), in log order:
    each goes through the ``head`` dispatchers and the arrival listeners, then into ``run`` for
    the last dispatcher; returns the new (offset, done). Compiled where the accelerator was built.
    """
    take = service._take_handed_off
    while done < max_records and (req := take(offset)) is not None:
        # _dispatch(req, notify, head), inlined: this runs for every record.
        for dispatcher in head:
            try:
                dispatcher(req)
            except Exception:
                log.exception("dispatcher %r failed for CommitLog offset %d", dispatcher, req.commit_log_offset)
        if listeners and req.consume_queue_offset >= 0 and _has_cq_entry(req.sys_flag):
            service._notify(req)
        run.append(req)
        offset += req.msg_size
        service.reput_from_offset = offset
        done += 1
    return offset, done


_py_dispatch_handed_off = dispatch_handed_off


def _incomplete_record(mm, pos: int, limit: int, file_size: int) -> bool:
    """The bytes at ``pos`` are the start of a record that goes on past ``limit`` (the written
    end of its segment): too short to hold the size and magic, or a message header whose size
    reaches beyond what is written but still fits the segment."""
    if pos + 8 > limit:
        return True
    total, magic = SIZE_MAGIC.unpack_from(mm, pos)
    return magic == MESSAGE_MAGIC_CODE and pos + total > limit and 0 < total <= file_size - pos


def _has_cq_entry(sys_flag: int) -> bool:
    tran = sys_flag & 0xC
    return tran == 0 or tran == 0x8


_fast = speedups.load("orbitmq.broker.store._speedups_dispatch")  # None: the code above runs
if _fast is not None:
    dispatch_handed_off = _fast.dispatch_handed_off
