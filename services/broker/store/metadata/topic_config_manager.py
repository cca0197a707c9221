"""TopicConfigManager: the broker's topic table, persisted as config/topics.json.

File shape (TopicConfigSerializeWrapper): {"topicConfigTable": {name: TopicConfig}, "dataVersion":
{"stateVersion", "timestamp", "counter"}}. The built-in system topics are created on start as
upstream's TopicConfigManager.init does; values from the file then overlay them.

Persistence (JournaledConfigManager): each change appends one line to topics.json.journal and
the snapshot is rewritten only once the journal is as long as the table, so creating or
deleting a topic costs the same with 10 topics or 1,000,000 (upstream's
TopicConfigManager#updateTopicConfig rewrites the whole file each time).
"""

from __future__ import annotations

import logging
from typing import Any

from orbitmq.broker.store.metadata.config_manager import JournaledConfigManager
from orbitmq.common import constants as C
from orbitmq.common.route import DataVersion
from orbitmq.common.topic_config import TopicConfig

log = logging.getLogger(__name__)

SCHEDULE_TOPIC_QUEUE_NUM = 18  # one queue per delay level
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"  # MixAll.REPLY_TOPIC_POSTFIX
SYNC_BROKER_MEMBER_GROUP_PREFIX = C.SYSTEM_TOPIC_PREFIX + "SYNC_BROKER_MEMBER_"


