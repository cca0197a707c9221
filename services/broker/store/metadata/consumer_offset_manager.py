"""ConsumerOffsetManager: committed consume offsets, persisted as config/consumerOffset.json.

File shape: {"offsetTable": {"topic@group": {"0": 12, ...}}, "dataVersion": {...}} (JSON object
keys are strings; queue ids are ints in memory). The broker persists it every
flushConsumerOffsetInterval (5 s) with persist_async().
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from orbitmq.broker.store.metadata.config_manager import JsonConfigManager
from orbitmq.common.route import DataVersion

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


def offset_key(topic: str, group: str) -> str:
    return topic + TOPIC_GROUP_SEPARATOR + group


def split_key(key: str) -> tuple[str, str] | None:
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


class ConsumerOffsetManager(JsonConfigManager):
    file_name = "consumerOffset.json"

    def __init__(self, config_dir: str, *, update_version_step: int = 500) -> None:
        super().__init__(config_dir)
        self.offset_table: dict[str, dict[int, int]] = {}
        # Server-side resets win over the next client commit's stale value (useServerSideResetOffset).
        self.reset_offset_table: dict[str, dict[int, int]] = {}
        self.pull_offset_table: dict[str, dict[int, int]] = {}
        self.data_version = DataVersion()
        # consumerOffsetUpdateVersionStep: commits are frequent, so the version moves every N.
        self.update_version_step = max(1, update_version_step)
        self._commits = 0

    # ---- JSON ----------------------------------------------------------------------------
    def encode(self) -> dict[str, Any]:
        return {
            "offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.offset_table.items()},
            "dataVersion": self.data_version.to_json_dict(),
        }

    def parse(self, obj: Any) -> tuple[dict[str, dict[int, int]], DataVersion]:
        if not isinstance(obj, dict) or not isinstance(obj.get("offsetTable", {}), dict):
            raise ValueError("consumerOffset.json: expected {'offsetTable': {...}}")
        table = {
            str(k): {int(q): int(o) for q, o in v.items()} for k, v in (obj.get("offsetTable") or {}).items()
        }
        return table, DataVersion.from_json_dict(obj.get("dataVersion"))

    def apply(self, parsed: tuple[dict[str, dict[int, int]], DataVersion]) -> None:
        table, version = parsed
        self.offset_table = table
        self.data_version.assign_new_one(version)

    # ---- commit / query ------------------------------------------------------------------
    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, client_host: str = "") -> None:
        key = offset_key(topic, group)
        with self._lock:
            old = self.offset_table.setdefault(key, {}).get(queue_id)
            self.offset_table[key][queue_id] = offset
            if old is not None and offset < old:
                log.warning(
                    "[NOTIFYME]update consumer offset less than store. clientHost=%s, key=%s, queueId=%d, "
                    "requestOffset=%d, storeOffset=%d", client_host, key, queue_id, offset, old,
                )
            self._commits += 1
            if self._commits % self.update_version_step == 0:
                self.data_version.next_version()

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset (or a pending server-side reset); -1 when none."""
        key = offset_key(topic, group)
        with self._lock:
            reset = self.reset_offset_table.get(key)
            if reset is not None and queue_id in reset:
                return reset[queue_id]
            return self.offset_table.get(key, {}).get(queue_id, -1)

    def query_group_offsets(self, group: str, topic: str) -> dict[int, int]:
        """All queues' committed offsets of (group, topic); empty when the group never committed."""
        with self._lock:
            return dict(self.offset_table.get(offset_key(topic, group), {}))

    def query_group(self, group: str) -> dict[str, dict[int, int]]:
        """Every topic's offsets of one group: {topic: {queueId: offset}}."""
        with self._lock:
            out: dict[str, dict[int, int]] = {}
            for key, offsets in self.offset_table.items():
                tg = split_key(key)
                if tg is not None and tg[1] == group:
                    out[tg[0]] = dict(offsets)
            return out

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return set(self.query_group(group))

    def which_group_by_topic(self, topic: str) -> set[str]:
        with self._lock:
            return {tg[1] for k in self.offset_table if (tg := split_key(k)) is not None and tg[0] == topic}

    def pull_offset_snapshot(self) -> dict[str, dict[str, int]]:
        """pullOffsetTable as ConsumerOffsetManager's getter shows it (queue ids as JSON keys)."""
        with self._lock:
            return {key: {str(q): o for q, o in table.items()} for key, table in self.pull_offset_table.items()}

    def commit_pull_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.pull_offset_table.setdefault(offset_key(topic, group), {})[queue_id] = offset

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        with self._lock:
            offset = self.pull_offset_table.get(offset_key(topic, group), {}).get(queue_id)
        return offset if offset is not None else self.query_offset(group, topic, queue_id)

    # ---- reset ---------------------------------------------------------------------------
    def reset_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Set offsets server-side (resetOffsetByTime / admin), visible to the next query."""
        if not group or not topic:
            raise ValueError("reset offset needs a group and a topic")
        for q, o in offsets.items():
            if q < 0 or o < 0:
                raise ValueError(f"illegal reset offset queueId={q} offset={o}")
        key = offset_key(topic, group)
        with self._lock:
            self.reset_offset_table.setdefault(key, {}).update(offsets)
            self.offset_table.setdefault(key, {}).update(offsets)
            self.data_version.next_version()

    def has_offset_reset(self, group: str, topic: str, queue_id: int) -> bool:
        with self._lock:
            return queue_id in self.reset_offset_table.get(offset_key(topic, group), {})

    def query_then_erase_reset_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        with self._lock:
            table = self.reset_offset_table.get(offset_key(topic, group))
            return None if table is None else table.pop(queue_id, None)

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        with self._lock:
            offsets = self.offset_table.get(offset_key(topic, src_group))
            if offsets is not None:
                self.offset_table[offset_key(topic, dest_group)] = dict(offsets)
                self.data_version.next_version()

    # ---- delete --------------------------------------------------------------------------
    def _remove_where(self, match) -> list[str]:
        removed = []
        for table in (self.offset_table, self.reset_offset_table, self.pull_offset_table):
            for key in [k for k in table if (tg := split_key(k)) is not None and match(*tg)]:
                del table[key]
                if table is self.offset_table:
                    removed.append(key)
        if removed:
            self.data_version.next_version()
        return removed

    def remove_offset(self, group: str) -> list[str]:
        """Drop every offset of a deleted group; returns the removed topic@group keys."""
        with self._lock:
            removed = self._remove_where(lambda _t, g: g == group)
        if removed:
            log.info("removed offsets of group %s: %s", group, removed)
        return removed

    def clean_offset_by_topic(self, topic: str) -> list[str]:
        """Drop every group's offsets of a deleted topic."""
        with self._lock:
            removed = self._remove_where(lambda t, _g: t == topic)
        if removed:
            log.info("removed offsets of topic %s: %s", topic, removed)
        return removed

    def remove_consumer_offset(self, group: str, topic: str) -> bool:
        with self._lock:
            return bool(self._remove_where(lambda t, g: t == topic and g == group))

    def clean_deleted_topics(self, existing_topics: Iterable[str]) -> list[str]:
        """Drop offsets whose topic no longer exists in the topic table."""
        alive = set(existing_topics)
        with self._lock:
            return self._remove_where(lambda t, _g: t not in alive)
