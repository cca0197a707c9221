"""The one error type of the filter package: the proxy maps it to ILLEGAL_FILTER_EXPRESSION."""

from __future__ import annotations


class FilterExpressionError(ValueError):
    """A subscription expression that cannot be parsed or compiled.

    ``position`` is the 0-based character offset of the offending token (None when the whole
    expression is at fault); the message repeats it as a 1-based line and column, as the
    JavaCC parser of RocketMQ reports it.
    """

    def __init__(self, reason: str, expression: str | None = None, position: int | None = None) -> None:
        self.reason = reason
        self.expression = expression
        self.position = position
        super().__init__(self._format())

    def _format(self) -> str:
        if self.position is None or self.expression is None:
            return f"Invalid filter expression: {self.reason}"
        line, column = line_column(self.expression, self.position)
        return f"Invalid filter expression: {self.reason} at line {line}, column {column}"


def line_column(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of a character offset (column counts characters, not bytes)."""
    head = text[:position]
    line = head.count("\n") + 1
    column = position - (head.rfind("\n") + 1) + 1
    return line, column
