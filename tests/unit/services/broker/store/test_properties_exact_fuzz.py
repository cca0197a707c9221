"""parse_properties_exact's split fast path against its definition: string_to_properties, and
whether properties_to_string of the result gives the string back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orbitmq.common.message import parse_properties_exact, properties_to_string, string_to_properties

# Strings made mostly of separators and short names, so that empty names and values, missing
# separators, repeated names and values holding \x01 all come up often.
_PIECES = st.sampled_from(["\x01", "\x02", "\x01", "\x02", "a", "b", "TAGS", "", "\u00e9", "UNIQ_KEY", "x\x01y"])


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.lists(_PIECES, max_size=14).map("".join), st.text(max_size=30)))
def test_matches_the_definition(s):
    props, exact = parse_properties_exact(s)
    want = string_to_properties(s)
    assert props == want and list(props) == list(want)
    assert exact == (properties_to_string(want) == (s or ""))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(st.characters(blacklist_characters="\x01\x02"), min_size=1, max_size=8),
                       st.text(st.characters(blacklist_characters="\x02"), max_size=8), max_size=8))
def test_canonical_strings_are_exact(d):
    s = properties_to_string(d)
    props, exact = parse_properties_exact(s)
    assert props == string_to_properties(s) and exact


def test_none_and_empty():
    assert parse_properties_exact(None) == ({}, True)
    assert parse_properties_exact("") == ({}, True)
