"""Compiled SQL92 filters, cached by expression text (brokers see the same few expressions)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.java_compat import EvaluationError
from orbitmq.common.filter.sql_ast import Node
from orbitmq.common.filter.sql_parser import parse_sql92

#: Compiled expressions (and rejected ones, as upstream does) kept in the LRU cache.
CACHE_SIZE = 256


class Sql92Filter:
    """One compiled expression; evaluate() never raises for a str -> str property map."""

    __slots__ = ("expression", "root")

    def __init__(self, expression: str, root: Node) -> None:
        self.expression = expression
        self.root = root

    def evaluate(self, properties: Mapping[str, str] | None) -> bool:
        """True only when the expression is TRUE; UNKNOWN (NULL) and evaluation errors are False."""
        try:
            return self.root.evaluate(properties if properties is not None else {}) is True
        except EvaluationError:
            return False

    def describe(self) -> str:
        """The parse tree fully parenthesised, to see how precedence grouped the expression."""
        return str(self.root)

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


_cache: OrderedDict[str, Sql92Filter | FilterExpressionError] = OrderedDict()
_cache_lock = threading.Lock()


def compile_sql92(expression: str) -> Sql92Filter:
    """Compile (or fetch from the cache) an SQL92 filter; FilterExpressionError if invalid."""
    if not isinstance(expression, str):
        raise FilterExpressionError(f"SQL92 expression must be a string, got {type(expression).__name__}")
    with _cache_lock:
        hit = _cache.get(expression)
        if hit is not None:
            _cache.move_to_end(expression)
    if hit is None:
        try:
            hit = Sql92Filter(expression, parse_sql92(expression))
        except FilterExpressionError as exc:
            hit = exc
        with _cache_lock:
            _cache[expression] = hit
            _cache.move_to_end(expression)
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    if isinstance(hit, FilterExpressionError):
        raise FilterExpressionError(hit.reason, hit.expression, hit.position)
    return hit


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
