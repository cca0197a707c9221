"""RunningFlags: the store's health bits (RocketMQ's values), checked before every write/read.

The retention/disk-usage service sets DISK_FULL; dispatch errors set the logic-queue and
index bits. Plain int updates under the GIL are enough: readers only need a recent value.
"""

from __future__ import annotations

NOT_READABLE_BIT = 1
NOT_WRITEABLE_BIT = 1 << 1
WRITE_LOGICS_QUEUE_ERROR_BIT = 1 << 2
WRITE_INDEX_FILE_ERROR_BIT = 1 << 3
DISK_FULL_BIT = 1 << 4


class RunningFlags:
    def __init__(self) -> None:
        self.flag_bits = 0

    def is_readable(self) -> bool:
        return not self.flag_bits & NOT_READABLE_BIT

    def is_writeable(self) -> bool:
        return not self.flag_bits & (
            NOT_WRITEABLE_BIT | WRITE_LOGICS_QUEUE_ERROR_BIT | DISK_FULL_BIT | WRITE_INDEX_FILE_ERROR_BIT
        )

    def is_disk_full(self) -> bool:
        return bool(self.flag_bits & DISK_FULL_BIT)

    def make_disk_full(self) -> None:
        self.flag_bits |= DISK_FULL_BIT

    def make_disk_ok(self) -> bool:
        """Clear DISK_FULL; returns whether it was set."""
        was = bool(self.flag_bits & DISK_FULL_BIT)
        self.flag_bits &= ~DISK_FULL_BIT
        return was

    def make_logics_queue_error(self) -> None:
        self.flag_bits |= WRITE_LOGICS_QUEUE_ERROR_BIT

    def make_index_file_error(self) -> None:
        self.flag_bits |= WRITE_INDEX_FILE_ERROR_BIT

    def get_and_make_not_writeable(self) -> bool:
        was = not self.flag_bits & NOT_WRITEABLE_BIT
        self.flag_bits |= NOT_WRITEABLE_BIT
        return was

    def get_and_make_writeable(self) -> bool:
        was = bool(self.flag_bits & NOT_WRITEABLE_BIT)
        self.flag_bits &= ~NOT_WRITEABLE_BIT
        return was
