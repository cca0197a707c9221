"""The vectorised String.hashCode equals Java's definition for every string."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orbitmq.common.java_hash import java_string_hash


def _reference(s: str) -> int:
    """String.hashCode spelled out: h = 31*h + unit over UTF-16 code units, 32-bit signed."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def test_known_jvm_values() -> None:
    # Well-known JVM values: "hello".hashCode(), and a string hashing to Integer.MIN_VALUE.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("") == 0
    assert java_string_hash("Aa") == java_string_hash("BB")


@given(st.text(max_size=600))
def test_matches_the_definition(s: str) -> None:
    assert java_string_hash(s) == _reference(s)


def test_long_strings_grow_the_power_table() -> None:
    s = "k" * 5000 + "\U0001F600" * 10
    assert java_string_hash(s) == _reference(s)
