"""DefaultBrokerHeartbeatManager: liveness, monotonic live info, scan and channel close."""

from __future__ import annotations

from orbitmq.controller.heartbeat import DefaultBrokerHeartbeatManager


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def beat(m, bid, channel=None, timeout=1000, epoch=1, max_offset=100, priority=None):
    m.on_broker_heartbeat("C", "b", f"127.0.0.1:{10910 + bid}", bid, timeout, channel, epoch, max_offset, 50,
                          priority)


def test_alive_until_timeout_then_scan_removes_and_notifies():
    clock = Clock()
    m = DefaultBrokerHeartbeatManager(clock)
    gone = []
    m.register_broker_inactive_listener(lambda c, n, i: gone.append((c, n, i)))
    beat(m, 1, timeout=1000)
    assert m.is_broker_active("C", "b", 1)
    clock.now += 1000
    assert m.is_broker_active("C", "b", 1)
    assert m.scan_not_active_broker() == []
    clock.now += 1
    assert not m.is_broker_active("C", "b", 1)
    assert m.scan_not_active_broker() == [("C", "b", 1)]
    assert gone == [("C", "b", 1)]
    assert m.get_broker_live_info("C", "b", 1) is None


def test_defaults_when_header_fields_are_missing():
    m = DefaultBrokerHeartbeatManager(Clock())
    m.on_broker_heartbeat("C", "b", "a:1", 1, None, None, None, None, None, None)
    info = m.get_broker_live_info("C", "b", 1)
    assert (info.heartbeat_timeout_millis, info.epoch, info.max_offset, info.election_priority) == \
        (10000, -1, -1, 2**31 - 1)


def test_live_info_moves_only_forward():
    m = DefaultBrokerHeartbeatManager(Clock())
    beat(m, 1, epoch=2, max_offset=100)
    beat(m, 1, epoch=1, max_offset=999)  # older epoch: ignored
    assert (m.get_broker_live_info("C", "b", 1).epoch, m.get_broker_live_info("C", "b", 1).max_offset) == (2, 100)
    beat(m, 1, epoch=2, max_offset=150)
    assert m.get_broker_live_info("C", "b", 1).max_offset == 150
    beat(m, 1, epoch=3, max_offset=10)
    assert (m.get_broker_live_info("C", "b", 1).epoch, m.get_broker_live_info("C", "b", 1).max_offset) == (3, 10)


def test_closed_channel_kills_its_brokers_at_once():
    m = DefaultBrokerHeartbeatManager(Clock())
    gone = []
    m.register_broker_inactive_listener(lambda c, n, i: gone.append(i))
    ch1, ch2 = object(), object()
    beat(m, 1, channel=ch1)
    beat(m, 2, channel=ch2)
    assert m.on_channel_close(ch1) == [("C", "b", 1)]
    assert gone == [1] and not m.is_broker_active("C", "b", 1) and m.is_broker_active("C", "b", 2)
    assert m.active_broker_ids("C", "b") == {2}


def test_failing_listener_does_not_stop_others():
    m = DefaultBrokerHeartbeatManager(Clock())
    seen = []

    def bad(*key):
        raise RuntimeError("boom")

    m.register_broker_inactive_listener(bad)
    m.register_broker_inactive_listener(lambda *key: seen.append(key))
    ch = object()
    beat(m, 1, channel=ch)
    m.on_channel_close(ch)
    assert seen == [("C", "b", 1)]
