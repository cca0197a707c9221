"""SubscriptionGroupManager: consumer-group settings, persisted as config/subscriptionGroup.json.

File shape: {"subscriptionGroupTable": {group: SubscriptionGroupConfig}, "forbiddenTable": {...},
"dataVersion": {...}}. The built-in system groups are created on start as upstream does.
"""

from __future__ import annotations

import logging
from typing import Any

from orbitmq.broker.store.metadata.config_manager import JournaledConfigManager
from orbitmq.common import constants as C
from orbitmq.common.route import DataVersion
from orbitmq.common.subscription_group import SubscriptionGroupConfig

log = logging.getLogger(__name__)

# SubscriptionGroupManager.init, in upstream's order.
SYSTEM_GROUPS: tuple[str, ...] = (
    C.TOOLS_CONSUMER_GROUP,
    C.FILTERSRV_CONSUMER_GROUP,
    C.SELF_TEST_CONSUMER_GROUP,
    C.ONS_HTTP_PROXY_GROUP,
    C.CID_ONSAPI_PULL_GROUP,
    C.CID_ONSAPI_PERMISSION_GROUP,
    C.CID_ONSAPI_OWNER_GROUP,
    C.CID_SYS_RMQ_TRANS,
)


class SubscriptionGroupManager(JournaledConfigManager):
    file_name = "subscriptionGroup.json"

    def __init__(self, config_dir: str, *, auto_create_subscription_group: bool = True) -> None:
        super().__init__(config_dir)
        self.auto_create_subscription_group = auto_create_subscription_group
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}
        # group -> topic -> forbidden bitmap (kept for file compatibility; see upstream forbiddenTable).
        self.forbidden_table: dict[str, dict[str, int]] = {}
        self.data_version = DataVersion()
        for group in SYSTEM_GROUPS:
            self.subscription_group_table[group] = SubscriptionGroupConfig(group, consume_broadcast_enable=True)

    # ---- JSON ----------------------------------------------------------------------------
    # Journaled as topics.json is (JournaledConfigManager): a change is one line of
    # subscriptionGroup.json.journal; the forbidden table changes only with a snapshot.
    def journal_table(self) -> dict[str, SubscriptionGroupConfig]:
        return self.subscription_group_table

    def encode_entry(self, value: SubscriptionGroupConfig) -> dict[str, Any]:
        return value.to_json_dict()

    def decode_entry(self, obj: dict[str, Any]) -> SubscriptionGroupConfig:
        return SubscriptionGroupConfig.from_json_dict(obj)

    def on_replayed_delete(self, name: str) -> None:
        self.forbidden_table.pop(name, None)

    def snapshot_state(self) -> Any:
        return (dict(self.subscription_group_table), {g: dict(t) for g, t in self.forbidden_table.items()},
                self.data_version.to_json_dict())

    def encode_snapshot(self, state: Any) -> dict[str, Any]:
        table, forbidden, version = state
        return {"subscriptionGroupTable": {name: cfg.to_json_dict() for name, cfg in table.items()},
                "forbiddenTable": forbidden, "dataVersion": version}

    def encode(self) -> dict[str, Any]:
        return {
            "subscriptionGroupTable": {
                name: cfg.to_json_dict() for name, cfg in self.subscription_group_table.items()
            },
            "forbiddenTable": {g: dict(t) for g, t in self.forbidden_table.items()},
            "dataVersion": self.data_version.to_json_dict(),
        }

    def parse(self, obj: Any) -> tuple[dict[str, SubscriptionGroupConfig], dict[str, dict[str, int]], DataVersion]:
        if not isinstance(obj, dict) or not isinstance(obj.get("subscriptionGroupTable", {}), dict):
            raise ValueError("subscriptionGroup.json: expected {'subscriptionGroupTable': {...}, ...}")
        table = {
            name: SubscriptionGroupConfig.from_json_dict(d)
            for name, d in obj.get("subscriptionGroupTable", {}).items()
        }
        forbidden = {
            str(g): {str(t): int(v) for t, v in topics.items()}
            for g, topics in (obj.get("forbiddenTable") or {}).items()
        }
        return table, forbidden, DataVersion.from_json_dict(obj.get("dataVersion"))

    def apply(self, parsed) -> None:
        table, forbidden, version = parsed
        self.subscription_group_table.update(table)
        self.forbidden_table.update(forbidden)
        self.data_version.assign_new_one(version)

    # ---- queries -------------------------------------------------------------------------
    def get(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            return self.subscription_group_table.get(group)

    def __contains__(self, group: str) -> bool:
        with self._lock:
            return group in self.subscription_group_table

    def all(self) -> list[SubscriptionGroupConfig]:
        with self._lock:
            return list(self.subscription_group_table.values())

    def find_subscription_group_config(self, group: str) -> tuple[SubscriptionGroupConfig | None, bool]:
        """The group's config, auto-created with defaults when autoCreateSubscriptionGroup is on.

        Returns (config, created); the caller persists when created is True.
        """
        with self._lock:
            cfg = self.subscription_group_table.get(group)
            if cfg is not None:
                return cfg, False
            if not self.auto_create_subscription_group:
                return None, False
            cfg = SubscriptionGroupConfig(group)
            self.subscription_group_table[group] = cfg
            self.data_version.next_version()
            self.record_put(group, cfg)
            return cfg, True

    # ---- changes -------------------------------------------------------------------------
    def put(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig | None:
        with self._lock:
            old = self.subscription_group_table.get(cfg.group_name)
            self.subscription_group_table[cfg.group_name] = cfg
            self.data_version.next_version()
            self.record_put(cfg.group_name, cfg)
            return old

    def delete(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            old = self.subscription_group_table.pop(group, None)
            self.forbidden_table.pop(group, None)
            if old is not None:
                self.data_version.next_version()
                self.record_delete(group)
            return old

    async def update_subscription_group_config(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig | None:
        """put(), durable on return (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP): one journal line."""
        old = self.put(cfg)
        await self.sync_async()
        return old

    async def delete_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        old = self.delete(group)
        if old is not None:
            await self.sync_async()
        return old
