"""Consumer groups as announced by heartbeats (RocketMQ's ConsumerManager / ConsumerGroupInfo).

Rebalancing clients ask the broker who is in their group (GET_CONSUMER_LIST_BY_GROUP), so the
table must follow membership closely: a heartbeat adds, UNREGISTER_CLIENT or a closed
connection removes, and a channel silent for ``channel_expired_millis`` is dropped by a scan.
Every membership change is reported to ``on_ids_changed`` so that the broker can push
NOTIFY_CONSUMER_IDS_CHANGED to the remaining members at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .channel_info import ClientChannelInfo, channel_remote_addr, now_ms

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_MILLIS = 120_000
SUBSCRIPTION_EXPIRED_MILLIS = 600_000  # BrokerConfig#subscriptionExpiredTimeout


@dataclass
class ConsumerGroupInfo:
    group_name: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    # channel -> ClientChannelInfo; channels are hashable connection objects.
    channel_info_table: dict[Any, ClientChannelInfo] = field(default_factory=dict)
    # topic -> subscription data as sent by the client (RocketMQ's SubscriptionData JSON).
    subscription_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_update_timestamp: int = field(default_factory=now_ms)

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def channels(self) -> list[Any]:
        return list(self.channel_info_table)

    def update_channel(self, info: ClientChannelInfo, consume_type: str, message_model: str,
                       consume_from_where: str) -> bool:
        """Returns True when the channel is new to the group (a membership change)."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        old = self.channel_info_table.get(info.channel)
        if old is None:
            self.channel_info_table[info.channel] = info
            log.info("new consumer connected, group: %s channel: %s client: %s", self.group_name,
                     channel_remote_addr(info.channel), info.client_id)
            changed = True
        else:
            if old.client_id != info.client_id:
                log.warning("consumer channel exists in broker but clientId differs, group: %s "
                            "old: %s new: %s", self.group_name, old.client_id, info.client_id)
                self.channel_info_table[info.channel] = info
            else:
                old.last_update_timestamp = now_ms()
                old.properties = info.properties
            changed = False
        self.last_update_timestamp = now_ms()
        return changed

    def update_subscription(self, subscriptions: list[dict[str, Any]]) -> bool:
        """Replaces the group's subscription set; True when topics were added or removed."""
        new_table = {sub["topic"]: sub for sub in subscriptions if isinstance(sub.get("topic"), str)}
        changed = set(new_table) != set(self.subscription_table)
        for topic, sub in new_table.items():
            old = self.subscription_table.get(topic)
            # Keep the newest version only, like upstream (subVersion is the client's clock).
            if old is None or _sub_version(sub) > _sub_version(old):
                self.subscription_table[topic] = sub
        for topic in [t for t in self.subscription_table if t not in new_table]:
            del self.subscription_table[topic]
        self.last_update_timestamp = now_ms()
        return changed

    def remove_channel(self, channel: Any) -> ClientChannelInfo | None:
        return self.channel_info_table.pop(channel, None)


def _sub_version(sub: dict[str, Any]) -> int:
    try:
        return int(sub.get("subVersion", 0))
    except (TypeError, ValueError):
        return 0


IdsChangedListener = Callable[[str, list[Any]], None]


