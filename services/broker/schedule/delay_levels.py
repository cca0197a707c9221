"""The ``messageDelayLevel`` table: "1s 5s 10s …" parsed into level -> delay in milliseconds.

Levels are numbered from 1; SCHEDULE_TOPIC_XXXX keeps one queue per level (queueId = level - 1),
which is what makes every queue time-ordered: all its messages wait the same delay.
"""

from __future__ import annotations

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> dict[int, int]:
    """ScheduleMessageService.parseDelayLevel; ValueError naming the bad item otherwise."""
    table: dict[int, int] = {}
    for index, item in enumerate(text.split(), start=1):
        unit = item[-1:].lower()
        number = item[:-1]
        if unit not in _UNIT_MS or not number.isdigit():
            raise ValueError(f"config key messageDelayLevel: bad level {index} {item!r}, "
                             "expected a number followed by s, m, h or d")
        table[index] = int(number) * _UNIT_MS[unit]
    if not table:
        raise ValueError("config key messageDelayLevel: no delay level given")
    return table


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


class DelayLevelTable:
    def __init__(self, text: str = DEFAULT_MESSAGE_DELAY_LEVEL) -> None:
        self.delay_millis = parse_delay_levels(text)
        self.max_level = max(self.delay_millis)

    def levels(self) -> list[int]:
        return sorted(self.delay_millis)

    def delay_of(self, level: int) -> int:
        return self.delay_millis[level]

    def cap(self, level: int) -> int:
        """A level above the highest is treated as the highest (CommitLog's delay rewrite)."""
        return min(level, self.max_level)

    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        delay = self.delay_millis.get(self.cap(level))
        return store_timestamp + delay if delay is not None else store_timestamp + 1000
