"""RecentAcks: an acked handle is refused a change of invisible time until it would expire."""

from __future__ import annotations

from orbitmq.broker.pop.checkpoint import AckMsg, BatchAckMsg
from orbitmq.broker.pop.recent_acks import RecentAcks


def test_acked_until_the_handle_expires_and_bounded() -> None:
    acks = RecentAcks(limit=4)
    acks.add([(AckMsg(5, 0, "G", "T", 1, 1000), 3000)])
    assert acks.acked("G", "T", 1, 5, 1000, now_ms=3999)
    assert not acks.acked("G", "T", 1, 5, 1000, now_ms=4000)  # expired: the proxy refuses it anyway
    assert not acks.acked("G", "T", 1, 5, 999, now_ms=2000)  # another pop of the same offset
    acks.add([(BatchAckMsg(-1, 10, "G", "T", 2, 2000, "b", [10, 11, 12, 13]), 5000)])
    assert len(acks._until) <= 4 and acks.acked("G", "T", 2, 13, 2000, now_ms=2500)


def test_expired_entries_are_dropped_as_acks_arrive() -> None:
    """Issue 17: the table no longer grows with every message consumed until its bound."""
    acks = RecentAcks(limit=1000)
    acks.add([(BatchAckMsg(-1, 0, "G", "T", 0, 1000, "b", list(range(8))), 3000)], now_ms=1500)
    assert len(acks._until) == 8  # live: kept
    acks.add([(AckMsg(20, 20, "G", "T", 0, 2000), 3000)], now_ms=2000)  # within a second: no sweep yet
    assert len(acks._until) == 9
    acks.add([(AckMsg(21, 21, "G", "T", 0, 4500), 3000)], now_ms=4500)  # the first 8 expired at 4000
    assert len(acks._until) == 2
    assert acks.acked("G", "T", 0, 20, 2000, now_ms=4600) and acks.acked("G", "T", 0, 21, 4500, now_ms=4600)
    acks.add([], now_ms=9000)  # everything expired: nothing left
    assert acks._until == {}
