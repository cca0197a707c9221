"""StatsHistory: the minute/hour/day windows VIEW_BROKER_STATS_DATA answers (mqadmin statsAll)."""

from __future__ import annotations

from orbitmq.broker.stats import BrokerStatsManager
from orbitmq.broker.stats_items import StatsHistory

T0 = 1_000_000_000


def test_windows_sum_only_their_span() -> None:
    history = StatsHistory(T0)
    total = 0
    for second in range(0, 7200, 10):  # 12 messages a minute for two hours
        total = second // 5
        history.sample(T0 + second * 1000, [("k", total)])
    now = T0 + 7200 * 1000
    total = 7200 // 5
    data = history.stats_data("k", total, now)
    assert data["statsMinute"]["sum"] == 12 and data["statsMinute"]["tps"] == 0.2
    assert data["statsHour"]["sum"] == 720
    assert data["statsDay"]["sum"] == total  # younger than a day: everything since the start
    assert data["statsMinute"]["avgpt"] == 0.0


def test_a_key_first_seen_late_counts_from_zero() -> None:
    history = StatsHistory(T0)
    history.sample(T0 + 5_000, [])
    assert history.stats_data("new", 3, T0 + 6_000)["statsMinute"]["sum"] == 3
    history.sample(T0 + 20_000, [("new", 5)])
    assert history.stats_data("new", 5, T0 + 21_000)["statsDay"]["sum"] == 5


def test_manager_answers_topic_put_and_group_get_items() -> None:
    stats = BrokerStatsManager()
    assert stats.stats_data("TOPIC_PUT_NUMS", "T") is None
    stats.on_put("T", 4, 400)
    stats.on_handed_out("G", "T", 3)
    stats.sample()
    assert stats.stats_data("TOPIC_PUT_NUMS", "T")["statsDay"]["sum"] == 4
    assert stats.stats_data("TOPIC_PUT_SIZE", "T")["statsDay"]["sum"] == 400
    assert stats.stats_data("GROUP_GET_NUMS", "T@G")["statsDay"]["sum"] == 3
    assert stats.stats_data("GROUP_GET_NUMS", "T@OTHER") is None
    assert stats.stats_data("NO_SUCH_STATS", "T") is None
    stats.forget_group("G")
    assert stats.stats_data("GROUP_GET_NUMS", "T@G") is None
    stats.forget_topics({"T"})
    assert stats.stats_data("TOPIC_PUT_NUMS", "T") is None
