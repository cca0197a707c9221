"""The producer's pieces without servers: client ids, selectors, checks, compression, batch size,
ACL signing and TLS context from the config."""

from __future__ import annotations

import ssl
import zlib

import pytest

from orbitmq.auth.client import AclClientRPCHook
from orbitmq.client.api import MessageQueueRef
from orbitmq.client.batch import encode_messages
from orbitmq.client.errors import MQClientError
from orbitmq.common.message import Message
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting_client.config import DEFAULT_INSTANCE_NAME, RemotingClientConfig
from orbitmq.remoting_client.instance import MQClientInstance, get_or_create_instance
from orbitmq.remoting_client.producer import (
    AsyncDefaultMQProducer,
    select_message_queue_by_hash,
    select_message_queue_by_random,
)
from orbitmq.remoting_client.producer.producer import batch_body_size

NS = "127.0.0.1:9876"


def test_client_id_is_ip_at_instance_name_at_unit_name() -> None:
    cfg = RemotingClientConfig(namesrv_addr=NS, client_ip="10.1.2.3", instance_name="orders")
    assert cfg.build_mq_client_id() == "10.1.2.3@orders"
    cfg.unit_name = "unitA"
    assert cfg.build_mq_client_id() == "10.1.2.3@orders@unitA"


def test_default_instance_name_becomes_pid_and_nanos() -> None:
    import os

    cfg = RemotingClientConfig(namesrv_addr=NS, instance_name=DEFAULT_INSTANCE_NAME)
    cfg.change_instance_name_to_pid()
    pid, _, nanos = cfg.instance_name.partition("#")
    assert pid == str(os.getpid()) and nanos.isdigit()
    named = RemotingClientConfig(namesrv_addr=NS, instance_name="mine")
    named.change_instance_name_to_pid()
    assert named.instance_name == "mine"


def test_one_instance_per_client_id() -> None:
    a = get_or_create_instance(RemotingClientConfig(namesrv_addr=NS, client_ip="1.1.1.1", instance_name="x"))
    b = get_or_create_instance(RemotingClientConfig(namesrv_addr=NS, client_ip="1.1.1.1", instance_name="x"))
    c = get_or_create_instance(RemotingClientConfig(namesrv_addr=NS, client_ip="1.1.1.1", instance_name="y"))
    assert a is b and a is not c and a.client_id == "1.1.1.1@x"


def test_no_name_server_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(MQClientError) as refused:
        MQClientInstance(RemotingClientConfig())
    assert refused.value.code == 10004


def test_credentials_sign_and_tls_keys_make_a_context() -> None:
    cfg = RemotingClientConfig(namesrv_addr=NS, access_key="ak", secret_key="sk", tls_enable=True)
    instance = MQClientInstance(cfg, "c1")
    assert isinstance(instance.api.remoting.rpc_hook, AclClientRPCHook)
    assert instance.api.remoting.rpc_hook.access_key == "ak"
    assert isinstance(instance.api.remoting.ssl_context, ssl.SSLContext)
    plain = MQClientInstance(RemotingClientConfig(namesrv_addr=NS), "c2")
    assert plain.api.remoting.rpc_hook is None and plain.api.remoting.ssl_context is None
    with pytest.raises(ValueError, match="secret_key"):
        RemotingClientConfig(namesrv_addr=NS, access_key="ak").credentials()


def test_hash_selector_is_java_hashcode_modulo_queues() -> None:
    mqs = [MessageQueueRef("T", "b", i) for i in range(4)]
    java = 0
    for ch in "order-1":  # String#hashCode, 32-bit signed
        java = (java * 31 + ord(ch)) & 0xFFFFFFFF
    java = java - (1 << 32) if java & 0x80000000 else java
    assert java < 0 and select_message_queue_by_hash(mqs, None, "order-1").queue_id == abs(java) % 4
    assert select_message_queue_by_hash(mqs, None, 7).queue_id == 3
    assert select_message_queue_by_hash(mqs, None, -5).queue_id == 1
    assert select_message_queue_by_hash(mqs, None, 1 << 40).queue_id == ((1 << 40) ^ ((1 << 40) >> 32)) % 4 % 4
    assert select_message_queue_by_random(mqs, None, None) in mqs


def test_checks_before_sending() -> None:
    producer = AsyncDefaultMQProducer("PG", RemotingClientConfig(namesrv_addr=NS), max_message_size=10)
    producer.check_message(Message("T", b"0123456789"))
    for msg, code, text in ((Message("T", b"0123456789x"), ResponseCode.MESSAGE_ILLEGAL, "over max value, MAX: 10"),
                            (Message("T", b""), ResponseCode.MESSAGE_ILLEGAL, "length is zero"),
                            (Message("T?", b"x"), -1, "illegal characters"),
                            (Message("", b"x"), -1, "blank"),
                            (Message("T" * 200, b"x"), -1, "longer than topic max length"),
                            (Message("SCHEDULE_TOPIC_XXXX", b"x"), ResponseCode.NO_PERMISSION, "forbidden")):
        with pytest.raises(MQClientError, match=text) as refused:
            producer.check_message(msg)
        assert refused.value.code == code


def test_compression_threshold_is_inclusive() -> None:
    producer = AsyncDefaultMQProducer("PG", RemotingClientConfig(namesrv_addr=NS))
    assert producer._compress(b"x" * 4095) is None
    packed = producer._compress(b"x" * 4096)
    assert packed is not None and zlib.decompress(packed) == b"x" * 4096


def test_compress_type_picks_the_codec_and_bad_names_are_refused() -> None:
    from orbitmq.common.compression import CompressionType, decompress

    producer = AsyncDefaultMQProducer("PG", compress_type="zstd")
    assert producer.compress_type is CompressionType.ZSTD
    packed = producer._compress(b"y" * 5000)
    assert packed is not None and decompress(packed, CompressionType.ZSTD) == b"y" * 5000
    with pytest.raises(ValueError, match="Unsupported compress type name: BROTLI"):
        AsyncDefaultMQProducer("PG", compress_type="BROTLI")


def test_batch_body_size_is_the_encoded_length() -> None:
    msgs = [Message("T", b"abc", properties={"UNIQ_KEY": "X" * 32, "KEYS": "k"}), Message("T", b"d" * 300)]
    assert batch_body_size(msgs) == len(encode_messages(msgs))
