"""Compiled SQL92 expression nodes and their evaluation against message properties.

Evaluation is three-valued like RocketMQ's: each node yields True, False or None (UNKNOWN,
e.g. a missing property); only True matches. A comparison Java would abort with an exception
(e.g. a non-numeric property compared with a number) raises EvaluationError, which makes the
whole message not match, exactly as the broker's catch-all does upstream.
"""

from __future__ import annotations

from collections.abc import Mapping

from orbitmq.common.filter.java_compat import (
    DOUBLE,
    INT,
    LONG,
    STR,
    JavaLong,
    compare_doubles,
    java_compare,
    kind_of,
    parse_java_double,
    to_int32,
    to_int64,
)

Properties = Mapping[str, str]


class Node:
    __slots__ = ("depth",)

    #: True for RocketMQ's BooleanExpression (may stand where a condition is expected).
    is_boolean = False

    def evaluate(self, props: Properties):
        raise NotImplementedError

    def _set_depth(self, *children: Node) -> None:
        self.depth = 1 + max((c.depth for c in children), default=0)


class Constant(Node):
    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value
        self.depth = 1

    @property
    def is_boolean(self) -> bool:  # TRUE, FALSE and NULL are BooleanConstantExpressions
        return self.value is None or type(self.value) is bool

    def evaluate(self, props: Properties):
        return self.value

    def __str__(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if type(v) is bool:
            return "TRUE" if v else "FALSE"
        if type(v) is str:
            return "'" + v.replace("'", "''") + "'"
        return repr(v) if type(v) is float else str(int(v))


class Property(Node):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        self.depth = 1

    def evaluate(self, props: Properties):
        return props.get(self.name)

    def __str__(self) -> str:
        return self.name


class Negate(Node):
    __slots__ = ("operand",)

    def __init__(self, operand: Node) -> None:
        self.operand = operand
        self._set_depth(operand)

    def evaluate(self, props: Properties):
        v = self.operand.evaluate(props)
        k = kind_of(v)
        if k == INT:
            return to_int32(-v)
        if k == LONG:
            return JavaLong(to_int64(-v))
        if k == DOUBLE:
            return -v
        return None  # null, strings and booleans negate to null upstream

    def __str__(self) -> str:
        return f"(- {self.operand})"


class BooleanCast(Node):
    """A bare property used as a condition: only a boolean value could be true, and properties are strings."""

    __slots__ = ("operand",)
    is_boolean = True

    def __init__(self, operand: Node) -> None:
        self.operand = operand
        self._set_depth(operand)

    def evaluate(self, props: Properties):
        v = self.operand.evaluate(props)
        if v is None:
            return None
        return v if type(v) is bool else False

    def __str__(self) -> str:
        return str(self.operand)


class Not(Node):
    __slots__ = ("operand",)
    is_boolean = True

    def __init__(self, operand: Node) -> None:
        self.operand = operand
        self._set_depth(operand)

    def evaluate(self, props: Properties):
        v = self.operand.evaluate(props)
        return None if v is None else not v

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


class _BooleanBinary(Node):
    """A boolean operator over two operands (AND, OR, =)."""

    __slots__ = ("left", "right")
    is_boolean = True

    def __init__(self, left: Node, right: Node) -> None:
        self.left, self.right = left, right
        self._set_depth(left, right)


class And(_BooleanBinary):
    __slots__ = ()

    def evaluate(self, props: Properties):
        lv = self.left.evaluate(props)
        if lv is False:
            return False
        rv = self.right.evaluate(props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


class Or(_BooleanBinary):
    __slots__ = ()

    def evaluate(self, props: Properties):
        lv = self.left.evaluate(props)
        if lv is True:
            return True
        rv = self.right.evaluate(props)
        if rv is True:
            return True
        return None if lv is None or rv is None else False

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


class Equal(_BooleanBinary):
    """``=`` and ``IS NULL`` (equality with the NULL constant); ``<>`` is NOT of this."""

    __slots__ = ()

    def evaluate(self, props: Properties):
        lv = self.left.evaluate(props)
        rv = self.right.evaluate(props)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        return java_compare(lv, rv) == 0

    def __str__(self) -> str:
        if isinstance(self.right, Constant) and self.right.value is None:
            return f"({self.left} IS NULL)"
        return f"({self.left} = {self.right})"


_RELATIONS = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


class Relational(Node):
    """``> >= < <=``: numeric only; two strings (two properties) are both read as doubles."""

    __slots__ = ("op", "left", "right", "_test")
    is_boolean = True

    def __init__(self, op: str, left: Node, right: Node) -> None:
        self.op, self.left, self.right = op, left, right
        self._test = _RELATIONS[op]
        self._set_depth(left, right)

    def evaluate(self, props: Properties):
        lv = self.left.evaluate(props)
        if lv is None:
            return None
        rv = self.right.evaluate(props)
        if rv is None:
            return None
        if kind_of(lv) == STR and kind_of(rv) == STR:
            return self._test(compare_doubles(parse_java_double(lv), parse_java_double(rv)))
        return self._test(java_compare(lv, rv))

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


class StringMatch(Node):
    """CONTAINS / STARTSWITH / ENDSWITH (and NOT …): false, never unknown, for a missing value."""

    __slots__ = ("op", "operand", "search", "negated")
    is_boolean = True

    def __init__(self, op: str, operand: Node, search: str, negated: bool) -> None:
        self.op, self.operand, self.search, self.negated = op, operand, search, negated
        self._set_depth(operand)

    def evaluate(self, props: Properties):
        if not self.search:
            return False
        v = self.operand.evaluate(props)
        if type(v) is not str:
            return False
        if self.op == "CONTAINS":
            hit = self.search in v
        elif self.op == "STARTSWITH":
            hit = v.startswith(self.search)
        else:
            hit = v.endswith(self.search)
        return hit != self.negated

    def __str__(self) -> str:
        neg = "NOT " if self.negated else ""
        return f"({self.operand} {neg}{self.op} {Constant(self.search)})"


class InList(Node):
    __slots__ = ("operand", "values", "negated", "_shown")
    is_boolean = True

    def __init__(self, operand: Property, values: list[str], negated: bool) -> None:
        self.operand, self.values, self.negated = operand, frozenset(values), negated
        self._shown = values
        self._set_depth(operand)

    def evaluate(self, props: Properties):
        v = self.operand.evaluate(props)
        if type(v) is not str:
            return None
        return (v in self.values) != self.negated

    def __str__(self) -> str:
        neg = "NOT " if self.negated else ""
        items = ", ".join(str(Constant(v)) for v in self._shown)
        return f"({self.operand} {neg}IN ({items}))"


__all__ = [
    "And",
    "BooleanCast",
    "Constant",
    "Equal",
    "InList",
    "Negate",
    "Node",
    "Not",
    "Or",
    "Property",
    "Relational",
    "StringMatch",
]
