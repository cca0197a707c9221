"""The compiled properties codec and String.hashCode (_speedups_message.pyx) equal the Python code.

The pure-Python functions stay in message.py / java_hash.py / message_codec.py as ``_py_<name>``;
they are the oracle here. A missing or stale build must fail these tests, never skip them. The
tests call the compiled functions themselves, so they compare the same code under ORBITMQ_NO_SPEEDUPS=1.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.common import _speedups_message as compiled
from orbitmq.common import java_hash, message, message_codec
from tests.support.speedups import assert_in_use

SWAPPED = [
    (message, "string_to_properties"),
    (message, "parse_properties_exact"),
    (message, "properties_to_string"),
    (message, "bytes_to_properties"),
    (java_hash, "java_string_hash_u32"),
    (java_hash, "java_string_hash"),
    (message_codec, "tags_hash_code"),
]


@pytest.mark.parametrize(("module", "name"), SWAPPED, ids=[f"{m.__name__}.{n}" for m, n in SWAPPED])
def test_public_names_are_the_compiled_functions(module: Any, name: str) -> None:
    """The compiled functions are in use (the Python ones with ORBITMQ_NO_SPEEDUPS=1)."""
    assert_in_use(module, name, compiled)


def _outcome(func: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What a call gives: ("ok", value) or ("raise", (exception type, its args))."""
    try:
        return "ok", func(*args)
    except Exception as exc:  # noqa: BLE001 - any exception must be the same one
        return "raise", (type(exc), exc.args)


def _same_str(a: str, b: str) -> None:
    assert type(a) is str and type(b) is str
    assert a == b
    # The same compact representation (1, 2 or 4 bytes a char), as a canonical str must have.
    assert sys.getsizeof(a) == sys.getsizeof(b)


def _same_props(got: dict[str, str], want: dict[str, str]) -> None:
    assert type(got) is dict
    assert list(got.items()) == list(want.items())  # values and insertion order
    for k, v in got.items():
        assert type(k) is str and type(v) is str


# ---- strategies -------------------------------------------------------------------------------

