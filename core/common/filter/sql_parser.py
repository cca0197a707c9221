"""Recursive-descent parser for RocketMQ's SQL92 selector grammar (SelectorParser.jj).

Precedence, loosest first: OR; AND; equality (= <> IS [NOT] NULL); comparison (> >= < <=,
[NOT] BETWEEN, [NOT] IN, [NOT] CONTAINS/STARTSWITH/ENDSWITH); unary (+ - NOT); primary.
NOT is a unary operator as upstream, so ``NOT a = 1`` means ``(NOT a) = 1``; write
``NOT (a = 1)``. Upstream's compile-time checks are kept (no NULL beside ``=``, only numbers
beside ``<``, IN only after a property, BETWEEN bounds in order…).

Two deliberate differences from the Java parser: input left after a complete expression is
an error (upstream silently ignores it, so ``a = 1 b = 2`` filtered on ``a`` only), and a
zero float literal such as ``0.0`` is accepted (upstream rejects it by mistake, comparing
against Double.MIN_VALUE, the smallest positive double).
"""

from __future__ import annotations

import math

from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.java_compat import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    EvaluationError,
    JavaLong,
    java_compare,
)
from orbitmq.common.filter.sql_ast import (
    And,
    BooleanCast,
    Constant,
    Equal,
    InList,
    Negate,
    Node,
    Not,
    Or,
    Property,
    Relational,
    StringMatch,
)
from orbitmq.common.filter.sql_lexer import DECIMAL, EOF, FLOAT, ID, KEYWORD, OP, STRING, Token, tokenize

#: Deepest expression tree accepted, and most parentheses / unary operators nested inside each
#: other: both keep parsing and evaluation well away from Python's recursion limit.
MAX_DEPTH = 200
MAX_NESTING = 64

_STRING_OPS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_NEGATABLE = frozenset({*_STRING_OPS, "BETWEEN", "IN"})


