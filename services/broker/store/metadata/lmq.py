"""The broker's metadata managers with enableLmq (RIP-28): Light Message Queues need no topic
config, %LMQ% groups no subscription group config, and %LMQ% groups' offsets live apart.

BrokerController takes these instead of the plain managers when the store config says
enableLmq, as upstream's BrokerController picks LmqTopicConfigManager,
LmqSubscriptionGroupManager and LmqConsumerOffsetManager.
"""

from __future__ import annotations

import logging
from typing import Any

from orbitmq.broker.store.metadata.consumer_offset_manager import (
    TOPIC_GROUP_SEPARATOR,
    ConsumerOffsetManager,
    offset_key,
)
from orbitmq.broker.store.metadata.subscription_group_manager import SubscriptionGroupManager
from orbitmq.broker.store.metadata.topic_config_manager import TopicConfigManager
from orbitmq.common.constants import PERM_READ, PERM_WRITE, is_lmq
from orbitmq.common.route import DataVersion
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig

log = logging.getLogger(__name__)


def simple_lmq_topic_config(topic: str) -> TopicConfig:
    """LmqTopicConfigManager#simpleLmqTopicConfig: one queue, readable and writable."""
    return TopicConfig(topic, read_queue_nums=1, write_queue_nums=1, perm=PERM_READ | PERM_WRITE)


class LmqTopicConfigManager(TopicConfigManager):
    """LmqTopicConfigManager: every %LMQ% topic exists, with a config made on each lookup and
    never stored (so the NameServer never hears of it)."""

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        if is_lmq(topic):
            return simple_lmq_topic_config(topic)
        return super().select_topic_config(topic)

    get = select_topic_config

    def __contains__(self, topic: str) -> bool:
        return is_lmq(topic) or super().__contains__(topic)

    def put(self, tc: TopicConfig) -> TopicConfig | None:
        if tc is None or is_lmq(tc.topic_name):  # updateTopicConfig ignores LMQ topics
            return None
        return super().put(tc)

    def put_all(self, configs: list[TopicConfig]) -> None:
        super().put_all([tc for tc in configs if tc is not None and not is_lmq(tc.topic_name)])


class LmqSubscriptionGroupManager(SubscriptionGroupManager):
    """LmqSubscriptionGroupManager: every %LMQ% group exists with the default config, made on
    each lookup and never stored."""

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        if is_lmq(group):
            return SubscriptionGroupConfig(group)
        return super().get(group)

    def __contains__(self, group: str) -> bool:
        return is_lmq(group) or super().__contains__(group)

    def find_subscription_group_config(self, group: str) -> tuple[SubscriptionGroupConfig | None, bool]:
        if is_lmq(group):
            return SubscriptionGroupConfig(group), False
        return super().find_subscription_group_config(group)

    def put(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig | None:
        if cfg is None or is_lmq(cfg.group_name):  # updateSubscriptionGroupConfig ignores LMQ groups
            return None
        return super().put(cfg)


class LmqConsumerOffsetManager(ConsumerOffsetManager):
    """LmqConsumerOffsetManager: a %LMQ% group's offset is one number per topic ("topic@group"
    in lmqOffsetTable, whatever the queue id); other groups' as ConsumerOffsetManager keeps
    them. The whole table is persisted as config/lmqConsumerOffset.json
    (BrokerPathConfigHelper#getLmqConsumerOffsetPath), consumerOffset.json's shape with
    "lmqOffsetTable" added."""

    file_name = "lmqConsumerOffset.json"

    def __init__(self, config_dir: str, *, update_version_step: int = 500) -> None:
        super().__init__(config_dir, update_version_step=update_version_step)
        self.lmq_offset_table: dict[str, int] = {}

    def encode(self) -> dict[str, Any]:
        obj = super().encode()
        with self._lock:
            obj["lmqOffsetTable"] = dict(self.lmq_offset_table)
        return obj

    def parse(self, obj: Any) -> tuple[dict[str, dict[int, int]], DataVersion, dict[str, int]]:
        table, version = super().parse(obj)
        raw = obj.get("lmqOffsetTable") or {}
        if not isinstance(raw, dict):
            raise ValueError("lmqConsumerOffset.json: expected 'lmqOffsetTable': {...}")
        return table, version, {str(k): int(v) for k, v in raw.items()}

    def apply(self, parsed: tuple[dict[str, dict[int, int]], DataVersion, dict[str, int]]) -> None:
        table, version, lmq = parsed
        super().apply((table, version))
        self.lmq_offset_table = lmq

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, client_host: str = "") -> None:
        if not is_lmq(group):
            super().commit_offset(group, topic, queue_id, offset, client_host)
            return
        with self._lock:
            self.lmq_offset_table[offset_key(topic, group)] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        if not is_lmq(group):
            return super().query_offset(group, topic, queue_id)
        with self._lock:
            return self.lmq_offset_table.get(offset_key(topic, group), -1)

    def query_group_offsets(self, group: str, topic: str) -> dict[int, int]:
        if not is_lmq(group):
            return super().query_group_offsets(group, topic)
        with self._lock:
            offset = self.lmq_offset_table.get(offset_key(topic, group))
        return {} if offset is None else {0: offset}

    def query_group(self, group: str) -> dict[str, dict[int, int]]:
        if not is_lmq(group):
            return super().query_group(group)
        with self._lock:
            return {key.split(TOPIC_GROUP_SEPARATOR)[0]: {0: offset} for key, offset in self.lmq_offset_table.items()
                    if len(parts := key.split(TOPIC_GROUP_SEPARATOR)) == 2 and parts[1] == group}

    def remove_offset(self, group: str) -> list[str]:
        if not is_lmq(group):
            return super().remove_offset(group)
        with self._lock:
            removed = [key for key in self.lmq_offset_table
                       if len(parts := key.split(TOPIC_GROUP_SEPARATOR)) == 2 and parts[1] == group]
            for key in removed:
                del self.lmq_offset_table[key]
        for key in removed:
            log.warning("clean lmq group offset %s", key)
        return removed

    def clean_deleted_topics(self, existing_topics: Any) -> list[str]:
        """LMQ topics exist without a topic config (LmqTopicConfigManager#containsTopic): their
        offsets stay."""
        alive = set(existing_topics)
        with self._lock:
            return self._remove_where(lambda t, _g: t not in alive and not is_lmq(t))
