"""SDK building blocks without a server: signing, error families, wire encoding, retry policy."""

from __future__ import annotations

from datetime import datetime

import pytest
from rocketmq.v5.util.signature import Signature

from orbitmq.clientcore import errors
from orbitmq.clientcore.config import ClientConfig, Credentials, parse_endpoints
from orbitmq.clientcore.message import Message
from orbitmq.clientcore.session import RetryPolicy
from orbitmq.clientcore.signing import authorization, request_metadata, sign
from orbitmq.producer.producer import _request_bytes
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb

Code = pb.Code


def test_signature_matches_the_official_python_client() -> None:
    assert sign("secret-key", "20250101T120000Z") == Signature.sign("secret-key", "20250101T120000Z")
    assert authorization(Credentials("ak", "sk"), "20250101T120000Z") == (
        "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature="
        + Signature.sign("sk", "20250101T120000Z"))


def test_request_metadata() -> None:
    md = dict(request_metadata("cid", "", Credentials("ak", "sk", "token"), now=datetime(2025, 1, 2, 3, 4, 5)))
    assert md["x-mq-date-time"] == "20250102T030405Z"
    assert md["x-mq-client-id"] == "cid" and md["x-mq-session-token"] == "token"
    assert md["authorization"].endswith(sign("sk", "20250102T030405Z"))
    assert "x-mq-namespace" not in md
    plain = dict(request_metadata("cid", "ns", None))
    assert "authorization" not in plain and plain["x-mq-namespace"] == "ns"


@pytest.mark.parametrize(("code", "family"), [
    (Code.ILLEGAL_TOPIC, errors.BadRequestError), (Code.UNAUTHORIZED, errors.UnauthorizedError),
    (Code.FORBIDDEN, errors.ForbiddenError), (Code.TOPIC_NOT_FOUND, errors.NotFoundError),
    (Code.MESSAGE_BODY_TOO_LARGE, errors.PayloadTooLargeError), (Code.TOO_MANY_REQUESTS, errors.TooManyRequestsError),
    (Code.INTERNAL_SERVER_ERROR, errors.InternalError), (Code.PROXY_TIMEOUT, errors.ProxyTimeoutError),
    (Code.NOT_IMPLEMENTED, errors.UnsupportedError), (Code.MESSAGE_PROPERTIES_TOO_LARGE, errors.BadRequestError),
])
def test_error_families(code: int, family: type) -> None:
    exc = errors.error_of(code, "why")
    assert type(exc) is family and exc.code == code and exc.message == "why"
    assert str(exc) == f"{Code.Name(code)} ({code}): why"
    assert errors.is_retriable(exc) == (code in errors.RETRIABLE_CODES)


def test_encoded_message_equals_the_protobuf_one() -> None:
    for m in [Message("T", b"x" * 300), Message("T", "ü", tag="a", keys=["k1", "k2"], properties={"p": "q"},
                                                message_group="g" * 200),
              Message("T", b"b", keys="one", delivery_timestamp=1795733133.283)]:
        raw, message_id, message_type = m.encode("ns")
        decoded = pb.Message.FromString(raw)
        expected = m.to_proto("ns")
        expected.system_properties.message_id = message_id
        expected.system_properties.born_timestamp.CopyFrom(decoded.system_properties.born_timestamp)
        assert decoded == expected
        assert message_type == expected.system_properties.message_type


def test_request_bytes_is_a_send_message_request() -> None:
    msgs = [Message("T", f"m{i}".encode() * 100).to_proto() for i in range(3)]
    raw = _request_bytes([m.SerializeToString() for m in msgs])
    assert spb.SendMessageRequest.FromString(raw) == spb.SendMessageRequest(messages=msgs)


def test_message_validation() -> None:
    with pytest.raises(errors.BadRequestError) as info:
        Message("T", b"").validate()
    assert info.value.code == Code.MESSAGE_BODY_EMPTY
    with pytest.raises(errors.BadRequestError) as info:
        Message("T", b"abc").validate(max_body_size=2)
    assert info.value.code == Code.MESSAGE_BODY_TOO_LARGE
    with pytest.raises(TypeError):
        Message("T", b"x", properties={"k": 1}).validate()  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        Message(None, b"x").validate()  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Message("T", b"x", delivery_timestamp="soon").validate()  # type: ignore[arg-type]


def test_retry_policy_from_settings() -> None:
    exp = pb.RetryPolicy(max_attempts=4)
    exp.exponential_backoff.initial.FromMilliseconds(100)
    exp.exponential_backoff.max.FromMilliseconds(1000)
    exp.exponential_backoff.multiplier = 2
    policy = RetryPolicy.of(exp, RetryPolicy())
    assert policy.max_attempts == 4
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    custom = pb.RetryPolicy(max_attempts=3)
    for ms in (1000, 5000):
        custom.customized_backoff.next.add().FromMilliseconds(ms)
    policy = RetryPolicy.of(custom, RetryPolicy())
    assert [policy.delay(n) for n in (1, 2, 3)] == [1.0, 5.0, 5.0]
    assert RetryPolicy.of(pb.RetryPolicy(), RetryPolicy(max_attempts=9)).max_attempts == 9


def test_endpoints_parsing() -> None:
    assert parse_endpoints("a:1; b:2,a:1") == ["a:1", "b:2"]
    assert parse_endpoints(["h:8081"]) == ["h:8081"]
    for bad in ("", "host", "h:0", "h:x"):
        with pytest.raises(ValueError):
            parse_endpoints(bad)
    assert ClientConfig("h:1", ca_file="/ca.pem").tls
    with pytest.raises(ValueError):
        ClientConfig("h:1", request_timeout=0)
    with pytest.raises(ValueError):
        Credentials("", "x")
