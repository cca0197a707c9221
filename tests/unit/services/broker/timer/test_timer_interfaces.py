"""The views the timer helpers take (services/broker/timer/interfaces.py) name only what the
real TimerMessageStore, broker and MessageStore have, and what this folder's fakes have."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orbitmq.broker.metrics.manager import BrokerMetricsManager
from orbitmq.broker.store.consume_queue import ConsumeQueue
from orbitmq.broker.timer import interfaces as i
from tests.support.broker import in_process_broker

if TYPE_CHECKING:
    from conftest import TimerEnv  # the fixture's fakes (this folder's conftest.py)

TIMER_VIEWS = (i.EnqueueTimer, i.DequeueTimer, i.RecoveryTimer)


def _missing(obj: object, views: tuple[type, ...]) -> list[str]:
    return [view.__name__ for view in views if not isinstance(obj, view)]


async def test_the_timer_store_and_broker_have_what_the_views_name(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path / "store", "ViewCluster", "broker-view") as broker:
        timer = broker.timer_message_store
        assert _missing(timer, (*TIMER_VIEWS, i.GaugeTimer)) == []
        assert _missing(timer.dequeue_service, (i.DueDelivery,)) == []
        assert _missing(broker, (i.TimerBroker,)) == []
        assert _missing(broker.message_store, (i.TimerStoreReads,)) == []
        assert _missing(broker.message_store.commit_log, (i.CommitLogReads,)) == []
    assert issubclass(ConsumeQueue, i.TimerQueue)
    assert issubclass(BrokerMetricsManager, i.TimerMetricsHooks)


def test_the_fakes_have_what_the_views_name(timer_env: TimerEnv) -> None:
    assert _missing(timer_env.timer, TIMER_VIEWS) == []
    assert _missing(timer_env.timer.broker, (i.TimerPutBroker,)) == []
    assert _missing(timer_env.store, (i.TimerStoreReads,)) == []
