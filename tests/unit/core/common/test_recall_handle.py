"""The recall handle codec (RocketMQ's RecallMessageHandle v1) and the handle a timer send answers."""

from __future__ import annotations

import base64

import pytest

from orbitmq.broker.recall.send_hook import recall_handle_of
from orbitmq.broker.store.model import MessageExtBrokerInner
from orbitmq.common.message import MessageConst
from orbitmq.common.recall_handle import (
    MAX_HANDLE_LENGTH,
    RecallHandle,
    RecallHandleError,
    decode_recall_handle,
    delete_key,
    encode_recall_handle,
)

ID = "7F00000100002A9F0000000000000001"


def test_encode_is_base64url_with_padding_of_the_five_tokens() -> None:
    handle = encode_recall_handle("TopicA", "broker-a", 1700000000001, ID)
    assert handle == base64.urlsafe_b64encode(f"v1 TopicA broker-a 1700000000001 {ID}".encode()).decode()
    assert handle.endswith("=")  # Java's Base64.getUrlEncoder() pads
    assert decode_recall_handle(handle) == RecallHandle("TopicA", "broker-a", "1700000000001", ID)


def test_decode_takes_the_handle_without_padding_too() -> None:
    handle = encode_recall_handle("T", "b", 5, "X")
    assert handle.endswith("==")
    assert decode_recall_handle(handle.rstrip("=")) == decode_recall_handle(handle)


def test_url_safe_characters_round_trip() -> None:
    # Bytes that encode to '-' and '_' in the URL-safe alphabet ('+' and '/' in the standard one).
    topic = "T%" + "\u00ff" * 3
    handle = encode_recall_handle(topic, "b", 9, "id")
    assert "-" in handle or "_" in handle
    assert decode_recall_handle(handle).topic == topic


def test_extra_tokens_are_ignored_and_trailing_separators_dropped() -> None:
    raw = base64.urlsafe_b64encode(b"v1 T b 10 ID extra more").decode()
    assert decode_recall_handle(raw) == RecallHandle("T", "b", "10", "ID")
    raw = base64.urlsafe_b64encode(b"v1 T b 10 ID   ").decode()
    assert decode_recall_handle(raw).message_id == "ID"


@pytest.mark.parametrize("text", [
    None, "", "@@", "a", "abc=d", "YQ=", "YWJj=", "YQ===", "%%%", "a b",
    base64.b64encode(b"v1 T b 10 ID??>").decode(),  # standard alphabet ('+', '/')
    base64.urlsafe_b64encode(b"v2 T b 10 ID").decode(),
    base64.urlsafe_b64encode(b"v1 T b 10").decode(),
    base64.urlsafe_b64encode(b"v1 T b 10    ").decode(),  # trailing empties dropped: 4 tokens
    base64.urlsafe_b64encode(b" v1 T b 10 ID").decode(),  # a leading empty token is the version
    "A" * (MAX_HANDLE_LENGTH + 4),
])
def test_garbled_handles_do_not_decode(text: str | None) -> None:
    with pytest.raises(RecallHandleError, match="recall handle is invalid"):
        decode_recall_handle(text)


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    raw = base64.urlsafe_b64encode(b"v1 T\xff b 10 ID").decode()
    assert decode_recall_handle(raw).topic == "T\ufffd"


@pytest.mark.parametrize(("text", "value"), [
    ("1700000000001", 1700000000001), ("+5", 5), ("-5", -5), ("", -1), ("soon", -1), ("1.5", -1),
    ("\u0661\u0662", -1), (str(2**63), -1), (str(2**63 - 1), 2**63 - 1),
])
def test_timestamp_is_read_like_number_utils_to_long(text: str, value: int) -> None:
    assert RecallHandle("T", "b", text, "X").timestamp_ms == value


def test_delete_key_is_topic_plus_id() -> None:
    assert delete_key("TopicA", ID) == f"TopicA+{ID}"


def _parked(props: dict[str, str], topic: str = "rmq_sys_wheel_timer") -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, queue_id=0, body=b"", properties=props)


def test_send_answers_a_handle_for_a_parked_timer_message_only() -> None:
    props = {MessageConst.TIMER_OUT_MS: "1700000000000", MessageConst.REAL_TOPIC: "TopicA",
             MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: ID}
    handle = recall_handle_of(_parked(props), "broker-a")
    assert decode_recall_handle(handle) == RecallHandle("TopicA", "broker-a", "1700000000001", ID)
    assert recall_handle_of(_parked(props, topic="TopicA"), "broker-a") is None  # not in the wheel
    assert recall_handle_of(_parked({**props, MessageConst.REAL_TOPIC: "%RETRY%g"}), "broker-a") is None
    assert recall_handle_of(_parked({k: v for k, v in props.items() if k != MessageConst.REAL_TOPIC}), "b") is None
    assert recall_handle_of(_parked({**props, MessageConst.TIMER_OUT_MS: "x"}), "broker-a") is None
