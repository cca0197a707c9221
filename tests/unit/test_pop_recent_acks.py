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
