"""Broker-side message filters (ExpressionMessageFilter) built from a subscription.

Filtering is two-stage: is_matched_by_consume_queue sees only the 8-byte tag code of a
ConsumeQueue entry, is_matched_by_commit_log sees the message's properties. A TAG filter
decides on the hash code first and re-checks the exact tag (hash codes can collide); an
SQL92 filter lets every entry through the ConsumeQueue stage (no bloom filter here) and
evaluates the expression on the properties.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.java_compat import to_int32
from orbitmq.common.filter.sql_filter import Sql92Filter, compile_sql92
from orbitmq.common.filter.subscription import (
    ExpressionType,
    SubscriptionData,
    build_subscription_data,
    parse_tag_expression,
)

#: The system property holding a message's tag (MessageConst.PROPERTY_TAGS).
PROPERTY_TAGS = "TAGS"


class MessageFilter(ABC):
    """What the pull/POP path asks of a subscription, per ConsumeQueue entry then per message."""

    __slots__ = ()

    @abstractmethod
    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool: ...

    @abstractmethod
    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool: ...


class TagFilter(MessageFilter):
    __slots__ = ("subscription",)

    def __init__(self, subscription: SubscriptionData) -> None:
        self.subscription = subscription

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """ExpressionMessageFilter: no code or "*" passes; else the code's low 32 bits must be subscribed."""
        sub = self.subscription
        if tags_code is None or sub.class_filter_mode or sub.is_sub_all:
            return True
        return to_int32(tags_code) in sub.code_set

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        return self.match_tag(properties.get(PROPERTY_TAGS) if properties is not None else None)

    def match_tag(self, tag: str | None) -> bool:
        """FilterUtils.isTagMatched: an empty tag set (e.g. "*") takes all, an untagged message nothing else."""
        sub = self.subscription
        if sub.class_filter_mode or not sub.tags_set:
            return True
        return tag is not None and tag in sub.tags_set

    def __repr__(self) -> str:
        return f"TagFilter({self.subscription.sub_string!r})"


class Sql92MessageFilter(MessageFilter):
    __slots__ = ("sql",)

    def __init__(self, sql: Sql92Filter) -> None:
        self.sql = sql

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return True

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        return self.sql.evaluate(properties)

    def __repr__(self) -> str:
        return f"Sql92MessageFilter({self.sql.expression!r})"


def build_message_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """The filter for one subscription expression; FilterExpressionError if it is invalid."""
    if ExpressionType.is_tag_type(expression_type):
        return TagFilter(parse_tag_expression(expression))
    if expression_type == ExpressionType.SQL92:
        if not expression:
            raise FilterExpressionError("Expression can't be null! SQL92")
        return Sql92MessageFilter(compile_sql92(expression))
    raise FilterExpressionError(f"unsupported expression type {expression_type!r}")


def build_message_filter_for(subscription: SubscriptionData) -> MessageFilter:
    """The filter for a SubscriptionData received in a heartbeat or pull (its codeSet is trusted)."""
    if ExpressionType.is_tag_type(subscription.expression_type):
        return TagFilter(subscription)
    return build_message_filter(subscription.expression_type, subscription.sub_string)


def validate_filter_expression(
    expression_type: str | None, expression: str | None, topic: str | None = None
) -> SubscriptionData:
    """Syntax-check a consumer's expression (the proxy answers ILLEGAL_FILTER_EXPRESSION on error).

    Returns the SubscriptionData FilterAPI.build would make, so callers need not parse twice.
    """
    build_message_filter(expression_type, expression)
    return build_subscription_data(topic, expression, expression_type)
