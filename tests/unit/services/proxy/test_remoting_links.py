"""BrokerLinks (services/proxy/remoting/channels.py): one broker-side RemotingClient per client
connection, gone with the connection, and the repeated-heartbeat answer of one connection."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from orbitmq.proxy.remoting import channels
from orbitmq.proxy.remoting.channels import BrokerLinks
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.protocol import RemotingCommand


class _Inbound:
    """A client connection: only what BrokerLinks uses (on_close)."""

    def __init__(self) -> None:
        self.listeners: list[Any] = []
        self.remote_address = "127.0.0.1:1"

    def on_close(self, listener: Any) -> None:
        self.listeners.append(listener)

    def close(self) -> None:
        for listener in self.listeners:
            listener(self)


def _links() -> BrokerLinks:
    shared = SimpleNamespace(connect_timeout=1.0, ssl_context=None)
    return BrokerLinks(SimpleNamespace(api=SimpleNamespace(remoting=shared)), 1.0)  # type: ignore[arg-type]


async def test_one_link_per_connection_closed_with_it() -> None:
    links = _links()
    a, b = _Inbound(), _Inbound()
    first = links.link(a)  # type: ignore[arg-type]
    assert links.link(a) is first  # type: ignore[arg-type]
    assert links.link(b) is not first  # type: ignore[arg-type]
    assert len(links) == 2
    a.close()
    assert len(links) == 1
    await links.shutdown()
    assert len(links) == 0


async def test_a_repeated_heartbeat_is_answered_from_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    links = _links()
    conn, other = _Inbound(), _Inbound()
    links.link(conn)  # type: ignore[arg-type]
    links.link(other)  # type: ignore[arg-type]
    answer = RemotingCommand.response(ResponseCode.SUCCESS, ext_fields={"k": "v"})
    assert links.repeated_heartbeat(conn, b"hb") is None  # type: ignore[arg-type]
    links.heartbeat_forwarded(conn, b"hb", answer)  # type: ignore[arg-type]
    again = links.repeated_heartbeat(conn, b"hb")  # type: ignore[arg-type]
    assert again is not None and again.code == ResponseCode.SUCCESS and again.ext_fields == {"k": "v"}
    assert again is not answer  # the connection writes its own opaque on it
    assert links.repeated_heartbeat(conn, b"changed") is None  # type: ignore[arg-type]
    assert links.repeated_heartbeat(other, b"hb") is None  # type: ignore[arg-type]
    now = channels.time.monotonic()
    later = SimpleNamespace(monotonic=lambda: now + channels.HEARTBEAT_REPEAT_SECONDS + 0.1)
    monkeypatch.setattr(channels, "time", later)  # this module's clock only, not the event loop's
    assert links.repeated_heartbeat(conn, b"hb") is None  # type: ignore[arg-type]
    conn.close()
    links.heartbeat_forwarded(conn, b"hb", answer)  # type: ignore[arg-type]
    assert links.repeated_heartbeat(conn, b"hb") is None  # type: ignore[arg-type]
    await links.shutdown()
