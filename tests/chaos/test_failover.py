"""Failover end to end: real processes (3 controllers, NameServer, 3 broker replicas in controller
mode with allAckInSyncStateSet, proxy), continuous produce and consume through the proxy, and
faults: kill -9 of the master, of the controller leader, SIGSTOP of a slave, the old master's
restart, and random kill/restart cycles. After each: no acknowledged message lost, duplicates
within what the recorded failures explain, per-group order kept on FIFO topics.

ORBITMQ_CHAOS_CYCLES sets the number of kill/restart cycles (default 10, half a minute on a
2-core machine, so `make test` stays in its time; ORBITMQ_CHAOS_CYCLES=100 for a longer soak);
ORBITMQ_CHAOS_SEED picks the victims.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from orbitmq.bench.proxy_client import ProxyClient
from orbitmq.common.message import Message
from tests.support.chaos_load import ChaosLoad, LoadSpec
from tests.support.checker import DeliveryChecker
from tests.support.ha_cluster import BROKER_NAME, HACluster, Replica

CYCLES = int(os.environ.get("ORBITMQ_CHAOS_CYCLES", "10"))
# Deliveries a consumer may hold un-acked when a master dies (receive batch x consumers).
IN_FLIGHT_SLACK = 2 * 16
# Consumer offsets reach slaves by SlaveSynchronize (every 3 s, a full copy after 10 s): what was
# consumed this long before a master's death may be delivered again by the new master. A promoted
# master raises concurrent POP offsets to its replicated checkpoints (docs/controller-ha.md), so
# this applies to orderly groups, and to plain ones only where faults come faster than the copies.
OFFSET_LAG_S = 13.0


async def _loads(cluster: HACluster, tag: str, fifo: bool = True) -> list[ChaosLoad]:
    """A plain and (optionally) a FIFO load, each with its own topic and consumer group."""
    specs = [LoadSpec(cluster.endpoint, f"Chaos{tag}", f"GChaos{tag}", prefix=f"{tag}n")]
    if fifo:
        specs.append(LoadSpec(cluster.endpoint, f"Chaos{tag}Fifo", f"GChaos{tag}Fifo", fifo=True, producers=3,
                              prefix=f"{tag}f"))
    for spec in specs:
        await cluster.create_topic(spec.topic, fifo=spec.fifo)
        await cluster.create_group(spec.group, orderly=spec.fifo)
        await cluster.wait_topic_routed(spec.topic)
    loads = [ChaosLoad(spec) for spec in specs]
    for load in loads:
        await load.start()
    return loads


def _fault(loads: list[ChaosLoad]) -> None:
    for load in loads:
        load.checker.mark_fault()


@contextlib.asynccontextmanager
async def _stopped_on_error(loads: list[ChaosLoad]) -> AsyncIterator[None]:
    """Stop the loads if the block fails (on success the test drains them with _finish)."""
    try:
        yield
    except BaseException:
        for load in loads:
            await load.stop()
        raise


async def _kill_master(cluster: HACluster, *checkers: DeliveryChecker,
                       timeout: float = 30) -> tuple[str, str, float]:  # noqa: ASYNC109
    """Once every replica is in sync, mark a fault on the checkers and kill -9 the master.

    Returns the old and the new master's address and when the kill began.
    """
    await cluster.wait_all_in_sync()
    old = await cluster.wait_master()
    killed_at = time.monotonic()
    for checker in checkers:
        checker.mark_fault()
    await cluster.kill(cluster.replica_at(old))
    new = await cluster.wait_master(timeout=timeout, not_addr=old)
    return old, new, killed_at


async def _all_continue(loads: list[ChaosLoad], since: float, count: int = 20, timeout: float = 40) -> None:  # noqa: ASYNC109
    for load in loads:
        assert await load.wait_acked_since(since, count, timeout), (
            f"{load.spec.topic}: only {load.acked_since(since)} sends acknowledged since the fault; "
            f"errors {dict(load.checker.send_errors)}")


async def _finish(cluster: HACluster, loads: list[ChaosLoad], drain: float = 45,  # noqa: ASYNC109
                  plain_offset_lag_s: float = OFFSET_LAG_S) -> None:
    """Stop producing, consume what is left, then check every load (duplicates of a plain load
    explained by offsets copied ``plain_offset_lag_s`` late)."""
    await asyncio.gather(*(load.drain(drain) for load in loads))
    for load in loads:
        await load.stop()
    proxy_dups = cluster.proxy_possible_duplicates()
    problems = []
    for load in loads:
        lag = OFFSET_LAG_S if load.spec.fifo else plain_offset_lag_s
        report = load.checker.verify(load.checker.duplicate_bound(proxy_dups, IN_FLIGHT_SLACK, lag))
        print(f"{load.spec.topic}: {report.summary()}; client resends {load.checker.client_resends}, "
              f"ack failures {load.checker.ack_failures}, proxy possible duplicates {proxy_dups}")
        assert report.acked > 0, f"{load.spec.topic}: nothing was acknowledged"
        problems += [f"{load.spec.topic}: {p}" for p in report.problems]
        if report.lost:
            blanks = await asyncio.to_thread(cluster.consume_queue_blanks, load.spec.topic)
            problems.append(f"{load.spec.topic}: blank ConsumeQueue entries per replica {blanks}")
    assert not problems, "\n".join(problems)


async def test_kill_master_under_load_elects_a_new_master_and_clients_continue(ha_cluster: HACluster) -> None:
    cluster = ha_cluster
    loads = await _loads(cluster, "KillMaster")
    async with _stopped_on_error(loads):
        await _all_continue(loads, time.monotonic(), 30, 30)
        old, new, killed_at = await _kill_master(cluster, *(load.checker for load in loads))
        assert new != old
        await _all_continue(loads, killed_at)
    # One master kill: the plain group's duplicates are only what was in flight or failed.
    await _finish(cluster, loads, plain_offset_lag_s=0.0)


async def test_kill_controller_leader_then_master(ha_cluster: HACluster) -> None:
    cluster = ha_cluster
    loads = await _loads(cluster, "KillLeader", fifo=False)
    async with _stopped_on_error(loads):
        await _all_continue(loads, time.monotonic(), 20, 30)
        leader = await cluster.controller_leader()
        await cluster.kill(leader)
        new_leader = await cluster.controller_leader(timeout=30)
        assert new_leader is not leader
        _old, _new, killed_at = await _kill_master(cluster, *(load.checker for load in loads), timeout=40)
        await _all_continue(loads, killed_at)
    await _finish(cluster, loads)


async def cut_slave_off_and_back(cluster: HACluster, tag: str, cut: Callable[[Replica], None],
                                 restore: Callable[[Replica], None]) -> None:
    """Under load, cut a slave off: the SyncStateSet shrinks without it and sends go on; restored,
    it catches up and rejoins, and the master never moved."""
    everyone = {r.addr for r in cluster.replicas}
    await cluster.wait_sync_state(lambda sss: sss == everyone, timeout=40)
    loads = await _loads(cluster, tag, fifo=False)
    master = await cluster.wait_master()
    slave = next(r for r in cluster.replicas if r.addr != master)
    async with _stopped_on_error(loads):
        try:
            cut(slave)
            shrunk = await cluster.wait_sync_state(lambda sss: slave.addr not in sss, timeout=30)
            assert master in shrunk
            await _all_continue(loads, time.monotonic(), 30)
        finally:
            restore(slave)
        await cluster.wait_sync_state(lambda sss: sss == everyone, timeout=60)
        assert await cluster.master_addr() == master, "a slave's absence must not move the master"
        await _all_continue(loads, time.monotonic(), 10)
    await _finish(cluster, loads)


async def test_stopped_slave_leaves_the_sync_state_set_and_rejoins(ha_cluster: HACluster) -> None:
    await cut_slave_off_and_back(ha_cluster, "Stop", ha_cluster.pause, ha_cluster.resume)


async def test_old_master_restarts_as_a_slave_with_the_new_epochs(ha_cluster: HACluster) -> None:
    cluster = ha_cluster
    loads = await _loads(cluster, "Rejoin", fifo=False)
    async with _stopped_on_error(loads):
        await _all_continue(loads, time.monotonic(), 30, 30)
        old, new, _killed_at = await _kill_master(cluster, *(load.checker for load in loads))
        await _all_continue(loads, time.monotonic(), 20)
        await cluster.start_replica(cluster.replica_at(old))
        # Back as a slave (brokerId >= 1 in the route), in the SyncStateSet again.
        deadline = time.monotonic() + 40
        while True:
            members = await cluster.route_members()
            if old in members.values() and members.get(0) == new:
                break
            assert time.monotonic() < deadline, f"old master not routed as a slave: {members}"
            await asyncio.sleep(0.3)
        await cluster.wait_sync_state(lambda sss: old in sss and new in sss, timeout=40)
    await _finish(cluster, loads)
    # Caught up: the same epochs (a divergent tail of the old epoch truncated) and the same end.
    deadline = time.monotonic() + 20
    while True:
        theirs, mine = await cluster.epoch_cache(new), await cluster.epoch_cache(old)
        same = ([(e["epoch"], e["startOffset"]) for e in mine["epochList"]]
                == [(e["epoch"], e["startOffset"]) for e in theirs["epochList"]]
                and mine["maxOffset"] == theirs["maxOffset"])
        if same:
            break
        assert time.monotonic() < deadline, f"old master's epochs {mine} differ from the master's {theirs}"
        await asyncio.sleep(0.5)
    assert mine["brokerId"] != 0 and len(theirs["epochList"]) >= 2


def _positions(store: Path, needle: bytes) -> list[int]:
    """CommitLog offsets where ``needle`` occurs in a replica's store (files read as they are)."""
    found = []
    for segment in sorted((store / "commitlog").iterdir()):
        data = segment.read_bytes()
        base = int(segment.name)
        at = data.find(needle)
        while at >= 0:
            found.append(base + at)
            at = data.find(needle, at + 1)
    return found


