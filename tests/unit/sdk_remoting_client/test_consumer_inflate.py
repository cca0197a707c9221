"""pull_api.inflate_body: the consumer-side half of MessageDecoder#decode's deCompressBody."""

from __future__ import annotations

import logging
import zlib

import pytest

from orbitmq.common import sysflag
from orbitmq.common.compression import CompressionType, compress
from orbitmq.common.message import MessageExt
from orbitmq.remoting_client.consumer.pull_api import inflate_body

BODY = b"payload " * 1000


def stored(body: bytes, flag: int) -> MessageExt:
    msg = MessageExt("T", body)
    msg.sys_flag = flag
    return msg


@pytest.mark.parametrize("kind", [0, sysflag.COMPRESSION_ZLIB_TYPE])  # 0: a 4.x producer, no type bits
def test_zlib_bodies_are_inflated_and_the_flag_cleared(kind: int) -> None:
    msg = stored(zlib.compress(BODY, 5), sysflag.COMPRESSED_FLAG | kind | sysflag.MULTI_TAGS_FLAG)
    inflate_body(msg)
    assert msg.body == BODY
    assert msg.sys_flag == kind | sysflag.MULTI_TAGS_FLAG


def test_uncompressed_bodies_are_untouched() -> None:
    msg = stored(BODY, sysflag.COMPRESSION_ZLIB_TYPE)  # a type without the flag means nothing
    inflate_body(msg)
    assert (msg.body, msg.sys_flag) == (BODY, sysflag.COMPRESSION_ZLIB_TYPE)


@pytest.mark.parametrize("kind", [CompressionType.LZ4, CompressionType.ZSTD])
def test_lz4_and_zstd_bodies_are_inflated(kind: CompressionType) -> None:
    msg = stored(compress(BODY, kind), sysflag.COMPRESSED_FLAG | kind.compression_flag)
    inflate_body(msg)
    assert (msg.body, msg.sys_flag) == (BODY, kind.compression_flag)


@pytest.mark.parametrize(("kind", "body"), [(sysflag.COMPRESSION_LZ4_TYPE, b"\x04\x22\x4d\x18lz4"),
                                            (sysflag.COMPRESSION_ZSTD_TYPE, b"\x28\xb5\x2f\xfdzstd"),
                                            (sysflag.COMPRESSION_ZLIB_TYPE, b"not zlib at all"),
                                            (5 << 8, b"an unknown type")])
def test_corrupt_bodies_and_unknown_types_stay_as_stored(kind: int, body: bytes,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    msg = stored(body, sysflag.COMPRESSED_FLAG | kind)
    with caplog.at_level(logging.WARNING):
        inflate_body(msg)
    assert (msg.body, msg.sys_flag) == (body, sysflag.COMPRESSED_FLAG | kind)
    assert caplog.records
