"""SubscriptionGroupConfig: a consumer group's broker-side settings, with RocketMQ's JSON names.

subscriptionGroup.json and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP bodies use these names; fields
this class does not model (subscriptionDataSet, a non-default groupRetryPolicy…) are kept in
``extra`` and written back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orbitmq.common.constants import MASTER_ID

# SubscriptionGroupAttributes.PRIORITY_FACTOR_ATTRIBUTE: the share (0-100) of a group's POP
# requests on a PRIORITY topic served in priority order; the rest start at a rotating queue.
PRIORITY_FACTOR_ATTRIBUTE = "priority.factor"
PRIORITY_FACTOR_MIN, PRIORITY_FACTOR_MAX, PRIORITY_FACTOR_DEFAULT = 0, 100, 100


def validate_group_attributes(attributes: dict[str, str]) -> None:
    """ValueError when a known group attribute is out of its range (LongRangeAttribute#verify)."""
    raw = attributes.get(PRIORITY_FACTOR_ATTRIBUTE)
    if raw is None:
        return
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{PRIORITY_FACTOR_ATTRIBUTE} {raw!r} is not a number") from None
    if not PRIORITY_FACTOR_MIN <= value <= PRIORITY_FACTOR_MAX:
        raise ValueError(f"value is not in range({PRIORITY_FACTOR_MIN}, {PRIORITY_FACTOR_MAX}) "
                         f"of attribute {PRIORITY_FACTOR_ATTRIBUTE}")


# (json name, attribute name, default)
_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("consumeEnable", "consume_enable", True),
    ("consumeFromMinEnable", "consume_from_min_enable", True),
    ("consumeBroadcastEnable", "consume_broadcast_enable", True),
    ("consumeMessageOrderly", "consume_message_orderly", False),
    ("retryQueueNums", "retry_queue_nums", 1),
    ("retryMaxTimes", "retry_max_times", 16),
    ("brokerId", "broker_id", MASTER_ID),
    ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly", 1),
    ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable", True),
    ("groupSysFlag", "group_sys_flag", 0),
    ("consumeTimeoutMinute", "consume_timeout_minute", 15),
)


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def priority_factor(self) -> int:
        """SubscriptionGroupConfig#getPriorityFactor: the attribute, 100 when unset or not a number."""
        try:
            return int(self.attributes.get(PRIORITY_FACTOR_ATTRIBUTE, PRIORITY_FACTOR_DEFAULT))
        except ValueError:
            return PRIORITY_FACTOR_DEFAULT

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = dict(self.extra)
        d["groupName"] = self.group_name
        for json_name, attr, _default in _FIELDS:
            d[json_name] = getattr(self, attr)
        d.setdefault("groupRetryPolicy", {"type": "CUSTOMIZED"})  # upstream's default policy
        d["attributes"] = dict(self.attributes)
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        if not isinstance(d, dict) or not isinstance(d.get("groupName"), str):
            raise ValueError(f"not a SubscriptionGroupConfig: {d!r:.200}")
        kwargs: dict[str, Any] = {"group_name": d["groupName"]}
        for json_name, attr, default in _FIELDS:
            value = d.get(json_name, default)
            kwargs[attr] = bool(value) if isinstance(default, bool) else int(value)
        kwargs["attributes"] = {str(k): str(v) for k, v in (d.get("attributes") or {}).items()}
        known = {"groupName", "attributes", *(f[0] for f in _FIELDS)}
        kwargs["extra"] = {k: v for k, v in d.items() if k not in known}
        return cls(**kwargs)
