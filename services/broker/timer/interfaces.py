"""What each timer helper needs of TimerMessageStore and the broker, as typing.Protocol classes.

TimerMessageStore (timer_message_store.py) owns the wheel, the timer log, the checkpoint and
the positions they share, and runs the pipeline. Each helper is typed with the narrow view
below, naming exactly the attributes and methods it uses, so it can be read on its own and
unit-tested with a small fake over real wheel and log files (tests/unit/services/broker/timer).
The file classes (TimerWheel, TimerLog, TimerCheckpoint) and MessageStoreConfig are named as
they are: a test builds the real ones in a temporary directory. The views are runtime-checkable
only so that test_timer_interfaces.py can hold the real objects and the fakes to them.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from orbitmq.broker.store.config import MessageStoreConfig
    from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageResult

    from .checkpoint import TimerCheckpoint
    from .enqueue import DueMessage
    from .timer_log import TimerLog
    from .timer_metrics import TimerMetrics
    from .wheel import TimerWheel


# ---- the message store and the broker -------------------------------------------------------

@runtime_checkable
class CommitLogReads(Protocol):
    """CommitLog#getMessage: one record's bytes by physical offset and size, None when gone."""

    def get_message(self, offset: int, size: int) -> bytes | None: ...


@runtime_checkable
class TimerQueue(Protocol):
    """The rmq_sys_wheel_timer ConsumeQueue, as the enqueue and recovery steps read it."""

    def get_min_offset_in_queue(self) -> int: ...

    def get_max_offset_in_queue(self) -> int: ...

    def get_entry(self, index: int) -> tuple[int, int, int] | None: ...


@runtime_checkable
class TimerStoreReads(Protocol):
    """The MessageStore reads of the timer pipeline (DefaultMessageStore#getConsumeQueue, the
    CommitLog); they run on worker threads."""

    commit_log: CommitLogReads

    def get_consume_queue(self, topic: str, queue_id: int) -> TimerQueue | None: ...


class MessagePutter(Protocol):
    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult: ...


@runtime_checkable
class TimerPutBroker(Protocol):
    """BrokerController's message building and put (counted in the broker's stats); deliveries
    go through its EscapeBridge (elsewhere while a slave acts as master, services/broker/failover)."""

    def new_inner_message(self, *, topic: str, queue_id: int, body: bytes, flag: int, properties: dict[str, str],
                          sys_flag: int, born_timestamp: int, born_host: str, reconsume_times: int,
                          copy_properties: bool = True,
                          properties_string: str | None = None) -> MessageExtBrokerInner: ...

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult: ...

    @property
    def escape_bridge(self) -> MessagePutter: ...


@runtime_checkable
class TimerBroker(TimerPutBroker, Protocol):
    """TimerMessageStore's view of BrokerController: its store config, its two admin requests
    (GET_TIMER_CHECK_POINT, GET_TIMER_METRICS); its metrics manager, when it has the attribute,
    is read with getattr (TimerMessageStore.metrics)."""

    store_config: MessageStoreConfig

    def register_processor(self, code: int, processor: Callable[[Any, Any], Awaitable[Any]]) -> None: ...


@runtime_checkable
class TimerMetricsHooks(Protocol):
    """BrokerMetricsManager's timer counters (rocketmq_timer_enqueue_total / _dequeue_total,
    rocketmq_delay_message_latency)."""

    def on_timer_enqueue(self, topic: str, nums: int = 1) -> None: ...

    def on_timer_dequeue(self, topic: str, nums: int = 1) -> None: ...

    def on_delay_latency(self, seconds: float) -> None: ...


# ---- TimerMessageStore, as each helper sees it ------------------------------------------------

@runtime_checkable
class TimerClock(Protocol):
    """The injected clock and the wheel's precision, fixed at start."""

    precision_ms: int
    now_ms: Callable[[], int]


@runtime_checkable
class TimerPositions(TimerClock, Protocol):
    """The hand-over between enqueue and dequeue (TimerMessageStore's module docstring):
    ``lock`` guards the file structures, ``running`` turns false once shutdown began."""

    config: MessageStoreConfig
    lock: threading.Lock
    commit_queue_offset: int
    curr_write_time_ms: int
    curr_read_time_ms: int
    dequeue_active: bool

    @property
    def running(self) -> bool: ...

    def count_timing(self, topic: str, delta: int) -> None: ...


@runtime_checkable
class DueDelivery(Protocol):
    """TimerDequeueService#put_due: messages already due when read, put without the wheel."""

    async def put_due(self, due: list[DueMessage]) -> bool: ...


@runtime_checkable
class EnqueueTimer(TimerPositions, Protocol):
    """TimerEnqueueService's view (enqueue.py): the timer queue in, units and slots out."""

    store: TimerStoreReads
    master_queue_offset: int
    last_enqueue_store_ms: int
    dequeue_service: DueDelivery

    @property
    def metrics(self) -> TimerMetricsHooks | None: ...

    def floor_now(self) -> int: ...

    def do_enqueue(self, offset_py: int, size_py: int, delayed_ms: int, magic: int, real_topic: str,
                   write_time_ms: int) -> int: ...


@runtime_checkable
class DequeueTimer(TimerPositions, Protocol):
    """TimerDequeueService's view (dequeue.py): due slots in, puts out."""

    store: TimerStoreReads
    wheel: TimerWheel
    timer_log: TimerLog
    broker: TimerPutBroker

    @property
    def metrics(self) -> TimerMetricsHooks | None: ...


@runtime_checkable
class RecoveryTimer(TimerClock, Protocol):
    """recover()'s view (recovery.py): the files it re-reads, the positions it sets."""

    checkpoint: TimerCheckpoint
    timer_log: TimerLog
    wheel: TimerWheel
    store: TimerStoreReads
    commit_queue_offset: int
    curr_write_time_ms: int
    curr_read_time_ms: int

    def floor_now(self) -> int: ...


@runtime_checkable
class GaugeTimer(TimerClock, Protocol):
    """timer_gauges()'s view (metrics.py): figures read at scrape time."""

    last_enqueue_store_ms: int
    dequeue_active: bool
    timer_metrics: TimerMetrics | None

    def stats(self) -> dict[str, int]: ...

    def wheel_figures(self) -> tuple[int, list[int]] | None: ...

