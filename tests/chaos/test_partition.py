"""Network partitions of a controller-mode broker set (each replica in its own network namespace).

Unlike SIGSTOP, a partitioned replica keeps running: its timers fire, it tries to reach the
controllers and its peers, and its connections hang without a reset. The checker asserts as in
test_failover: no acknowledged message lost, duplicates within the bound.
"""

from __future__ import annotations

import asyncio
import time

from tests.chaos.test_failover import (
    _all_continue,
    _finish,
    _loads,
    _stopped_on_error,
    cut_slave_off_and_back,
)
from tests.support.ha_cluster import HACluster


async def test_partitioned_slave_leaves_the_sync_state_set_and_rejoins(partitionable_cluster: HACluster) -> None:
    cluster = partitionable_cluster
    print(f"partitions by {cluster.partition_mode}")
    await cut_slave_off_and_back(cluster, "CutSlave", cluster.partition, cluster.heal)


async def test_partitioned_master_is_replaced_and_rejoins_as_a_slave(partitionable_cluster: HACluster) -> None:
    """The master is cut off under load: the controllers elect a slave of the SyncStateSet, the
    proxy moves to it, and after the heal the old master (still running, still believing it is
    master until told otherwise) steps down, truncates what only it had and rejoins as a slave."""
    cluster = partitionable_cluster
    print(f"partitions by {cluster.partition_mode}")
    everyone = {r.addr for r in cluster.replicas}
    loads = await _loads(cluster, "CutMaster")
    async with _stopped_on_error(loads):
        await _all_continue(loads, time.monotonic(), 30, 30)
        await cluster.wait_all_in_sync()
        old = await cluster.wait_master()
        victim = cluster.replica_at(old)
        cut_at = time.monotonic()
        for load in loads:
            load.checker.mark_fault()
        try:
            cluster.partition(victim)
            new = await cluster.wait_master(timeout=40, not_addr=old)
            await _all_continue(loads, cut_at, 20, 60)
        finally:
            cluster.heal(victim)
        deadline = time.monotonic() + 60
        while True:  # the old master is routed as a slave of the new one
            members = await cluster.route_members()
            if members.get(0) == new and old in members.values():
                break
            assert time.monotonic() < deadline, f"old master not routed as a slave after the heal: {members}"
            await asyncio.sleep(0.3)
        await cluster.wait_sync_state(lambda sss: sss == everyone, timeout=60)
        await _all_continue(loads, time.monotonic(), 10)
    await _finish(cluster, loads)
    mine, theirs = await cluster.epoch_cache(old), await cluster.epoch_cache(new)
    assert mine["brokerId"] != 0
    assert [e["epoch"] for e in mine["epochList"]][-1] == [e["epoch"] for e in theirs["epochList"]][-1]
