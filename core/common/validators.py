"""Topic, group and properties checks with RocketMQ's own wording.

Clients and servers both validate, so the same error text reaches a user whether the SDK,
the proxy or the broker rejected the name.
"""

from __future__ import annotations

from orbitmq.common import constants

VALID_PATTERN_STR = "^[%|a-zA-Z0-9_-]+$"
TOPIC_MAX_LENGTH = constants.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = constants.GROUP_MAX_LENGTH
# The CommitLog stores the properties length in 2 bytes (Short.MAX_VALUE).
PROPERTIES_MAX_LENGTH = 32767

_VALID_CHARS = frozenset("%|_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


class ValidationError(ValueError):
    """A name or message that RocketMQ would refuse; the text is RocketMQ's."""


def is_topic_or_group_illegal(name: str) -> bool:
    """True when name holds a character outside ^[%|a-zA-Z0-9_-]+$."""
    return any(ch not in _VALID_CHARS for ch in name)


def is_system_topic(topic: str) -> bool:
    return topic in constants.SYSTEM_TOPIC_SET or topic.startswith(constants.SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in constants.NOT_ALLOWED_SEND_TOPIC_SET


def is_system_group(group: str) -> bool:
    return group in constants.SYSTEM_GROUP_SET or constants.is_sys_consumer_group(group)


def check_topic(topic: str, allow_system: bool = True) -> None:
    """Raise ValidationError unless topic is a legal RocketMQ topic name."""
    if topic is None or not str(topic).strip():
        raise ValidationError("The specified topic is blank.")
    if is_topic_or_group_illegal(topic):
        raise ValidationError(
            f"The specified topic[{topic}] contains illegal characters, allowing only {VALID_PATTERN_STR}"
        )
    if len(topic) > TOPIC_MAX_LENGTH:
        raise ValidationError(f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not allow_system and is_system_topic(topic):
        raise ValidationError(f"The topic[{topic}] is conflict with system topic.")


def check_group(group: str, allow_system: bool = True) -> None:
    """Raise ValidationError unless group is a legal producer/consumer group name."""
    if group is None or not str(group).strip():
        raise ValidationError("The specified group is blank.")
    if is_topic_or_group_illegal(group):
        raise ValidationError(
            f"The specified group[{group}] contains illegal characters, allowing only {VALID_PATTERN_STR}"
        )
    if len(group) > GROUP_MAX_LENGTH:
        raise ValidationError(f"The specified group is longer than group max length {GROUP_MAX_LENGTH}.")
    if not allow_system and is_system_group(group):
        raise ValidationError(f"The consumerGroup[{group}] is conflict with system group.")


def check_properties_size(props_str: str) -> None:
    """The encoded properties must fit the CommitLog's 2-byte length field."""
    size = len(props_str.encode("utf-8"))
    if size > PROPERTIES_MAX_LENGTH:
        raise ValidationError(
            f"The message properties length {size} exceeds the max length {PROPERTIES_MAX_LENGTH}."
        )


def check_body(body: bytes, max_message_size: int = 4 * 1024 * 1024) -> None:
    """Producer-side body check (Validators.checkMessage): non-empty and within maxMessageSize."""
    if not body:
        raise ValidationError("the message body length is zero")
    if len(body) > max_message_size:
        raise ValidationError(f"the message body size over max value, MAX: {max_message_size}")
