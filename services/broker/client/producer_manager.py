"""Producer groups as announced by heartbeats (RocketMQ's ProducerManager).

The broker needs producers only to reach them again (transaction checks) and for
connection listings, so the table is group -> channel -> ClientChannelInfo with the same
120 s expiry as consumers.
"""

from __future__ import annotations

import logging
from typing import Any

from .channel_info import ClientChannelInfo, channel_remote_addr, now_ms

log = logging.getLogger(__name__)


class ProducerManager:
    def __init__(self, channel_expired_millis: int = 120_000) -> None:
        self.group_channel_table: dict[str, dict[Any, ClientChannelInfo]] = {}
        self.channel_expired_millis = channel_expired_millis
        # client id -> its newest channel: where replies go (request/reply, findChannel upstream).
        self.client_channel_table: dict[str, Any] = {}

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.setdefault(group, {})
        if info.client_id:
            self.client_channel_table[info.client_id] = info.channel
        old = channels.get(info.channel)
        if old is None:
            channels[info.channel] = info
            log.info("new producer connected, group: %s channel: %s", group, channel_remote_addr(info.channel))
        else:
            old.last_update_timestamp = now_ms()
            old.properties = info.properties

    def unregister_producer(self, group: str, channel: Any) -> None:
        channels = self.group_channel_table.get(group)
        if channels is not None and channels.pop(channel, None) is not None:
            log.info("unregister producer ok, group: %s channel: %s", group, channel_remote_addr(channel))
            if not channels:
                del self.group_channel_table[group]

    def do_channel_close_event(self, channel: Any) -> None:
        for group in list(self.group_channel_table):
            self.unregister_producer(group, channel)
        self._forget_channel(channel)

    def _forget_channel(self, channel: Any) -> None:
        for client_id in [c for c, ch in self.client_channel_table.items() if ch is channel]:
            del self.client_channel_table[client_id]

    def find_channel(self, client_id: str) -> Any | None:
        """The live channel of a producer client id (ProducerManager.findChannel), or None."""
        channel = self.client_channel_table.get(client_id)
        if channel is not None and not getattr(channel, "is_active", True):
            del self.client_channel_table[client_id]
            return None
        return channel

    def scan_not_active_channel(self) -> list[Any]:
        expired = []
        deadline = now_ms() - self.channel_expired_millis
        for group, channels in list(self.group_channel_table.items()):
            for channel, info in list(channels.items()):
                if info.last_update_timestamp < deadline:
                    log.warning("producer channel expired, group: %s channel: %s", group,
                                channel_remote_addr(channel))
                    del channels[channel]
                    expired.append(channel)
                    self._forget_channel(channel)
            if not channels:
                del self.group_channel_table[group]
        return expired

    def group_count(self) -> int:
        return len(self.group_channel_table)