async def test_old_master_truncates_its_divergent_tail(ha_cluster: HACluster) -> None:
    """A message the master appended but no slave got is cut from the old master when it comes
    back as a slave of the new master, which wrote other data at that offset.

    Both slaves are stopped while the master appends a 3.5 MiB message (their socket buffers take
    only its start, so its end, with the marker, reaches the master alone), then the master is
    killed and the slaves resumed: the new master drops the partial tail and writes on from there.
    """
    cluster = ha_cluster
    topic = "ChaosDivergent"
    await cluster.create_topic(topic)
    await cluster.wait_topic_routed(topic)
    needle = b"divergent-tail-marker"
    async with ProxyClient(cluster.endpoint, request_timeout=20) as client:
        for n in range(20):
            assert (await client.send(topic, f"before-{n}")).message_id
        await cluster.wait_all_in_sync()
        old = await cluster.wait_master()
        slaves = [r for r in cluster.replicas if r.addr != old]
        for r in slaves:
            cluster.pause(r)
        try:
            # Straight to the master (not through the proxy, which would send it again elsewhere).
            big = Message(topic, b"x" * (3_500_000) + needle, 0, {"WAIT": "true"})
            pending = asyncio.create_task(cluster.api.send_message(old, BROKER_NAME, big, "ChaosDivergentProducer",
                                                                   0, timeout=10))
            await asyncio.sleep(1.0)  # appended by the master, waiting for acknowledgements
            await cluster.kill(cluster.replica_at(old))
        finally:
            for r in slaves:
                cluster.resume(r)
        with contextlib.suppress(Exception):
            await pending  # the connection died with the master
        new = await cluster.wait_master(timeout=30, not_addr=old)
        for n in range(20):
            assert (await client.send(topic, f"after-{n}")).message_id
    old_store = cluster.replica_at(old).store
    new_store = cluster.replica_at(new).store
    before = await asyncio.to_thread(_positions, old_store, needle)
    on_new = await asyncio.to_thread(_positions, new_store, needle)
    assert before and not on_new, f"no divergent tail was made: old master {before}, new master {on_new}"
    await cluster.start_replica(cluster.replica_at(old))
    await cluster.wait_sync_state(lambda sss: old in sss and new in sss, timeout=40)
    deadline = time.monotonic() + 20
    while True:
        mine, theirs = await cluster.epoch_cache(old), await cluster.epoch_cache(new)
        if mine["maxOffset"] == theirs["maxOffset"]:
            break
        assert time.monotonic() < deadline, f"old master did not catch up: {mine} vs {theirs}"
        await asyncio.sleep(0.5)
    assert [(e["epoch"], e["startOffset"]) for e in mine["epochList"]] == [
        (e["epoch"], e["startOffset"]) for e in theirs["epochList"]]
    assert await asyncio.to_thread(_positions, old_store, needle) == [], "the divergent tail survived"


