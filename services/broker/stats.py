"""BrokerStatsManager: put/get counters and the TPS windows of GET_BROKER_RUNTIME_INFO.

The counters are plain ints bumped on the event loop (every put and pull completes there), so
the send and pull paths pay one dict lookup and two integer additions per call: no lock, no
allocation. Once a second the sampler snapshots each running total (StoreStatsService's
``sampling``), keeping ten minutes of history; a rate is "growth since the snapshot N seconds
ago, divided by the time elapsed", measured up to the live counter.

Runtime-info formats follow RocketMQ: ``putTps`` and its siblings are three space-separated
rates over the last 10 s, 1 min and 10 min; ``msgPutTotalTodayMorning`` etc. are the running
totals recorded at the last two local midnights (BrokerStats.record), and ``…TodayNow`` the
totals now, system topics excluded. Unlike upstream, which prints an empty field until a
window has filled, a young window is measured over the history it has.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from orbitmq.broker.stats_items import StatsHistory
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.validators import is_system_topic

SAMPLING_INTERVAL_SECONDS = 1.0  # StoreStatsService.FREQUENCY_OF_SAMPLING
MAX_RECORDS_OF_SAMPLING = 600  # ten minutes of one-second snapshots
TPS_WINDOWS_SECONDS = (10, 60, 600)
CONSUME_TPS_WINDOW_SECONDS = 60  # ConsumeStats.consumeTps is the group's last-minute rate
# A window younger than this is measured over this span, so a burst right after boot (or
# right after a snapshot) is not divided by a few milliseconds.
MIN_SPAN_MS = 1000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TopicStats:
    """Running totals of one topic; ``system`` is decided once, not per message."""

    __slots__ = ("topic", "system", "put_nums", "put_size", "get_nums")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.system = is_system_topic(topic)
        self.put_nums = 0
        self.put_size = 0
        self.get_nums = 0


class GroupStats:
    """Messages handed out to one consumer group, with its own snapshot history."""

    __slots__ = ("get_nums", "history")

    def __init__(self, now_ms: int) -> None:
        self.get_nums = 0
        self.history: deque[tuple[int, int]] = deque([(now_ms, 0)], maxlen=CONSUME_TPS_WINDOW_SECONDS + 1)


def window_tps(history: deque[tuple[int, int]], total: int, now_ms: int, seconds: int) -> float:
    """Rate of ``total`` over the last ``seconds``, from the snapshots in ``history``."""
    if not history:
        return 0.0
    start = now_ms - seconds * 1000
    begin_ts, begin_total = history[0]
    # Newest snapshot at least ``seconds`` old (the history is in time order, newest last).
    for ts, value in reversed(history):
        if ts <= start:
            begin_ts, begin_total = ts, value
            break
    span = max(now_ms - begin_ts, MIN_SPAN_MS)
    return max(total - begin_total, 0) * 1000.0 / span


class BrokerStatsManager:
    def __init__(self, sampling_interval: float = SAMPLING_INTERVAL_SECONDS) -> None:
        self.sampling_interval = sampling_interval
        self.boot_timestamp = _now_ms()
        self.topics: dict[str, TopicStats] = {}
        self.groups: dict[str, GroupStats] = {}
        # Broker-wide put totals are sums over the topics (as StoreStatsService sums its
        # per-topic counters), so a put bumps two counters only; deleted topics' totals live on here.
        self._retired_put_nums = 0
        self._retired_put_size = 0
        self._retired_put_nums_without_system = 0
        self.get_found = 0  # getMessage calls that found messages
        self.get_miss = 0  # getMessage calls that found none
        self.get_transferred = 0  # messages read out of the store for clients
        self.get_nums_without_system = 0  # messages handed to consumers (pull and POP)
        # BrokerStats: totals at the last two local midnights.
        self.msg_put_total_yesterday_morning = 0
        self.msg_put_total_today_morning = 0
        self.msg_get_total_yesterday_morning = 0
        self.msg_get_total_today_morning = 0
        self._day = dt.date.today()
        self._history: dict[str, deque[tuple[int, int]]] = {
            name: deque(maxlen=MAX_RECORDS_OF_SAMPLING + 1) for name in self._SAMPLED}
        self._task: asyncio.Task[None] | None = None
        # Messages handed to each consumer group per topic (GROUP_GET_NUMS "topic@group"), and the
        # minute/hour/day history of the per-topic and per-group totals for VIEW_BROKER_STATS_DATA.
        self.group_topic_get: dict[tuple[str, str], int] = {}
        self.items = StatsHistory(self.boot_timestamp)
        self.sample(self.boot_timestamp)

    _SAMPLED = ("put_nums", "get_found", "get_miss", "get_transferred")

    # ---- hot path -------------------------------------------------------------------------------

    def on_put(self, topic: str, nums: int, size: int) -> None:
        """A put stored ``nums`` messages (``size`` bytes) in ``topic``."""
        entry = self.topics.get(topic)
        if entry is None:
            entry = self.topics[topic] = TopicStats(topic)
        entry.put_nums += nums
        entry.put_size += size

    def on_get(self, nums: int) -> None:
        """One store read for a client: ``nums`` messages found (0: a miss)."""
        if nums:
            self.get_found += 1
            self.get_transferred += nums
        else:
            self.get_miss += 1

    def on_handed_out(self, group: str, topic: str | None, nums: int) -> None:
        """``nums`` messages answered to a consumer of ``group`` (pull or POP)."""
        entry_g = self.groups.get(group)
        if entry_g is None:
            entry_g = self.groups[group] = GroupStats(_now_ms())
        entry_g.get_nums += nums
        if topic is None:
            self.get_nums_without_system += nums
            return
        entry = self.topics.get(topic)
        if entry is None:
            entry = self.topics[topic] = TopicStats(topic)
        entry.get_nums += nums
        if not entry.system:
            self.get_nums_without_system += nums
        key = (topic, group)
        self.group_topic_get[key] = self.group_topic_get.get(key, 0) + nums

    @property
    def put_nums(self) -> int:
        return self._retired_put_nums + sum(t.put_nums for t in self.topics.values())

    @property
    def put_size(self) -> int:
        return self._retired_put_size + sum(t.put_size for t in self.topics.values())

    @property
    def put_nums_without_system(self) -> int:
        return self._retired_put_nums_without_system + sum(
            t.put_nums for t in self.topics.values() if not t.system)

    # ---- sampling -------------------------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="BrokerStatsSampling")

    async def shutdown(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.sampling_interval)
            self.sample()

    def sample(self, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        for name, history in self._history.items():
            history.append((now, getattr(self, name)))
        for group in self.groups.values():
            group.history.append((now, group.get_nums))
        self.items.sample(now, self._item_totals())
        today = dt.date.today()
        if today != self._day:
            self._day = today
            self.record_morning()

    def record_morning(self) -> None:
        """BrokerStats.record: roll the midnight totals (run once a day, at local midnight)."""
        self.msg_put_total_yesterday_morning = self.msg_put_total_today_morning
        self.msg_get_total_yesterday_morning = self.msg_get_total_today_morning
        self.msg_put_total_today_morning = self.put_nums_without_system
        self.msg_get_total_today_morning = self.get_nums_without_system

    # ---- reading --------------------------------------------------------------------------------

    def tps(self, name: str, seconds: int, now_ms: int | None = None) -> float:
        now = _now_ms() if now_ms is None else now_ms
        return window_tps(self._history[name], getattr(self, name), now, seconds)

    def tps_string(self, name: str, now_ms: int | None = None) -> str:
        """RocketMQ's "10s 1min 10min" triple, e.g. "12.50 3.20 0.33"."""
        now = _now_ms() if now_ms is None else now_ms
        return " ".join(f"{self.tps(name, s, now):.2f}" for s in TPS_WINDOWS_SECONDS)

    def group_get_tps(self, group: str) -> float:
        """ConsumeStats.consumeTps of ``group`` (BrokerStatsManager#tpsGroupGetNums), rounded to
        two decimals as GET_CONSUME_STATS answers it."""
        entry = self.groups.get(group)
        if entry is None:
            return 0.0
        return round(window_tps(entry.history, entry.get_nums, _now_ms(), CONSUME_TPS_WINDOW_SECONDS), 2)

    def runtime_info(self) -> dict[str, str]:
        """The statistics keys of GET_BROKER_RUNTIME_INFO, as upstream names them."""
        now = _now_ms()
        total_tps = " ".join(f"{self.tps('get_found', s, now) + self.tps('get_miss', s, now):.2f}"
                             for s in TPS_WINDOWS_SECONDS)
        return {
            "putTps": self.tps_string("put_nums", now),
            "getFoundTps": self.tps_string("get_found", now),
            "getMissTps": self.tps_string("get_miss", now),
            "getTotalTps": total_tps,
            # 5.x's StoreStatsService#getRuntimeInfo spelling (clusterList's #OutTPS reads it),
            # and 4.x's, which older tools read.
            "getTransferredTps": self.tps_string("get_transferred", now),
            "getTransferedTps": self.tps_string("get_transferred", now),
            "msgPutTotalYesterdayMorning": str(self.msg_put_total_yesterday_morning),
            "msgPutTotalTodayMorning": str(self.msg_put_total_today_morning),
            "msgPutTotalTodayNow": str(self.put_nums_without_system),
            "msgGetTotalYesterdayMorning": str(self.msg_get_total_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.msg_get_total_today_morning),
            "msgGetTotalTodayNow": str(self.get_nums_without_system),
        }

    def forget_topics(self, topics: set[str]) -> None:
        """Drop the totals of deleted topics so the table does not outgrow the topic table."""
        for topic in topics:
            entry = self.topics.pop(topic, None)
            if entry is None:
                continue
            self._retired_put_nums += entry.put_nums
            self._retired_put_size += entry.put_size
            if not entry.system:
                self._retired_put_nums_without_system += entry.put_nums
        gone = [key for key in self.group_topic_get if key[0] in topics]
        for key in gone:
            del self.group_topic_get[key]
        self.items.forget([("GROUP_GET_NUMS", key) for key in gone]
                          + [(name, topic) for topic in topics for name in ("TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE")])

    def forget_group(self, group: str) -> None:
        self.groups.pop(group, None)
        gone = [key for key in self.group_topic_get if key[1] == group]
        for key in gone:
            del self.group_topic_get[key]
        self.items.forget([("GROUP_GET_NUMS", key) for key in gone])

    # ---- VIEW_BROKER_STATS_DATA ------------------------------------------------------------------

    def _item_totals(self) -> Iterator[tuple[tuple[str, Any], int]]:
        for topic, entry in self.topics.items():
            yield ("TOPIC_PUT_NUMS", topic), entry.put_nums
            yield ("TOPIC_PUT_SIZE", topic), entry.put_size
        for key, nums in self.group_topic_get.items():
            yield ("GROUP_GET_NUMS", key), nums

    def stats_data(self, stats_name: str, stats_key: str) -> dict[str, dict[str, float]] | None:
        """BrokerStatsData of TOPIC_PUT_NUMS / TOPIC_PUT_SIZE (key: topic) or GROUP_GET_NUMS
        (key: topic@group); None when the broker has no such item, as upstream."""
        total: int | None = None
        key: Any = stats_key
        if stats_name in ("TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"):
            entry = self.topics.get(stats_key)
            if entry is not None and (entry.put_nums or entry.put_size):
                total = entry.put_nums if stats_name == "TOPIC_PUT_NUMS" else entry.put_size
        elif stats_name == "GROUP_GET_NUMS":
            topic, sep, group = stats_key.rpartition("@")
            key = (topic, group)
            if sep:
                total = self.group_topic_get.get(key)
        if total is None:
            return None
        return self.items.stats_data((stats_name, key), total, _now_ms())

    def topic_put_tps(self, topic: str) -> float:
        """BrokerStatsManager#tpsTopicPutNums: messages put per second over the last minute."""
        data = self.stats_data("TOPIC_PUT_NUMS", topic)
        return float(data["statsMinute"]["tps"]) if data else 0.0

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """Running totals of one topic (zeros for a topic never written or read)."""
        entry = self.topics.get(topic)
        if entry is None:
            return {"putNums": 0, "putSize": 0, "getNums": 0}
        return {"putNums": entry.put_nums, "putSize": entry.put_size, "getNums": entry.get_nums}
