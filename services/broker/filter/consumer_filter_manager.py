"""ConsumerFilterManager / ConsumerFilterData: the SQL92 subscriptions consumers registered.

A heartbeat's subscriptions register here (ConsumerManager's REGISTER event); a group gone
from the broker (UNREGISTER) marks its filters dead, and filters dead for
filterDataCleanTimeSpan (24 h) are dropped when the table is persisted. Every filter of a
(topic, group) gets the bloom filter positions of ``group + "#" + topic``. The table is
<storePathRootDir>/config/consumerFilter.json in upstream's JSON shape; filters loaded from it
are taken as dead (their consumers re-register), and are ignored altogether when the bloom
filter (expectConsumerNumUseFilter, maxErrorRateOfBloomFilter) changed since.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orbitmq.broker.store.metadata.config_manager import JsonConfigManager
from orbitmq.common.filter.bloom import BloomFilter, BloomFilterData, hit_masks
from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.sql_filter import Sql92Filter, compile_sql92
from orbitmq.common.filter.subscription import ExpressionType

log = logging.getLogger(__name__)

MS_24_HOUR = 24 * 3600 * 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ConsumerFilterData:
    consumer_group: str
    topic: str
    expression: str
    expression_type: str
    born_time: int
    dead_time: int = 0
    bloom_filter_data: BloomFilterData | None = None
    client_version: int = 0
    compiled_expression: Sql92Filter | None = field(default=None, repr=False, compare=False)
    # (byte index, mask) of each bloom position: the per-entry check, precomputed.
    masks: tuple[tuple[int, int], ...] = field(default=(), repr=False, compare=False)

    def is_dead(self) -> bool:
        """ConsumerFilterData#isDead."""
        return self.dead_time >= self.born_time

    def how_long_after_death(self, now: int | None = None) -> int:
        if self.is_dead():
            return (_now_ms() if now is None else now) - self.dead_time
        return -1

    def is_msg_in_live(self, msg_store_time: int) -> bool:
        """ConsumerFilterData#isMsgInLive: the filter was there when the message was dispatched."""
        return msg_store_time > self.born_time

    def set_bloom(self, data: BloomFilterData | None) -> None:
        self.bloom_filter_data = data
        self.masks = hit_masks(data) if data is not None else ()

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bornTime": self.born_time, "clientVersion": self.client_version,
                               "consumerGroup": self.consumer_group, "dead": self.is_dead(),
                               "deadTime": self.dead_time, "expression": self.expression,
                               "expressionType": self.expression_type, "topic": self.topic}
        if self.bloom_filter_data is not None:
            out["bloomFilterData"] = self.bloom_filter_data.to_json_dict()
        return out

    @classmethod
    def from_json_dict(cls, obj: dict[str, Any]) -> ConsumerFilterData:
        data = cls(str(obj["consumerGroup"]), str(obj["topic"]), str(obj.get("expression") or ""),
                   str(obj.get("expressionType") or ExpressionType.SQL92), int(obj.get("bornTime") or 0),
                   int(obj.get("deadTime") or 0), None, int(obj.get("clientVersion") or 0))
        data.set_bloom(BloomFilterData.from_json_dict(obj.get("bloomFilterData")))
        return data


def build(topic: str, consumer_group: str, expression: str | None, expression_type: str | None,
          client_version: int) -> ConsumerFilterData | None:
    """ConsumerFilterManager#build: the filter of a non-TAG subscription, without bloom data;
    None for a TAG one or an expression that does not compile."""
    if ExpressionType.is_tag_type(expression_type):
        return None
    data = ConsumerFilterData(consumer_group, topic, expression or "", str(expression_type), _now_ms(), 0, None,
                              client_version)
    try:
        if expression_type != ExpressionType.SQL92:
            raise FilterExpressionError(f"unsupported expression type {expression_type!r}")
        data.compiled_expression = compile_sql92(expression or "")
    except (FilterExpressionError, ValueError, TypeError) as exc:
        log.error("parse error: expr=%s, topic=%s, group=%s, error=%s", expression, topic, consumer_group, exc)
        return None
    return data


