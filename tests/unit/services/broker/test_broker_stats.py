"""BrokerStatsManager windows and counters, and the hold service's closed-connection cleanup."""

from __future__ import annotations

import asyncio

from orbitmq.broker.longpolling.pull_request_hold import PullRequest, PullRequestHoldService
from orbitmq.broker.stats import BrokerStatsManager


def test_tps_windows_measure_growth_since_the_snapshot_of_each_window() -> None:
    stats = BrokerStatsManager()
    base = stats.boot_timestamp
    # 600 seconds of history: 1 put per second for the first 540 s, then 10 per second.
    for second in range(1, 601):
        stats.on_put("T", 1 if second <= 540 else 10, 100)
        stats.sample(base + second * 1000)
    now = base + 600_000
    assert stats.tps("put_nums", 10, now) == 10.0
    assert stats.tps("put_nums", 60, now) == 10.0
    assert stats.tps("put_nums", 600, now) == (540 + 600) / 600
    assert stats.tps_string("put_nums", now) == "10.00 10.00 1.90"
    assert stats.runtime_info()["msgPutTotalTodayNow"] == str(540 + 600)


def test_young_window_uses_the_history_it_has() -> None:
    stats = BrokerStatsManager()
    for _ in range(30):
        stats.on_put("T", 1, 10)
    later = stats.boot_timestamp + 3000
    assert stats.tps("put_nums", 10, later) == 10.0  # 30 puts over the 3 s since boot
    # Right after boot a burst is spread over at least a second, not a few milliseconds.
    assert stats.tps("put_nums", 10, stats.boot_timestamp + 1) == 30.0


def test_system_topics_are_left_out_of_the_daily_totals() -> None:
    stats = BrokerStatsManager()
    stats.on_put("UserTopic", 3, 300)
    stats.on_put("SCHEDULE_TOPIC_XXXX", 2, 200)
    stats.on_put("rmq_sys_REVIVE_LOG_C", 1, 100)
    stats.on_handed_out("G", "UserTopic", 3)
    stats.on_handed_out("G", "SCHEDULE_TOPIC_XXXX", 5)
    assert (stats.put_nums, stats.put_size, stats.put_nums_without_system) == (6, 600, 3)
    assert stats.get_nums_without_system == 3
    stats.record_morning()
    stats.on_put("UserTopic", 4, 400)
    stats.record_morning()
    info = stats.runtime_info()
    assert (info["msgPutTotalYesterdayMorning"], info["msgPutTotalTodayMorning"], info["msgPutTotalTodayNow"]) == (
        "3", "7", "7")
    stats.forget_topics({"UserTopic"})
    assert stats.topic_stats("UserTopic") == {"putNums": 0, "putSize": 0, "getNums": 0}


def test_get_found_miss_and_transferred() -> None:
    stats = BrokerStatsManager()
    stats.on_get(4)
    stats.on_get(0)
    stats.on_get(2)
    assert (stats.get_found, stats.get_miss, stats.get_transferred) == (2, 1, 6)


async def test_drop_channel_releases_only_that_connections_pulls() -> None:
    hold = PullRequestHoldService(lambda topic, queue_id: 0, lambda *args: True)
    await hold.start()
    try:
        closed, alive = object(), object()
        mine = [PullRequest("T", q, 0, 15_000, None, client_channel=closed) for q in (0, 0, 1)]
        other = PullRequest("T", 0, 0, 15_000, None, client_channel=alive)
        futures = [hold.suspend_pull_request(r) for r in [*mine, other]]
        assert hold.drop_channel(closed) == 3
        assert [f.done() for f in futures] == [True, True, True, False]
        assert all(f.result() is False for f in futures[:3])  # released unmatched
        assert hold.pull_request_table == {"T@0": [other]}
        hold.remove(other)
        assert hold.pull_request_table == {} and futures[3].result() is False
        hold.remove(other)  # twice is harmless
        await asyncio.sleep(0)
    finally:
        await hold.shutdown()
