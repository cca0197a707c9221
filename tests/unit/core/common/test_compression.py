"""orbitmq.common.compression: the codecs by sysFlag, their round trips and their errors."""

from __future__ import annotations

import zlib

import lz4.frame
import pytest
import zstandard

from orbitmq.common import sysflag
from orbitmq.common.compression import (
    CompressionError,
    CompressionType,
    compress,
    decompress,
    decompress_by_sys_flag,
)

BODY = bytes(range(256)) * 64 + b"tail"


def test_names_values_and_flags_are_upstreams() -> None:
    assert [(t.name, t.value) for t in CompressionType] == [("LZ4", 1), ("ZSTD", 2), ("ZLIB", 3)]
    assert CompressionType.LZ4.compression_flag == sysflag.COMPRESSION_LZ4_TYPE
    assert CompressionType.ZSTD.compression_flag == sysflag.COMPRESSION_ZSTD_TYPE
    assert CompressionType.ZLIB.compression_flag == sysflag.COMPRESSION_ZLIB_TYPE
    assert CompressionType.of(" lz4 ") is CompressionType.LZ4
    with pytest.raises(ValueError, match="Unsupported compress type name: snappy"):
        CompressionType.of("snappy")


def test_type_from_sys_flag() -> None:
    assert CompressionType.from_sys_flag(sysflag.COMPRESSED_FLAG) is CompressionType.ZLIB  # a 4.x producer
    for kind in CompressionType:
        assert CompressionType.from_sys_flag(sysflag.COMPRESSED_FLAG | kind.compression_flag | 0x80) is kind
    with pytest.raises(CompressionError, match="Unknown compress type value: 5"):
        CompressionType.from_sys_flag(sysflag.COMPRESSED_FLAG | 5 << 8)


@pytest.mark.parametrize("kind", list(CompressionType))
def test_round_trip_and_corrupt_bodies(kind: CompressionType) -> None:
    packed = compress(BODY, kind, 5)
    assert len(packed) < len(BODY)
    assert decompress(packed, kind) == BODY
    assert decompress_by_sys_flag(packed, sysflag.COMPRESSED_FLAG | kind.compression_flag) == BODY
    with pytest.raises(CompressionError, match=f"corrupt {kind.name} body"):
        decompress(b"\x00garbage\xff" * 3, kind)


def test_reads_the_streams_java_compressors_write() -> None:
    """Streams as lz4-java's LZ4FrameOutputStream (block-independent frames, content size left out)
    and zstd-jni's ZstdOutputStream (several frames' worth of streamed blocks, no content size) write."""
    lz4_stream = lz4.frame.compress(BODY, content_checksum=True, store_size=False)
    assert decompress(lz4_stream, CompressionType.LZ4) == BODY
    chunks = zstandard.ZstdCompressor(level=5, write_content_size=False).compressobj()
    zstd_stream = chunks.compress(BODY[:5000]) + chunks.compress(BODY[5000:]) + chunks.flush()
    assert decompress(zstd_stream, CompressionType.ZSTD) == BODY
    assert decompress(zstd_stream + zstd_stream, CompressionType.ZSTD) == BODY + BODY  # two frames
    with pytest.raises(CompressionError, match="incomplete"):
        decompress(zstd_stream[:-4], CompressionType.ZSTD)
    assert decompress(zlib.compress(BODY, 9), CompressionType.ZLIB) == BODY
