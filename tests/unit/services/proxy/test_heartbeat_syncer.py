"""Pull groups across proxy processes (services/proxy/heartbeat_syncer.py, pull_assignment.py):
members travel between proxies as snapshots, and the broker's rebalance locks keep every queue
to one client even while two proxies' views of the group disagree."""

from __future__ import annotations

import asyncio
import json

import pytest

from orbitmq.broker.client.rebalance_lock import RebalanceLockManager
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.heartbeat_syncer import FORMAT, HeartbeatSyncer, RemoteMembers, decode, encode
from orbitmq.proxy.pull_assignment import GroupKey, PullAssignments, QueueKey

KEY: GroupKey = ("", "G", "T")
QUEUES: list[QueueKey] = [("b", i) for i in range(8)]


class _Broker:
    """QueueLocks backed by the broker's own RebalanceLockManager."""

    def __init__(self, max_live_millis: int = 60_000) -> None:
        self.manager = RebalanceLockManager(max_live_millis)

    async def lock(self, key: GroupKey, client_id: str, queues) -> set[QueueKey]:
        got = self.manager.try_lock_batch(key[1], [(key[2], b, q) for b, q in queues], client_id)
        return {(b, q) for _t, b, q in got}

    async def unlock(self, key: GroupKey, client_id: str, queues) -> None:
        self.manager.unlock_batch(key[1], [(key[2], b, q) for b, q in queues], client_id)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Proxy:
    """One proxy process: its local live clients, its PullAssignments and its view of the others."""

    seqs = iter(range(1, 10_000))

    def __init__(self, name: str, broker: _Broker, clock: _Clock) -> None:
        self.name = name
        self.live: list[str] = []
        self.remote = RemoteMembers(30.0, clock)
        self.pa = PullAssignments(lambda ns, g, t: self.live, broker, self.remote.members)

    def snapshot(self, **flags: bool) -> dict:
        data = decode(encode(self.name, next(self.seqs), self.pa.members(), **flags))
        assert data is not None
        return data


def _sync(*proxies: _Proxy) -> None:
    for sender in proxies:
        for receiver in proxies:
            if receiver is not sender:
                receiver.remote.apply(sender.snapshot())


async def _round(where: dict[str, _Proxy]) -> dict[str, list[QueueKey]]:
    """Every client asks once, through its proxy."""
    return {cid: await p.pa.assign(KEY, cid, QUEUES) for cid, p in sorted(where.items())}


def _disjoint(shares: dict[str, list[QueueKey]]) -> bool:
    flat = [q for s in shares.values() for q in s]
    return len(flat) == len(set(flat))


def test_snapshots_round_trip_and_foreign_messages_are_skipped() -> None:
    body = encode("p1", 7, [("ns", "G", "T", "c1")], hello=True)
    data = decode(body)
    assert data is not None and data["format"] == FORMAT and data["members"] == [["ns", "G", "T", "c1"]]
    assert data["hello"] is True and data["seq"] == 7
    # an upstream proxy's HeartbeatSyncerData on the same topic, and garbage, are not ours
    upstream = json.dumps({"heartbeatType": "REGISTER", "clientId": "x", "group": "G", "localProxyId": "p9"})
    assert decode(upstream.encode()) is None
    assert decode(b"\xff\x00") is None
    assert decode(json.dumps({"format": FORMAT, "localProxyId": "p", "seq": 1, "members": [["a"]]}).encode()) is None


def test_remote_members_keep_the_newest_snapshot_and_expire() -> None:
    clock = _Clock()
    remote = RemoteMembers(30.0, clock)
    assert remote.apply(decode(encode("p1", 2, [("", "G", "T", "c1"), ("", "G", "T", "c2")])))
    assert not remote.apply(decode(encode("p1", 1, [])))  # older: a late message from another broker
    assert remote.members(KEY) == {"c1", "c2"} and remote.members(("", "G", "U")) == set()
    clock.now += 29
    assert remote.members(KEY) == {"c1", "c2"}
    clock.now += 2  # three periods without a word: killed
    assert remote.members(KEY) == set() and remote.proxies() == []
    assert remote.apply(decode(encode("p1", 3, [("", "G", "T", "c1")])))
    assert remote.members(KEY) == {"c1"}
    assert remote.apply(decode(encode("p1", 4, [("", "G", "T", "c1")], bye=True)))  # stopped
    assert remote.members(KEY) == set()