async def test_random_kill_restart_cycles_under_load(ha_cluster: HACluster) -> None:
    cluster = ha_cluster
    rng = random.Random(int(os.environ.get("ORBITMQ_CHAOS_SEED", "20261126")))
    everyone = {r.addr for r in cluster.replicas}
    loads = await _loads(cluster, "Cycles")
    async with _stopped_on_error(loads):
        await _all_continue(loads, time.monotonic(), 20, 30)
        for cycle in range(CYCLES):
            await cluster.wait_sync_state(lambda sss: sss == everyone, timeout=40)
            master = await cluster.wait_master()
            victim = rng.choice(cluster.replicas)
            print(f"cycle {cycle}: kill -9 {'master' if victim.addr == master else 'slave'} {victim.addr}")
            killed_at = time.monotonic()
            if victim.addr == master:
                _fault(loads)
            await cluster.kill(victim)
            if victim.addr == master:
                await cluster.wait_master(timeout=30, not_addr=master)
            await _all_continue(loads, killed_at, 5)
            await cluster.start_replica(victim)
    await cluster.wait_sync_state(lambda sss: sss == everyone, timeout=40)
    await _finish(cluster, loads)


async def test_official_client_keeps_sending_and_receiving_across_a_failover(ha_cluster: HACluster) -> None:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    cluster = ha_cluster
    topic, group = "ChaosOfficial", "GChaosOfficial"
    await cluster.create_topic(topic)
    await cluster.create_group(group)
    await cluster.wait_topic_routed(topic)
    checker = DeliveryChecker()
    stop = threading.Event()
    acked_after: list[float] = []

    def produce() -> None:
        producer = Producer(ClientConfiguration(cluster.endpoint, Credentials(), request_timeout=10), (topic,))
        producer.startup()
        try:
            n = 0
            while not stop.is_set():
                key = f"official-{n}"
                msg = Message()
                msg.topic = topic
                msg.body = key.encode()
                msg.keys = key
                try:
                    receipt = producer.send(msg)
                except Exception as exc:  # noqa: BLE001 -- the client's own retries failed: resend
                    checker.send_failed(key, type(exc).__name__, will_resend=True)
                    time.sleep(0.2)
                    continue
                checker.sent(key, receipt.message_id)
                acked_after.append(time.monotonic())
                n += 1
                time.sleep(0.02)
        finally:
            producer.shutdown()

    def consume() -> None:
        consumer = SimpleConsumer(ClientConfiguration(cluster.endpoint, Credentials(), request_timeout=10), group,
                                  {topic: FilterExpression()}, await_duration=2)
        consumer.startup()
        try:
            while not stop.is_set() or checker.missing():
                try:
                    messages = consumer.receive(16, 15)
                except Exception:  # noqa: BLE001 -- failing over: ask again
                    time.sleep(0.2)
                    continue
                for m in messages or []:
                    checker.consumed(m.body.decode())
                    try:
                        consumer.ack(m)
                    except Exception:  # noqa: BLE001
                        checker.ack_failed()
                if stop.is_set() and time.monotonic() > drain_deadline:
                    return
        finally:
            consumer.shutdown()

    drain_deadline = float("inf")
    producer_thread = asyncio.create_task(asyncio.to_thread(produce))
    consumer_thread = asyncio.create_task(asyncio.to_thread(consume))
    try:
        deadline = time.monotonic() + 30
        while len(acked_after) < 20:
            assert time.monotonic() < deadline, "the official producer did not get going"
            await asyncio.sleep(0.1)
        _old, _new, killed_at = await _kill_master(cluster, checker)
        deadline = time.monotonic() + 40
        while sum(1 for t in acked_after if t > killed_at) < 20:
            assert time.monotonic() < deadline, f"official producer stalled after the failover: {checker.send_errors}"
            await asyncio.sleep(0.1)
    finally:
        drain_deadline = time.monotonic() + 45
        stop.set()
        await producer_thread
        await consumer_thread
    report = checker.verify(checker.duplicate_bound(cluster.proxy_possible_duplicates(), IN_FLIGHT_SLACK,
                                                    OFFSET_LAG_S))
    print(f"official client: {report.summary()}")
    assert not report.problems, "\n".join(report.problems)
