"""Typed results of the high-level Remoting calls (SendResult, PullResult, PopResult, AckResult)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from orbitmq.common.message import MessageExt


class SendStatus(enum.StrEnum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    status: SendStatus
    msg_id: str  # the UNIQ_KEY (comma-joined for a batch), what clients call the message id
    offset_msg_id: str  # the broker's offset message id(s)
    queue_id: int
    queue_offset: int
    broker_name: str
    topic: str
    transaction_id: str | None = None
    recall_handle: str | None = None


class PullStatus(enum.StrEnum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


class PopStatus(enum.StrEnum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@dataclass
class PopResult:
    status: PopStatus
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0


class AckStatus(enum.StrEnum):
    OK = "OK"
    NO_EXIST = "NO_EXIST"


@dataclass
class AckResult:
    status: AckStatus
    extra_info: str | None = None
    pop_time: int = 0