def parse_sql92(expression: str) -> Node:
    """Parse and check an expression; the root is a boolean node. Raises FilterExpressionError."""
    return _Parser(expression).parse()


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = tokenize(expression)
        self.index = 0
        self.nesting = 0

    # -- token helpers -------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        tok = self.tokens[self.index]
        if tok.kind != EOF:
            self.index += 1
        return tok

    def at_keyword(self, word: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == KEYWORD and tok.text == word

    def at_op(self, op: str) -> bool:
        tok = self.peek()
        return tok.kind == OP and tok.text == op

    def error(self, reason: str, token: Token | None = None) -> FilterExpressionError:
        tok = token if token is not None else self.peek()
        return FilterExpressionError(reason, self.expression, tok.position)

    def unexpected(self, wanted: str) -> FilterExpressionError:
        tok = self.peek()
        return self.error(f"expected {wanted} but found {tok.describe()}", tok)

    def expect_keyword(self, word: str) -> Token:
        if not self.at_keyword(word):
            raise self.unexpected(word)
        return self.advance()

    def expect_op(self, op: str) -> Token:
        if not self.at_op(op):
            raise self.unexpected(repr(op))
        return self.advance()

    def expect_string(self) -> str:
        if self.peek().kind != STRING:
            raise self.unexpected("a string literal")
        return self.advance().text

    def node(self, built: Node, token: Token) -> Node:
        if built.depth > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH} levels", token)
        return built

    def as_boolean(self, value: Node, token: Token) -> Node:
        """asBooleanExpression: conditions must be boolean; a bare property is cast."""
        if value.is_boolean:
            return value
        if isinstance(value, Property):
            return self.node(BooleanCast(value), token)
        raise self.error(f"expression will not result in a boolean value: {value}", token)

    # -- grammar -------------------------------------------------------------------------
    def parse(self) -> Node:
        start = self.peek()
        root = self.or_expression()
        if self.peek().kind != EOF:
            raise self.unexpected("an operator or end of expression")
        return self.as_boolean(root, start)

    def or_expression(self) -> Node:
        start = self.peek()
        left = self.and_expression()
        while self.at_keyword("OR"):
            op = self.advance()
            right_start = self.peek()
            right = self.and_expression()
            left = self.node(Or(self.as_boolean(left, start), self.as_boolean(right, right_start)), op)
        return left

    def and_expression(self) -> Node:
        start = self.peek()
        left = self.equality_expression()
        while self.at_keyword("AND"):
            op = self.advance()
            right_start = self.peek()
            right = self.equality_expression()
            left = self.node(And(self.as_boolean(left, start), self.as_boolean(right, right_start)), op)
        return left

    def equality_expression(self) -> Node:
        left = self.comparison_expression()
        while True:
            tok = self.peek()
            if self.at_op("="):
                self.advance()
                left = self.create_equal(left, self.comparison_expression(), tok)
            elif self.at_op("<>"):
                self.advance()
                left = self.node(Not(self.create_equal(left, self.comparison_expression(), tok)), tok)
            elif self.at_keyword("IS"):
                self.advance()
                if self.at_keyword("NULL"):
                    self.advance()
                    left = self.node(Equal(left, Constant(None)), tok)
                else:
                    self.expect_keyword("NOT")
                    self.expect_keyword("NULL")
                    left = self.node(Not(Equal(left, Constant(None))), tok)
            else:
                return left

    def comparison_expression(self) -> Node:
        left = self.unary_expression()
        while True:
            tok = self.peek()
            if tok.kind == OP and tok.text in (">", ">=", "<", "<="):
                self.advance()
                left = self.create_relational(tok.text, left, self.unary_expression(), tok)
                continue
            negated = False
            if self.at_keyword("NOT") and self.peek(1).kind == KEYWORD and self.peek(1).text in _NEGATABLE:
                self.advance()
                negated = True
            word = self.peek()
            if word.kind != KEYWORD or word.text not in _NEGATABLE:
                return left
            self.advance()
            if word.text in _STRING_OPS:
                left = self.node(StringMatch(word.text, left, self.expect_string(), negated), tok)
            elif word.text == "BETWEEN":
                low = self.unary_expression()
                self.expect_keyword("AND")
                high = self.unary_expression()
                left = self.create_between(left, low, high, negated, tok)
            else:
                left = self.create_in(left, negated, tok)

    def unary_expression(self) -> Node:
        tok = self.peek()
        if tok.kind == OP and tok.text in ("+", "-") or self.at_keyword("NOT"):
            self.advance()
            self.nesting += 1
            if self.nesting > MAX_NESTING:
                raise self.error(f"expression nested deeper than {MAX_NESTING} levels", tok)
            try:
                operand = self.unary_expression()
            finally:
                self.nesting -= 1
            if tok.text == "+":
                return operand
            if tok.text == "-":
                return self.node(Negate(operand), tok)
            return self.node(Not(self.as_boolean(operand, tok)), tok)
        return self.primary_expression()

    def primary_expression(self) -> Node:
        tok = self.peek()
        if tok.kind == OP and tok.text == "(":
            self.advance()
            self.nesting += 1
            if self.nesting > MAX_NESTING:
                raise self.error(f"expression nested deeper than {MAX_NESTING} levels", tok)
            try:
                inner = self.or_expression()
            finally:
                self.nesting -= 1
            self.expect_op(")")
            return inner
        if tok.kind == ID:
            self.advance()
            return Property(tok.text)
        if tok.kind == STRING:
            self.advance()
            return Constant(tok.text)
        if tok.kind == DECIMAL:
            self.advance()
            return Constant(self.decimal_value(tok))
        if tok.kind == FLOAT:
            self.advance()
            return Constant(self.float_value(tok))
        if tok.kind == KEYWORD and tok.text in ("TRUE", "FALSE", "NULL"):
            self.advance()
            return Constant({"TRUE": True, "FALSE": False, "NULL": None}[tok.text])
        raise self.unexpected("a property, literal or '('")

    # -- literals ------------------------------------------------------------------------
    def decimal_value(self, tok: Token) -> int:
        """Integer when it fits in 32 bits, else Long; a trailing L only marks the literal."""
        value = int(tok.text.rstrip("lL"))
        if value > LONG_MAX:
            raise self.error(f"integer literal {tok.text} is out of the long range", tok)
        return value if INT_MIN <= value <= INT_MAX else JavaLong(value)

    def float_value(self, tok: Token) -> float:
        value = float(tok.text)
        if math.isinf(value):
            raise self.error(f"float literal {tok.text} is greater than the largest double", tok)
        return value

    # -- upstream's compile-time checks (ComparisonExpression.create*) -------------------------
    def check_comparable(self, operand: Node, tok: Token) -> None:
        """checkLessThanOperand: only numbers (or non-boolean expressions) beside < > <= >=."""
        if isinstance(operand, Constant):
            if operand.value is not None and type(operand.value) in (int, JavaLong, float):
                return
            raise self.error(f"value {operand} cannot be compared with {tok.text!r}", tok)
        if operand.is_boolean:
            raise self.error(f"value {operand} cannot be compared with {tok.text!r}", tok)

    def create_relational(self, op: str, left: Node, right: Node, tok: Token) -> Node:
        self.check_comparable(left, tok)
        self.check_comparable(right, tok)
        return self.node(Relational(op, left, right), tok)

    def create_equal(self, left: Node, right: Node, tok: Token) -> Node:
        for operand in (left, right):
            if isinstance(operand, Constant) and operand.value is None:
                raise self.error("NULL cannot be compared with '=' (use IS NULL)", tok)
        if (
            isinstance(left, Constant)
            and isinstance(right, Constant)
            and left.is_boolean
            and not right.is_boolean
        ):
            raise self.error(f"{left} cannot be compared with {right}", tok)
        return self.node(Equal(left, right), tok)

    def create_between(self, value: Node, low: Node, high: Node, negated: bool, tok: Token) -> Node:
        if not negated and isinstance(low, Constant) and isinstance(high, Constant):
            if low.value is None or high.value is None:
                raise self.error("illegal values of BETWEEN, values can not be NULL", tok)
            try:
                in_order = java_compare(high.value, low.value) >= 0
            except EvaluationError as exc:
                raise self.error(f"illegal values of BETWEEN: {exc}", tok) from None
            if not in_order:
                raise self.error(
                    f"illegal values of BETWEEN, lower value ({low}) must be less than or equal to "
                    f"upper value ({high})",
                    tok,
                )
        if negated:
            return self.node(
                Or(
                    self.create_relational("<", value, low, tok),
                    self.create_relational(">", value, high, tok),
                ),
                tok,
            )
        return self.node(
            And(
                self.create_relational(">=", value, low, tok), self.create_relational("<=", value, high, tok)
            ),
            tok,
        )

    def create_in(self, left: Node, negated: bool, tok: Token) -> Node:
        self.expect_op("(")
        values = [self.expect_string()]
        while self.at_op(","):
            self.advance()
            values.append(self.expect_string())
        self.expect_op(")")
        if not isinstance(left, Property):
            raise self.error(f"expected a property before IN, got {left}", tok)
        return self.node(InList(left, values, negated), tok)
