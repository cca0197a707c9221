"""NameServer address lists: "a:9876;b:9876" as RocketMQ's namesrvAddr, or NAMESRV_ADDR."""

from __future__ import annotations

import os

from orbitmq.common.constants import NAMESRV_ADDR_ENV


def parse_namesrv_addr(value: str | None) -> list[str]:
    """Split a namesrvAddr string into "host:port" items; ';' separates, ',' is tolerated."""
    if not value:
        return []
    result: list[str] = []
    for part in value.replace(",", ";").split(";"):
        addr = part.strip()
        if not addr:
            continue
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad NameServer address {addr!r}: expected host:port")
        if addr not in result:
            result.append(addr)
    return result


def resolve_namesrv_addr(explicit: str | None = None) -> list[str]:
    """The explicit value when given, otherwise the NAMESRV_ADDR environment variable."""
    return parse_namesrv_addr(explicit if explicit else os.environ.get(NAMESRV_ADDR_ENV))
