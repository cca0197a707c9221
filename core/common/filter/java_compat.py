"""Java value semantics the SQL92 filter must reproduce to match RocketMQ's broker.

Property values are strings; RocketMQ compares them with constants through Java's boxed types
(Integer, Long, Double, Boolean) and the parsers Integer.valueOf, Long.valueOf, Double.valueOf
and Boolean.valueOf. Python's int()/float() accept other spellings (underscores, surrounding
blanks, "inf"), so the accepted forms are spelled out here.
"""

from __future__ import annotations

import math
import re

from orbitmq.common.message_codec import tags_hash_code

#: Java ``String.hashCode`` over UTF-16 code units, as a signed 32-bit int (the ConsumeQueue tag code).
java_string_hash = tags_hash_code

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


class JavaLong(int):
    """An int that Java would hold as a Long: conversions of strings then use Long.valueOf."""

    __slots__ = ()


# Value kinds, ordered so that numeric promotion picks the wider one (Integer < Long < Double).
BOOL, INT, LONG, DOUBLE, STR, OTHER = 0, 1, 2, 3, 4, 5
_KINDS = {bool: BOOL, int: INT, JavaLong: LONG, float: DOUBLE, str: STR}


class EvaluationError(Exception):
    """A comparison Java would abort with an exception; the message then does not match."""


def kind_of(value: object) -> int:
    return _KINDS.get(type(value), OTHER)


def to_int32(value: int) -> int:
    """Java ``long.intValue()``: keep the low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def to_int64(value: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value & (1 << 63) else value


# Integer.parseInt: optional sign, then at least one Unicode decimal digit, nothing else.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
# Double.valueOf after String.trim(): NaN, Infinity, decimal or hex, optional f/F/d/D suffix.
_JAVA_DOUBLE = re.compile(
    r"([+-]?)(?:(NaN)|(Infinity)"
    r"|((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?"
    r"|(0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?)"
)


def parse_java_integer(text: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    """Integer.valueOf (or Long.valueOf with the long bounds); EvaluationError on failure."""
    if _JAVA_INTEGER.fullmatch(text) is None:
        raise EvaluationError(f"For input string: {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise EvaluationError(f"For input string: {text!r} (out of range)")
    return value


def parse_java_long(text: str) -> JavaLong:
    return JavaLong(parse_java_integer(text, LONG_MIN, LONG_MAX))


def parse_java_double(text: str) -> float:
    """Double.valueOf: Java trims chars <= U+0020 first."""
    trimmed = java_trim(text)
    m = _JAVA_DOUBLE.fullmatch(trimmed)
    if m is None:
        raise EvaluationError(f"For input string: {text!r}")
    sign, nan, inf, decimal, hexa = m.groups()
    if nan:
        return math.nan
    if inf:
        return -math.inf if sign == "-" else math.inf
    if decimal is not None:
        value = float(decimal)
    else:
        try:
            value = float.fromhex(hexa)
        except OverflowError:
            value = math.inf
    return -value if sign == "-" else value


def parse_java_boolean(text: str) -> bool:
    """Boolean.valueOf: "true" ignoring case is true, anything else false (never fails)."""
    return len(text) == 4 and text.lower() == "true"


def java_trim(text: str) -> str:
    """String.trim(): strips chars <= U+0020, unlike str.strip() which strips Unicode spaces."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def compare_doubles(a: float, b: float) -> int:
    """Double.compareTo: NaN above everything and equal to itself, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
    return (sa > sb) - (sa < sb)


def _compare_same(kind: int, a, b) -> int:
    if kind == DOUBLE:
        return compare_doubles(a, b)
    if kind == STR:
        if a == b:
            return 0
        # String.compareTo orders UTF-16 code units; big-endian bytes keep that order.
        ea = a.encode("utf-16-be", "surrogatepass")
        eb = b.encode("utf-16-be", "surrogatepass")
        return -1 if ea < eb else 1
    return (a > b) - (a < b)


def _parse_as(kind: int, text: str):
    if kind == INT:
        return parse_java_integer(text)
    if kind == LONG:
        return parse_java_long(text)
    if kind == DOUBLE:
        return parse_java_double(text)
    return parse_java_boolean(text)


def java_compare(lv, rv) -> int:
    """ComparisonExpression.__compare with string conversion on: sign of lv compared to rv.

    Mismatched kinds convert the way RocketMQ does: a string beside a number is parsed as that
    number's type (failing parse -> EvaluationError), numbers widen, a boolean beside a number
    compares as "less", and a boolean on the left of a string fails (a ClassCastException
    upstream).
    """
    lk, rk = kind_of(lv), kind_of(rv)
    if OTHER in (lk, rk):
        raise EvaluationError(f"cannot compare {type(lv).__name__} with {type(rv).__name__}")
    if lk != rk:
        if lk == BOOL:
            if rk == STR:
                raise EvaluationError("cannot compare a boolean with a string")
            return -1
        if lk == STR:
            lv = _parse_as(rk, lv)
            lk = rk
        elif rk == STR:
            rv = _parse_as(lk, rv)
        elif rk == BOOL:
            return -1
        else:
            lk = max(lk, rk)
            if lk == DOUBLE:
                lv, rv = float(lv), float(rv)
    return _compare_same(lk, lv, rv)
