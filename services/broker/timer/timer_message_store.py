"""TimerMessageStore: owns the wheel, the timer log and the checkpoint, and runs the pipeline.

Shared state, guarded by one lock for the file structures:
- ``commit_queue_offset``: every entry of the rmq_sys_wheel_timer ConsumeQueue before it is in
  the timer log (or was due and has been put to its real topic);
- ``curr_write_time_ms``: units only go to slots at or after it (set by the enqueue service
  after each batch), and the dequeue service only reads slots before it. That hand-over is what
  keeps a message from landing in a slot that was already read;
- ``curr_read_time_ms``: every slot before it has been delivered (on a slave: by the master).

File writes are memory writes into maps (as the CommitLog's); the enqueue and dequeue steps that
read the ConsumeQueue, CommitLog and wheel run on worker threads, and so do fsyncs. Puts go through
the broker on the event loop. Delivery runs on a master only; a slave just builds its wheel.
The helpers (enqueue, dequeue, recovery, metrics) take only their own view of this store, named
in interfaces.py, so each can be read and tested without the rest.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orbitmq.broker.store.config import SLAVE
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.java_hash import java_string_hash
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .checkpoint import TimerCheckpoint, TimerCheckpointData
from .dequeue import TimerDequeueService
from .enqueue import TimerEnqueueService
from .metrics import timer_gauges
from .put_hook import TimerPutHook
from .recovery import recover
from .timer_log import TimerLog, encode_unit
from .timer_metrics import TIMER_DIST_S, TimerMetrics
from .wheel import TimerWheel
from .wheel_math import MAGIC_DELETE, MAGIC_ROLL, effective_roll_window, floor_time, roll_target

if TYPE_CHECKING:
    from .interfaces import TimerBroker

log = logging.getLogger(__name__)

WHEEL_FIGURES_MAX_AGE_S = 5.0
CLEAN_TIMER_LOG_INTERVAL_S = 30.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TimerMessageStore:
    def __init__(self, broker: TimerBroker, now_ms: Callable[[], int] = _now_ms) -> None:
        self.broker = broker
        self.config = broker.store_config
        self.now_ms = now_ms
        # Fixed at start as upstream (a wheel cannot change its precision under its files).
        self.precision_ms = self.config.timer_precision_ms
        self.lock = threading.Lock()
        self.wheel: TimerWheel | None = None
        self.timer_log: TimerLog | None = None
        self.checkpoint: TimerCheckpoint | None = None
        self.timer_metrics: TimerMetrics | None = None
        self.store: Any = None
        self.hook = TimerPutHook(self.config, now_ms)
        self.commit_queue_offset = 0
        self.curr_write_time_ms = 0
        self.curr_read_time_ms = 0
        # (monotonic time, wheel figures) of the last scan for the metrics (wheel_figures)
        self._wheel_figures: tuple[float, tuple[int, list[int]]] | None = None
        self._wheel_scan: asyncio.Future[None] | None = None
        self.dequeue_active = False
        # A slave files the timer queue only as far as its master has (SlaveSynchronize copies
        # the master's timercheck), so what the master delivered is not filed into live slots.
        self.master_queue_offset = 0
        self.enqueue_service = TimerEnqueueService(self)
        self.dequeue_service = TimerDequeueService(self)
        self.last_enqueue_store_ms = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        broker.register_processor(RequestCode.GET_TIMER_CHECK_POINT, self.process_get_timer_check_point)
        broker.register_processor(RequestCode.GET_TIMER_METRICS, self.process_get_timer_metrics)

    @property
    def running(self) -> bool:
        """False once shutdown began: worker threads still in a step stop touching the files."""
        return self._running

    @property
    def metrics(self) -> Any:
        """The broker's metrics manager, None when metrics are off."""
        return getattr(self.broker, "metrics", None)

    @property
    def enabled(self) -> bool:
        return self.config.timer_wheel_enable

    # ---- lifecycle ---------------------------------------------------------------------------

    def attach(self, store: Any) -> None:
        """Install the put-time conversion (it refuses timer messages while the wheel is off)."""
        self.store = store
        store.add_put_message_hook(self.hook)

    async def start(self, store: Any) -> None:
        self.attach(store)
        if not self.enabled:
            return
        await asyncio.to_thread(self._open_and_recover)
        self.hook.slot_num = self._slot_num
        # As the delay levels: a master delivers from the start; role changes come through
        # BrokerController.change_special_service_status.
        self.dequeue_active = self.config.broker_role != SLAVE
        self._running = True
        metrics = self.metrics
        if metrics is not None:
            metrics.add_source(lambda: timer_gauges(self, metrics))
        self._tasks = [
            asyncio.create_task(self.enqueue_service.run(), name="TimerEnqueueService"),
            asyncio.create_task(self.dequeue_service.run(), name="TimerDequeueService"),
            asyncio.create_task(self._flush_loop(), name="TimerFlushService"),
        ]

    def _open_and_recover(self) -> None:
        cfg = self.config
        self.checkpoint = TimerCheckpoint(cfg.timer_checkpoint_path)
        self.wheel = TimerWheel(cfg.timer_wheel_path, self.precision_ms)
        self.timer_log = TimerLog(cfg.timer_log_dir, cfg.mapped_file_size_timer_log)
        metrics = TimerMetrics(cfg.config_dir)
        if not metrics.load():
            raise RuntimeError(f"cannot load {metrics.path}")
        self.timer_metrics = metrics
        recover(self)

    def set_dequeue_active(self, active: bool) -> None:
        """A master delivers; a slave (or a master turned slave) only fills its wheel."""
        self.dequeue_active = active

    async def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        self.dequeue_active = False
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        if self._wheel_scan is not None:  # a metrics scan still reading the wheel ends before it closes
            await asyncio.wait([self._wheel_scan])
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self.lock:  # a worker thread still filing finishes its unit first
            pass
        self.flush()
        with self.lock:
            if self.timer_log is not None:
                self.timer_log.shutdown()
            if self.wheel is not None:
                self.wheel.close()
            if self.checkpoint is not None:
                self.checkpoint.close()

    # ---- shared operations -------------------------------------------------------------------

    def floor_now(self) -> int:
        return floor_time(self.now_ms(), self.precision_ms)

    def _slot_num(self, slot_ms: int) -> int:
        wheel = self.wheel
        return wheel.get_num(slot_ms) if wheel is not None else 0

    def do_enqueue(self, offset_py: int, size_py: int, delayed_ms: int, magic: int, real_topic: str,
                   write_time_ms: int) -> int:
        """File one message into the wheel (caller holds the lock); the slot time used.

        Too far for the roll window, it is parked in a nearer slot with MAGIC_ROLL and re-put
        to the timer topic when that slot fires.
        """
        slot_ms = delayed_ms
        parked = roll_target(delayed_ms, write_time_ms, effective_roll_window(self.config.timer_roll_window_slot),
                             self.precision_ms)
        if parked is not None:
            slot_ms = parked
            magic |= MAGIC_ROLL
        wheel = self.wheel
        slot = wheel.get_slot(slot_ms)
        unit = encode_unit(slot.last_pos, magic, write_time_ms, slot_ms - write_time_ms, offset_py, size_py,
                           java_string_hash(real_topic) if real_topic else 0)
        pos = self.timer_log.append(unit)
        delta = -1 if magic & MAGIC_DELETE else 1
        if slot.empty:
            wheel.put_slot(slot_ms, pos, pos, delta)
        else:
            wheel.put_slot(slot_ms, slot.first_pos, pos, slot.num + delta, slot.magic)
        return slot_ms

    def apply_master_checkpoint(self, body: bytes) -> None:
        """A slave takes the master's read time (SlaveSynchronize): slots before it were delivered."""
        if self.dequeue_active or len(body) < 56:
            return
        master = TimerCheckpointData.decode(body)
        self.master_queue_offset = max(self.master_queue_offset, master.master_timer_queue_offset)
        if master.last_read_time_ms > self.curr_read_time_ms:
            self.curr_read_time_ms = master.last_read_time_ms
            if self.curr_write_time_ms < self.curr_read_time_ms:
                self.curr_write_time_ms = self.curr_read_time_ms

    async def process_get_timer_metrics(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_TIMER_METRICS (61): the timermetrics table as JSON."""
        if self.timer_metrics is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "The timer metrics is null")
        body = await asyncio.to_thread(lambda: json.dumps(self.timer_metrics.encode_json()).encode("utf-8"))
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    def count_timing(self, topic: str, delta: int) -> None:
        """The per-topic count of messages waiting in the wheel (timermetrics)."""
        if self.timer_metrics is not None and topic:
            self.timer_metrics.add(topic, delta)

    async def process_get_timer_check_point(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_TIMER_CHECK_POINT (60): the timercheck's 56 bytes (AdminBrokerProcessor upstream)."""
        if self.checkpoint is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        return request.response_to(ResponseCode.SUCCESS, None, None, self.checkpoint.snapshot())

    def flush(self) -> None:
        """Timer log, wheel, then the checkpoint of what they hold (worker thread)."""
        if self.timer_log is None or self.wheel is None or self.checkpoint is None:
            return
        with self.lock:
            read_time = self.curr_read_time_ms
            log_pos = self.timer_log.max_offset()
            queue_offset = self.commit_queue_offset
        self.timer_log.flush()
        self.wheel.flush()
        self.checkpoint.update(last_read_time_ms=read_time, last_timer_log_flush_pos=log_pos,
                               last_timer_queue_offset=queue_offset, master_timer_queue_offset=queue_offset)
        if self.timer_metrics is not None:
            self.timer_metrics.persist_if_changed()

    async def _flush_loop(self) -> None:
        last_clean = time.monotonic()
        while True:
            await asyncio.sleep(max(self.config.timer_flush_interval_ms, 10) / 1000.0)
            try:
                await asyncio.to_thread(self.flush)
                if time.monotonic() - last_clean >= CLEAN_TIMER_LOG_INTERVAL_S:
                    last_clean = time.monotonic()
                    await asyncio.to_thread(self._clean_timer_log)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer flush failed")

    def _clean_timer_log(self) -> None:
        min_offset = self.store.get_min_phy_offset()
        with self.lock:
            dropped = self.timer_log.delete_expired(min_offset)
        if dropped:
            log.info("deleted %d expired timerlog file(s)", dropped)

    def refresh_wheel_figures(self) -> None:
        """Scan the wheel for rocketmq_timer_dequeue_lag and _message_snapshot. Blocking (tens of
        ms over the 38 MB file, more with many filled slots): wheel_figures runs it off the loop."""
        figures = self.wheel.figures(self.curr_read_time_ms, self.now_ms(), TIMER_DIST_S)
        self._wheel_figures = (time.monotonic(), figures)

    def wheel_figures(self) -> tuple[int, list[int]] | None:
        """The last scan's (messages pending in the wheel, per-bound counts of TIMER_DIST_S), None
        before the first; a scrape finding them older than WHEEL_FIGURES_MAX_AGE_S starts a new
        scan on a worker thread (upstream scans in its metrics callback, on a thread of its own;
        here scrapes are served on the broker's event loop)."""
        cached = self._wheel_figures
        stale = cached is None or time.monotonic() - cached[0] > WHEEL_FIGURES_MAX_AGE_S
        if stale and self._wheel_scan is None and self._running:
            scan = asyncio.get_running_loop().run_in_executor(None, self.refresh_wheel_figures)
            self._wheel_scan = scan
            scan.add_done_callback(self._wheel_scan_done)
        return None if cached is None else cached[1]

    def _wheel_scan_done(self, scan: asyncio.Future[None]) -> None:
        self._wheel_scan = None
        if not scan.cancelled() and scan.exception() is not None and self._running:
            log.warning("timer wheel scan for the metrics failed: %s", scan.exception())

    def stats(self) -> dict[str, int]:
        """Progress figures (the metrics' enqueue/dequeue lag and latency inputs)."""
        cq = self.store.get_consume_queue(self.enqueue_service.topic, 0) if self.store is not None else None
        max_offset = cq.get_max_offset_in_queue() if cq is not None else 0
        return {
            "enqueueLag": max(max_offset - self.commit_queue_offset, 0),
            "currReadTimeMs": self.curr_read_time_ms,
            "currWriteTimeMs": self.curr_write_time_ms,
            "dequeueLatencySec": max(self.now_ms() - self.curr_read_time_ms, 0) // 1000,
        }
