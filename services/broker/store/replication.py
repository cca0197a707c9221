"""StoreReplication: the store's side of replication, ``MessageStore.replication``.

What the HA services (services/broker/ha: AutoSwitchHAService in controller mode,
DefaultHAService for classic HA) ask of the store, and the confirm offset readers stop at.
Upstream keeps these on DefaultMessageStore (getConfirmOffset/setConfirmOffset, appendToCommitLog,
truncateFiles, truncateInvalidMsg) and in CommitLog#handleHA; here they live apart from the
put/get engine. docs/controller-ha.md ("Store ↔ HA interface") lists who calls what.

Everything runs on the store's event loop, as the rest of the MessageStore.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orbitmq.broker.store.config import SYNC_MASTER

if TYPE_CHECKING:
    from orbitmq.broker.store.dispatch import DispatchRequest
    from orbitmq.broker.store.message_store import MessageStore

log = logging.getLogger(__name__)


class StoreReplication:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        # The broker's HA service, or None for a lone broker. Read by the put path (send-ack
        # rules); set it with attach_ha_service(), which also installs the dispatch gate.
        self.ha_service: Any = None
        # The stored confirm offset (checkpoint byte 32); what readers see is get_confirm_offset().
        self._confirm_offset = -1

    # --- the HA service ------------------------------------------------------------------
    def attach_ha_service(self, service: Any) -> None:
        """Attach the HA service (None detaches); one that gates dispatch hides everything past
        the confirm offset from now on, rolling back ConsumeQueue entries a previous life built
        beyond it (upstream #6609): the role decides later what becomes visible."""
        self.ha_service = service
        self.apply_confirm_gating()

    def apply_confirm_gating(self) -> None:
        """(Re)install the reput end for the current HA service and readUnCommitted."""
        store = self.store
        rs = store.reput_service
        if rs is None:
            return
        ha = self.ha_service
        gate = ha is not None and getattr(ha, "gates_dispatch", False) and not store.config.read_un_committed
        rs.end_offset_fn = self.get_confirm_offset if gate else None
        if gate:
            confirm = self.get_confirm_offset()
            if rs.reput_from_offset > confirm:
                log.info("dispatch was at %d, beyond the confirm offset %d: rolling the queues back",
                         rs.reput_from_offset, confirm)
                self._roll_back_dispatch(confirm)

    def refuses_put(self, wait: bool) -> bool:
        """SYNC_MASTER, WAIT: fewer in-sync replicas than minInSyncReplicas, so the put is
        answered IN_SYNC_REPLICAS_NOT_ENOUGH before anything is written (CommitLog#asyncPutMessage)."""
        ha = self.ha_service
        return (ha is not None and wait and self.store.config.broker_role == SYNC_MASTER
                and ha.in_sync_replicas_not_enough())

    # --- confirm offset ------------------------------------------------------------------
    def recover_confirm_offset(self, end: int) -> None:
        """At start-up: the checkpoint's confirm offset, clamped to [CommitLog min, valid end];
        the HA service decides whether it gates dispatch."""
        store = self.store
        stored = store.checkpoint.confirm_phy_offset
        low = max(0, store.commit_log.get_min_offset())
        if stored < low or stored > end:
            log.info("confirm offset %d clamped to [%d, %d]", stored, low, end)
        self.set_confirm_offset(min(max(stored, low), end))

    def get_confirm_offset(self) -> int:
        """The offset readers may see up to (DefaultMessageStore#getConfirmOffset); the CommitLog
        max without HA."""
        ha = self.ha_service
        if ha is None:
            return self.store.commit_log.get_max_offset()
        return ha.get_confirm_offset()

    def get_confirm_offset_directly(self) -> int:
        """The stored value, whatever the HA service would answer."""
        return self._confirm_offset

    def set_confirm_offset(self, value: int) -> None:
        """Store ``value`` (made durable by the next checkpoint flush) and wake a gated reput."""
        self._confirm_offset = value
        store = self.store
        if store.checkpoint is not None:
            store.checkpoint.confirm_phy_offset = value
        rs = store.reput_service
        if rs is not None and rs.end_offset_fn is not None:
            rs.wakeup()

    # --- the CommitLog of a replica ------------------------------------------------------
    def append_to_commit_log(self, start_offset: int, data: bytes | memoryview) -> bool:
        """Slave side: raw CommitLog bytes from the master, written at exactly the local max.

        The reput service decodes and dispatches them from the log. An empty store takes any
        segment-aligned start (the master's min offset, or its last file with syncFromLastFile).
        """
        store = self.store
        if store.shutdown_flag or store.commit_log is None:
            return False
        cl = store.commit_log
        mfq = cl.mapped_file_queue
        self._commit_pending()
        local_max = cl.get_max_offset()
        if start_offset != local_max:
            if local_max != 0 or start_offset % cl.file_size:
                log.error("append to the CommitLog at %d refused: the local max offset is %d", start_offset, local_max)
                return False
            # An empty store starting at the master's first (or last) file: drop the empty segments.
            if any(mf.wrote_position for mf in mfq.mapped_files):
                return False
            if mfq.allocate_service is not None:
                mfq.allocate_service.discard_prepared()
            while mfq.get_last_mapped_file() is not None:
                mfq.delete_last_mapped_file()
            mfq.flushed_where = mfq.committed_where = start_offset
            store.reput_service.reput_from_offset = start_offset
        view = memoryview(data)
        pos = 0
        total = len(view)
        try:
            while pos < total:
                mf = mfq.get_last_mapped_file_or_create(start_offset)
                room = mf.file_size - mf.wrote_position
                n = min(room, total - pos)
                if not mf.append(view[pos : pos + n]):
                    return False
                pos += n
        except OSError:
            log.exception("cannot create a CommitLog segment for replicated data at %d", start_offset + pos)
            return False
        store.reput_service.wakeup()
        return True

    def _commit_pending(self) -> None:
        """Records this broker appended as a master still in a transient store pool buffer go
        into the file first, so truncation and replicated appends see the whole log
        (AutoSwitchHAService#changeToSlave waits for all to be committed)."""
        cl = self.store.commit_log
        mfq = cl.mapped_file_queue
        if cl.transient_store_pool is not None and mfq.get_max_wrote_position() > cl.get_max_offset():
            mfq.commit_all()

    def truncate_files(self, offset: int) -> bool:
        """Drop every CommitLog byte from ``offset`` on (a record boundary) and the
        ConsumeQueue/index entries of those records; dispatch restarts at ``offset``."""
        store = self.store
        self._commit_pending()
        cl = store.commit_log
        if offset >= cl.get_max_offset():
            return True
        if not self._is_offset_aligned(offset):
            log.error("truncate CommitLog to %d refused: not a record boundary", offset)
            return False
        self._roll_back_dispatch(offset)
        mfq = cl.mapped_file_queue
        if mfq.allocate_service is not None:
            mfq.allocate_service.discard_prepared()
        mfq.truncate_dirty_files(offset)
        last = mfq.get_last_mapped_file()
        if last is None:
            mfq.flushed_where = mfq.committed_where = offset
        elif last.hold():
            # The zeroed tail reaches the disk now: a crash must not bring the cut records back
            # as valid ones on recovery (upstream #10666). Rare, and one segment at most.
            try:
                os.fdatasync(last.fd)
            finally:
                last.release()
        store.recover_offset_table()
        self.set_confirm_offset(min(self._confirm_offset, offset))
        log.info("CommitLog truncated to %d", offset)
        return True

    def truncate_invalid_msg(self) -> int:
        """Cut a partially written tail: scan from the dispatch offset, cut at the first record
        that does not decode. The cut offset, or -1 when there was nothing to check."""
        store = self.store
        self._commit_pending()
        cl = store.commit_log
        rs = store.reput_service
        offset = rs.reput_from_offset
        max_offset = cl.get_max_offset()
        if offset >= max_offset:
            return -1
        offset = min(self._walk(offset, max_offset, True), max_offset)
        if offset < max_offset:
            log.info("truncate the invalid CommitLog tail from %d (max was %d)", offset, max_offset)
            rs._handoff.clear()
            cl.mapped_file_queue.truncate_dirty_files(offset)
            self.set_confirm_offset(min(self._confirm_offset, offset))
        return offset

    def recover_topic_queue_table(self) -> None:
        """Queue offsets from the ConsumeQueues, raised past the records of the not yet
        dispatched tail (beyond the confirm offset): a new message never reuses the queue
        offset of a stored one (upstream #7689). Called by a new master."""
        store = self.store
        store.recover_offset_table()
        table = store.commit_log.topic_queue_table

        def raise_queue_offset(req: DispatchRequest) -> None:
            tran = req.sys_flag & 0xC
            if tran == 0 or tran == 0x8:
                key = (req.topic, req.queue_id)
                if req.consume_queue_offset + 1 > table.get(key, 0):
                    table[key] = req.consume_queue_offset + 1

        self._walk(store.reput_service.reput_from_offset, store.commit_log.get_max_offset(), False,
                   raise_queue_offset)

    def _walk(self, offset: int, end: int, check: bool,
              on_record: Callable[[DispatchRequest], None] | None = None) -> int:
        """Walk the CommitLog's records from the record boundary ``offset`` while before ``end``
        (blank and full segment ends stepped over), calling ``on_record`` for each; returns
        where the walk stopped: at or past ``end``, where nothing is written yet, or at the first
        record that does not decode. ``check``: also verify each body CRC and physical offset."""
        cl = self.store.commit_log
        mfq = cl.mapped_file_queue
        while offset < end:
            mf = mfq.find_mapped_file_by_offset(offset)
            if mf is None:
                break
            pos = offset - mf.file_from_offset
            if pos >= mf.wrote_position:
                if mf.is_full():
                    offset = cl.roll_next_file(offset)
                    continue
                break
            req = cl.check_message_and_return_size(mf.mm, pos, mf.wrote_position, check, offset if check else None)
            if not req.success:
                break
            if req.msg_size == 0:
                offset = cl.roll_next_file(offset)
                continue
            if on_record is not None:
                on_record(req)
            offset += req.msg_size
        return offset

    # --- rolling dispatch back -----------------------------------------------------------
    def _roll_back_dispatch(self, offset: int) -> None:
        """Forget every ConsumeQueue/index entry of records ending past ``offset``; dispatch
        restarts there and the queue offsets are recomputed (so a new message takes the queue
        offset a dropped one had, #7689)."""
        store = self.store
        for cq in store.consume_queues():
            cq.truncate_dirty_logic_files(offset)
        if store.index_service is not None:
            for f in store.index_service.files:
                if f.end_phy_offset > offset:
                    f.end_phy_offset = offset  # lets new records at these offsets be indexed
        rs = store.reput_service
        rs._handoff.clear()
        rs.reput_from_offset = min(rs.reput_from_offset, self._record_start_at_or_before(offset))
        store.recover_offset_table()

    def _record_start_at_or_before(self, offset: int) -> int:
        """The last record boundary <= ``offset`` (a confirm offset may fall inside a record):
        scanned from the last ConsumeQueue entry end, or the segment start, below it."""
        cl = self.store.commit_log
        mf = cl.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return offset
        base = mf.file_from_offset
        pos = base
        for cq in self.store.consume_queues():
            if pos < cq.max_physic_offset <= offset:
                pos = cq.max_physic_offset
        while pos < offset:
            req = cl.check_message_and_return_size(mf.mm, pos - base, mf.wrote_position, False)
            if not req.success or req.msg_size == 0 or pos + req.msg_size > offset:
                break
            pos += req.msg_size
        return pos

    def _is_offset_aligned(self, offset: int) -> bool:
        """A record (or a segment's blank end) starts exactly at ``offset``."""
        cl = self.store.commit_log
        mf = cl.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return False
        pos = offset - mf.file_from_offset
        if pos == 0:
            return True
        req = cl.check_message_and_return_size(mf.mm, pos, mf.wrote_position, False)
        return req.success and (req.msg_size == 0 or req.commit_log_offset == offset)
