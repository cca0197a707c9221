"""SubscriptionData: a consumer's subscription as it travels in heartbeats and pulls.

Field and JSON names are RocketMQ's (``subString``, ``tagsSet``, ``codeSet``…); a TAG
expression is parsed like FilterAPI.buildSubscriptionData, tag codes being Java hash codes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.java_compat import java_string_hash, java_trim


class ExpressionType:
    """Values of SubscriptionData.expressionType (RocketMQ's ExpressionType)."""

    TAG = "TAG"
    SQL92 = "SQL92"

    @staticmethod
    def is_tag_type(expression_type: str | None) -> bool:
        """Absent or empty counts as TAG, as older clients send no type at all."""
        return expression_type is None or expression_type in ("", ExpressionType.TAG)


SUB_ALL = "*"
_TAG_SEPARATOR = "||"


def _now_millis() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class SubscriptionData:
    topic: str | None = None
    sub_string: str = SUB_ALL
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = field(default_factory=_now_millis)
    expression_type: str = ExpressionType.TAG
    class_filter_mode: bool = False

    @property
    def is_sub_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def to_json_dict(self) -> dict[str, Any]:
        """fastjson's shape: alphabetical keys, null topic left out, sets as arrays."""
        out: dict[str, Any] = {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags_set),
        }
        if self.topic is not None:
            out["topic"] = self.topic
        return out

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> SubscriptionData:
        """Decode a heartbeat's subscription entry; ValueError names the bad field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"SubscriptionData must be a JSON object, got {type(data).__name__}")
        topic = _field(data, "topic", str, None)
        sub_string = _field(data, "subString", str, SUB_ALL)
        tags = _field(data, "tagsSet", list, [])
        codes = _field(data, "codeSet", list, [])
        if not all(isinstance(t, str) for t in tags):
            raise ValueError("SubscriptionData.tagsSet must hold strings")
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in codes):
            raise ValueError("SubscriptionData.codeSet must hold integers")
        sub_version = _field(data, "subVersion", int, None)
        expression_type = _field(data, "expressionType", str, None)
        return cls(
            topic=topic,
            sub_string=sub_string,
            tags_set=set(tags),
            code_set=set(codes),
            sub_version=_now_millis() if sub_version is None else sub_version,
            expression_type=ExpressionType.TAG if not expression_type else expression_type,
            class_filter_mode=bool(_field(data, "classFilterMode", bool, False)),
        )


def _field(data: Mapping[str, Any], name: str, kind: type, default: Any) -> Any:
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"SubscriptionData.{name} must be {kind.__name__}, got {type(value).__name__}")
    return value


def parse_tag_expression(expr: str | None, topic: str | None = None) -> SubscriptionData:
    """FilterAPI.buildSubscriptionData: "*" or "" subscribes to all, else "A || B" tag sets.

    Parts are trimmed and blank ones dropped. Like Java's String.split, trailing empty parts
    vanish first, so an expression made only of separators ("||") is an error, while " || "
    yields an empty tag set (which matches no tagged message at the ConsumeQueue).
    """
    if expr is None or expr == "" or expr == SUB_ALL:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL)
    if not isinstance(expr, str):
        raise FilterExpressionError(f"tag expression must be a string, got {type(expr).__name__}")
    parts = expr.split(_TAG_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    if not parts:
        raise FilterExpressionError("subString split error", expr, 0)
    sub = SubscriptionData(topic=topic, sub_string=expr)
    for part in parts:
        tag = java_trim(part)
        if tag:
            sub.tags_set.add(tag)
            sub.code_set.add(java_string_hash(tag))
    return sub


def build_subscription_data(
    topic: str | None, expression: str | None, expression_type: str | None = None
) -> SubscriptionData:
    """FilterAPI.build: a TAG expression is parsed into tag sets; other types keep the text.

    The SQL92 text is not compiled here (the broker does that when filtering); use
    validate_filter_expression to check it too.
    """
    if ExpressionType.is_tag_type(expression_type):
        return parse_tag_expression(expression, topic)
    if not expression:
        raise FilterExpressionError(f"Expression can't be null! {expression_type}")
    return SubscriptionData(topic=topic, sub_string=expression, expression_type=expression_type)
