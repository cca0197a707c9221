"""Message filtering: TAG expressions, Java hash codes, RocketMQ's SQL92 selector semantics.

The SQL92 outcomes below were cross-checked against upstream's own SelectorParser (built from
apache/rocketmq's filter module on a JVM); they agree except for the two deliberate
differences documented in sql_parser.py (trailing input rejected, 0.0 literal accepted).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.common.filter import (
    SUB_ALL,
    ExpressionType,
    FilterExpressionError,
    Sql92MessageFilter,
    SubscriptionData,
    TagFilter,
    build_message_filter,
    build_message_filter_for,
    compile_sql92,
    java_string_hash,
    parse_tag_expression,
    validate_filter_expression,
)
from orbitmq.common.filter.java_compat import parse_java_double, parse_java_integer
from orbitmq.common.filter.sql_parser import MAX_DEPTH


def matches(expr: str, **props: str) -> bool:
    return compile_sql92(expr).evaluate(props)


def shape(expr: str) -> str:
    return compile_sql92(expr).describe()


# --------------------------------------------------------------------------- Java hashCode
# Vectors printed by a JVM ("...".hashCode()).
JAVA_HASHES = {
    "TagA": 2598919,
    "TagB": 2598920,
    "": 0,
    "hello": 99162322,
    "*": 42,
    "Aa": 2112,
    "BB": 2112,
    "\u00e9": 233,
    "\U0001f600": 1772899,  # astral: two UTF-16 code units
    "polygenelubricants": -2147483648,
    "\u4e2d\u6587\u6807\u7b7e": 622041809,
    "\U0001d11etag": 1261896688,
    "tag with spaces": 1806266689,
}


@pytest.mark.parametrize(("text", "expected"), sorted(JAVA_HASHES.items()))
def test_java_string_hash_vectors(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


@given(st.text())
def test_java_string_hash_is_the_utf16_polynomial(text: str) -> None:
    data = text.encode("utf-16-be", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]
    h = sum(u * pow(31, len(units) - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    assert java_string_hash(text) == (h - (1 << 32) if h >= 1 << 31 else h)


# --------------------------------------------------------------------------- TAG expressions
@pytest.mark.parametrize("expr", ["*", "", None])
def test_tag_expression_subscribe_all(expr) -> None:
    sub = parse_tag_expression(expr, topic="T")
    assert sub.sub_string == SUB_ALL and sub.is_sub_all
    assert sub.tags_set == set() and sub.code_set == set()
    assert sub.topic == "T" and sub.expression_type == ExpressionType.TAG


@pytest.mark.parametrize(
    ("expr", "tags"),
    [
        ("A||B", {"A", "B"}),
        (" A || B ", {"A", "B"}),
        ("A || B ||C", {"A", "B", "C"}),
        ("TagA||||TagB||", {"TagA", "TagB"}),
        ("||A", {"A"}),
        ("A|B", {"A|B"}),
        ("|||", {"|"}),
        (" || ", set()),  # Java's split keeps the blank parts, trimming empties them
        (" * ", {"*"}),  # only the exact "*" means all
    ],
)
def test_tag_expression_sets(expr: str, tags: set[str]) -> None:
    sub = parse_tag_expression(expr)
    assert sub.sub_string == expr
    assert sub.tags_set == tags
    assert sub.code_set == {java_string_hash(t) for t in tags}


@pytest.mark.parametrize("expr", ["||", "||||"])
def test_tag_expression_only_separators_is_rejected(expr: str) -> None:
    with pytest.raises(FilterExpressionError, match="split error"):
        parse_tag_expression(expr)


def test_subscription_json_roundtrip_uses_rocketmq_names() -> None:
    sub = parse_tag_expression("TagA || TagB", topic="orders")
    data = sub.to_json_dict()
    assert data == {
        "classFilterMode": False,
        "codeSet": sorted([2598919, 2598920]),
        "expressionType": "TAG",
        "subString": "TagA || TagB",
        "subVersion": sub.sub_version,
        "tagsSet": ["TagA", "TagB"],
        "topic": "orders",
    }
    assert SubscriptionData.from_json_dict(data) == sub
    assert "topic" not in SubscriptionData(topic=None).to_json_dict()


def test_subscription_from_json_defaults_and_errors() -> None:
    sub = SubscriptionData.from_json_dict({"topic": "t", "subString": "a > 1", "expressionType": "SQL92"})
    assert sub.expression_type == "SQL92" and sub.tags_set == set() and sub.sub_version > 0
    assert SubscriptionData.from_json_dict({"topic": "t"}).expression_type == "TAG"
    with pytest.raises(ValueError, match="codeSet"):
        SubscriptionData.from_json_dict({"codeSet": ["x"]})
    with pytest.raises(ValueError, match="subVersion"):
        SubscriptionData.from_json_dict({"subVersion": "12"})
    with pytest.raises(ValueError, match="JSON object"):
        SubscriptionData.from_json_dict(["topic"])  # type: ignore[arg-type]


def test_tag_filter_two_stages_and_hash_collision() -> None:
    f = build_message_filter("TAG", "Aa || TagB")
    assert isinstance(f, TagFilter)
    assert f.is_matched_by_consume_queue(java_string_hash("Aa"))
    assert f.is_matched_by_consume_queue(java_string_hash("TagB"))
    assert not f.is_matched_by_consume_queue(java_string_hash("TagC"))
    assert f.is_matched_by_consume_queue(None)  # no code known: let it through
    # "BB" collides with "Aa": the ConsumeQueue stage passes it, the exact tag check drops it.
    assert f.is_matched_by_consume_queue(java_string_hash("BB"))
    assert not f.is_matched_by_commit_log({"TAGS": "BB"})
    assert f.is_matched_by_commit_log({"TAGS": "Aa", "k": "v"})
    assert not f.is_matched_by_commit_log({})  # untagged message
    assert not f.match_tag(None) and f.match_tag("TagB") and not f.match_tag("tagb")


def test_tag_filter_uses_low_32_bits_of_the_tags_code() -> None:
    f = build_message_filter(None, "polygenelubricants")
    assert f.is_matched_by_consume_queue(-2147483648)
    assert f.is_matched_by_consume_queue(0x80000000)  # long form of the same int
    assert f.is_matched_by_consume_queue((7 << 32) | 0x80000000)


def test_tag_filter_subscribe_all() -> None:
    for expr_type in ("TAG", "", None):
        f = build_message_filter(expr_type, "*")
        assert f.is_matched_by_consume_queue(12345)
        assert f.is_matched_by_commit_log({"TAGS": "anything"})
        assert f.is_matched_by_commit_log({})
        assert f.is_matched_by_commit_log(None)


def test_build_filter_from_heartbeat_subscription_trusts_code_set() -> None:
    sub = SubscriptionData(topic="t", sub_string="X", tags_set={"X"}, code_set={java_string_hash("X")})
    f = build_message_filter_for(sub)
    assert f.is_matched_by_consume_queue(java_string_hash("X"))
    assert f.is_matched_by_commit_log({"TAGS": "X"})
    sql = build_message_filter_for(SubscriptionData(topic="t", sub_string="a = 'x'", expression_type="SQL92"))
    assert isinstance(sql, Sql92MessageFilter)
    assert sql.is_matched_by_commit_log({"a": "x"}) and not sql.is_matched_by_commit_log({"a": "y"})


# --------------------------------------------------------------------------- SQL92: operators
@pytest.mark.parametrize(
    ("expr", "props", "expected"),
    [
        ("a = 'x'", {"a": "x"}, True),
        ("a = 'x'", {"a": "y"}, False),
        ("a <> 'x'", {"a": "y"}, True),
        ("a <> 'x'", {"a": "x"}, False),
        ("a = 5", {"a": "5"}, True),
        ("a = 5", {"a": "+5"}, True),
        ("a = 5.0", {"a": "5"}, True),
        ("a > 5", {"a": "6"}, True),
        ("a > 5", {"a": "5"}, False),
        ("a >= 5", {"a": "5"}, True),
        ("a < 5", {"a": "-7"}, True),
        ("a <= 5", {"a": "5"}, True),
        ("a <= 5", {"a": "10"}, False),  # numeric, not lexicographic
        ("a > 3.14", {"a": "3.15"}, True),
        ("a > 3.14", {"a": " 3.15 "}, True),  # Double.valueOf trims
        ("a > 10000000000", {"a": "10000000001"}, True),  # long literal
        ("a > 10L", {"a": "11"}, True),
        ("a > -5", {"a": "-4"}, True),
        ("a > - -5", {"a": "4"}, False),
        ("a > +5", {"a": "6"}, True),
        ("a > b", {"a": "10", "b": "9.5"}, True),  # two properties compare as doubles
        ("a BETWEEN 1 AND 3", {"a": "1"}, True),
        ("a BETWEEN 1 AND 3", {"a": "3"}, True),
        ("a BETWEEN 1 AND 3", {"a": "4"}, False),
        ("a NOT BETWEEN 1 AND 3", {"a": "4"}, True),
        ("a NOT BETWEEN 1 AND 3", {"a": "2"}, False),
        ("a IN ('x', 'y')", {"a": "y"}, True),
        ("a IN ('x', 'y')", {"a": "z"}, False),
        ("a NOT IN ('x', 'y')", {"a": "z"}, True),
        ("a NOT IN ('x', 'y')", {"a": "x"}, False),
        ("a IN ('1','2','3','4','5','6')", {"a": "6"}, True),
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a IS NOT NULL", {}, False),
        ("a CONTAINS 'bc'", {"a": "abcd"}, True),
        ("a NOT CONTAINS 'bc'", {"a": "abcd"}, False),
        ("a NOT CONTAINS 'zz'", {"a": "abcd"}, True),
        ("a STARTSWITH 'ab'", {"a": "abcd"}, True),
        ("a NOT STARTSWITH 'ab'", {"a": "xabcd"}, True),
        ("a ENDSWITH 'cd'", {"a": "abcd"}, True),
        ("a NOT ENDSWITH 'cd'", {"a": "abcd"}, False),
        ("a CONTAINS ''", {"a": "abcd"}, False),  # empty search never matches
        ("a NOT CONTAINS ''", {"a": "abcd"}, False),
        ("a = TRUE", {"a": "true"}, True),
        ("a = TRUE", {"a": "TRUE"}, True),
        ("a = FALSE", {"a": "yes"}, True),  # Boolean.valueOf("yes") is false
        ("TRUE", {}, True),
        ("FALSE", {}, False),
        ("NOT FALSE", {}, True),
        ("a = 'it''s'", {"a": "it's"}, True),
        ("TAGS = 'TagA' AND KEYS IS NOT NULL", {"TAGS": "TagA", "KEYS": "k1"}, True),
        ("a = '\u4e2d\u6587'", {"a": "\u4e2d\u6587"}, True),
        ("a='x'and b='y'", {"a": "x", "b": "y"}, True),  # no blanks needed
        ("a = 'x' -- trailing comment\n", {"a": "x"}, True),
        ("/* lead */ a = 'x'", {"a": "x"}, True),
        ("a = --5", {"a": "5"}, True),  # "--" without a line break is two minus signs
        ("a In ('x') aNd B is NoT nUlL", {"a": "x", "B": "1"}, True),  # keywords ignore case
        ("A = 'x'", {"a": "x"}, False),  # property names do not
    ],
)
def test_sql92_operators(expr: str, props: dict[str, str], expected: bool) -> None:
    assert compile_sql92(expr).evaluate(props) is expected


# --------------------------------------------------------------------------- precedence
def test_precedence_and_binds_tighter_than_or() -> None:
    assert shape("a = 1 OR b = 2 AND c = 3") == "((a = 1) OR ((b = 2) AND (c = 3)))"
    assert shape("(a = 1 OR b = 2) AND c = 3") == "(((a = 1) OR (b = 2)) AND (c = 3))"
    assert matches("a = 1 OR b = 2 AND c = 3", a="1")
    assert not matches("(a = 1 OR b = 2) AND c = 3", a="1")


def test_precedence_not_is_unary_and_binds_tightest() -> None:
    # As upstream: NOT applies to the next operand, so parenthesise comparisons.
    assert shape("NOT a = 1") == "((NOT a) = 1)"
    assert not matches("NOT a = 1", a="2")
    assert shape("NOT (a = 1) AND b = 2") == "((NOT (a = 1)) AND (b = 2))"
    assert matches("NOT (a = 1) AND b = 2", a="2", b="2")
    assert shape("NOT (a = 1) OR NOT (b = 2) AND c = 3") == "((NOT (a = 1)) OR ((NOT (b = 2)) AND (c = 3)))"
    assert shape("NOT NOT TRUE") == "(NOT (NOT TRUE))"


def test_precedence_comparison_binds_tighter_than_equality() -> None:
    assert shape("a > 1 = TRUE") == "((a > 1) = TRUE)"
    assert matches("a > 1 = TRUE", a="2")
    assert shape("a BETWEEN 1 AND 2 AND b = 1") == "(((a >= 1) AND (a <= 2)) AND (b = 1))"


# --------------------------------------------------------------------------- NULL semantics
@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("a = 'x'", False),
        ("a <> 'x'", False),  # UNKNOWN, not true
        ("NOT (a = 'x')", False),
        ("a > 1", False),
        ("NOT (a > 1)", False),
        ("a IN ('x')", False),
        ("a NOT IN ('x')", False),
        ("NOT (a IN ('x'))", False),
        ("a BETWEEN 1 AND 2", False),
        ("a NOT BETWEEN 1 AND 2", False),
        ("a = 'x' OR TRUE", True),  # UNKNOWN OR TRUE
        ("a = 'x' OR FALSE", False),  # UNKNOWN OR FALSE
        ("a = 'x' AND FALSE", False),
        ("NOT (a = 'x' AND FALSE)", True),  # UNKNOWN AND FALSE is FALSE
        ("NOT (a = 'x' AND TRUE)", False),  # UNKNOWN AND TRUE is UNKNOWN
        ("a CONTAINS 'x'", False),
        ("NOT (a CONTAINS 'x')", True),  # CONTAINS is false, never unknown, for a missing value
        ("a IS NULL", True),
        ("a", False),  # a bare property is a boolean cast
        ("NULL", False),
        ("NOT NULL", False),
        ("a = b", True),  # upstream: two NULLs are equal (IS NULL is built on that)
        ("a <> b", False),
        ("-a > 1", False),  # negating a string is NULL
    ],
)
def test_missing_property_is_unknown(expr: str, expected: bool) -> None:
    assert compile_sql92(expr).evaluate({"other": "1"}) is expected


def test_none_properties_map_means_no_properties() -> None:
    assert compile_sql92("a IS NULL").evaluate(None)


# --------------------------------------------------------------------------- numeric vs string
@pytest.mark.parametrize(
    ("expr", "props", "expected"),
    [
        ("a > 5", {"a": "abc"}, False),  # not a number: the message does not match
        ("a > 5", {"a": "5.5"}, False),  # Integer.valueOf("5.5") fails upstream too
        ("a > 5.0", {"a": "5.5"}, True),
        ("a > 5", {"a": "3000000000"}, False),  # beyond Integer: Integer.valueOf fails
        ("a > 5", {"a": "1_0"}, False),  # Python would accept this spelling, Java does not
        ("a > 5", {"a": " 6"}, False),  # Integer.valueOf does not trim
        ("a > 5.0", {"a": "1_0"}, False),
        ("a > 5.0", {"a": "inf"}, False),
        ("a > 5.0", {"a": "Infinity"}, True),
        ("a > 5.0", {"a": "NaN"}, True),  # Double.compareTo puts NaN above everything
        ("a > 5.0", {"a": "0x1p3"}, True),  # hex float, 8.0
        ("a > 5.0", {"a": "6d"}, True),
        ("a = 'abc'", {"a": "abc"}, True),
        ("a = 0.0", {"a": "-0.0"}, False),  # Double.compareTo separates the zeros (0.0: see parser)
        ("a = 5", {"a": "abc"}, False),
        ("a = 5 OR b = 'x'", {"a": "abc", "b": "x"}, False),  # a failed comparison aborts it all
        ("b = 'x' OR a = 5", {"a": "abc", "b": "x"}, True),  # ...unless OR already decided
        ("a > b", {"a": "x", "b": "1"}, False),
        ("'5' = 5", {}, True),
        ("1 = TRUE", {}, False),  # a boolean against a number compares unequal
        ("TRUE = a", {"a": "true"}, False),  # boolean on the left of a string fails upstream
        ("a = TRUE", {"a": "true"}, True),
        ("a = 2147483648", {"a": "2147483648"}, True),
        ("a < -2147483648", {"a": "-2147483649"}, True),
        ("a = 9223372036854775807", {"a": "9223372036854775807"}, True),
    ],
)
def test_numeric_and_string_comparison(expr: str, props: dict[str, str], expected: bool) -> None:
    assert compile_sql92(expr).evaluate(props) is expected


def test_java_number_parsers() -> None:
    assert parse_java_integer("\u0663") == 3  # Character.digit accepts Unicode digits
    assert parse_java_double(" 1.5f ") == 1.5
    assert parse_java_double("-Infinity") == float("-inf")
    for bad in ("", "+", "1e", "0x10", ".", "1.5x", "infinity", "1 2"):
        with pytest.raises(Exception) as info:
            parse_java_double(bad)
        assert type(info.value).__name__ == "EvaluationError"


# --------------------------------------------------------------------------- syntax errors
@pytest.mark.parametrize(
    ("expr", "column", "fragment"),
    [
        ("", 1, "end of expression"),
        ("a = ", 5, "end of expression"),
        ("a = 1 b = 2", 7, "'b'"),  # upstream ignores trailing input; we reject it
        ("(a = 1", 7, "')'"),
        ("a = 1)", 6, "')'"),
        ("a == 1", 4, "'='"),
        ("a != 1", 3, "'!'"),
        ("a = 'unterminated", 5, "unterminated string"),
        ("a = 1 /* open", 7, "unterminated comment"),
        ("a = 007", 6, "'0'"),
        ("a = 0L", 6, "'L'"),
        ("a.b = 1", 2, "'.'"),
        ("a IN (1, 2)", 7, "string literal"),
        ("a IN ()", 7, "string literal"),
        ("a CONTAINS b", 12, "string literal"),
        ("a BETWEEN 1 OR 2", 13, "AND"),
        ("a IS 1", 6, "NOT"),
        ("a and between 2 and 10", 7, "BETWEEN"),
        ("5", 1, "boolean"),
        ("'x'", 1, "boolean"),
        ("NOT 5", 1, "boolean"),
        ("a = 1 AND 5", 11, "boolean"),
        ("-a", 1, "boolean"),
        ("a = NULL", 3, "NULL"),
        ("NULL <> a", 6, "NULL"),
        ("TRUE = 1", 6, "cannot be compared"),
        ("a > 'x'", 3, "cannot be compared"),
        ("a > TRUE", 3, "cannot be compared"),
        ("a > NULL", 3, "cannot be compared"),
        ("a > 1 > 2", 7, "cannot be compared"),
        ("a BETWEEN 10 AND 0", 3, "BETWEEN"),
        ("a BETWEEN NULL AND 0", 3, "NULL"),
        ("a BETWEEN 'a' AND 'b'", 3, "cannot be compared"),
        ("'x' IN ('x')", 5, "property before IN"),
        ("a > 100000000000000000000000", 5, "long range"),
        ("a > 1e400", 5, "largest double"),
        ("a = 1 ; b = 2", 7, "';'"),
        ("a = \u00a0'x'", 5, "'\\xa0'"),
    ],
)
def test_bad_syntax_reports_position(expr: str, column: int, fragment: str) -> None:
    with pytest.raises(FilterExpressionError) as info:
        compile_sql92(expr)
    err = info.value
    assert isinstance(err, ValueError)
    assert f"line 1, column {column}" in str(err), str(err)
    assert fragment in str(err)
    assert err.position == column - 1 and err.expression == expr


def test_error_position_on_later_line() -> None:
    with pytest.raises(FilterExpressionError, match="line 2, column 5") as info:
        compile_sql92("a = 1\nAND ?")
    assert info.value.position == 10


def test_accepted_oddities_of_upstream_grammar() -> None:
    assert compile_sql92("a BETWEEN -1 AND -5")  # negated bounds are not constants: no order check
    assert compile_sql92("a NOT BETWEEN 10 AND 0")
    assert compile_sql92("(a) IN ('x')")  # parentheses around a property keep it a property
    assert compile_sql92("a > 0.0")  # upstream rejects 0.0 by mistake; we accept it
    assert compile_sql92("a <= now")  # "now" is just a property name
    assert compile_sql92("$x_1 = 5")
    assert compile_sql92("a > 5. AND b < .5E1 AND c < 5e+2")


def test_too_deep_nesting_is_a_filter_error() -> None:
    with pytest.raises(FilterExpressionError, match="nested deeper"):
        compile_sql92("(" * 5000 + "a = 1" + ")" * 5000)
    with pytest.raises(FilterExpressionError, match="nested deeper"):
        compile_sql92("NOT " * 5000 + "TRUE")
    with pytest.raises(FilterExpressionError, match="nested deeper"):
        compile_sql92(" OR ".join(f"a = '{i}'" for i in range(MAX_DEPTH + 5)))
    ok = compile_sql92(" OR ".join(f"a = '{i}'" for i in range(MAX_DEPTH - 5)))
    assert ok.evaluate({"a": "3"}) and not ok.evaluate({"a": "x"})


def test_compiled_filters_are_cached() -> None:
    assert compile_sql92("cached = 'yes'") is compile_sql92("cached = 'yes'")
    with pytest.raises(FilterExpressionError) as first:
        compile_sql92("cached = ")
    with pytest.raises(FilterExpressionError) as second:
        compile_sql92("cached = ")
    assert str(first.value) == str(second.value)


def test_non_string_expression_is_a_filter_error() -> None:
    with pytest.raises(FilterExpressionError):
        compile_sql92(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- MessageFilter / proxy
def test_sql92_message_filter_two_stages() -> None:
    f = build_message_filter("SQL92", "a > 5 AND TAGS = 'T'")
    assert isinstance(f, Sql92MessageFilter)
    assert f.is_matched_by_consume_queue(123) and f.is_matched_by_consume_queue(None)
    assert f.is_matched_by_commit_log({"a": "6", "TAGS": "T"})
    assert not f.is_matched_by_commit_log({"a": "6", "TAGS": "U"})


@pytest.mark.parametrize(
    ("expr_type", "expr"),
    [("SQL92", "a >"), ("SQL92", ""), ("SQL92", None), ("TAG", "||"), ("CLASS", "x"), ("sql92", "a = 1")],
)
def test_validate_rejects(expr_type, expr) -> None:
    with pytest.raises(FilterExpressionError):
        validate_filter_expression(expr_type, expr)


def test_validate_returns_subscription_data() -> None:
    sub = validate_filter_expression("SQL92", "a = 1", topic="t")
    assert (sub.topic, sub.sub_string, sub.expression_type) == ("t", "a = 1", "SQL92")
    sub = validate_filter_expression("TAG", "A || B")
    assert sub.tags_set == {"A", "B"}


# --------------------------------------------------------------------------- property tests
NAMES = st.sampled_from(["a", "b", "TAGS", "x1"])
VALUES = st.sampled_from(["1", "-2", "2.5", "abc", "", "true", "NaN", "9999999999", " 3 ", "x'y", "1e3"])
ATOMS = st.one_of(
    NAMES,
    st.sampled_from(["1", "-1", "2.5", "0", "10L", "'abc'", "''", "'x''y'", "TRUE", "FALSE", "NULL", "1e3"]),
)
BINARY = st.sampled_from(["=", "<>", ">", ">=", "<", "<=", "AND", "OR"])
SUFFIX = st.sampled_from(
    [
        "IS NULL",
        "IS NOT NULL",
        "IN ('1', 'abc')",
        "NOT IN ('x')",
        "BETWEEN 1 AND 5",
        "NOT BETWEEN -1 AND 2.5",
        "CONTAINS 'b'",
        "NOT STARTSWITH 'a'",
        "ENDSWITH ''",
    ]
)
JUNK = st.sampled_from(["(", ")", ",", "'", "NOT", "IN", "AND", "=", ".", "--", "/*", "!", "1.2.3", "0x"])


def _expressions():
    return st.recursive(
        ATOMS,
        lambda inner: st.one_of(
            st.tuples(inner, BINARY, inner).map(" ".join),
            st.tuples(inner, SUFFIX).map(" ".join),
            inner.map(lambda e: f"({e})"),
            inner.map(lambda e: f"NOT {e}"),
            inner.map(lambda e: f"-{e}"),
        ),
        max_leaves=8,
    )


def _mangled():
    return st.one_of(
        _expressions(),
        st.tuples(_expressions(), JUNK, st.integers(0, 200)).map(
            lambda t: t[0][: t[2]] + " " + t[1] + t[0][t[2] :]
        ),
        st.text(alphabet="ab=<>()' ,.-0123456789NOTANDINUL\n*/", max_size=30),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mangled(), st.dictionaries(NAMES, VALUES, max_size=4))
def test_random_expressions_compile_or_raise_filter_error(expr: str, props: dict[str, str]) -> None:
    try:
        compiled = compile_sql92(expr)
    except FilterExpressionError as err:
        assert err.position is None or 0 <= err.position <= len(expr)
        return
    assert compiled.evaluate(props) in (True, False)
    # The parenthesised form means the same thing.
    again = compile_sql92(compiled.describe())
    assert again.evaluate(props) is compiled.evaluate(props)


FIXED = [
    "a > 5 AND b < 2.5",
    "a = b OR TAGS IN ('x', 'y')",
    "NOT (a BETWEEN -1 AND 10) OR b IS NULL",
    "a CONTAINS 'x' AND b NOT ENDSWITH 'y'",
    "a = TRUE OR b <> 9999999999",
    "-a > -b",
    "a = 1.5 OR b = 'q'",
    "x1 > b",
]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(FIXED),
    st.dictionaries(st.sampled_from(["a", "b", "TAGS", "x1", "zz"]), st.text(max_size=12)),
)
def test_evaluation_never_raises(expr: str, props: dict[str, str]) -> None:
    assert compile_sql92(expr).evaluate(props) in (True, False)
