"""Reading broker tables keyed by MessageQueue objects (fastjson's ``{{…}:value}`` shape).

TopicStatsTable, ConsumeStats and ResetOffsetBody come back from brokers with JSON objects as
map keys, which no standard JSON parser accepts. ``loads`` reads that dialect (and plain JSON);
an object key becomes the ``dict`` itself, and such maps become lists of (key, value) pairs.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = " \t\r\n"
_LITERALS = {"true": True, "false": False, "null": None}
MAX_DEPTH = 64


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> ValueError:
        return ValueError(f"{what} at char {self.pos}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(f"expected {char!r}")
        self.pos += 1

    def value(self, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise self.error("nesting too deep")
        char = self.peek()
        if char == "{":
            return self.obj(depth)
        if char == "[":
            self.pos += 1
            items: list[Any] = []
            if self.peek() == "]":
                self.pos += 1
                return items
            while True:
                items.append(self.value(depth + 1))
                if self.peek() == ",":
                    self.pos += 1
                    continue
                self.expect("]")
                return items
        if char == '"':
            text, self.pos = scanstring(self.text, self.pos + 1)
            return text
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.error("unexpected character")
        self.pos = match.end()
        number = match.group()
        return float(number) if any(c in number for c in ".eE") else int(number)

    def obj(self, depth: int) -> Any:
        self.expect("{")
        pairs: list[tuple[Any, Any]] = []
        if self.peek() == "}":
            self.pos += 1
            return {}
        while True:
            key = self.value(depth + 1) if self.peek() == "{" else self.key()
            self.expect(":")
            pairs.append((key, self.value(depth + 1)))
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            break
        if any(isinstance(k, dict) for k, _ in pairs):
            return pairs
        return dict(pairs)

    def key(self) -> str:
        if self.peek() == '"':
            text, self.pos = scanstring(self.text, self.pos + 1)
            return text
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ":" + _WS:
            self.pos += 1
        if start == self.pos:
            raise self.error("expected a key")
        return self.text[start:self.pos]


def loads(data: bytes | str) -> Any:
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    try:
        return json.loads(text)
    except ValueError:
        pass
    parser = _Parser(text)
    value = parser.value()
    if parser.peek():
        raise parser.error("trailing data")
    return value


def message_queue_pairs(table: Any) -> list[tuple[dict[str, Any], Any]]:
    """(MessageQueue dict, value) pairs of a table in either shape."""
    items = table.items() if isinstance(table, dict) else (table or [])
    pairs: list[tuple[dict[str, Any], Any]] = []
    for item in items:
        key, value = item
        if isinstance(key, str):
            try:
                key = json.loads(key)
            except ValueError:
                continue
        if isinstance(key, dict):
            pairs.append((key, value))
    return pairs
