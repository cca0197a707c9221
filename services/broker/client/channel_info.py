"""What the broker remembers about one client connection (RocketMQ's ClientChannelInfo)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


def now_ms() -> int:
    return int(time.time() * 1000)


def channel_remote_addr(channel: Any) -> str:
    """Best-effort "ip:port" of a Remoting channel, used in logs and remarks only."""
    for name in ("remote_addr", "remote_address", "peer", "addr"):
        value = getattr(channel, name, None)
        if callable(value):
            try:
                value = value()
            except Exception:  # noqa: BLE001 - a log label must never fail a request
                value = None
        if value:
            if isinstance(value, tuple | list) and len(value) >= 2:
                return f"{value[0]}:{value[1]}"
            return str(value)
    return "unknown"


@dataclass(slots=True)
class ClientChannelInfo:
    channel: Any
    client_id: str
    language: str = "JAVA"
    version: int = 0
    last_update_timestamp: int = field(default_factory=now_ms)
    # Settings.client_properties of a gRPC client, relayed by the proxy's heartbeats.
    properties: dict[str, str] = field(default_factory=dict)