class ConsumerFilterManager(JsonConfigManager):
    file_name = "consumerFilter.json"

    def __init__(self, config_dir: str, max_error_rate: int = 20, expect_consumer_num: int = 32,
                 clean_time_span: int = MS_24_HOUR) -> None:
        super().__init__(config_dir)
        self.bloom_filter = BloomFilter.create_by_fn(max_error_rate, expect_consumer_num)
        self.clean_time_span = clean_time_span
        # topic -> group -> filter (FilterDataMapByTopic#groupFilterData)
        self.filter_data_by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self._used = False

    # ---- registration ----------------------------------------------------------------------
    def register_group(self, consumer_group: str, subscriptions: Iterable[dict[str, Any]]) -> None:
        """ConsumerFilterManager#register(group, subList): each subscription, then the group's
        filters of topics it no longer subscribes are made dead."""
        subs = list(subscriptions)
        for sub in subs:
            try:
                version = int(sub.get("subVersion") or 0)
            except (TypeError, ValueError):
                version = 0
            self.register(str(sub.get("topic")), consumer_group, sub.get("subString"),
                          sub.get("expressionType"), version)
        topics = {str(sub.get("topic")) for sub in subs}
        with self._lock:
            for data in self.get_by_group(consumer_group):
                if data.topic not in topics and not data.is_dead():
                    data.dead_time = _now_ms()
                    log.info("Consumer filter changed: %s, make illegal topic dead:%s", consumer_group, data)

    def register(self, topic: str, consumer_group: str, expression: str | None, expression_type: str | None,
                 client_version: int) -> bool:
        """ConsumerFilterManager#register + FilterDataMapByTopic#register."""
        if ExpressionType.is_tag_type(expression_type) or not expression:
            return False
        bloom = self.bloom_filter.generate(consumer_group + "#" + topic)
        with self._lock:
            groups = self.filter_data_by_topic.setdefault(topic, {})
            old = groups.get(consumer_group)
            if old is None:
                data = build(topic, consumer_group, expression, expression_type, client_version)
                if data is None:
                    return False
                data.set_bloom(bloom)
                groups[consumer_group] = data
                log.info("New consumer filter registered: %s", data)
                return True
            if client_version <= old.client_version:
                if expression_type != old.expression_type or expression != old.expression:
                    log.info("Ignore consumer(%s:%s) filter, because of version %d <= %d, but maybe info changed!",
                             consumer_group, topic, client_version, old.client_version)
                if client_version == old.client_version and old.is_dead():
                    old.dead_time = 0  # reAlive
                    return True
                return False
            change = old.expression != expression or old.expression_type != expression_type
            if old.bloom_filter_data != bloom:
                change = True
            if change:
                data = build(topic, consumer_group, expression, expression_type, client_version)
                if data is None:
                    # new expression compile error, remove old, let client report error
                    groups.pop(consumer_group, None)
                    return False
                data.set_bloom(bloom)
                groups[consumer_group] = data
                log.info("Consumer filter info change, old: %s, new: %s", old, data)
                return True
            old.client_version = client_version
            if old.is_dead():
                old.dead_time = 0
            return True

    def unregister(self, consumer_group: str) -> None:
        """ConsumerFilterManager#unRegister: the group's filters become dead (kept for a while:
        messages dispatched meanwhile still carry their bits)."""
        now = _now_ms()
        with self._lock:
            for groups in self.filter_data_by_topic.values():
                data = groups.get(consumer_group)
                if data is not None and not data.is_dead():
                    log.info("Unregister consumer filter: %s, deadTime: %d", data, now)
                    data.dead_time = now

    # ---- lookup ----------------------------------------------------------------------------
    def get(self, topic: str | None, consumer_group: str) -> ConsumerFilterData | None:
        groups = self.filter_data_by_topic.get(topic) if topic is not None else None
        return groups.get(consumer_group) if groups else None

    def get_topic(self, topic: str) -> list[ConsumerFilterData] | None:
        """ConsumerFilterManager#get(topic): the topic's filters, None when it has none."""
        groups = self.filter_data_by_topic.get(topic)
        return list(groups.values()) if groups else None

    def get_by_group(self, consumer_group: str) -> list[ConsumerFilterData]:
        return [data for groups in list(self.filter_data_by_topic.values())
                for data in list(groups.values()) if data.consumer_group == consumer_group]

    def has_filters(self) -> bool:
        return bool(self.filter_data_by_topic)

    # ---- persistence -----------------------------------------------------------------------
    async def persist_if_used(self) -> None:
        """The periodic persist (every 10 s upstream), skipped while no filter was ever known."""
        if self.filter_data_by_topic or self._used:
            self._used = True  # keep writing once there was something: the file then empties too
            await self.persist_async()

    def clean(self, now: int | None = None) -> None:
        """ConsumerFilterManager#clean: filters dead for cleanTimeSpan go, then empty topics."""
        for topic, groups in list(self.filter_data_by_topic.items()):
            for group, data in list(groups.items()):
                if data.how_long_after_death(now) >= self.clean_time_span:
                    log.info("Remove filter consumer %s, died too long!", data)
                    del groups[group]
            if not groups:
                log.info("Topic has no consumer, remove it! %s", topic)
                del self.filter_data_by_topic[topic]

    def encode(self) -> dict[str, Any]:
        self.clean()
        return {"filterDataByTopic": {
            topic: {"groupFilterData": {g: d.to_json_dict() for g, d in sorted(groups.items())}, "topic": topic}
            for topic, groups in sorted(self.filter_data_by_topic.items())}}

    def parse(self, obj: Any) -> Any:
        if not isinstance(obj, dict):
            raise ValueError("consumerFilter.json: not an object")
        table: dict[str, dict[str, ConsumerFilterData]] = {}
        for topic, by_topic in (obj.get("filterDataByTopic") or {}).items():
            if not isinstance(by_topic, dict):
                continue
            groups: dict[str, ConsumerFilterData] = {}
            for group, raw in (by_topic.get("groupFilterData") or {}).items():
                if isinstance(raw, dict):
                    groups[group] = ConsumerFilterData.from_json_dict(raw)
            table[topic] = groups
        return table

    def apply(self, parsed: dict[str, dict[str, ConsumerFilterData]]) -> None:
        """ConsumerFilterManager#decode: compile each loaded filter, take its consumer as dead; a
        filter made by another bloom filter (m, k) discards the whole file."""
        now = _now_ms()
        for groups in parsed.values():
            for data in groups.values():
                try:
                    data.compiled_expression = compile_sql92(data.expression)
                except (FilterExpressionError, ValueError, TypeError):
                    log.exception("load filter data error, %s", data)
                if not self.bloom_filter.is_valid(data.bloom_filter_data):
                    log.info("Bloom filter is changed!So ignore all filter data persisted! %s, %s",
                             self.bloom_filter, data.bloom_filter_data)
                    return
                if data.dead_time == 0:
                    # we think all consumers are dead when load
                    dead = now - 30 * 1000
                    data.dead_time = data.born_time if dead <= data.born_time else dead
        self.filter_data_by_topic = parsed
        self._used = True
