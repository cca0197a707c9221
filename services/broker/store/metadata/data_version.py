"""DataVersion: the (stateVersion, timestamp, counter) triple brokers send with their metadata.

The NameServer and peers compare it to tell whether a topic table changed since they last saw
it, so every change must bump it and the JSON names must be RocketMQ's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class DataVersion:
    state_version: int = 0
    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0

    def next_version(self, state_version: int = 0) -> None:
        self.timestamp = _now_ms()
        self.state_version = state_version
        self.counter += 1

    def assign_new_one(self, other: DataVersion) -> None:
        self.state_version, self.timestamp, self.counter = other.state_version, other.timestamp, other.counter

    def to_json_dict(self) -> dict[str, Any]:
        return {"stateVersion": self.state_version, "timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json_dict(cls, d: Any) -> DataVersion:
        if not isinstance(d, dict):
            return cls()
        return cls(
            state_version=int(d.get("stateVersion", 0)),
            timestamp=int(d.get("timestamp", _now_ms())),
            counter=int(d.get("counter", 0)),
        )
