"""MessageStore: the storage engine façade the broker calls (RocketMQ's DefaultMessageStore).

put_message/put_messages, get_message and the queue/offset queries must be called on the
event loop that ran ``start()``; flushing, recovery and retention work run on threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from orbitmq.broker.store.checkpoint import StoreCheckpoint
from orbitmq.broker.store.commit_log import CommitLog
from orbitmq.broker.store.config import SLAVE, SYNC_FLUSH, SYNC_MASTER, MessageStoreConfig
from orbitmq.broker.store.consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE, ConsumeQueue, is_blank_entry
from orbitmq.broker.store.consume_queue_ext import MAX_ADDR, ConsumeQueueExt
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.flush import (
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
)
from orbitmq.broker.store.model import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
)
from orbitmq.broker.store.replication import StoreReplication
from orbitmq.broker.store.reput import ArrivalListener, Dispatcher, ReputMessageService
from orbitmq.broker.store.retention import RetentionService, disk_partition_used_ratio
from orbitmq.broker.store.running_flags import RunningFlags
from orbitmq.broker.store.transient_store_pool import TransientStorePool
from orbitmq.common import speedups
from orbitmq.common.aio import cancel_and_wait, periodic
from orbitmq.common.constants import (
    LMQ_QUEUE_ID,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_SCHEDULE_TOPIC,
    is_lmq,
    split_lmq_names,
    topic_allows_lmq,
)
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import RecordError, decode_record
from orbitmq.common.message_id import decode_offset_message_id

log = logging.getLogger(__name__)

_PUT_OK = PutMessageStatus.PUT_OK
# DefaultMessageStore#addScheduleTask: checkSelf 1 minute after start, then every 10 minutes.
CHECK_SELF_INITIAL_DELAY_S = 60.0
CHECK_SELF_INTERVAL_S = 600.0
_WAIT = MessageConst.WAIT_STORE_MSG_OK
_MULTI_DISPATCH = MessageConst.INNER_MULTI_DISPATCH
_MULTI_QUEUE_OFFSET = MessageConst.INNER_MULTI_QUEUE_OFFSET


def _wait_store_msg_ok(properties: dict[str, str]) -> bool:
    """MessageExtBrokerInner.wait_store_msg_ok of a message with these properties."""
    raw = properties.get(_WAIT)
    return raw is None or raw.lower() == "true"


PutMessageHook = Callable[[MessageExtBrokerInner], PutMessageResult | None]


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024**3


class MessageStore:
    def __init__(self, config: MessageStoreConfig, *, store_host: tuple[str, int] = ("127.0.0.1", 10911),
                 enable_controller_mode: bool = False) -> None:
        self.config = config
        # BrokerConfig#enableControllerMode: decides, with brokerRole, whether the transient
        # store pool is used (DefaultMessageStore#isTransientStorePoolEnable).
        self.enable_controller_mode = enable_controller_mode
        self.transient_store_pool: TransientStorePool | None = None
        self._commit_service: CommitRealTimeService | None = None
        self.store_host = store_host
        self.running_flags = RunningFlags()
        self.checkpoint: StoreCheckpoint | None = None
        self.commit_log: CommitLog | None = None
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.reput_service: ReputMessageService | None = None
        self.index_service = None
        # CleanCommitLogService + CleanConsumeQueueService + the disk-full check (retention.py).
        self.retention_service: RetentionService | None = None
        self.put_message_hooks: list[PutMessageHook] = []
        self._delivery_time_of: Callable[[int, int], int] | None = None
        self._extra_dispatchers: list[Dispatcher] = []
        # Dispatchers that run before the ConsumeQueue's (CommitLogDispatcherCalcBitMap, which
        # upstream adds with getDispatcherList().addFirst).
        self._first_dispatchers: list[Dispatcher] = []
        self._arrival_listeners: list[ArrivalListener] = []
        self._flush_service: FlushRealTimeService | GroupCommitService | None = None
        self._group_commit: GroupCommitService | None = None
        self._flush_cq_service: FlushConsumeQueueService | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock_fd: int | None = None
        self._started = False
        self._check_self_task: asyncio.Task[None] | None = None
        self.shutdown_flag = True
        self.last_exit_ok = True
        self.dispatched_store_timestamp = 0
        self.total_physical_memory = _total_physical_memory()
        self._print_times = 0
        # The store's side of replication (services/broker/ha drives it): the HA service, the
        # confirm offset readers stop at, a replica's appends and truncations.
        self.replication = StoreReplication(self)

    # --- hooks ---------------------------------------------------------------------------
    def add_dispatcher(self, fn: Dispatcher) -> None:
        """Called for every stored record after the ConsumeQueue (and index) dispatchers."""
        self._extra_dispatchers.append(fn)
        if self.reput_service is not None:
            self.reput_service.dispatchers.append(fn)

    def add_first_dispatcher(self, fn: Dispatcher) -> None:
        """Called for every stored record before the ConsumeQueue dispatcher (so that what it
        sets on the DispatchRequest, e.g. the filter bit map, goes into the queue entry)."""
        self._first_dispatchers.append(fn)
        if self.reput_service is not None:
            self._install_dispatchers()

    def add_arrival_listener(self, fn: ArrivalListener) -> None:
        """fn(topic, queue_id, logic_offset, tags_code, store_timestamp, properties) on the loop.

        ``logic_offset`` is the queue's new max offset (the stored message's offset + 1), as
        MessageArrivingListener.arriving receives it.
        """
        self._arrival_listeners.append(fn)
        if self.reput_service is not None:
            self.reput_service.arrival_listeners.append(fn)

    def add_put_message_hook(self, fn: PutMessageHook) -> None:
        """Runs before each append; may rewrite the message (delay redirect) or refuse it."""
        self.put_message_hooks.append(fn)

    def set_delivery_time_function(self, fn: Callable[[int, int], int] | None) -> None:
        """fn(delay_level, store_timestamp) -> delivery time, stored as SCHEDULE_TOPIC tag code.

        Set it before start() so entries rebuilt during recovery get delivery times too.
        """
        self._delivery_time_of = fn
        if self.commit_log is not None:
            self.commit_log.delivery_time_of = fn

    # --- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Lock the store directory, load and recover, then start the flush and reput services."""
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._load_and_recover)
        cfg = self.config
        if cfg.flush_disk_type == SYNC_FLUSH:
            self._flush_service = self._group_commit = GroupCommitService(self.commit_log, self.checkpoint)
        else:
            self._flush_service = FlushRealTimeService(self.commit_log, cfg, self.checkpoint)
        self._flush_cq_service = FlushConsumeQueueService(
            self.consume_queues, cfg, self.checkpoint, lambda: self.dispatched_store_timestamp
        )
        if self.transient_store_pool is not None:
            self._commit_service = CommitRealTimeService(self.commit_log, cfg, self._flush_service.wakeup)
            if self._group_commit is not None:
                self._group_commit.wake_commit = self._commit_service.wakeup
            self._commit_service.start()
        self._flush_service.start()
        self._flush_cq_service.start()
        self.reput_service.start()
        self.retention_service = RetentionService(
            cfg, self.commit_log.mapped_file_queue, self.running_flags,
            consume_queues=self.consume_queues, index_service=self.index_service,
            min_commit_log_offset=self.commit_log.get_min_offset,
        )
        self.retention_service.start()
        self._check_self_task = asyncio.create_task(
            periodic(CHECK_SELF_INTERVAL_S, self.check_self, what="checkSelf", initial_delay=CHECK_SELF_INITIAL_DELAY_S),
            name="StoreCheckSelf")
        self._started = True
        self.shutdown_flag = False

    def check_self(self) -> bool:
        """DefaultMessageStore#checkSelf (every 10 minutes, first after 1): the CommitLog's and every
        ConsumeQueue's segments follow each other without a gap; what does not is logged as a bug.
        In-memory lists only, so it runs on the loop."""
        ok = self.commit_log.mapped_file_queue.check_self()
        for cq in self.consume_queues():
            ok = cq.mapped_file_queue.check_self() and ok
            if cq.ext is not None:
                ok = cq.ext.check_self() and ok
        return ok

    def _load_and_recover(self) -> None:
        cfg = self.config
        root = cfg.store_path_root_dir
        os.makedirs(root, exist_ok=True)
        for d in (cfg.commit_log_dir, cfg.consume_queue_dir, cfg.config_dir):
            os.makedirs(d, exist_ok=True)
        self._lock_fd = os.open(os.path.join(root, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise RuntimeError(f"store directory {root} is locked by another broker process") from None
        try:
            self._recover_locked()
        except BaseException:
            self._release_after_failed_start()
            raise

    def is_transient_store_pool_enable(self) -> bool:
        """DefaultMessageStore#isTransientStorePoolEnable (see MessageStoreConfig.transient_store_pool_effective)."""
        return self.config.transient_store_pool_effective(self.enable_controller_mode)

    def remain_transient_store_buffer_numbs(self) -> int:
        """Free pool buffers; 2**31 - 1 (Integer.MAX_VALUE) without a pool, as upstream."""
        pool = self.transient_store_pool
        return pool.available_buffer_nums() if pool is not None else 2**31 - 1

    def is_transient_store_pool_deficient(self) -> bool:
        """No pool buffer left (DefaultMessageStore#isTransientStorePoolDeficient): the send
        processor then refuses sends, SYSTEM_BUSY "[REJECTREQUEST]…", as
        SendMessageProcessor#rejectRequest."""
        pool = self.transient_store_pool
        return pool is not None and pool.available_buffer_nums() == 0

    def _destroy_transient_store_pool(self) -> None:
        if self.transient_store_pool is not None:
            self.transient_store_pool.destroy()
            self.transient_store_pool = None

    def _release_after_failed_start(self) -> None:
        for closer in (
            getattr(self.commit_log, "shutdown", None),
            *(cq.shutdown for cq in self.consume_queues()),
            getattr(self.index_service, "shutdown", None),
            getattr(self.checkpoint, "shutdown", None),
        ):
            if closer is None:
                continue
            try:
                closer()
            except Exception:
                log.exception("cleanup after a failed start")
        self._destroy_transient_store_pool()
        self.consume_queue_table.clear()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _recover_locked(self) -> None:
        cfg = self.config
        self.last_exit_ok = not os.path.exists(cfg.abort_path)
        self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
        if self.is_transient_store_pool_enable() and self.transient_store_pool is None:
            pool = TransientStorePool(cfg.transient_store_pool_size, cfg.mapped_file_size_commit_log)
            pool.init()
            self.transient_store_pool = pool
        self.commit_log = CommitLog(cfg, self.store_host, self.checkpoint, self.transient_store_pool)
        self.commit_log.delivery_time_of = self._delivery_time_of
        self.commit_log.load()
        shutil.rmtree(self._trash_dir, ignore_errors=True)  # queues dropped just before a crash
        self._load_consume_queues()
        self._create_index_service()
        # ConsumeQueues first, then the CommitLog, then align the queues to the log.
        for cq in self.consume_queues():
            cq.recover()
        if self.last_exit_ok:
            end = self.commit_log.recover_normally()
            scan_start = end
        else:
            # With an index, start early enough to rebuild the index files its load() dropped.
            min_ts = (self.checkpoint.get_min_timestamp_index() if self.index_service is not None
                      else self.checkpoint.get_min_timestamp())
            scan_start, end = self.commit_log.recover_abnormally(min_ts)
        for cq in self.consume_queues():
            cq.truncate_dirty_logic_files(end)
        reput_from = self.commit_log.get_min_offset()
        for cq in self.consume_queues():
            reput_from = max(reput_from, cq.max_physic_offset)
        reput_from = max(0, min(reput_from, end, scan_start))
        self.replication.recover_confirm_offset(end)
        self.reput_service = ReputMessageService(self.commit_log)
        self.reput_service.reput_from_offset = reput_from
        self._install_dispatchers()
        if self.replication.ha_service is not None:  # attached before start: gate the recovery dispatch too
            self.replication.apply_confirm_gating()
        # Catch up before accepting traffic: readers must see everything the log holds.
        self.reput_service.do_reput(notify=False)
        self.recover_offset_table()
        self.commit_log.prepare_segments()
        # Created last: a crash during recovery repeats the abnormal recovery.
        with open(cfg.abort_path, "w"):
            pass
        self.running_flags.flag_bits = 0

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        for topic in sorted(os.listdir(root)):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qname in sorted(os.listdir(tdir)):
                if not qname.lstrip("-").isdigit():
                    continue
                cq = new_consume_queue(self.config, topic, int(qname))
                cq.on_gap = self._redispatch_consume_queue_gap
                cq.load()
                self.consume_queue_table.setdefault(topic, {})[int(qname)] = cq

    def _create_index_service(self) -> None:
        if not self.config.message_index_enable:
            return
        from orbitmq.broker.store.index_service import IndexService

        def on_flushed(ts: int) -> None:
            self.checkpoint.index_msg_timestamp = ts

        self.index_service = IndexService(self.config, on_index_file_flushed=on_flushed)
        self.index_service.load(self.last_exit_ok, self.checkpoint.index_msg_timestamp)

    def _install_dispatchers(self) -> None:
        rs = self.reput_service
        # The module's dispatch_consume_queue (compiled where the accelerator was built), bound
        # to this store by a partial: no Python frame runs around it for each record.
        cq_dispatcher = (partial(dispatch_consume_queue_ext, self) if self.config.enable_consume_queue_ext
                         else partial(dispatch_consume_queue, self))
        rs.dispatchers = [*self._first_dispatchers, cq_dispatcher]
        if self.config.enable_multi_dispatch:
            # Right after the record's own entry, as ConsumeQueue#putMessagePositionInfoWrapper
            # calls multiDispatchLmqQueue; a dispatcher of its own keeps the compiled one as is.
            rs.dispatchers.append(partial(dispatch_multi_queue, self))
        if self.index_service is not None:
            rs.dispatchers.append(self.index_service.build_index)
            rs.run_dispatchers = {self.index_service.build_index: self.index_service.build_index_many}
        rs.dispatchers.extend(self._extra_dispatchers)
        rs.arrival_listeners = list(self._arrival_listeners)
        if self.config.enable_multi_dispatch:
            rs.arrival_listeners.append(partial(_notify_multi_queue, self))

    def _redispatch_consume_queue_gap(self, cq: ConsumeQueue) -> bool:
        """A record came with a queue offset past ``cq``'s end: the records owning the slots
        between lie in the CommitLog after the queue's last entry, not dispatched. Dispatch
        starts again there (instead of filling the slots with blanks, which would hide those
        messages for good); True when it will."""
        rs = self.reput_service
        if rs is None:
            return False
        rs.request_redispatch(max(cq.max_physic_offset, self.commit_log.get_min_offset(), 0))
        return True

    def recover_offset_table(self) -> None:
        """topicQueueTable from the ConsumeQueues' max offsets, their min offsets corrected to the
        CommitLog's (ConsumeQueueStore#recoverOffsetTable)."""
        table: dict[tuple[str, int], int] = {}  # LMQ queues included: their offsets come back too
        min_phy = self.commit_log.get_min_offset()
        for cq in self.consume_queues():
            table[(cq.topic, cq.queue_id)] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        self.commit_log.recover_topic_queue_table(table)

    async def shutdown(self) -> None:
        """Dispatch what is left, flush everything, and remove the abort marker."""
        if not self._started:
            return
        self._started = False
        self.shutdown_flag = True
        await cancel_and_wait(self._check_self_task)
        self._check_self_task = None
        await self.retention_service.shutdown()
        await self.reput_service.shutdown()
        await asyncio.to_thread(self._shutdown_blocking)

    def _shutdown_blocking(self) -> None:
        # Commit before the last flush (CommitLog$DefaultFlushManager#shutdown): what sits in a
        # pool buffer must reach the file before it can reach the disk.
        if self._commit_service is not None:
            self._commit_service.shutdown()
            self._commit_service = None
        self._flush_service.shutdown()
        self._flush_cq_service.shutdown()
        self.commit_log.flush_all()
        for cq in self.consume_queues():
            cq.flush_all()
        if self.index_service is not None:
            self.index_service.flush()
            self.index_service.shutdown()
        self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp,
                                                   self.commit_log.mapped_file_queue.store_timestamp)
        if self.dispatched_store_timestamp:
            self.checkpoint.logics_msg_timestamp = self.dispatched_store_timestamp
        self.checkpoint.confirm_phy_offset = min(self.replication.get_confirm_offset(),
                                                 self.commit_log.get_max_offset())
        self.checkpoint.shutdown()
        self.commit_log.shutdown()
        self._destroy_transient_store_pool()
        for cq in self.consume_queues():
            cq.shutdown()
        if self.running_flags.is_writeable() or self.running_flags.is_disk_full():
            try:
                os.unlink(self.config.abort_path)
            except FileNotFoundError:
                pass
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- consume queues ------------------------------------------------------------------
    def consume_queues(self) -> list[ConsumeQueue]:
        return [cq for queues in list(self.consume_queue_table.values()) for cq in list(queues.values())]

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        queues = self.consume_queue_table.get(topic)
        return queues.get(queue_id) if queues is not None else None

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        queues = self.consume_queue_table.get(topic)
        if queues is None:
            queues = self.consume_queue_table.setdefault(topic, {})
        cq = queues.get(queue_id)
        if cq is None:
            cq = new_consume_queue(self.config, topic, queue_id)
            cq.on_gap = self._redispatch_consume_queue_gap
            queues[queue_id] = cq
        return cq

    # --- put -----------------------------------------------------------------------------
    def _check_store_status(self) -> PutMessageStatus | None:
        if self.shutdown_flag:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.config.broker_role == SLAVE:
            self._print_times += 1
            if self._print_times % 50000 == 1:
                log.warning("message store is in slave mode, so putMessage is forbidden")
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        flags = self.running_flags
        if not flags.is_writeable():
            self._print_times += 1
            if self._print_times % 50000 == 1:
                log.warning("message store is not writeable, so putMessage is forbidden %d", flags.flag_bits)
            return PutMessageStatus.DISK_FULL if flags.is_disk_full() else PutMessageStatus.SERVICE_NOT_AVAILABLE
        self._print_times = 0
        # No OS_PAGE_CACHE_BUSY (DefaultMessageStore#isOSPageCacheBusy): appends run on this loop,
        # so no put is ever in the CommitLog's lock while another is checked.
        return None

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Append one message; under SYNC_FLUSH return once it is on disk (or timed out).

        Under ASYNC_FLUSH this never suspends: the append is synchronous on this loop (no lock,
        no Future), and durability is FlushRealTimeService's job.
        """
        # Cheap guard first: the full status check only when something may be wrong. (Appends
        # run on this loop, so another append can never be holding the lock long right now.)
        if self.shutdown_flag or self.running_flags.flag_bits or self.config.broker_role == SLAVE:
            status = self._check_store_status()
            if status is not None:
                return PutMessageResult(status)
        ha = self.replication.ha_service
        if (ha is not None and self.config.broker_role == SYNC_MASTER and msg.wait_store_msg_ok
                and ha.in_sync_replicas_not_enough()):  # replication.refuses_put, inlined
            return PutMessageResult(PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH)
        cfg = self.config
        if cfg.enable_lmq and cfg.enable_multi_dispatch and self.lmq_consume_queue_num_exceeded(msg):
            return PutMessageResult(PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED)
        if self.put_message_hooks:
            for hook in self.put_message_hooks:
                refused = hook(msg)
                if refused is not None:
                    return refused
        try:
            result = self.commit_log.put_message(msg)
        except (TypeError, ValueError, AttributeError) as exc:  # a malformed message object
            log.warning("illegal message refused: %s", exc)
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR))
        if result.status is not _PUT_OK:
            return result
        cs = self._commit_service
        if cs is not None:
            cs.wakeup_on_put(result.append_message_result.store_timestamp)
        rs = self.reput_service
        waiter = rs._waiter  # wakeup(), inlined on the hot path
        if waiter is not None:
            # Woken once is enough until the reput task runs again and sets a new waiter.
            rs._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        if ha is not None and self.config.broker_role == SYNC_MASTER and msg.wait_store_msg_ok:
            return await self._wait_for_flush_and_replicas(result, True, msg.topic, ha)
        if self._group_commit is not None:
            return await self._wait_for_flush(result, msg.wait_store_msg_ok, msg.topic)
        return result

    def lmq_consume_queue_num(self) -> int:
        """How many Light Message Queues exist: those recovered from their ConsumeQueues and
        those given offsets since (the LMQ offset table)."""
        return len(self.commit_log.lmq_topic_queue_table)

    def lmq_consume_queue_num_exceeded(self, msg: MessageExtBrokerInner) -> bool:
        """DefaultMessageStore#checkLmqMessage (RIP-28; Apache 5 keeps the status and the key
        but dropped the check): a multi-dispatch message while more LMQ queues than
        maxLmqConsumeQueueNum exist."""
        names = msg.properties.get(_MULTI_DISPATCH)
        return (bool(names) and not names.isspace()
                and self.lmq_consume_queue_num() > self.config.max_lmq_consume_queue_num)

    async def put_messages(self, msgs: list[MessageExtBrokerInner], *, undelayed: bool = False) -> PutMessageResult:
        """Append a batch, all or nothing in one lock; SYNC_FLUSH waits for the disk.

        ``undelayed``: the caller guarantees no message carries a DELAY level other than absent,
        empty or "0", nor a TIMER_* delivery property (SEND_BATCH_MESSAGE refuses the others), so
        hooks marked ``only_delayed`` (the delay redirect and the timer conversion, no-ops for such
        messages) are not called per message.
        """
        status = self._check_store_status()
        if status is not None:
            return PutMessageResult(status)
        ha = self.replication.ha_service
        if ha is not None:
            wait = all(m.wait_store_msg_ok for m in msgs)
            if self.replication.refuses_put(wait):
                return PutMessageResult(PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH)
        hooks = self.put_message_hooks
        if hooks and undelayed:
            hooks = [hook for hook in hooks if not getattr(hook, "only_delayed", False)]
        if hooks:
            for msg in msgs:
                for hook in hooks:
                    refused = hook(msg)
                    if refused is not None:
                        return refused
        try:
            result = self.commit_log.put_messages(msgs)
        except (TypeError, ValueError, AttributeError) as exc:  # a malformed message object
            log.warning("illegal message refused: %s", exc)
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR))
        if result.status is not PutMessageStatus.PUT_OK:
            return result
        if self._commit_service is not None:
            self._commit_service.wakeup_on_put(result.append_message_result.store_timestamp)
        self.reput_service.wakeup()
        if ha is not None and wait and self.config.broker_role == SYNC_MASTER:
            return await self._wait_for_flush_and_replicas(result, True, msgs[0].topic, ha)
        if self._group_commit is not None:
            return await self._wait_for_flush(result, all(m.wait_store_msg_ok for m in msgs), msgs[0].topic)
        return result

    async def put_uniform_batch(self, topic: str, queue_id: int, sys_flag: int, born_timestamp: int,
                                born_host: tuple[str, int], reconsume_times: int,
                                items: list[tuple[int, bytes, dict[str, str], str | None]],
                                build: Callable[[], list[MessageExtBrokerInner]]) -> PutMessageResult:
        """put_messages(build(), undelayed=True) for a SEND_BATCH_MESSAGE batch given as the
        (flag, body, properties, properties_string) tuples ``build`` turns into messages (see
        CommitLog.put_uniform_items): the same records, result and DispatchRequests, without
        building a message per record while no put hook is left to run and the append takes
        the uniform path; otherwise ``build`` is called and put_messages does the rest.
        """
        if not all(getattr(hook, "only_delayed", False) for hook in self.put_message_hooks):
            return await self.put_messages(build(), undelayed=True)
        status = self._check_store_status()  # once per batch, as put_messages
        if status is not None:
            return PutMessageResult(status)
        ha = self.replication.ha_service
        if ha is not None:
            wait = all(_wait_store_msg_ok(item[2]) for item in items)
            if self.replication.refuses_put(wait):
                return PutMessageResult(PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH)
        try:
            result = self.commit_log.put_uniform_items(topic, queue_id, sys_flag, born_timestamp, born_host,
                                                       reconsume_times, items)
        except (TypeError, ValueError, AttributeError) as exc:  # as put_messages reports it
            log.warning("illegal message refused: %s", exc)
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR))
        if result is None:  # anything unusual: the general path reports the precise result
            return await self.put_messages(build(), undelayed=True)
        if self._commit_service is not None:
            self._commit_service.wakeup_on_put(result.append_message_result.store_timestamp)
        self.reput_service.wakeup()
        if ha is not None and wait and self.config.broker_role == SYNC_MASTER:
            return await self._wait_for_flush_and_replicas(result, True, topic, ha)
        if self._group_commit is not None:
            wait = all(_wait_store_msg_ok(item[2]) for item in items)
            return await self._wait_for_flush(result, wait, topic)
        return result

    async def _wait_for_flush_and_replicas(self, result: PutMessageResult, wait_flush: bool, topic: str,
                                           ha: Any) -> PutMessageResult:
        """SYNC_MASTER: the disk and the replicas are waited for together; a replica timeout
        (FLUSH_SLAVE_TIMEOUT) overrides a flush one (CommitLog#handleDiskFlushAndHA)."""
        ar = result.append_message_result
        replicas = ha.wait_for_replicas(ar.wrote_offset + ar.wrote_bytes)
        if self._group_commit is not None:
            _, ok = await asyncio.gather(self._wait_for_flush(result, wait_flush, topic), replicas)
        else:
            ok = await replicas
        if not ok:
            log.warning("transfer message to slave timeout, offset %d", ar.wrote_offset + ar.wrote_bytes)
            result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return result

    async def _wait_for_flush(self, result: PutMessageResult, wait: bool, topic: str) -> PutMessageResult:
        """``wait``: every message asked to wait for the disk (WAIT true or absent)."""
        service = self._group_commit
        if wait:
            ar = result.append_message_result
            loop = self._loop
            fut = loop.create_future()
            service.put_request(ar.wrote_offset + ar.wrote_bytes, fut, loop)
            try:
                ok = await asyncio.wait_for(fut, self.config.sync_flush_timeout / 1000)
            except TimeoutError:
                ok = False
            if not ok:
                log.error("do groupcommit, wait for flush failed, topic: %s", topic)
                result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        else:
            service.wakeup()
        return result

    # --- get -----------------------------------------------------------------------------
    def _next_offset_correction(self, old: int, new: int) -> int:
        return old if self.config.broker_role == SLAVE else new

    def _is_in_disk(self, offset_py: int, max_offset_py: int) -> bool:
        memory = self.total_physical_memory * (self.config.access_message_in_memory_max_ratio / 100.0)
        return (max_offset_py - offset_py) > memory

    def _is_the_batch_full(self, size_py: int, max_msg_nums: int, max_total_size: int,
                           buffer_total: int, message_total: int, in_disk: bool) -> bool:
        if buffer_total == 0 or message_total == 0:
            return False
        if max_msg_nums <= message_total:
            return True
        if buffer_total + size_py > max_total_size:
            return True
        cfg = self.config
        if in_disk:
            return (buffer_total + size_py > cfg.max_transfer_bytes_on_message_in_disk
                    or message_total > cfg.max_transfer_count_on_message_in_disk - 1)
        return (buffer_total + size_py > cfg.max_transfer_bytes_on_message_in_memory
                or message_total > cfg.max_transfer_count_on_message_in_memory - 1)

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int = 32,
        max_total_size: int = 256 * 1024,
        message_filter=None,
    ) -> GetMessageResult:
        """Read up to ``max_msg_nums`` raw records of a queue from ``offset`` (DefaultMessageStore.getMessage)."""
        if self.shutdown_flag or not self.running_flags.is_readable():
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, next_begin_offset=offset)
        cl = self.commit_log
        max_offset_py = cl.get_max_offset()
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
                                    next_begin_offset=self._next_offset_correction(offset, 0))
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        result = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, min_offset=min_offset, max_offset=max_offset)
        if max_offset == 0:
            result.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
            result.next_begin_offset = self._next_offset_correction(offset, 0)
        elif offset < min_offset:
            result.status = GetMessageStatus.OFFSET_TOO_SMALL
            result.next_begin_offset = self._next_offset_correction(offset, min_offset)
        elif offset == max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            result.next_begin_offset = self._next_offset_correction(offset, offset)
        elif offset > max_offset:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            # the max offset, even when the queue still starts at 0: the min-offset case went with
            # upstream ISSUE #4215 (it made such a consumer read the whole queue again)
            result.next_begin_offset = self._next_offset_correction(offset, max_offset)
        else:
            max_filter_count = max(16000, max_msg_nums * 20)
            buf = cq.get_index_buffer(offset, max_filter_count)
            if buf is None:
                result.status = GetMessageStatus.OFFSET_FOUND_NULL
                result.next_begin_offset = self._next_offset_correction(offset, cq.roll_next_file(offset))
            else:
                self._collect(result, buf, offset, max_msg_nums, max_total_size, message_filter, max_offset_py, cq)
        return result

    def _collect(self, result: GetMessageResult, buf: bytes, offset: int, max_msg_nums: int,
                 max_total_size: int, message_filter, max_offset_py: int, cq: ConsumeQueue) -> None:
        cl = self.commit_log
        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        next_phy_file_start = -1
        max_phy_offset_pulling = 0
        n = 0
        count = len(buf) // CQ_STORE_UNIT_SIZE
        # With the ConsumeQueue extension: its unit reader, and the filter's check of a unit
        # (bound once: they run for every entry scanned).
        ext_get = cq.ext.get if cq.ext is not None else None
        by_ext = getattr(message_filter, "is_matched_by_consume_queue_ext", None)
        for n, (offset_py, size_py, tags_code) in enumerate(CQ_ENTRY.iter_unpack(buf)):  # noqa: B007
            if is_blank_entry(offset_py, size_py):
                continue
            max_phy_offset_pulling = offset_py
            if next_phy_file_start >= 0 and offset_py < next_phy_file_start:
                continue
            in_disk = self._is_in_disk(offset_py, max_offset_py)
            if self._is_the_batch_full(size_py, max_msg_nums, max_total_size, result.buffer_total_size,
                                       result.message_count, in_disk):
                break
            if tags_code <= MAX_ADDR:
                # an extension address (enableConsumeQueueExt): the unit's tag code, and its
                # bit map for the SQL92 bloom check (DefaultMessageStore#getMessage via CqUnit)
                # (ConsumeQueue.resolve_tags_code, inlined)
                unit = ext_get(tags_code) if ext_get is not None else None
                valid_tags = unit.tags_code if unit is not None else None
                if message_filter is not None:
                    matched = (by_ext(valid_tags, unit) if by_ext is not None
                               else message_filter.is_matched_by_consume_queue(valid_tags))
                    if not matched:
                        if result.buffer_total_size == 0:
                            result.status = GetMessageStatus.NO_MATCHED_MESSAGE
                        continue
            elif message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                if result.buffer_total_size == 0:
                    result.status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            record = cl.get_message(offset_py, size_py)
            if record is None:
                if result.buffer_total_size == 0:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = cl.roll_next_file(offset_py)
                continue
            if message_filter is not None and hasattr(message_filter, "is_matched_by_commit_log"):
                if not message_filter.is_matched_by_commit_log(_record_properties(record)):
                    if result.buffer_total_size == 0:
                        result.status = GetMessageStatus.NO_MATCHED_MESSAGE
                    continue
            result.add_message(record, offset + n)
            result.status = GetMessageStatus.FOUND
            next_phy_file_start = -1
        else:
            n = count
        result.next_begin_offset = offset + n
        memory = self.total_physical_memory * (self.config.access_message_in_memory_max_ratio / 100.0)
        result.suggest_pulling_from_slave = (max_offset_py - max_phy_offset_pulling) > memory

    # --- queries -------------------------------------------------------------------------
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        # A queue never written is empty from offset 0, as upstream (whose lookup creates the
        # ConsumeQueue) answers, not -1.
        cq = self.get_consume_queue(topic, queue_id)
        return cq.get_min_offset_in_queue() if cq is not None else 0

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """Whether a queue's message is still in memory (DefaultMessageStore#checkInMemByConsumeOffset).

        Upstream asks the page cache about the record; this store decides "in memory" as its read
        path does (estimateInMemByCommitOffset, ``_is_in_disk``): the record lies within
        accessMessageInMemoryMaxRatio % of physical memory of the CommitLog's end, and is not deleted.
        """
        cq = self.get_consume_queue(topic, queue_id)
        entry = cq.get_entry(consume_offset) if cq is not None else None
        if entry is None or is_blank_entry(entry[0], entry[1]) or entry[0] < self.commit_log.get_min_offset():
            return False
        return not self._is_in_disk(entry[0], self.commit_log.get_max_offset())

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        entry = cq.get_entry(cq_offset) if cq is not None else None
        return entry[0] if entry is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp_ms, self.commit_log.pickup_store_timestamp)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        entry = cq.get_entry(cq_offset) if cq is not None else None
        if entry is None or is_blank_entry(entry[0], entry[1]):
            return -1
        return self.commit_log.pickup_store_timestamp(entry[0], entry[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.get_consume_queue(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def get_earliest_message_time_store(self) -> int:
        """Store time of the first message in the CommitLog (-1 when empty)."""
        first = self.commit_log.get_min_offset()
        return self.commit_log.pickup_store_timestamp(first, 0) if first >= 0 else -1

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        record = self.commit_log.get_record(phy_offset)
        if record is None:
            return None
        try:
            return decode_record(record, 0, check_crc=False)
        except RecordError:
            return None

    def look_message_by_msg_id(self, msg_id: str) -> MessageExt | None:
        """Resolve an offset message id (store host + CommitLog offset); None if not here."""
        try:
            _host, _port, offset = decode_offset_message_id(msg_id)
        except ValueError:
            return None
        return self.look_message_by_offset(offset)

    def select_one_message_by_offset(self, phy_offset: int, size: int | None = None) -> bytes | None:
        """Raw record bytes at a CommitLog offset (VIEW_MESSAGE_BY_ID returns these)."""
        if size is None:
            return self.commit_log.get_record(phy_offset)
        return self.commit_log.get_message(phy_offset, size)

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_reput_from_offset(self) -> int:
        return self.reput_service.reput_from_offset

    def dispatch_behind_bytes(self) -> int:
        return self.reput_service.behind()

    def dispatch_caught_up(self) -> bool:
        """Every record ending at or before the confirm offset is dispatched."""
        return self.reput_service.caught_up()

    async def delete_topics(self, topics: Iterable[str]) -> int:
        """Drop the ConsumeQueues (files included) of ``topics``; returns how many queues.

        The queues leave the tables on the loop, so no dispatch or read sees them again; their
        files are unmapped and removed on a thread, off the event loop.
        """
        detached: list[tuple[str | None, list[ConsumeQueue]]] = []
        for topic in topics:
            queues = self.consume_queue_table.pop(topic, None)
            if not queues:
                continue
            for qid in queues:
                self.commit_log.remove_queue_from_topic_queue_table(topic, qid)
            detached.append((self._move_aside(topic), list(queues.values())))
        if detached:
            await asyncio.to_thread(self._destroy_detached, detached)
        return sum(len(queues) for _, queues in detached)

    async def clean_expired_consume_queues(self) -> int:
        """cleanExpiredConsumerQueue (CLEAN_EXPIRED_CONSUMEQUEUE): drop every ConsumeQueue whose
        entries all point below the CommitLog's min offset (retention removed their messages),
        except SCHEDULE_TOPIC_XXXX's, whose offsets are the delay service's progress. A topic left
        without queues goes too. Returns how many queues."""
        min_phy = self.commit_log.get_min_offset()
        detached: list[tuple[str | None, list[ConsumeQueue]]] = []
        for topic, queues in list(self.consume_queue_table.items()):
            if topic == RMQ_SYS_SCHEDULE_TOPIC:
                continue
            for qid in [qid for qid, cq in queues.items() if 0 <= cq.max_physic_offset <= min_phy]:
                self.commit_log.remove_queue_from_topic_queue_table(topic, qid)
                detached.append((self._move_aside(os.path.join(topic, str(qid))), [queues.pop(qid)]))
            if not queues:
                self.consume_queue_table.pop(topic, None)
                with contextlib.suppress(OSError):  # empty now; a queue made later makes it again
                    os.rmdir(os.path.join(self.config.consume_queue_dir, topic))
        if detached:
            await asyncio.to_thread(self._destroy_detached, detached)
        count = sum(len(queues) for _, queues in detached)
        log.info("cleanExpiredConsumerQueue: %d queues below CommitLog offset %d dropped", count, min_phy)
        return count

    def unused_topics(self, retain: Iterable[str], is_system_topic: Callable[[str], bool]) -> list[str]:
        """cleanUnusedTopic's choice: topics with ConsumeQueues that are neither in ``retain`` (the
        broker's topic config) nor system topics."""
        keep = set(retain)
        # LMQ queues have no topic config and are never unused (DefaultMessageStore#cleanUnusedTopic).
        return sorted(t for t in self.consume_queue_table
                      if t not in keep and not is_system_topic(t) and not is_lmq(t))

    @property
    def _trash_dir(self) -> str:
        return self.config.consume_queue_dir + ".deleted"

    def _move_aside(self, relative: str) -> str | None:
        """Rename a dropped queue's (or topic's) directory out of the ConsumeQueue tree, on the loop
        (two metadata calls), before its files are deleted on a thread: a message dispatched to the
        same queue meanwhile starts new files at the old path, which the deletion never touches."""
        target = os.path.join(self._trash_dir, f"{time.time_ns()}-{relative.replace(os.sep, '-')}")
        os.makedirs(self._trash_dir, exist_ok=True)
        try:
            os.rename(os.path.join(self.config.consume_queue_dir, relative), target)
        except FileNotFoundError:  # never written to disk
            return None
        return target

    @staticmethod
    def _destroy_detached(detached: list[tuple[str | None, list[ConsumeQueue]]]) -> None:
        for moved, queues in detached:
            for cq in queues:
                cq.shutdown()  # unmap; the files themselves went aside with their directory
            if moved is not None:
                shutil.rmtree(moved, ignore_errors=True)

    def runtime_info(self) -> dict[str, str]:
        cl = self.commit_log
        cfg = self.config
        info = {
            "commitLogMinOffset": str(cl.get_min_offset()),
            "commitLogMaxOffset": str(cl.get_max_offset()),
            "commitLogFlushedOffset": str(cl.mapped_file_queue.flushed_where),
            "dispatchBehindBytes": str(self.reput_service.behind() if self.reput_service else 0),
            "reputFromOffset": str(self.reput_service.reput_from_offset if self.reput_service else 0),
            "putMessageTimesTotal": str(cl.put_message_times_total),
            "putMessageSizeTotal": str(cl.put_message_size_total),
            "pageCacheLockTimeMills": str(max(0, time.time_ns() // 1_000_000 - cl.begin_time_in_lock)
                                          if cl.begin_time_in_lock else 0),
            "earliestMessageTimeStamp": str(self.get_earliest_message_time_store()),
            "commitLogFileCount": str(len(cl.mapped_file_queue.mapped_files)),
            "consumeQueueCount": str(len(self.consume_queues())),
            "runningFlags": str(self.running_flags.flag_bits),
            "flushDiskType": cfg.flush_disk_type,
            "brokerRole": cfg.broker_role,
            "remainTransientStoreBufferNumbs": str(self.remain_transient_store_buffer_numbs()),
        }
        for name, path in (("commitLogDiskRatio", cfg.commit_log_dir), ("consumeQueueDiskRatio", cfg.consume_queue_dir)):
            ratio = disk_partition_used_ratio(path)  # what the retention service decides on
            info[name] = f"{ratio:.4f}" if ratio >= 0 else "-1"
        return info


def new_consume_queue(cfg: MessageStoreConfig, topic: str, queue_id: int) -> ConsumeQueue:
    """A ConsumeQueue, with its extension when enableConsumeQueueExt (ConsumeQueue's constructor)."""
    ext = None
    if getattr(cfg, "enable_consume_queue_ext", False):
        ext = ConsumeQueueExt(topic, queue_id, cfg.consume_queue_ext_dir, cfg.mapped_file_size_consume_queue_ext,
                              cfg.bit_map_length_consume_queue_ext)
    return ConsumeQueue(topic, queue_id, cfg.consume_queue_dir, cfg.mapped_file_size_consume_queue, ext)


# Compiled twin: _speedups_dispatch.dispatch_consume_queue (same queue entries).
def dispatch_consume_queue(store: MessageStore, req: DispatchRequest) -> None:
    """The store's first dispatcher: the ConsumeQueue entry of a record that has one (not a
    prepared or rolled-back transaction half), then the dispatched store time."""
    tran = req.sys_flag & 0xC
    if tran == 0 or tran == 0x8:
        cq = store.find_consume_queue(req.topic, req.queue_id)
        cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code, req.consume_queue_offset)
    store.dispatched_store_timestamp = req.store_timestamp


_py_dispatch_consume_queue = dispatch_consume_queue


def dispatch_consume_queue_ext(store: MessageStore, req: DispatchRequest) -> None:
    """dispatch_consume_queue with enableConsumeQueueExt (ConsumeQueue#putMessagePositionInfoWrapper):
    the entry's extension unit carries the tag code, the store time and the request's filter
    bit map, and the entry its address. Pure Python: the compiled twin serves the plain entry."""
    tran = req.sys_flag & 0xC
    if tran == 0 or tran == 0x8:
        cq = store.find_consume_queue(req.topic, req.queue_id)
        cq.put_message_position_info_wrapper(req.commit_log_offset, req.msg_size, req.tags_code,
                                             req.consume_queue_offset, req.store_timestamp, req.bit_map)
    store.dispatched_store_timestamp = req.store_timestamp


def _multi_queue_targets(store: MessageStore, topic: str, queue_id: int,
                         props: dict[str, str] | None, report: bool = True) -> list[tuple[str, int, int]] | None:
    """(queue name, queue id, queue offset) of each queue a record's INNER_MULTI_DISPATCH
    names, as ConsumeQueue#multiDispatchLmqQueue reads them; None when there are none or the
    two properties disagree in length (upstream logs it as a bug and dispatches none)."""
    if not props:
        return None
    names_value = props.get(_MULTI_DISPATCH)
    offsets_value = props.get(_MULTI_QUEUE_OFFSET)
    if not names_value or not offsets_value or names_value.isspace() or offsets_value.isspace():
        return None
    names = split_lmq_names(names_value)
    offsets = split_lmq_names(offsets_value)
    if len(names) != len(offsets):
        if report:
            log.error("[bug] queues.length!=queueOffsets.length %s", topic)
        return None
    enable_lmq = store.config.enable_lmq
    targets = []
    for name, raw in zip(names, offsets, strict=True):
        try:
            offset = int(raw)
        except ValueError:  # upstream's Long.parseLong throws and stalls dispatch; skipped here
            if report:
                log.error("%s: no queue offset %r for multi-dispatch queue %r", topic, raw, name)
            continue
        targets.append((name, LMQ_QUEUE_ID if enable_lmq and is_lmq(name) else queue_id, offset))
    return targets


def dispatch_multi_queue(store: MessageStore, req: DispatchRequest) -> None:
    """enableMultiDispatch: an entry in each queue the record names, after its own
    (ConsumeQueue#multiDispatchLmqQueue / doDispatchLmqQueue, MultiDispatchUtils#checkMultiDispatchQueue).
    A name holding a path separator is skipped, as upstream skips it; the entry carries the
    record's tag code and no extension unit."""
    tran = req.sys_flag & 0xC
    if (tran != 0 and tran != 0x8) or not topic_allows_lmq(req.topic):
        return
    targets = _multi_queue_targets(store, req.topic, req.queue_id, req.properties)
    if not targets:
        return
    for name, queue_id, offset in targets:
        if os.sep in name:
            continue
        cq = store.find_consume_queue(name, queue_id)
        cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code, offset)


def _notify_multi_queue(store: MessageStore, topic: str, queue_id: int, logic_offset: int, tags_code: int,
                        store_timestamp: int, props: dict) -> None:
    """ReputMessageService#notifyMessageArrive4MultiQueue: a record that named queues wakes the
    long polls of each of them too (offset + 1, as for the record's own queue), through the
    store's arrival listeners (those added later included)."""
    listeners = store._arrival_listeners
    if not listeners or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return
    targets = _multi_queue_targets(store, topic, queue_id, props, report=False)
    if not targets:
        return
    for name, qid, offset in targets:
        for listener in listeners:
            try:
                listener(name, qid, offset + 1, tags_code, store_timestamp, props)
            except Exception:
                log.exception("message arrival listener %r failed", listener)


def _record_properties(record: bytes) -> dict[str, str]:
    """Properties of a raw record, for the CommitLog-side filter check."""
    try:
        return decode_record(record, 0, check_crc=False).properties
    except RecordError:
        return {}


__all__ = [
    "MessageStore",
    "MessageExtBrokerInner",
    "PutMessageResult",
    "PutMessageStatus",
    "AppendMessageResult",
    "AppendMessageStatus",
    "GetMessageResult",
    "GetMessageStatus",
]


_fast = speedups.load("orbitmq.broker.store._speedups_dispatch")  # None: the code above runs
if _fast is not None:
    dispatch_consume_queue = _fast.dispatch_consume_queue
