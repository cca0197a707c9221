"""Java's String.hashCode, which RocketMQ's on-disk and on-wire formats depend on.

Tag codes in ConsumeQueue entries, IndexFile key slots, tag subscriptions and FIFO queue
selection all use it, so it must match the JVM bit for bit: UTF-16 code units (an astral
character counts as its two surrogates), 32-bit wrap-around, signed result.

It is on the hot path (an IndexFile key or two per stored message), so instead of a loop per
code unit the string is read as one big integer, one code unit per 8-bit (ASCII) or 16-bit
lane, and neighbouring lanes are merged pairwise, log2(n) times: a pair of lanes holding the
hashes ``lo`` and ``hi`` of two adjacent g-unit groups becomes ``lo + hi * 31**g``, which is the
hash of the 2g-unit group. Every merge is a handful of C-level big-integer operations on the
whole string at once, and a group's exact hash always fits its lane, so lanes never carry
into each other; the final single lane is the exact polynomial, reduced mod 2**32.
"""

from __future__ import annotations

from operator import mul

from orbitmq.common import speedups

_MASK = 0xFFFFFFFF
_SIGN = 0x80000000
# Strings up to this many code units are hashed in one piece; longer ones chunk by chunk.
_CHUNK = 512
_from_bytes = int.from_bytes


def _lane_mask(lane_bits: int, total_bits: int) -> int:
    """The low ``lane_bits`` of every 2*lane_bits-bit lane, over ``total_bits`` bits."""
    lane = (1 << lane_bits) - 1
    mask = 0
    for pos in range(0, total_bits, 2 * lane_bits):
        mask |= lane << pos
    return mask


def _plans(unit_bits: int) -> list[tuple[tuple[int, int, int], ...]]:
    """plans[n]: the (shift, mask, factor) merge rounds for an n-unit string.

    A pair lane of 2L bits holds ``lo + hi * 2**L``; subtracting ``hi * (2**L - 31**g)``
    leaves ``lo + hi * 31**g`` in place (never negative, never wider than 2L bits).
    """
    rounds: list[tuple[int, int, int]] = []
    lane_bits, units = unit_bits, 1
    while units < _CHUNK:
        rounds.append((lane_bits, _lane_mask(lane_bits, _CHUNK * unit_bits), (1 << lane_bits) - 31**units))
        lane_bits, units = lane_bits * 2, units * 2
    return [tuple(rounds[: (n - 1).bit_length()]) if n > 1 else () for n in range(_CHUNK + 1)]


_ASCII_PLANS = _plans(8)
_UTF16_PLANS = _plans(16)
# Below 8 units (tags, mostly) a plain dot product with the weights 31**(n-1) .. 1 is quicker.
_SMALL = 8
_SMALL_WEIGHTS = [tuple(pow(31, i, 1 << 32) for i in range(n - 1, -1, -1)) for n in range(_SMALL)]
_POW31 = [pow(31, i, 1 << 32) for i in range(_CHUNK + 1)]


def pow31(n: int) -> int:
    """31**n mod 2**32: the factor a prefix's hash is scaled by when n code units follow it."""
    return _POW31[n] if n <= _CHUNK else pow(31, n, 1 << 32)


def _hash_units(data: bytes, unit_size: int, plans: list[tuple[tuple[int, int, int], ...]]) -> int:
    n = len(data) // unit_size
    if n <= _CHUNK:
        a = _from_bytes(data, "big")
        for shift, mask, factor in plans[n]:
            a -= (a >> shift & mask) * factor
        return a & _MASK
    step = _CHUNK * unit_size
    h = 0
    for i in range(0, len(data), step):
        chunk = data[i : i + step]
        h = (h * pow31(len(chunk) // unit_size) + _hash_units(chunk, unit_size, plans)) & _MASK
    return h


# Compiled twin: _speedups_message.java_string_hash_u32 (same value).
def java_string_hash_u32(s: str) -> int:
    """String.hashCode of ``s`` as an unsigned 32-bit int (the same bits as the signed one)."""
    if s.isascii():
        data = s.encode("ascii")
        n = len(data)
        if n < _SMALL:
            return sum(map(mul, data, _SMALL_WEIGHTS[n])) & _MASK
        if n <= _CHUNK:  # _hash_units inlined for the common case
            a = _from_bytes(data, "big")
            for shift, mask, factor in _ASCII_PLANS[n]:
                a -= (a >> shift & mask) * factor
            return a & _MASK
        return _hash_units(data, 1, _ASCII_PLANS)
    return _hash_units(s.encode("utf-16-be"), 2, _UTF16_PLANS)


_py_java_string_hash_u32 = java_string_hash_u32


# Compiled twin: _speedups_message.java_string_hash (same value).
def java_string_hash(s: str) -> int:
    """String.hashCode of ``s`` as a signed 32-bit int."""
    if s.isascii():  # java_string_hash_u32's fast paths, inlined: tags are hashed per message
        data = s.encode("ascii")
        n = len(data)
        if n < _SMALL:
            return ((sum(map(mul, data, _SMALL_WEIGHTS[n])) & _MASK) ^ _SIGN) - _SIGN
        if n <= _CHUNK:
            a = _from_bytes(data, "big")
            for shift, mask, factor in _ASCII_PLANS[n]:
                a -= (a >> shift & mask) * factor
            return ((a & _MASK) ^ _SIGN) - _SIGN
    return (java_string_hash_u32(s) ^ _SIGN) - _SIGN


_py_java_string_hash = java_string_hash


def java_utf16_length(s: str) -> int:
    """String.length(): code units, so an astral character counts twice."""
    return len(s) if s.isascii() else len(s.encode("utf-16-le")) // 2


# Compiled: a plain loop over the code units, in C. None: the code above runs.
_fast = speedups.load("orbitmq.common._speedups_message")
if _fast is not None:
    java_string_hash = _fast.java_string_hash
    java_string_hash_u32 = _fast.java_string_hash_u32
