"""What both halves of the conformance run (run.py for Remoting, grpc_run.py for gRPC) share: a
row per request with its differences, the printed table, and the rows no deviation explains."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Row:
    case: Any  # a corpus case: it has a ``name``
    diffs: list[str]
    apache: Any = None
    orbit: Any = None
    deviations: Mapping[str, str] | None = None  # the corpus' DEVIATIONS

    @property
    def deviation(self) -> str | None:
        return (self.deviations or {}).get(self.case.name)


def table(rows: list[Row], what: str, where: Callable[[Any], str]) -> str:
    """"N <what>, M differ (K recorded deviations)", then each differing row: its mark, ``where``
    (target or RPC), name, differences and the deviation's reason."""
    lines = [f"{len(rows)} {what}, {sum(1 for r in rows if r.diffs)} differ "
             f"({sum(1 for r in rows if r.diffs and r.deviation)} recorded deviations)", ""]
    for row in rows:
        if not row.diffs:
            continue
        mark = "deviation" if row.deviation else "DIFFERS"
        lines.append(f"{mark:9}  {where(row.case)}  {row.case.name}")
        lines.extend(f"           {d}" for d in row.diffs)
        if row.deviation:
            lines.append(f"           reason: {row.deviation}")
    return "\n".join(lines)


def unexpected(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.diffs and not r.deviation]