# Separators often, and every kind of character: ASCII, Latin-1, BMP (lone surrogates too), astral.
_CHAR = st.one_of(
    st.sampled_from(["\x01", "\x02", "\x01", "\x02", "=", " "]),
    st.characters(max_codepoint=0x7F),
    st.characters(min_codepoint=0x80, max_codepoint=0xFF),
    st.characters(min_codepoint=0x100, max_codepoint=0xFFFF, codec=None, categories=None),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, codec=None, categories=None),
    st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, codec=None, categories=None),
)
_TEXT = st.text(_CHAR, max_size=80)
_NAME = st.one_of(st.sampled_from(["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "DELAY", "TRACE_ON", "a", "Tags"]),
                  st.text(st.characters(max_codepoint=0x7F), max_size=60), _TEXT)
_VALUE = st.one_of(st.none(), st.sampled_from(["", "true", "0", "TagA"]), _TEXT)


@st.composite
def _properties_strings(draw: st.DrawFn) -> str:
    """Mostly well-formed strings (what clients send), plus arbitrary text."""
    if draw(st.booleans()):
        return draw(_TEXT)
    pairs = draw(st.lists(st.tuples(_NAME, _TEXT), max_size=12))
    s = "".join(f"{k}\x01{v}\x02" for k, v in pairs)
    if s and draw(st.booleans()):
        s = s[:-1]
    return s


def _utf16_reference(s: str) -> int:
    """String.hashCode by its definition over UTF-16 code units, unsigned."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h


# ---- properties -------------------------------------------------------------------------------

@settings(max_examples=1500)
@given(_properties_strings())
def test_string_to_properties_matches_python(s: str) -> None:
    want = message._py_string_to_properties(s)
    _same_props(compiled.string_to_properties(s), want)
    props, exact = compiled.parse_properties_exact(s)
    _same_props(props, want)
    want_exact = not s or (s[-1] == "\x02" and len(want) == s.count("\x02"))
    assert exact is want_exact
    assert message._py_parse_properties_exact(s) == (props, exact)


@settings(max_examples=1000)
@given(_properties_strings())
def test_bytes_to_properties_matches_python(s: str) -> None:
    try:
        data = s.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: bytes that are not UTF-8 instead
        data = s.encode("utf-8", "surrogatepass")
    want = _outcome(lambda d: message._py_string_to_properties(bytes(d).decode("utf-8")), data)
    for arg in (data, bytearray(data), memoryview(data)):
        got = _outcome(compiled.bytes_to_properties, arg)
        assert got[0] == want[0]
        if got[0] == "ok":
            _same_props(got[1], want[1])
        else:
            assert got == want
        assert got == _outcome(message._py_bytes_to_properties, arg)


@settings(max_examples=1000)
@given(st.lists(st.tuples(_NAME, _VALUE), max_size=12))
def test_properties_to_string_matches_python(pairs: list[tuple[str, str | None]]) -> None:
    props = dict(pairs)
    _same_str(compiled.properties_to_string(props), message._py_properties_to_string(props))


@settings(max_examples=300)
@given(st.lists(st.tuples(st.text(st.characters(max_codepoint=0x7F, exclude_characters="\x01\x02"), min_size=1),
                          st.text(st.characters(exclude_characters="\x02"))), max_size=12))
def test_round_trip_is_exact(pairs: list[tuple[str, str]]) -> None:
    props = dict(pairs)
    s = compiled.properties_to_string(props)
    assert compiled.parse_properties_exact(s) == (props, True)


def test_edge_cases() -> None:
    cases = ["", "\x02", "\x01", "\x01\x02", "a", "a\x01", "a\x01b", "a\x01b\x02", "\x02\x02a\x01b\x02\x02",
             "a\x01b\x01c\x02", "a\x01\x02a\x01x\x02", "\x01v\x02k\x01v\x02", "a\x01b\x02c\x02", "é\x01ü\x02",
             "k\x01\ud800\x02", "\U0001F600\x01\U0001F601", "UNIQ_KEY\x01x\x02UNIQ_KEY\x01y\x02"]
    for s in cases:
        _same_props(compiled.string_to_properties(s), message._py_string_to_properties(s))
        assert compiled.parse_properties_exact(s) == (
            message._py_string_to_properties(s),
            not s or (s[-1] == "\x02" and len(message._py_string_to_properties(s)) == s.count("\x02")))
    assert compiled.parse_properties_exact("a\x01\x02a\x01x\x02") == ({"a": "x"}, False)
    assert compiled.parse_properties_exact("a\x01b\x02") == ({"a": "b"}, True)
    assert compiled.parse_properties_exact("a\x01b") == ({"a": "b"}, False)


def test_big_input() -> None:
    props = {f"key{i}": "v" * (i % 300) + "é" * (i % 3) for i in range(5000)}
    s = message._py_properties_to_string(props)
    _same_str(compiled.properties_to_string(props), s)
    assert compiled.parse_properties_exact(s) == (props, True)
    assert compiled.bytes_to_properties(s.encode()) == props


def test_name_cache_never_confuses_names() -> None:
    # Many names of one length whose sampled bytes collide, interleaved, each with its own value.
    names = [f"N{i:04d}X" for i in range(400)] + [f"N{i:04d}Y" for i in range(400)] + ["é" * 6, "ÿ" * 6]
    for _ in range(3):
        for i in range(0, len(names), 7):
            chunk = names[i:i + 7]
            s = "".join(f"{n}\x01{n[::-1]}\x02" for n in chunk)
            assert compiled.string_to_properties(s) == {n: n[::-1] for n in chunk}


class _Props(Mapping[str, Any]):
    def __init__(self, items: dict[str, Any]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class _Str(str):
    def __format__(self, spec: str) -> str:
        return "<" + str.__format__(self, spec) + ">"


def test_odd_arguments_behave_like_python() -> None:
    od = OrderedDict(a="1", b="2", c=None)
    od.move_to_end("a")
    odd_props = [od, MappingProxyType({"a": "1"}), _Props({"x": "y", "z": None}), {"n": 5, "b": True, "f": 1.5},
                 {1: "x"}, {_Str("k"): _Str("v")}, {None: None}, {"a": None}, {}, None, [("a", "b")], "ab", 5]
    for props in odd_props:
        assert _outcome(compiled.properties_to_string, props) == _outcome(message._py_properties_to_string, props)
    odd_strings = [None, "", b"", b"a\x01b", 0, 7, [], ["a\x01b"], _Str("a\x01b\x02"), bytearray(b"a")]
    for s in odd_strings:
        assert _outcome(compiled.string_to_properties, s) == _outcome(message._py_string_to_properties, s)
        assert _outcome(compiled.parse_properties_exact, s) == _outcome(message._py_parse_properties_exact, s)
    odd_data = [b"", b"\xff", b"a\x01\xc3\x28\x02", bytearray(b"\xe2\x82"), memoryview(b"a\x01b\x02"),
                memoryview(b"xxa\x01b\x02")[2:], memoryview(bytearray(b"a\x01b")), "a\x01b", 3, None,
                memoryview(b"abcd").cast("i")]
    for data in odd_data:
        assert _outcome(compiled.bytes_to_properties, data) == _outcome(message._py_bytes_to_properties, data)


# ---- String.hashCode --------------------------------------------------------------------------

@settings(max_examples=1500)
@given(st.text(_CHAR, max_size=300))
def test_java_hash_matches_python(s: str) -> None:
    want = _outcome(java_hash._py_java_string_hash_u32, s)
    got = _outcome(compiled.java_string_hash_u32, s)
    assert got == want
    signed = _outcome(compiled.java_string_hash, s)
    assert signed == _outcome(java_hash._py_java_string_hash, s)
    assert _outcome(compiled.tags_hash_code, s) == signed
    if want[0] == "ok":
        assert type(got[1]) is int and type(signed[1]) is int
        assert got[1] == _utf16_reference(s)
        assert signed[1] == (got[1] ^ 0x80000000) - 0x80000000


@settings(max_examples=500)
@given(st.text(st.characters(max_codepoint=0xFF), max_size=600))
def test_java_hash_one_byte_strings_match_python(s: str) -> None:
    # The 1-byte kind is hashed four units a step: every length mod 4 and every byte value.
    assert compiled.java_string_hash_u32(s) == java_hash._py_java_string_hash_u32(s) == _utf16_reference(s)


def test_java_hash_known_values_and_odd_arguments() -> None:
    assert compiled.java_string_hash("hello") == 99162322
    assert compiled.java_string_hash("polygenelubricants") == -2147483648
    assert compiled.java_string_hash_u32("polygenelubricants") == 0x80000000
    assert compiled.java_string_hash("") == 0 == compiled.java_string_hash_u32("")
    assert compiled.java_string_hash("\U0001F600") == 31 * 0xD83D + 0xDE00
    long = "k" * 100_000 + "\U0001F600é" * 1000
    assert compiled.java_string_hash_u32(long) == java_hash._py_java_string_hash_u32(long)
    for arg in [None, b"abc", 5, ["a"], _Str("abc"), "a\udc80b", "\ud800", "\U0001F600\ud800x"]:
        for name in ("java_string_hash_u32", "java_string_hash"):
            assert _outcome(getattr(compiled, name), arg) == _outcome(getattr(java_hash, f"_py_{name}"), arg)
        assert _outcome(compiled.tags_hash_code, arg) == _outcome(message_codec._py_tags_hash_code, arg)


def test_keyword_arguments_keep_their_python_names() -> None:
    import inspect

    args = {"string_to_properties": "a\x01b\x02", "parse_properties_exact": "a\x01b\x02",
            "properties_to_string": {"a": "b"}, "bytes_to_properties": b"a\x01b\x02",
            "java_string_hash_u32": "abc", "java_string_hash": "abc", "tags_hash_code": "TagA"}
    for module, name in SWAPPED:
        py = getattr(module, f"_py_{name}")
        (param,) = inspect.signature(py).parameters
        assert getattr(compiled, name)(**{param: args[name]}) == py(**{param: args[name]})
