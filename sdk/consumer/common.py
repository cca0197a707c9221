"""What the consumers share: filter expressions, consume results, the subscription Settings."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from orbitmq.clientcore.errors import BadRequestError, Code
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb


@dataclass(frozen=True)
class FilterExpression:
    """A TAG expression ("*", "a || b") or an SQL92 one (``type="SQL92"``) on user properties."""

    expression: str = "*"
    type: str = "TAG"

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str) or not self.expression.strip():
            raise TypeError(f"filter expression must be a non-blank str, not {self.expression!r}")
        if self.type not in ("TAG", "SQL92"):
            raise ValueError(f"filter type must be 'TAG' or 'SQL92', not {self.type!r}")

    def to_proto(self) -> pb.FilterExpression:
        return pb.FilterExpression(type=pb.FilterType.SQL if self.type == "SQL92" else pb.FilterType.TAG,
                                   expression=self.expression)


SubscriptionsArg = Mapping[str, "str | FilterExpression"] | None


def normalize_subscriptions(subscriptions: SubscriptionsArg) -> dict[str, FilterExpression]:
    """{topic: FilterExpression}; a plain str is a TAG expression."""
    if subscriptions is None:
        return {}
    if not isinstance(subscriptions, Mapping):
        raise TypeError("subscriptions must be a mapping {topic: expression}")
    out: dict[str, FilterExpression] = {}
    for topic, expr in subscriptions.items():
        if not isinstance(topic, str) or not topic.strip():
            raise TypeError(f"topic must be a non-blank str, not {topic!r}")
        out[topic] = expr if isinstance(expr, FilterExpression) else FilterExpression(expr)
    return out


def validate_group(group: object) -> str:
    if not isinstance(group, str):
        raise TypeError(f"consumer group must be a str, not {type(group).__name__}")
    if not group.strip():
        raise BadRequestError(Code.ILLEGAL_CONSUMER_GROUP, "consumer group cannot be blank")
    return group


def subscription_settings(settings: pb.Settings, group: str, namespace: str,
                          subscriptions: Mapping[str, FilterExpression]) -> pb.Settings:
    sub = settings.subscription
    sub.group.name = group
    sub.group.resource_namespace = namespace
    for topic, expr in subscriptions.items():
        sub.subscriptions.add(topic=pb.Resource(name=topic, resource_namespace=namespace),
                              expression=expr.to_proto())
    return settings


class ConsumeResult(enum.Enum):
    """What a PushConsumer listener returns (None and True count as SUCCESS, False as FAILURE)."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
