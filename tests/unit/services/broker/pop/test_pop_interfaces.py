"""The views the POP helpers take (services/broker/pop/interfaces.py) name only what the real
broker and PopService have, and what this folder's fakes have: a rename on either side fails here
rather than in a helper at run time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orbitmq.broker.metrics.manager import BrokerMetricsManager
from orbitmq.broker.pop import interfaces as i
from tests.support.broker import in_process_broker

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

BROKER_VIEWS = (i.PopBroker, i.ReviveBroker, i.ReviveLogBroker, i.DeadLetterBroker, i.NotificationBroker,
                i.BufferMergeBroker)
POP_VIEWS = (i.RevivePop, i.ReviveLogPop, i.AckPop, i.ChangeInvisiblePop, i.NotificationPop, i.PopProcessorPop,
             i.BufferMergePop)


def _missing(obj: object, views: tuple[type, ...]) -> list[str]:
    return [view.__name__ for view in views if not isinstance(obj, view)]


async def test_the_broker_and_pop_service_have_what_the_views_name(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path / "store", "ViewCluster", "broker-view") as broker:
        assert _missing(broker, BROKER_VIEWS) == []
        assert _missing(broker.pop_service, POP_VIEWS) == []
        assert _missing(broker.config, (i.BrokerIdentity,)) == []
        assert _missing(broker.message_store, (i.QueueOffsets,)) == []
        assert _missing(broker.consumer_offset_manager, (i.OffsetTable,)) == []
        assert _missing(broker.topic_config_manager, (i.TopicConfigs,)) == []
        assert _missing(broker.subscription_group_manager, (i.GroupConfigs,)) == []
    assert issubclass(BrokerMetricsManager, i.PopMetrics)


def test_the_fakes_have_what_the_views_name(pop_env: PopEnv) -> None:
    assert _missing(pop_env.broker, BROKER_VIEWS) == []
    assert _missing(pop_env.pop, POP_VIEWS) == []
    assert _missing(pop_env.broker.message_store, (i.QueueOffsets,)) == []