class ConsumerManager:
    def __init__(self, on_ids_changed: IdsChangedListener | None = None,
                 channel_expired_millis: int = CHANNEL_EXPIRED_MILLIS) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        # consumerCompensationTable: what consumers without a heartbeat (pull consumers naming their
        # subscription in each pull, consumers through a proxy) are known by, so admin queries
        # still find their subscription; it expires with subscriptionExpiredTimeout.
        self.compensation_table: dict[str, ConsumerGroupInfo] = {}
        self.subscription_expired_millis = SUBSCRIPTION_EXPIRED_MILLIS
        self._on_ids_changed = on_ids_changed
        self.channel_expired_millis = channel_expired_millis
        # ConsumerGroupEvent.REGISTER (every heartbeat with subscriptions: group, subscriptions)
        # and UNREGISTER (the group's last channel went: group), as DefaultConsumerIdsChangeListener
        # hands them to ConsumerFilterManager.
        self.on_register: Callable[[str, list[dict[str, Any]]], None] | None = None
        self.on_unregister: Callable[[str], None] | None = None

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_subscription_data(self, group: str, topic: str, from_compensation: bool = True) -> dict[str, Any] | None:
        """ConsumerManager#findSubscriptionData: a member's heartbeat first, else (by default) what
        the group's pulls compensated."""
        info = self.consumer_table.get(group)
        if info is not None:
            sub = info.subscription_table.get(topic)
            if sub is not None:
                return sub
        if from_compensation:
            compensated = self.compensation_table.get(group)
            if compensated is not None:
                return compensated.subscription_table.get(topic)
        return None

    def compensate_basic_consumer_info(self, group: str, consume_type: str, message_model: str) -> None:
        """ConsumerManager#compensateBasicConsumerInfo, for every pull."""
        info = self.compensation_table.get(group)
        if info is None:
            info = self.compensation_table[group] = ConsumerGroupInfo(group)
        info.consume_type, info.message_model = consume_type, message_model

    def compensate_subscribe_data(self, group: str, topic: str, subscription: dict[str, Any]) -> None:
        """ConsumerManager#compensateSubscribeData: a pull that carried its subscription."""
        info = self.compensation_table.get(group)
        if info is None:
            info = self.compensation_table[group] = ConsumerGroupInfo(group)
        info.subscription_table[topic] = subscription

    def remove_expire_consumer_group_info(self, now: int | None = None) -> None:
        """ConsumerManager#removeExpireConsumerGroupInfo: compensated subscriptions older than
        subscriptionExpiredTimeout (by their subVersion, the time they were built) go, and a group
        left with none goes too."""
        deadline = (now_ms() if now is None else now) - self.subscription_expired_millis
        for group, info in list(self.compensation_table.items()):
            table = info.subscription_table
            for topic, sub in list(table.items()):
                version = sub.get("subVersion")
                if isinstance(version, int) and version < deadline:
                    del table[topic]
                    if not table:
                        self.compensation_table.pop(group, None)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        if info is None:
            return None
        for channel_info in info.channel_info_table.values():
            if channel_info.client_id == client_id:
                return channel_info
        return None

    def register_consumer(self, group: str, channel_info: ClientChannelInfo, consume_type: str,
                          message_model: str, consume_from_where: str,
                          subscriptions: list[dict[str, Any]], notify: bool) -> bool:
        info = self.consumer_table.get(group)
        if info is None:
            info = self.consumer_table[group] = ConsumerGroupInfo(group)
        channel_changed = info.update_channel(channel_info, consume_type, message_model,
                                              consume_from_where)
        sub_changed = info.update_subscription(subscriptions)
        if channel_changed and notify:
            self._notify(group, info)
        self._event(self.on_register, group, subscriptions)
        return channel_changed or sub_changed

    def register_consumer_without_sub(self, group: str, channel_info: ClientChannelInfo, consume_type: str,
                                      message_model: str, consume_from_where: str, notify: bool) -> bool:
        """ConsumerManager#registerConsumerWithoutSub: a heartbeat V2 whose subscription did not
        change (its fingerprint is the one last sent) refreshes the channel and keeps the group's
        subscriptions as they are."""
        info = self.consumer_table.get(group)
        if info is None:
            info = self.consumer_table[group] = ConsumerGroupInfo(group)
        channel_changed = info.update_channel(channel_info, consume_type, message_model, consume_from_where)
        if channel_changed and notify:
            self._notify(group, info)
        return channel_changed

    def unregister_consumer(self, group: str, channel: Any, notify: bool) -> None:
        info = self.consumer_table.get(group)
        if info is None:
            return
        if info.remove_channel(channel) is not None:
            log.info("unregister consumer ok, group: %s channel: %s", group, channel_remote_addr(channel))
            if not info.channel_info_table:
                del self.consumer_table[group]
                self._event(self.on_unregister, group)
            elif notify:
                self._notify(group, info)

    def do_channel_close_event(self, channel: Any) -> None:
        for group, info in list(self.consumer_table.items()):
            if info.remove_channel(channel) is not None:
                log.info("consumer channel closed, group: %s channel: %s", group,
                         channel_remote_addr(channel))
                if not info.channel_info_table:
                    del self.consumer_table[group]
                    self._event(self.on_unregister, group)
                else:
                    self._notify(group, info)

    def scan_not_active_channel(self) -> list[Any]:
        """Drops channels silent for longer than the expiry; returns them so they can be closed."""
        expired: list[Any] = []
        deadline = now_ms() - self.channel_expired_millis
        for group, info in list(self.consumer_table.items()):
            stale = [ch for ch, ci in info.channel_info_table.items() if ci.last_update_timestamp < deadline]
            for channel in stale:
                log.warning("consumer channel expired, group: %s channel: %s", group,
                            channel_remote_addr(channel))
                info.remove_channel(channel)
                expired.append(channel)
            if not info.channel_info_table:
                del self.consumer_table[group]
            elif stale:
                self._notify(group, info)
        self.remove_expire_consumer_group_info()  # ConsumerManager#scanNotActiveChannel ends so too
        return expired

    def groups_subscribing(self, topic: str) -> list[str]:
        return [g for g, info in self.consumer_table.items() if topic in info.subscription_table]

    @staticmethod
    def _event(listener: Callable[..., None] | None, *args: Any) -> None:
        if listener is not None:
            try:
                listener(*args)
            except Exception:
                log.exception("consumer group event listener %r failed", listener)

    def _notify(self, group: str, info: ConsumerGroupInfo) -> None:
        if self._on_ids_changed is not None:
            self._on_ids_changed(group, info.channels())
