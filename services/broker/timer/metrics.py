"""The timer store's figures for Prometheus (DefaultStoreMetricsManager's timer gauges).

Counters (rocketmq_timer_enqueue_total / dequeue_total, rocketmq_delay_message_latency) go
through the broker's metrics manager hooks as messages pass; the gauges are read at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from orbitmq.common import metrics as m

from .timer_metrics import TIMER_DIST_S

if TYPE_CHECKING:
    from .interfaces import GaugeTimer

ENQUEUE_LATENCY_WINDOW_MS = 2000


def timer_gauges(timer: GaugeTimer, manager: Any) -> Iterable[m.Metric]:
    """rocketmq_timer_enqueue_lag, _enqueue_latency (ms), _dequeue_lag (every message in the wheel
    from the read time on), _dequeue_latency (s, as upstream), rocketmq_timing_messages{topic} and
    rocketmq_timer_message_snapshot{timer_bound_s}."""
    names = manager.label_names
    common = manager.common_labels
    stats = timer.stats()
    lag = m.gauge("rocketmq_timer_enqueue_lag", "Timer queue entries not yet filed into the wheel.", names)
    lag.add_metric(common, stats["enqueueLag"])
    yield lag
    now = timer.now_ms()
    last = timer.last_enqueue_store_ms
    latency = now - last if last and now - last <= ENQUEUE_LATENCY_WINDOW_MS else 0
    enqueue = m.gauge("rocketmq_timer_enqueue_latency", "now - store time of the last filed message (ms).", names)
    enqueue.add_metric(common, latency)
    yield enqueue
    figures = timer.wheel_figures()  # from a scan at most a few seconds old; None before the first
    if figures is not None:
        pending, counts = figures
        dequeue_lag = m.gauge("rocketmq_timer_dequeue_lag", "Timer messages in the wheel not yet delivered.", names)
        dequeue_lag.add_metric(common, pending)
        yield dequeue_lag
        snapshot = m.gauge("rocketmq_timer_message_snapshot",
                           "Timer messages due within each bound from now (only the next 24 h).",
                           (*names, "timer_bound_s"))
        for bound, count in zip(TIMER_DIST_S, counts, strict=True):
            snapshot.add_metric((*common, str(bound)), count)
        yield snapshot
    dequeue = m.gauge("rocketmq_timer_dequeue_latency",
                      "How far the wheel's read time is behind now, in seconds as upstream reports it.", names)
    dequeue.add_metric(common, stats["dequeueLatencySec"] if timer.dequeue_active else 0)
    yield dequeue
    if timer.timer_metrics is not None:
        timing = m.gauge("rocketmq_timing_messages", "Timer messages waiting in the wheel (timermetrics).",
                         (*names, "topic"))
        for topic, count in sorted(timer.timer_metrics.counts().items()):
            timing.add_metric((*common, topic), count)
        yield timing
