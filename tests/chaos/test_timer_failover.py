"""Timer messages across a master failover (controller mode, 3 replicas, allAckInSyncStateSet).

Timer messages are sent to the master; the master is killed (SIGKILL) before they are due; the
new master, whose wheel was filed up to its old master's timercheck (SlaveSynchronize) and
finishes the rest itself, delivers every one of them, none before its time (duplicates allowed,
as upstream).
"""

from __future__ import annotations

import asyncio
import time

from orbitmq.common.message import Message, MessageExt
from orbitmq.remoting import headers as h
from tests.support.ha_cluster import BROKER_NAME, HACluster

TOPIC = "TimerFailoverTopic"
GROUP = "CG_TIMER_FAILOVER"
QUEUES = 2


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _pull_all(cluster: HACluster, addr: str) -> list[MessageExt]:
    out: list[MessageExt] = []
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            header = h.PullMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=queue_id,
                                                queue_offset=offset, max_msg_nums=32, sys_flag=0x4, commit_offset=0,
                                                suspend_timeout_millis=0, subscription="*", sub_version=0)
            result = await cluster.api.pull_message(addr, header)
            if not result.messages:
                break
            out.extend(result.messages)
            offset = result.next_begin_offset
    return out


async def test_timer_messages_survive_a_master_failover(ha_cluster: HACluster) -> None:
    cluster = ha_cluster
    await cluster.create_topic(TOPIC, QUEUES)
    await cluster.create_group(GROUP)
    master = await cluster.wait_master()
    due: dict[str, int] = {}
    for i in range(20):
        deliver = _now_ms() + 20_000 + i * 250  # after the 12 s below, the kill and (usually) the election
        uniq = f"TIMERFAILOVER{i:04d}"
        msg = Message(TOPIC, uniq.encode(), properties={"UNIQ_KEY": uniq, "TIMER_DELIVER_MS": str(deliver)})
        result = await cluster.api.send_message(master, BROKER_NAME, msg, "PG_TIMER_FAILOVER", i % QUEUES)
        assert result.status.value == "SEND_OK"
        due[uniq] = deliver
    await asyncio.sleep(12)  # the slaves copy the master's timercheck every 10 s
    await cluster.kill(cluster.replica_at(master))
    new_master = await cluster.wait_master(timeout=60, not_addr=master)
    seen: dict[str, MessageExt] = {}
    deadline = time.monotonic() + 60
    while len(seen) < len(due) and time.monotonic() < deadline:
        for m in await _pull_all(cluster, new_master):
            seen.setdefault(m.properties["UNIQ_KEY"], m)
        await asyncio.sleep(0.5)
    assert set(seen) == set(due), f"lost across the failover: {sorted(set(due) - set(seen))}"
    for uniq, m in seen.items():
        assert m.store_timestamp >= due[uniq], (uniq, m.store_timestamp - due[uniq])
