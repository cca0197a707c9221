"""Transaction codecs: op-message bodies (both RocketMQ forms) and the proxy's transaction id."""

from __future__ import annotations

import base64

import pytest

from orbitmq.broker.transaction.op_codec import decode_op_body, encode_op_body
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.transaction import (
    TransactionHandle,
    decode_transaction_id,
    encode_transaction_id,
    offset_of_msg_id,
)


def test_op_body_old_single_offset_form() -> None:
    assert decode_op_body(b"1234") == [1234]
    assert decode_op_body("0") == [0]


def test_op_body_batched_form_round_trips() -> None:
    assert encode_op_body([12, 13, 17]) == b"12,13,17,"
    assert decode_op_body(b"12,13,17,") == [12, 13, 17]
    assert decode_op_body(encode_op_body([2**62])) == [2**62]


def test_op_body_as_fill_op_remove_map_reads_it() -> None:
    # Empty pieces are dropped; what Long.parseLong refuses becomes -1.
    assert decode_op_body(b"") == []
    assert decode_op_body(b",,5,") == [5]
    assert decode_op_body(b"7,x, 8,9") == [7, -1, -1, 9]
    assert decode_op_body(b"+3,-4,") == [3, -4]
    assert decode_op_body(b"99999999999999999999,") == [-1]  # beyond a long


@pytest.mark.parametrize("handle", [
    TransactionHandle("broker-a", 0, 0),
    TransactionHandle("broker-a", 123_456_789, 42),
    TransactionHandle("b" * 255, 2**63 - 1, 2**63 - 1),
    TransactionHandle("brökér-ü", 1, 2),
])
def test_transaction_id_round_trips(handle: TransactionHandle) -> None:
    text = encode_transaction_id(handle)
    assert decode_transaction_id(text) == handle
    assert set(text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_transaction_id_is_compact() -> None:
    assert len(encode_transaction_id(TransactionHandle("broker-a", 1 << 40, 1 << 20))) <= 32


def _invalid(text: str) -> str:
    with pytest.raises(ProxyError) as info:
        decode_transaction_id(text)
    assert info.value.code == pb.Code.INVALID_TRANSACTION_ID
    return info.value.message


def test_garbled_or_forged_transaction_ids_are_refused() -> None:
    good = encode_transaction_id(TransactionHandle("broker-a", 4096, 7))
    raw = bytearray(base64.urlsafe_b64decode(good + "=" * (-len(good) % 4)))
    for text in ("", "   ", "not base64 !", good[:-1], good + "A", "A" * 600,
                 "7F0000010000271100000000000012AB",  # an offset msg id, as an upstream id looks
                 "AC11000100002A9F0000000000000000"):
        _invalid(text)
    for i in range(len(raw)):  # every single-byte change is caught by the CRC or the structure
        forged = bytearray(raw)
        forged[i] ^= 0x01
        _invalid(base64.urlsafe_b64encode(bytes(forged)).rstrip(b"=").decode())
    assert "checksum" in _invalid(good[:-2] + ("A" if good[-2] != "A" else "B") + good[-1])


def test_transaction_id_refuses_bad_handles() -> None:
    with pytest.raises(ValueError):
        encode_transaction_id(TransactionHandle("", 1, 1))
    with pytest.raises(ValueError):
        encode_transaction_id(TransactionHandle("b", -1, 1))


def test_offset_of_msg_id() -> None:
    assert offset_of_msg_id("7F00000100002A9F00000000000012AB") == 0x12AB
    assert offset_of_msg_id("7F00000100002A9F0000000000000010,7F00000100002A9F0000000000000020") == 0x10
