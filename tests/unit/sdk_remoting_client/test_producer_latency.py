"""MQFaultStrategy and LatencyFaultTolerance with a fake clock: upstream's tables and queue choice."""

from __future__ import annotations

import pytest

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.route import BrokerData, QueueData, TopicRouteData
from orbitmq.remoting_client.latency import (
    LATENCY_MAX_MS,
    NOT_AVAILABLE_DURATION_MS,
    MQFaultStrategy,
    compute_not_available_duration,
)
from orbitmq.remoting_client.publish_info import route_to_publish_info, route_to_subscribe_queues


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def route(*brokers: tuple[str, int, int, bool]) -> TopicRouteData:
    """(name, write queues, perm, has master) per broker group."""
    return TopicRouteData(
        queue_datas=[QueueData(name, queues, queues, perm) for name, queues, perm, _ in brokers],
        broker_datas=[BrokerData("c", name, {0: f"10.0.0.{i}:10911"} if master else {1: f"10.0.0.{i}:10911"})
                      for i, (name, _, _, master) in enumerate(brokers)])


def test_upstream_tables() -> None:
    assert LATENCY_MAX_MS == (50, 100, 550, 1800, 3000, 5000, 15000)
    assert NOT_AVAILABLE_DURATION_MS == (0, 0, 2000, 5000, 6000, 10000, 30000)


@pytest.mark.parametrize(("latency", "duration"), [
    (0, 0), (49, 0), (50, 0), (549, 0), (550, 2000), (1799, 2000), (1800, 5000), (2999, 5000), (3000, 6000),
    (4999, 6000), (5000, 10000), (10000, 10000), (14999, 10000), (15000, 30000), (60000, 30000)])
def test_not_available_duration_per_latency(latency: int, duration: int) -> None:
    assert compute_not_available_duration(latency) == duration


def test_slow_broker_is_avoided_for_its_duration_then_used_again() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(True, clock)
    info = route_to_publish_info("T", route(("a", 2, 6, True), ("b", 2, 6, True)))
    strategy.update_fault_item("a", 600, False, True)  # 600 ms: 2 s unavailable
    for _ in range(20):
        assert strategy.select_one_message_queue(info, None).broker_name == "b"
    clock.now += 1999
    assert not strategy.tolerance.is_available("a")
    clock.now += 1
    assert strategy.tolerance.is_available("a")
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(8)} == {"a", "b"}


def test_isolation_counts_as_ten_seconds_and_a_longer_duration_is_never_shortened() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(True, clock)
    strategy.update_fault_item("a", 5, True, True)  # a failure: 10 s whatever the latency
    clock.now += 5000
    strategy.update_fault_item("a", 600, False, True)  # 2 s from now ends before the 10 s: kept
    clock.now += 4999
    assert not strategy.tolerance.is_available("a")
    clock.now += 1
    assert strategy.tolerance.is_available("a")
    strategy.update_fault_item("a", 600, False, True)  # now it starts 2 s more
    clock.now += 1999
    assert not strategy.tolerance.is_available("a")
    clock.now += 1
    assert strategy.tolerance.is_available("a")
    strategy.update_fault_item("a", 20, False, True)  # fast again: no new duration
    assert strategy.tolerance.is_available("a")


def test_unavailable_everywhere_falls_back_to_reachable_then_any() -> None:
    clock = Clock()
    strategy = MQFaultStrategy(True, clock)
    info = route_to_publish_info("T", route(("a", 1, 6, True), ("b", 1, 6, True)))
    strategy.update_fault_item("a", 20000, False, True)
    strategy.update_fault_item("b", 20000, True, False)  # unavailable and unreachable
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(6)} == {"a"}
    strategy.update_fault_item("a", 20000, True, False)
    assert strategy.select_one_message_queue(info, None) is not None  # still sends somewhere


def test_disabled_strategy_records_nothing_and_only_avoids_the_last_broker() -> None:
    strategy = MQFaultStrategy(False, Clock())
    strategy.update_fault_item("a", 20000, True, False)
    assert strategy.tolerance.items == {}
    info = route_to_publish_info("T", route(("a", 2, 6, True), ("b", 2, 6, True)))
    for _ in range(10):
        assert strategy.select_one_message_queue(info, "a").broker_name == "b"
    single = route_to_publish_info("T", route(("a", 2, 6, True)))
    assert strategy.select_one_message_queue(single, "a").broker_name == "a"  # no other: the same group


def test_round_robin_walks_every_queue() -> None:
    info = route_to_publish_info("T", route(("b", 2, 6, True), ("a", 2, 6, True)))
    assert [q.broker_name for q in info.message_queue_list] == ["a", "a", "b", "b"]  # sorted by broker name
    picks = [info.select_one_message_queue() for _ in range(8)]
    assert set(picks) == set(info.message_queue_list) and picks[:4] == picks[4:]


def test_publish_and_subscribe_queues_follow_perm_and_masters() -> None:
    r = route(("a", 2, 6, True), ("b", 3, 4, True), ("c", 2, 6, False))
    publish = route_to_publish_info("T", r)
    assert publish.message_queue_list == [MessageQueueRef("T", "a", 0), MessageQueueRef("T", "a", 1)]
    subscribe = route_to_subscribe_queues("T", r)
    assert {(q.broker_name, q.queue_id) for q in subscribe} == {("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2),
                                                                 ("c", 0), ("c", 1)}
    ordered = route_to_publish_info("T", TopicRouteData(order_topic_conf="b:2;a:1"))
    assert ordered.order_topic and [(q.broker_name, q.queue_id) for q in ordered.message_queue_list] == [
        ("b", 0), ("b", 1), ("a", 0)]
