"""Message filters for pulls and parked pulls, built with orbitmq.common.filter.

The filter decides twice: by the ConsumeQueue tag hash code (cheap, may collide) and by the
stored properties (the exact tag, or the SQL92 expression). Parked pulls are woken only when
both agree, so a colliding hash code does not wake a consumer for a message it never sees.
"""

from __future__ import annotations

from typing import Any

from orbitmq.common.filter import build_message_filter
from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.remoting.codes import ResponseCode

from .base import RequestError


def build_filter(expression_type: str | None, expression: str | None, topic: str, group: str) -> Any:
    try:
        return build_message_filter(expression_type or "TAG", expression or "*")
    except (FilterExpressionError, ValueError, TypeError) as exc:
        raise RequestError(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                           f"parse the consumer's subscription[{expression}] failed, group: {group}: {exc}") from None


def filter_from_subscription(sub: dict[str, Any], topic: str, group: str) -> Any:
    """A filter for a subscription learnt from a heartbeat (SubscriptionData JSON)."""
    expression = sub.get("subString")
    return build_filter(str(sub.get("expressionType") or "TAG"), None if expression is None else str(expression),
                        topic, group)


def matches(message_filter: Any, tags_code: int | None, properties: dict[str, str] | None) -> bool:
    """The hold service's wake-up test for one arrived message."""
    if message_filter is None:
        return True
    if not message_filter.is_matched_by_consume_queue(tags_code):
        return False
    if properties is None:
        return True
    return bool(message_filter.is_matched_by_commit_log(properties=properties))
