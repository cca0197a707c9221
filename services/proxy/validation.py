"""GrpcValidator: checks of what raw gRPC callers send (official clients check locally first)."""

from __future__ import annotations

import re

from orbitmq.common import validators
from orbitmq.common.constants import is_sys_consumer_group
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.errors import ProxyError

Code = pb.Code


_ISO_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def contains_control_character(data: str) -> bool:
    """CharMatcher.javaIsoControl: U+0000–U+001F and U+007F–U+009F."""
    # Control characters are never printable, so the (C-speed) common case skips the regex.
    return not data.isprintable() and _ISO_CONTROL.search(data) is not None


# Names that passed validate_topic: the checks depend on the name alone, and every send asks.
_VALID_TOPICS: set[str] = set()
_VALID_TOPICS_MAX = 4096


def validate_topic(name: str) -> None:
    if name in _VALID_TOPICS:
        return
    try:
        validators.check_topic(name)
    except validators.ValidationError as exc:
        raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from None
    if validators.is_system_topic(name):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")
    if len(_VALID_TOPICS) >= _VALID_TOPICS_MAX:
        _VALID_TOPICS.clear()
    _VALID_TOPICS.add(name)


def validate_consumer_group(name: str) -> None:
    try:
        validators.check_group(name)
    except validators.ValidationError as exc:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, str(exc)) from None
    if is_sys_consumer_group(name):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def validate_invisible_time(invisible_ms: int, min_ms: int, max_ms: int) -> None:
    if invisible_ms < min_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {min_ms}")
    if max_ms > 0 and invisible_ms > max_ms:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {max_ms}")


def validate_tag(tag: str) -> None:
    if tag:
        if not tag.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if contains_control_character(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def validate_message_key(key: str) -> None:
    if key:
        if not key.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if contains_control_character(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def validate_message_group(group: str, max_size: int) -> None:
    if group:
        if not group.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if max_size > 0 and len(group.encode("utf-8")) >= max_size:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_size}")
        if contains_control_character(group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
