"""Message body compression as RocketMQ 5 does it: zlib, LZ4 and ZSTD, chosen by sysFlag bits.

A producer compresses a body of compressMsgBodyOverHowmuch bytes or more with its
``compressType`` (upstream's CompressionType, default ZLIB) and sets COMPRESSED_FLAG plus the
type's bits 8-10 (MessageSysFlag#COMPRESSION_*_TYPE). A reader picks the codec from those bits
(MessageSysFlag#getCompressionType, CompressionType#findByValue); a 4.x producer sets no type
bits, which means zlib. The formats are the streams upstream's compressors write, so bodies move
between Java and Python clients: zlib's (Deflater, InflaterInputStream), the LZ4 frame format
(lz4-java's LZ4FrameOutputStream) and a zstd frame (zstd-jni's ZstdOutputStream, which leaves the
content size out of the frame header, so decompression streams rather than sizing up front).
"""

from __future__ import annotations

import enum
import zlib

import lz4.frame
import zstandard

from orbitmq.common import sysflag

# rocketmq.message.compressType / rocketmq.message.compressLevel: upstream's defaults
DEFAULT_COMPRESS_TYPE = "ZLIB"
DEFAULT_COMPRESS_LEVEL = 5


class CompressionError(ValueError):
    """A body that does not decode with the codec its sysFlag names."""


class CompressionType(enum.IntEnum):
    """CompressionType: the value is what sysFlag bits 8-10 hold."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @classmethod
    def of(cls, name: str) -> CompressionType:
        """CompressionType#of: by name, case-insensitive."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"Unsupported compress type name: {name}") from None

    @classmethod
    def from_sys_flag(cls, flag: int) -> CompressionType:
        """MessageSysFlag#getCompressionType then findByValue; no type bits (a 4.x writer) is zlib."""
        value = (flag & sysflag.COMPRESSION_TYPE_COMPARATOR) >> 8
        if value == 0:
            return cls.ZLIB
        try:
            return cls(value)
        except ValueError:
            raise CompressionError(f"Unknown compress type value: {value}") from None

    @property
    def compression_flag(self) -> int:
        """CompressionType#getCompressionFlag: the sysFlag bits a producer sets."""
        return self.value << 8


def compress(body: bytes, kind: CompressionType, level: int = DEFAULT_COMPRESS_LEVEL) -> bytes:
    """Compressor#compress of the type's compressor (LZ4's ignores the level, as lz4-java's frame
    stream does)."""
    if kind is CompressionType.ZLIB:
        return zlib.compress(body, level)
    if kind is CompressionType.LZ4:
        return lz4.frame.compress(body)
    return zstandard.ZstdCompressor(level=level, write_content_size=False).compress(body)


def decompress(body: bytes, kind: CompressionType) -> bytes:
    """Compressor#decompress; CompressionError on a body that is not what ``kind`` writes."""
    try:
        if kind is CompressionType.ZLIB:
            return zlib.decompress(body)
        if kind is CompressionType.LZ4:
            return lz4.frame.decompress(body)
        out = []
        rest = body
        while True:  # frame by frame: a stream may hold several, each must be whole
            inflater = zstandard.ZstdDecompressor().decompressobj()
            out.append(inflater.decompress(rest))
            if not inflater.eof:  # a cut-off frame inflates to what it has, silently
                raise CompressionError("corrupt ZSTD body: the frame is incomplete")
            rest = inflater.unused_data
            if not rest:
                return b"".join(out)
    except CompressionError:
        raise
    except Exception as exc:  # zlib.error, lz4's RuntimeError, zstandard.ZstdError
        raise CompressionError(f"corrupt {kind.name} body: {exc}") from exc


def decompress_by_sys_flag(body: bytes, flag: int) -> bytes:
    """The body as written, for a record whose sysFlag has COMPRESSED_FLAG."""
    return decompress(body, CompressionType.from_sys_flag(flag))
