"""ACL 2.0 signatures: known vectors computed the way the official clients compute them.

Remoting vector (AclClientRPCHook / AclUtils#combineRequestContent): ext fields {topic: TopicTest, queueId: 1} plus AccessKey
rocketmq2, sorted by key (AccessKey < queueId < topic), values concatenated, then the body:
"rocketmq2" + "1" + "TopicTest" + "Hello", HmacSHA1 with secret 12345678, base64. Computed
independently with `printf 'rocketmq21TopicTestHello' | openssl dgst -sha1 -hmac 12345678 -binary | base64`.
gRPC vector (the official clients' Signature class): HMAC-SHA1("20250101T120000Z", 12345678) in hex (openssl -hex).
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from rocketmq.v5.util.signature import Signature as OfficialSignature

from orbitmq.auth.client import AclClientRPCHook
from orbitmq.auth.signature import (
    grpc_auth_headers,
    grpc_clock_skew_ms,
    parse_grpc_authorization,
    remoting_signature,
    remoting_signature_content,
    sign_remoting_fields,
    verify_grpc_signature,
    verify_remoting_signature,
)
from orbitmq.remoting.protocol import RemotingCommand

REMOTING_VECTOR = "KI70mN/8zIBP7GWCYVTmuW98oEE="
GRPC_VECTOR = "28f6197047a0b0cc33c05e4f75d7d5446262c710"


def test_remoting_known_vector() -> None:
    fields = {"topic": "TopicTest", "queueId": "1"}
    sign_remoting_fields(fields, b"Hello", "rocketmq2", "12345678")
    assert fields["AccessKey"] == "rocketmq2"
    assert fields["Signature"] == REMOTING_VECTOR
    assert remoting_signature_content(fields, b"Hello") == b"rocketmq21TopicTestHello"
    assert verify_remoting_signature("12345678", fields, b"Hello")


def test_remoting_signature_covers_every_field_and_the_body() -> None:
    fields = {"topic": "TopicTest", "queueId": "1"}
    sign_remoting_fields(fields, b"Hello", "rocketmq2", "12345678")
    assert not verify_remoting_signature("wrong", fields, b"Hello")
    assert not verify_remoting_signature("12345678", fields, b"Hellp")
    assert not verify_remoting_signature("12345678", {**fields, "queueId": "2"}, b"Hello")
    assert not verify_remoting_signature("12345678", {**fields, "Signature": "not base64!"}, b"Hello")
    # no body: the values alone
    empty = {"a": "x"}
    sign_remoting_fields(empty, b"", "ak", "sk")
    assert empty["Signature"] == remoting_signature("sk", {"AccessKey": "ak", "a": "x"}, None)


def test_rpc_hook_signs_a_request_and_re_signs_a_resend() -> None:
    request = RemotingCommand.request(10, {"topic": "TopicTest", "queueId": "1"}, b"Hello")
    hook = AclClientRPCHook("rocketmq2", "12345678")
    hook(request)
    hook(request)  # a retry: the old Signature is not part of the new content
    assert request.ext_fields["Signature"] == REMOTING_VECTOR
    decoded = RemotingCommand.decode(request.encode()[4:])
    assert verify_remoting_signature("12345678", decoded.ext_fields, decoded.body)


def test_grpc_known_vector_and_parsing() -> None:
    headers = dict(grpc_auth_headers("rocketmq2", "12345678", "20250101T120000Z"))
    assert headers["x-mq-date-time"] == "20250101T120000Z"
    assert headers["authorization"] == (
        f"MQv2-HMAC-SHA1 Credential=rocketmq2, SignedHeaders=x-mq-date-time, Signature={GRPC_VECTOR}")
    username, sig = parse_grpc_authorization(headers["authorization"])
    assert username == "rocketmq2" and sig.hex() == GRPC_VECTOR
    assert verify_grpc_signature("12345678", "20250101T120000Z", sig)
    assert not verify_grpc_signature("12345678", "20250101T120001Z", sig)
    # Java writes upper-case hex and may scope the credential: both accepted
    upper = f"MQv2-HMAC-SHA1 Credential=rocketmq2/scope, SignedHeaders=x-mq-date-time, Signature={GRPC_VECTOR.upper()}"
    assert parse_grpc_authorization(upper) == ("rocketmq2", sig)


@pytest.mark.parametrize("bad", ["", "MQv2-HMAC-SHA1", "MQv2-HMAC-SHA1 Credential=, Signature=00",
                                 "MQv2-HMAC-SHA1 Credential=a, Signature=zz", "MQv2-HMAC-SHA1 Credential=a"])
def test_grpc_malformed_headers_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_grpc_authorization(bad)


def test_matches_the_official_python_client() -> None:
    class Creds:
        ak, sk = "rocketmq2", "12345678"

    class Config:
        credentials = Creds()
        namespace = ""

    md = dict(OfficialSignature.metadata(Config(), "client-1"))
    username, sig = parse_grpc_authorization(md["authorization"])
    assert username == "rocketmq2"
    assert verify_grpc_signature("12345678", md["x-mq-date-time"], sig)
    assert grpc_clock_skew_ms(md["x-mq-date-time"]) < 5_000


def test_clock_skew_reads_utc_or_local() -> None:
    now = time.time()
    local = datetime.fromtimestamp(now).strftime("%Y%m%dT%H%M%SZ")
    utc = datetime.utcfromtimestamp(now).strftime("%Y%m%dT%H%M%SZ")
    assert grpc_clock_skew_ms(local, now) < 1000
    assert grpc_clock_skew_ms(utc, now) < 1000
    stale = datetime.fromtimestamp(now - 3600 * 30).strftime("%Y%m%dT%H%M%SZ")
    assert grpc_clock_skew_ms(stale, now) > 15 * 60 * 1000
    with pytest.raises(ValueError):
        grpc_clock_skew_ms("yesterday", now)
