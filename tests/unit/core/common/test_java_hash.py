"""The lane-merging String.hashCode equals Java's definition for every string."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.common.java_hash import java_string_hash, java_string_hash_u32, java_utf16_length, pow31


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


# ---- the lane-merging evaluation, edge by edge ----------------------------------------------

_ASTRAL = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF)
_BMP = st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",))
_MIXED = st.text(st.one_of(st.characters(max_codepoint=0x7F), _BMP, _ASTRAL), max_size=300)


@given(st.text(st.characters(max_codepoint=0x7F), max_size=300))
def test_ascii_matches_the_definition(s: str) -> None:
    assert java_string_hash(s) == _reference(s)
    assert java_string_hash_u32(s) == _reference(s) & 0xFFFFFFFF


@given(_MIXED)
def test_non_ascii_and_astral_match_the_definition(s: str) -> None:
    assert java_string_hash(s) == _reference(s)
    assert java_utf16_length(s) == len(s.encode("utf-16-le")) // 2


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from([511, 512, 513, 1023, 1024, 1025, 1537, 3000]),
    st.one_of(st.just("k"), st.just("\u00e9"), st.just("\U0001F600"), st.characters(max_codepoint=0x7F)),
    st.integers(min_value=0, max_value=2),
)
def test_chunked_long_strings(n: int, ch: str, pad: int) -> None:
    # Lengths around the one-piece limit, and astral characters whose surrogates straddle it.
    s = "x" * pad + ch * n
    assert java_string_hash(s) == _reference(s)


@given(st.text(max_size=80), st.text(max_size=80))
def test_hash_of_a_concatenation_from_its_parts(a: str, b: str) -> None:
    # What IndexKeyHasher relies on: hash(a + b) = hash(a) * 31**len(b) + hash(b) (mod 2**32).
    combined = (java_string_hash_u32(a) * pow31(java_utf16_length(b)) + java_string_hash_u32(b)) & 0xFFFFFFFF
    assert combined == java_string_hash_u32(a + b)


def test_pow31() -> None:
    for n in (0, 1, 2, 31, 511, 512, 513, 10_000):
        assert pow31(n) == pow(31, n, 1 << 32)


def test_every_merge_round_boundary() -> None:
    # 2**k +- 1 units: the number of merge rounds changes there; all-0x7F / all-0xFFFF maximise lanes.
    for k in range(0, 11):
        for n in {max(0, 2**k - 1), 2**k, 2**k + 1}:
            for ch in ("\x7f", "\uffff", "\U0010FFFF", "\x00"):
                s = ch * n
                assert java_string_hash(s) == _reference(s), (k, n, ch)