def test_two_proxies_that_do_not_know_each_other_yet_never_give_a_queue_twice() -> None:
    async def run() -> None:
        broker, clock = _Broker(), _Clock()
        p1, p2 = _Proxy("p1", broker, clock), _Proxy("p2", broker, clock)
        p1.live, p2.live = ["a"], ["b"]
        where = {"a": p1, "b": p2}
        # no snapshot exchanged: each proxy believes its client is alone; the locks decide
        shares = await _round(where)
        assert shares == {"a": QUEUES, "b": []}
        assert _disjoint(await _round(where))
        # once the snapshots arrive, the allocation agrees: b waits for a's release, then takes its half
        _sync(p1, p2)
        for _ in range(3):
            shares = await _round(where)
            assert _disjoint(shares)
        assert shares == {"a": QUEUES[0:4], "b": QUEUES[4:8]}
        # a third client on p1: a hand-off to it waits for the owners' next requests
        p1.live.append("c")
        where["c"] = p1
        for _ in range(4):
            _sync(p1, p2)
            shares = await _round(where)
            assert _disjoint(shares)
        assert shares == {"a": QUEUES[0:3], "b": QUEUES[3:6], "c": QUEUES[6:8]}

    asyncio.run(run())


def test_a_killed_member_frees_its_queues_for_the_other_proxy() -> None:
    async def run() -> None:
        broker, clock = _Broker(), _Clock()
        p1, p2 = _Proxy("p1", broker, clock), _Proxy("p2", broker, clock)
        p1.live, p2.live = ["a"], ["b"]
        where = {"a": p1, "b": p2}
        for _ in range(3):
            _sync(p1, p2)
            await _round(where)
        p2.live.remove("b")  # b killed: its Telemetry stream with p2 ends
        await p2.pa.sweep(renew=False)  # what the stream-closed hook runs
        assert p2.pa.members() == []
        _sync(p1, p2)
        assert (await _round({"a": p1}))["a"] == QUEUES

    asyncio.run(run())


def test_a_killed_proxy_blocks_its_queues_only_until_the_locks_lapse() -> None:
    async def run() -> None:
        broker, clock = _Broker(max_live_millis=200), _Clock()
        p1, p2 = _Proxy("p1", broker, clock), _Proxy("p2", broker, clock)
        p1.live, p2.live = ["a"], ["b"]
        where = {"a": p1, "b": p2}
        for _ in range(3):
            _sync(p1, p2)
            await _round(where)
        # p2 is killed -9: no snapshot, no unlock, no renewal any more
        clock.now += 31
        assert p1.remote.members(KEY) == set()
        assert (await _round({"a": p1}))["a"] == QUEUES[0:4]  # b's half is still locked
        await p1.pa.sweep()  # p1 renews what it holds
        await asyncio.sleep(0.3)  # the broker's rebalanceLockMaxLiveTime passes
        assert (await _round({"a": p1}))["a"] == QUEUES

    asyncio.run(run())


def test_the_syncer_skips_its_own_messages_and_answers_a_hello() -> None:
    async def run() -> None:
        syncer = HeartbeatSyncer(ProxyConfig(), None, lambda: [])  # type: ignore[arg-type]
        assert syncer.topic == "DefaultHeartBeatSyncerTopic" and syncer.cluster_name == "DefaultCluster"
        syncer._on_message(encode(syncer.proxy_id, 1, [("", "G", "T", "mine")]))
        assert syncer.remote_members(KEY) == set() and syncer.received == 0
        syncer._on_message(encode("other", 1, [("", "G", "T", "theirs")], hello=True))
        assert syncer.remote_members(KEY) == {"theirs"} and syncer._dirty.is_set()
        custom = HeartbeatSyncer(ProxyConfig(heartbeat_syncer_topic_name="SyncT",  # type: ignore[arg-type]
                                             heartbeat_syncer_topic_cluster_name="C2"), None, lambda: [])
        assert (custom.topic, custom.cluster_name, custom.consumer_group) == ("SyncT", "C2", "CID_SyncT")
        # two processes of one proxy (orbitmq proxy --workers) are two proxies
        assert HeartbeatSyncer(ProxyConfig(), None, lambda: []).proxy_id != syncer.proxy_id  # type: ignore[arg-type]

    asyncio.run(run())


def test_a_bad_sync_topic_name_stops_the_proxy_with_the_key_named() -> None:
    with pytest.raises(ValueError, match="heartbeatSyncerTopicName: .*illegal characters"):
        HeartbeatSyncer(ProxyConfig(heartbeat_syncer_topic_name="bad topic!"), None, lambda: [])  # type: ignore[arg-type]
