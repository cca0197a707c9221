"""HeartbeatData's V2 parts: the fingerprint and the without-subscription body."""

from __future__ import annotations

from orbitmq.client.api import ConsumerData, ProducerData, heartbeat_data, heartbeat_fingerprint
from orbitmq.common.filter.subscription import build_subscription_data


def _consumer(expression: str, version: int) -> ConsumerData:
    sub = build_subscription_data("T", expression)
    sub.sub_version = version
    return ConsumerData("CG", [sub])


def test_fingerprint_ignores_sub_version_and_follows_subscriptions() -> None:
    producers = [ProducerData("PG")]
    a = heartbeat_fingerprint(producers, [_consumer("TagA", 1)])
    assert a != 0
    assert heartbeat_fingerprint(producers, [_consumer("TagA", 99)]) == a
    assert heartbeat_fingerprint(producers, [_consumer("TagB", 1)]) != a
    assert heartbeat_fingerprint([ProducerData("PG2")], [_consumer("TagA", 1)]) != a


def test_without_sub_body_keeps_groups_and_drops_subscriptions() -> None:
    consumer = _consumer("TagA", 1)
    full = heartbeat_data("c1", [], [consumer], fingerprint=7)
    bare = heartbeat_data("c1", [], [consumer], fingerprint=7, without_sub=True)
    assert full["consumerDataSet"][0]["subscriptionDataSet"][0]["subString"] == "TagA"
    assert full["heartbeatFingerprint"] == 7 and full["withoutSub"] is False
    assert bare["consumerDataSet"][0]["groupName"] == "CG"
    assert bare["consumerDataSet"][0]["subscriptionDataSet"] == []
    assert bare["withoutSub"] is True
    assert "heartbeatFingerprint" not in heartbeat_data("c1", [], [consumer])  # a V1 heartbeat
    assert consumer.subscriptions[0].sub_string == "TagA"  # the caller's data is left alone
