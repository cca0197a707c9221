"""Tokens of RocketMQ's SQL92 selector (the TOKEN section of SelectorParser.jj).

Keywords and identifiers are ASCII and case-insensitive; the longest match wins and a
keyword beats an identifier of the same length, as in JavaCC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orbitmq.common.filter.errors import FilterExpressionError

KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)

# Token kinds.
ID, KEYWORD, DECIMAL, FLOAT, STRING, OP, EOF = "ID", "KEYWORD", "DECIMAL", "FLOAT", "STRING", "OP", "EOF"

_WHITESPACE = " \t\n\r\f"
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*[lL]?)")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
# A "--" comment only counts when a line break ends it (otherwise JavaCC reads two minus signs).
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_OPERATORS = ("<>", "<=", ">=", "<", ">", "=", "(", ")", ",", "+", "-")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str  # the image; keywords upper-cased, string literals decoded
    position: int

    def describe(self) -> str:
        if self.kind == EOF:
            return "end of expression"
        if self.kind == STRING:
            return "string literal"
        return repr(self.text)


def tokenize(expression: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(expression)
    while i < n:
        ch = expression[i]
        if ch in _WHITESPACE:
            i += 1
            continue
        if expression.startswith("--", i):
            m = _LINE_COMMENT.match(expression, i)
            if m is not None:
                i = m.end()
                continue
        if expression.startswith("/*", i):
            end = expression.find("*/", i + 2)
            if end < 0:
                raise FilterExpressionError("unterminated comment", expression, i)
            i = end + 2
            continue
        if ch == "'":
            i = _string_literal(expression, i, tokens)
            continue
        if ch.isascii() and (ch.isdigit() or ch == "."):
            mf = _FLOAT.match(expression, i)
            md = _DECIMAL.match(expression, i)
            if mf is not None and (md is None or mf.end() > md.end()):
                tokens.append(Token(FLOAT, mf.group(), i))
                i = mf.end()
                continue
            if md is not None:
                tokens.append(Token(DECIMAL, md.group(), i))
                i = md.end()
                continue
            raise FilterExpressionError("unexpected character '.'", expression, i)
        m = _IDENTIFIER.match(expression, i)
        if m is not None:
            word = m.group()
            upper = word.upper()
            if upper in KEYWORDS:
                tokens.append(Token(KEYWORD, upper, i))
            else:
                tokens.append(Token(ID, word, i))
            i = m.end()
            continue
        for op in _OPERATORS:
            if expression.startswith(op, i):
                tokens.append(Token(OP, op, i))
                i += len(op)
                break
        else:
            raise FilterExpressionError(f"unexpected character {ch!r}", expression, i)
    tokens.append(Token(EOF, "", n))
    return tokens


def _string_literal(expression: str, start: int, tokens: list[Token]) -> int:
    """Single-quoted, a doubled quote stands for one quote; any other char (newlines too) is literal."""
    parts: list[str] = []
    i = start + 1
    while True:
        end = expression.find("'", i)
        if end < 0:
            raise FilterExpressionError("unterminated string literal", expression, start)
        parts.append(expression[i:end])
        if expression.startswith("''", end):
            parts.append("'")
            i = end + 2
            continue
        tokens.append(Token(STRING, "".join(parts), start))
        return end + 1