class TopicConfigManager(JournaledConfigManager):
    file_name = "topics.json"

    def __init__(
        self,
        config_dir: str,
        *,
        broker_cluster_name: str = C.DEFAULT_CLUSTER,
        broker_name: str = "broker-a",
        auto_create_topic_enable: bool = True,
        default_topic_queue_nums: int = 8,
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic_enable: bool = False,
        msg_trace_topic_name: str = C.RMQ_SYS_TRACE_TOPIC,
        revive_queue_num: int = 8,
        timer_wheel_enable: bool = True,
    ) -> None:
        super().__init__(config_dir)
        self.broker_cluster_name = broker_cluster_name
        self.broker_name = broker_name
        self.auto_create_topic_enable = auto_create_topic_enable
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics: set[str] = set()
        # Topics created or changed since the broker last told the NameServers about them
        # (BrokerController#registerIncrementBrokerData sends just these); insertion-ordered.
        self._unregistered: dict[str, None] = {}
        self._init_system_topics(
            default_topic_queue_nums=default_topic_queue_nums,
            cluster_topic_enable=cluster_topic_enable,
            broker_topic_enable=broker_topic_enable,
            trace_topic_enable=trace_topic_enable,
            msg_trace_topic_name=msg_trace_topic_name,
            revive_queue_num=revive_queue_num,
            timer_wheel_enable=timer_wheel_enable,
        )

    def _init_system_topics(
        self,
        *,
        default_topic_queue_nums: int,
        cluster_topic_enable: bool,
        broker_topic_enable: bool,
        trace_topic_enable: bool,
        msg_trace_topic_name: str,
        revive_queue_num: int,
        timer_wheel_enable: bool,
    ) -> None:
        rw = C.PERM_READ | C.PERM_WRITE

        def add(name: str, queues: int | None = None, perm: int | None = None) -> None:
            tc = TopicConfig(name)
            if queues is not None:
                tc.read_queue_nums = tc.write_queue_nums = queues
            if perm is not None:
                tc.perm = perm
            self.topic_config_table[name] = tc
            self.system_topics.add(name)

        add(C.RMQ_SYS_SELF_TEST_TOPIC, 1)
        if self.auto_create_topic_enable:
            # The template auto-created topics copy: PERM_INHERIT marks it as one.
            add(C.AUTO_CREATE_TOPIC_KEY_TOPIC, default_topic_queue_nums, C.PERM_INHERIT | rw)
        add(C.RMQ_SYS_BENCHMARK_TOPIC, 1024)
        add(self.broker_cluster_name, None, C.PERM_INHERIT | (rw if cluster_topic_enable else 0))
        add(self.broker_name, 1, C.PERM_INHERIT | (rw if broker_topic_enable else 0))
        add(C.RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        add(C.RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if trace_topic_enable:
            add(msg_trace_topic_name, 1)
        add(self.broker_cluster_name + "_" + REPLY_TOPIC_POSTFIX, 1)
        add(C.revive_topic(self.broker_cluster_name), revive_queue_num)
        add(SYNC_BROKER_MEMBER_GROUP_PREFIX + self.broker_name, 1, C.PERM_INHERIT)
        add(C.RMQ_SYS_TRANS_HALF_TOPIC, 1)
        add(C.RMQ_SYS_TRANS_OP_HALF_TOPIC, 1)
        if timer_wheel_enable:
            add(C.RMQ_SYS_WHEEL_TIMER_TOPIC, 1)

    # ---- JSON ----------------------------------------------------------------------------
    def journal_table(self) -> dict[str, TopicConfig]:
        return self.topic_config_table

    def encode_entry(self, value: TopicConfig) -> dict[str, Any]:
        return value.to_json_dict()

    def decode_entry(self, obj: dict[str, Any]) -> TopicConfig:
        return TopicConfig.from_json_dict(obj)

    def snapshot_state(self) -> Any:
        # TopicConfigs are replaced in the table, never changed in place: a shallow copy is a
        # snapshot, and the O(table) encoding runs after the lock is released.
        return dict(self.topic_config_table), self.data_version.to_json_dict()

    def encode_snapshot(self, state: Any) -> dict[str, Any]:
        table, version = state
        return {"topicConfigTable": {name: tc.to_json_dict() for name, tc in table.items()}, "dataVersion": version}

    def encode(self) -> dict[str, Any]:
        return {
            "topicConfigTable": {name: tc.to_json_dict() for name, tc in self.topic_config_table.items()},
            "dataVersion": self.data_version.to_json_dict(),
        }

    def parse(self, obj: Any) -> tuple[dict[str, TopicConfig], DataVersion]:
        if not isinstance(obj, dict) or not isinstance(obj.get("topicConfigTable", {}), dict):
            raise ValueError("topics.json: expected {'topicConfigTable': {...}, 'dataVersion': {...}}")
        table = {name: TopicConfig.from_json_dict(d) for name, d in obj.get("topicConfigTable", {}).items()}
        return table, DataVersion.from_json_dict(obj.get("dataVersion"))

    def apply(self, parsed: tuple[dict[str, TopicConfig], DataVersion]) -> None:
        table, version = parsed
        self.topic_config_table.update(table)
        self.data_version.assign_new_one(version)

    def record_put(self, name: str, value: TopicConfig) -> int:
        self._unregistered[name] = None
        return super().record_put(name, value)

    def take_unregistered(self) -> list[TopicConfig]:
        """The current configs of the topics changed since the last call (deleted ones left out)."""
        with self._lock:
            names, self._unregistered = self._unregistered, {}
            return [tc for tc in map(self.topic_config_table.get, names) if tc is not None]

    # ---- queries -------------------------------------------------------------------------
    def select_topic_config(self, topic: str) -> TopicConfig | None:
        with self._lock:
            return self.topic_config_table.get(topic)

    get = select_topic_config

    def __contains__(self, topic: str) -> bool:
        with self._lock:
            return topic in self.topic_config_table

    def topic_names(self) -> list[str]:
        with self._lock:
            return list(self.topic_config_table)

    def all(self) -> list[TopicConfig]:
        with self._lock:
            return list(self.topic_config_table.values())

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic in C.SYSTEM_TOPIC_SET or topic.startswith(C.SYSTEM_TOPIC_PREFIX)

    # ---- changes (each bumps dataVersion and is journaled; callers then sync_async()) ------
    def put(self, tc: TopicConfig) -> TopicConfig | None:
        """Create or replace a topic; returns the previous config."""
        with self._lock:
            old = self.topic_config_table.get(tc.topic_name)
            self.topic_config_table[tc.topic_name] = tc
            self.data_version.next_version()
            self.record_put(tc.topic_name, tc)
            return old

    def put_all(self, configs: list[TopicConfig]) -> None:
        """TopicConfigManager#updateTopicConfigList: one dataVersion step for the whole list."""
        with self._lock:
            for tc in configs:
                self.topic_config_table[tc.topic_name] = tc
            self.data_version.next_version()
            for tc in configs:
                self.record_put(tc.topic_name, tc)

    def delete(self, topic: str) -> TopicConfig | None:
        with self._lock:
            old = self.topic_config_table.pop(topic, None)
            if old is not None:
                self.data_version.next_version()
                self.record_delete(topic)
            return old

    async def update_topic_config(self, tc: TopicConfig) -> TopicConfig | None:
        """put(), durable on return (UPDATE_AND_CREATE_TOPIC): one journal line, not the table."""
        old = self.put(tc)
        await self.sync_async()
        return old

    async def update_topic_config_list(self, configs: list[TopicConfig]) -> None:
        self.put_all(configs)
        await self.sync_async()

    async def delete_topic_config(self, topic: str) -> TopicConfig | None:
        old = self.delete(topic)
        if old is not None:
            await self.sync_async()
        return old

    def create_topic_in_send_message_method(
        self, topic: str, default_topic: str, client_default_topic_queue_nums: int, topic_sys_flag: int = 0
    ) -> tuple[TopicConfig | None, bool]:
        """Auto-create `topic` from the template `default_topic` (normally TBW102).

        Returns (config, created). The caller persists and re-registers with the NameServers
        when created is True. None when the template is missing or not inheritable.
        """
        with self._lock:
            existing = self.topic_config_table.get(topic)
            if existing is not None:
                return existing, False
            template = self.topic_config_table.get(default_topic)
            if template is None:
                log.warning("create topic %s: default topic %s does not exist", topic, default_topic)
                return None, False
            template_perm = template.perm
            if default_topic == C.AUTO_CREATE_TOPIC_KEY_TOPIC and not self.auto_create_topic_enable:
                template_perm = C.PERM_READ | C.PERM_WRITE
            if not C.is_inherited(template_perm):
                log.warning("create topic %s: default topic %s has no inherit permission", topic, default_topic)
                return None, False
            queue_nums = max(0, min(client_default_topic_queue_nums, template.write_queue_nums))
            tc = TopicConfig(
                topic,
                read_queue_nums=queue_nums,
                write_queue_nums=queue_nums,
                perm=template_perm & ~C.PERM_INHERIT,
                topic_filter_type=template.topic_filter_type,
                topic_sys_flag=topic_sys_flag,
            )
            self.topic_config_table[topic] = tc
            self.data_version.next_version()
            self.record_put(topic, tc)
            return tc, True

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_topic_queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> tuple[TopicConfig, bool]:
        """Create a retry/DLQ topic if absent (CONSUMER_SEND_MSG_BACK); returns (config, created)."""
        with self._lock:
            existing = self.topic_config_table.get(topic)
            if existing is not None:
                return existing, False
            tc = TopicConfig(
                topic,
                read_queue_nums=client_default_topic_queue_nums,
                write_queue_nums=client_default_topic_queue_nums,
                perm=perm,
                topic_sys_flag=topic_sys_flag,
            )
            self.topic_config_table[topic] = tc
            self.data_version.next_version()
            self.record_put(topic, tc)
            return tc, True

    def serialize_wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper JSON, e.g. for REGISTER_BROKER / GET_ALL_TOPIC_CONFIG."""
        return self.encode_json()
