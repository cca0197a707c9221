"""resendMsgById's choice of where a dead letter goes so that its group reads it again (issue 22):
%RETRY%<group> for Remoting push consumers, the pop retry topic for POP consumers."""

from __future__ import annotations

from orbitmq.admin.commands.message import resend_target

G, T = "CG", "Orders"
CLASSIC, POP_V1, POP_V2 = "%RETRY%CG", "%RETRY%CG_Orders", "%RETRY%CG+Orders"


def online(*topics: str) -> dict:
    """A GET_CONSUMER_CONNECTION_LIST answer whose consumers subscribe ``topics``."""
    return {"subscriptionTable": {t: {"topic": t, "subString": "*"} for t in topics},
            "consumeType": "CONSUME_PASSIVELY"}


def test_live_remoting_push_consumers_read_the_group_retry_topic() -> None:
    # DefaultMQPushConsumerImpl#copySubscription: a clustering push consumer subscribes %RETRY%<group>.
    assert resend_target(G, T, online(T, CLASSIC), None, False) == CLASSIC
    assert resend_target(G, T, online(T, CLASSIC), POP_V1, False) == CLASSIC


def test_live_pop_consumers_read_the_pop_retry_topic() -> None:
    # The proxy's gRPC clients subscribe the topic alone and pop it (PopMessageProcessor).
    assert resend_target(G, T, online(T), None, False) == POP_V1
    assert resend_target(G, T, online(T), None, True) == POP_V2
    assert resend_target(G, POP_V1, online(T), None, False) == POP_V1
    assert resend_target(G, T, online(T), POP_V1, True) == POP_V1  # the one that exists wins
    # A consumer that switched from POP back to pull subscribes the pop retry topic (RebalanceImpl).
    assert resend_target(G, T, online(T, POP_V2), None, False) == POP_V2


def test_offline_group_the_message_or_the_cluster_says_where() -> None:
    assert resend_target(G, T, None, None, False) == CLASSIC
    assert resend_target(G, POP_V1, None, None, False) == POP_V1  # popped from the pop retry topic
    assert resend_target(G, POP_V2, None, None, False) == POP_V2
    assert resend_target(G, T, None, POP_V1, False) == POP_V1  # the group pops T on some broker
    assert resend_target(G, T, online("Other"), None, False) == CLASSIC


def test_no_origin_topic_or_a_classic_retry_origin_goes_to_the_group_retry_topic() -> None:
    assert resend_target(G, None, online(T), POP_V1, False) == CLASSIC
    assert resend_target(G, CLASSIC, online(T), None, False) == CLASSIC
