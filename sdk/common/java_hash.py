"""Java's String.hashCode, which RocketMQ's on-disk and on-wire formats depend on.

Tag codes in ConsumeQueue entries, IndexFile key slots, tag subscriptions and FIFO queue
selection all use it, so it must match the JVM bit for bit: UTF-16 code units (an astral
character counts as its two surrogates), 32-bit wrap-around, signed result.

It is on the hot path (one IndexFile key per message), so the polynomial is evaluated by
``sum(map(mul, ...))`` over precomputed weights (powers of 31) rather than a per-character
Python loop.
"""

from __future__ import annotations

import sys
from array import array
from operator import mul

_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
_MASK = 0xFFFFFFFF
_PRECOMPUTED = 160  # covers topic#key and topic#UNIQ_KEY index keys
_POWERS = [pow(31, i, 1 << 32) for i in range(_PRECOMPUTED)]
# _DESCENDING[n] = (31**(n-1), ..., 31, 1) mod 2**32: the weights of an n-unit string.
_DESCENDING = [tuple(reversed(_POWERS[:n])) for n in range(_PRECOMPUTED + 1)]


def _weights(n: int) -> tuple[int, ...]:
    if n <= _PRECOMPUTED:
        return _DESCENDING[n]
    return tuple(pow(31, i, 1 << 32) for i in range(n - 1, -1, -1))


def java_string_hash(s: str) -> int:
    """String.hashCode of ``s`` as a signed 32-bit int."""
    units = s.encode("ascii") if s.isascii() else array("H", s.encode(_UTF16))
    h = sum(map(mul, units, _weights(len(units)))) & _MASK
    return h - 0x100000000 if h & 0x80000000 else h
