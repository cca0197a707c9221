"""JSON with object-valued map keys, the way RocketMQ's fastjson writes Map<MessageQueue, …>.

TopicStatsTable, ConsumeStats and ResetOffsetBody key their tables by MessageQueue. fastjson
writes such a key as the object itself: ``{"offsetTable":{{"brokerName":"b","queueId":0,
"topic":"t"}:{"maxOffset":3,…}}}``. That is not standard JSON, but it is what RocketMQ's own
tools (mqadmin, the dashboard) parse, so the broker answers in exactly that shape.

``dumps`` writes it from Python dicts whose keys are ``ObjectKey`` values; ``loads`` reads it
back (and plain JSON), turning every object key into ``ObjectKey`` — a hashable, sorted
(name, value) tuple with ``as_dict()``.
"""

from __future__ import annotations

import json
import re
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = " \t\r\n"
_BARE_KEY = re.compile(r"[A-Za-z_$][\w$]*")
# RocketMQ's tables nest a handful of levels; anything deeper is garbage, refused early.
MAX_DEPTH = 64


class ObjectKey(tuple):
    """A JSON object used as a map key; hashable, compares by content."""

    @classmethod
    def of(cls, d: dict[str, Any]) -> ObjectKey:
        return cls(sorted(d.items()))

    def as_dict(self) -> dict[str, Any]:
        return dict(self)


def _dump(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            if isinstance(k, ObjectKey):
                _dump(k.as_dict(), out)
            else:
                out.append(json.dumps(str(k), ensure_ascii=False))
            out.append(":")
            _dump(v, out)
        out.append("}")
    elif isinstance(value, list | tuple) and not isinstance(value, ObjectKey):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _dump(v, out)
        out.append("]")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def dumps(value: Any) -> str:
    out: list[str] = []
    _dump(value, out)
    return "".join(out)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def error(self, what: str) -> ValueError:
        return ValueError(f"{what} at position {self.pos}")

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def value(self) -> Any:
        self.ws()
        if self.pos >= len(self.text):
            raise self.error("unexpected end of JSON")
        ch = self.text[self.pos]
        if ch in "{[":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error("JSON nested too deeply")
            result = self.object() if ch == "{" else self.array()
            self.depth -= 1
            return result
        if ch == '"':
            s, self.pos = json.decoder.scanstring(self.text, self.pos + 1)
            return s
        for literal, value in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(literal, self.pos):
                self.pos += len(literal)
                return value
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.error("unexpected character")
        self.pos = m.end()
        token = m.group()
        return float(token) if any(c in token for c in ".eE") else int(token)

    def object(self) -> dict[Any, Any]:
        self.pos += 1
        result: dict[Any, Any] = {}
        self.ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return result
        while True:
            self.ws()
            bare = _BARE_KEY.match(self.text, self.pos)
            if bare and not self.text.startswith(("true", "false", "null"), self.pos):
                key = bare.group()  # lenient readers (fastjson) accept unquoted names
                self.pos = bare.end()
            else:
                key = self.value()
            if isinstance(key, dict):
                key = ObjectKey.of(key)
            elif not isinstance(key, str):
                key = str(key)  # fastjson also writes bare numeric keys
            self.ws()
            if not self.text.startswith(":", self.pos):
                raise self.error("expected ':'")
            self.pos += 1
            result[key] = self.value()
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return result
            raise self.error("expected ',' or '}'")

    def array(self) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        self.ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            self.ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return result
            raise self.error("expected ',' or ']'")


def loads(data: str | bytes) -> Any:
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    parser = _Parser(text)
    value = parser.value()
    parser.ws()
    if parser.pos != len(text):
        raise parser.error("trailing data after JSON")
    return value


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> ObjectKey:
    """A MessageQueue as fastjson writes it: {"brokerName","queueId","topic"}."""
    return ObjectKey.of({"brokerName": broker_name, "queueId": queue_id, "topic": topic})


def message_queue_pairs(table: Any) -> list[tuple[dict[str, Any], Any]]:
    """(MessageQueue dict, value) pairs of a table keyed by MessageQueue objects.

    Accepts fastjson's object keys (ObjectKey) and keys that are JSON text of an object, which
    is how a standard JSON writer would have had to encode them.
    """
    pairs: list[tuple[dict[str, Any], Any]] = []
    for key, value in (table or {}).items():
        if isinstance(key, ObjectKey):
            pairs.append((key.as_dict(), value))
        elif isinstance(key, str) and key.startswith("{"):
            try:
                decoded = loads(key)
            except ValueError:
                continue
            if isinstance(decoded, dict):
                pairs.append((decoded, value))
    return pairs
