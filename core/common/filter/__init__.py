"""Message filtering: TAG expressions ("TagA || TagB") and RocketMQ's SQL92 selectors.

Used by the broker's pull and POP processors to filter stored messages and by the proxy to
reject a bad filter expression (ILLEGAL_FILTER_EXPRESSION).
"""

from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.java_compat import java_string_hash
from orbitmq.common.filter.message_filter import (
    PROPERTY_TAGS,
    MessageFilter,
    Sql92MessageFilter,
    TagFilter,
    build_message_filter,
    build_message_filter_for,
    validate_filter_expression,
)
from orbitmq.common.filter.sql_filter import Sql92Filter, clear_cache, compile_sql92
from orbitmq.common.filter.subscription import (
    SUB_ALL,
    ExpressionType,
    SubscriptionData,
    build_subscription_data,
    parse_tag_expression,
)

__all__ = [
    "PROPERTY_TAGS",
    "SUB_ALL",
    "ExpressionType",
    "FilterExpressionError",
    "MessageFilter",
    "Sql92Filter",
    "Sql92MessageFilter",
    "SubscriptionData",
    "TagFilter",
    "build_message_filter",
    "build_message_filter_for",
    "build_subscription_data",
    "clear_cache",
    "compile_sql92",
    "java_string_hash",
    "parse_tag_expression",
    "validate_filter_expression",
]
