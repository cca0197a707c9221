"""The bloom filter of SQL92 consumer filters (RocketMQ's BloomFilter, BloomFilterData, BitsArray).

Each consumer filter (group, topic) owns ``k`` bit positions out of ``m``, taken from the
Murmur3 x64 128-bit hash of ``group + "#" + topic`` (Guava's ``Hashing.murmur3_128()``, seed 0,
UTF-8, ``asLong()``: the first 8 bytes little-endian) by Kirsch-Mitzenmacher double hashing, all
in Java int arithmetic. At dispatch, a message's bit map gets the positions of every filter its
properties match; a pull then skips, without reading the CommitLog, the entries whose bit map
misses one of its filter's positions. ``k`` and ``m`` follow from the error rate ``f`` (percent)
and the expected number of filters ``n`` exactly as BloomFilter#BloomFilter computes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_M64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    k ^= k >> 33
    return k


def murmur3_x64_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3_x64_128 of ``data``: (h1, h2) as unsigned 64-bit ints."""
    h1 = h2 = seed & _M64
    n = len(data)
    nblocks = n // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[i * 16:i * 16 + 8], "little")
        k2 = int.from_bytes(data[i * 16 + 8:i * 16 + 16], "little")
        k1 = (k1 * _C1) & _M64
        k1 = _rotl64(k1, 31)
        k1 = (k1 * _C2) & _M64
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 = (h1 + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        k2 = (k2 * _C2) & _M64
        k2 = _rotl64(k2, 33)
        k2 = (k2 * _C1) & _M64
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 = (h2 + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = data[nblocks * 16:]
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        k2 = int.from_bytes(tail[8:], "little")
        if k2:
            k2 = (k2 * _C2) & _M64
            k2 = _rotl64(k2, 33)
            k2 = (k2 * _C1) & _M64
            h2 ^= k2
        k1 = (k1 * _C1) & _M64
        k1 = _rotl64(k1, 31)
        k1 = (k1 * _C2) & _M64
        h1 ^= k1
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1, h2


def murmur3_128_as_long(text: str) -> int:
    """Guava ``Hashing.murmur3_128().hashString(text, UTF_8).asLong()`` (a signed Java long)."""
    h1, _ = murmur3_x64_128(text.encode("utf-8"))
    return h1 - (1 << 64) if h1 >= 1 << 63 else h1


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


@dataclass(slots=True)
class BloomFilterData:
    """The bit positions of one consumer filter and the bit count they were taken from."""

    bit_pos: list[int]
    bit_num: int

    def to_json_dict(self) -> dict:
        return {"bitNum": self.bit_num, "bitPos": list(self.bit_pos)}

    @classmethod
    def from_json_dict(cls, obj: dict | None) -> BloomFilterData | None:
        if not isinstance(obj, dict):
            return None
        pos = obj.get("bitPos")
        num = obj.get("bitNum")
        if not isinstance(num, int) or not isinstance(pos, list) or not all(isinstance(p, int) for p in pos):
            return None
        return cls(list(pos), num)


class BloomFilter:
    """BloomFilter.createByFn(f, n): ``f`` the error rate in percent (1..99), ``n`` the filters."""

    __slots__ = ("f", "n", "k", "m")

    def __init__(self, f: int, n: int) -> None:
        if f < 1 or f >= 100:
            raise ValueError("f must be greater or equal than 1 and less than 100")
        if n < 1:
            raise ValueError("n must be greater than 0")
        self.f = f
        self.n = n
        error_rate = f / 100.0
        # BloomFilter#BloomFilter: k = ceil(log_0.5(f)); m = ceil(n * log2(1/f) * log2(e)), rounded up to bytes
        self.k = math.ceil(math.log(error_rate) / math.log(0.5))
        if self.k < 1:
            raise ValueError("Hash function num is less than 1, maybe you should change the value of error rate or bit num!")
        m = math.ceil(n * (math.log(1 / error_rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        self.m = 8 * math.ceil(m / 8.0)

    @classmethod
    def create_by_fn(cls, f: int, n: int) -> BloomFilter:
        return cls(f, n)

    @property
    def byte_length(self) -> int:
        return self.m // 8

    def calc_bit_positions(self, text: str) -> list[int]:
        """BloomFilter#calcBitPositions: k positions from the two halves of one 64-bit hash."""
        hash64 = murmur3_128_as_long(text)
        hash1 = _int32(hash64)
        hash2 = _int32(hash64 >> 32)
        m = self.m
        out = []
        for i in range(1, self.k + 1):
            combined = _int32(hash1 + i * hash2)
            if combined < 0:
                combined = ~combined
            out.append(combined % m)
        return out

    def generate(self, text: str) -> BloomFilterData:
        return BloomFilterData(self.calc_bit_positions(text), self.m)

    def is_valid(self, data: BloomFilterData | None) -> bool:
        """BloomFilter#isValid: the data was made by a filter of this m and k."""
        return (data is not None and data.bit_num == self.m and data.bit_pos is not None
                and len(data.bit_pos) == self.k)

    def hash_to(self, data: BloomFilterData, bits: bytearray) -> None:
        """Set the data's positions in ``bits`` (BitsArray#setBit: byte pos/8, mask 1 << pos%8)."""
        if not self.is_valid(data):
            raise ValueError(f"Bloom filter data may not belong to this filter! {data}, {self}")
        if len(bits) * 8 != self.m:
            raise ValueError(f"Length({len(bits) * 8}) of bits in BitsArray is not equal to {self.m}!")
        for pos in data.bit_pos:
            bits[pos >> 3] |= 1 << (pos & 7)

    def is_hit(self, data: BloomFilterData, bits: bytes) -> bool:
        """BloomFilter#isHit: every position of the data is set in ``bits``."""
        if not self.is_valid(data):
            raise ValueError(f"Bloom filter data may not belong to this filter! {data}, {self}")
        if len(bits) * 8 != self.m:
            raise ValueError(f"Length({len(bits) * 8}) of bits in BitsArray is not equal to {self.m}!")
        return all(bits[pos >> 3] & (1 << (pos & 7)) for pos in data.bit_pos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BloomFilter) and (self.f, self.n, self.k, self.m) == (other.f, other.n, other.k, other.m)

    def __hash__(self) -> int:
        return hash((self.f, self.n, self.k, self.m))

    def __repr__(self) -> str:
        return f"f: {self.f}, n: {self.n}, k: {self.k}, m: {self.m}"


def hit_masks(data: BloomFilterData) -> tuple[tuple[int, int], ...]:
    """(byte index, mask) per position: what a per-entry bit map check tests."""
    return tuple((pos >> 3, 1 << (pos & 7)) for pos in data.bit_pos)
