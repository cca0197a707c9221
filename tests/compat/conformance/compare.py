"""What two answers to one request must share: the response code, the names of the header
fields, the body's structure (JSON keys and value types, recursively), and the values a case names
as comparable. Ids, times, addresses and remarks legitimately differ and are left out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from orbitmq.common.route import RouteDataError, parse_json
from orbitmq.remoting.protocol import RemotingCommand

# Header fields either side adds for its own bookkeeping, never part of the contract.
NOISE_FIELDS = frozenset()


@dataclass(frozen=True)
class Answer:
    code: int
    fields: dict[str, str]
    body: bytes
    remark: str

    @classmethod
    def of(cls, response: RemotingCommand) -> Answer:
        return cls(response.code, dict(response.ext_fields or {}), bytes(response.body or b""), response.remark or "")


def shape(value: Any, depth: int) -> Any:
    """The structure of a JSON value: dict keys with their values' shapes, a list's first element's
    shape, a scalar's type name; ``depth`` levels deep, below that only the type."""
    if depth <= 0:
        return type(value).__name__
    if isinstance(value, dict):
        return {str(k): shape(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0], depth - 1)] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"  # fastjson writes 1.0 where another writer has 1
    return type(value).__name__


def body_shape(body: bytes, depth: int) -> Any:
    if not body:
        return None
    try:
        return shape(parse_json(body), depth)
    except (RouteDataError, ValueError):
        return f"<{len(body) and 'bytes'}>"


def differences(apache: Answer, orbit: Answer, *, body_depth: int, values: tuple[str, ...],
                ignore_fields: frozenset[str] = frozenset()) -> list[str]:
    """What differs, each as one short line; empty when the answers conform."""
    out: list[str] = []
    if apache.code != orbit.code:
        out.append(f"code {apache.code} vs {orbit.code} (remarks: {apache.remark[:80]!r} / {orbit.remark[:80]!r})")
        return out  # the rest follows from the code
    skip = NOISE_FIELDS | ignore_fields
    a_fields, o_fields = set(apache.fields) - skip, set(orbit.fields) - skip
    if a_fields != o_fields:
        only_a = {k: apache.fields[k] for k in sorted(a_fields - o_fields)}
        only_o = {k: orbit.fields[k] for k in sorted(o_fields - a_fields)}
        out.append(f"header fields only Apache: {only_a}, only OrbitMQ: {only_o}")
    for name in values:
        if apache.fields.get(name) != orbit.fields.get(name):
            out.append(f"header {name}: {apache.fields.get(name)!r} vs {orbit.fields.get(name)!r}")
    if body_depth >= 0:
        a_shape, o_shape = body_shape(apache.body, body_depth), body_shape(orbit.body, body_depth)
        if a_shape != o_shape:
            out.append(f"body {_diff_shapes(a_shape, o_shape)}")
    return out


def _diff_shapes(a: Any, b: Any, path: str = "$") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        if only_a or only_b:
            return f"{path}: keys only Apache {only_a}, only OrbitMQ {only_b}"
        for key in a:
            if a[key] != b[key]:
                return _diff_shapes(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and a and b:
        return _diff_shapes(a[0], b[0], f"{path}[0]")
    return f"{path}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}"
