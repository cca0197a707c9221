"""POP with enablePopBufferMerge=true across a broker crash (SIGKILL).

Killed while partly acked checkpoints are still buffered (never written to the revive topic),
the broker has not committed the pop offsets past them, so after the restart every message of
those batches -- the un-acked ones certainly -- is popped again: at-least-once, nothing lost.
Killed after the checkpoints were written with their buffered acks (popCkStayBufferTime passed
and the offsets were persisted), the acked messages stay acked and only the rest come back.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from orbitmq.remoting import RemotingClient
from orbitmq.remoting.codes import ResponseCode
from tests.integration.test_pop import BROKER, ack, create_topic, pop, pop_until, send
from tests.integration.test_pop_buffer_merge_broker import revive_records, start_merge_broker
from tests.support import free_port

# BrokerConfig.flushConsumerOffsetInterval: after this, pop offsets and revive offsets are on disk.
OFFSET_FLUSH_SECONDS = 5.5


async def _send_pop_ack_half(client: RemotingClient, addr: str, topic: str, group: str) -> tuple[list[str], list]:
    await create_topic(client, addr, topic, queues=2)
    ids = [await send(client, addr, topic, f"c{i}".encode(), queue_id=i % 2) for i in range(8)]
    popped: list = []
    for _ in range(4):  # several buffered checkpoints per queue, each partly acked below
        response, messages = await pop(client, addr, group, topic, max_nums=2, invisible_ms=9000)
        assert response.code == ResponseCode.SUCCESS, response.remark
        popped.extend(messages)
    assert sorted(m.uniq_key for m in popped) == sorted(ids)
    for m in popped[::2]:
        assert (await ack(client, addr, group, m)).code == ResponseCode.SUCCESS
    return ids, popped


async def test_sigkill_with_buffered_checkpoints_redelivers_every_unacked_message(procs, tmp_path: Path) -> None:
    port = free_port()
    async with RemotingClient() as client:
        addr = await start_merge_broker(procs, tmp_path, port)  # popCkStayBufferTime 10 s: all stay buffered
        ids, popped = await _send_pop_ack_half(client, addr, "MergeCrash", "GMC")
        unacked = {m.uniq_key for m in popped[1::2]}
        await asyncio.sleep(OFFSET_FLUSH_SECONDS)  # offsets persisted, still inside the stay time
        assert await revive_records(client, addr) == 0
        await asyncio.to_thread(procs.processes[-1].kill)
        await client.close_channel(addr)
        await start_merge_broker(procs, tmp_path, port, name=BROKER + "-after-crash")
        again = await pop_until(client, addr, "GMC", "MergeCrash", len(ids), within=30)
        arrived = {m.uniq_key for m in again}
        assert unacked <= arrived, sorted(unacked - arrived)  # every un-acked message again
        assert set(ids) <= arrived | {m.uniq_key for m in popped}  # every message at least once
        for m in again:
            assert (await ack(client, addr, "GMC", m)).code == ResponseCode.SUCCESS
        response, late = await pop(client, addr, "GMC", "MergeCrash", poll_ms=2000)
        assert late == [], [m.uniq_key for m in late]


async def test_sigkill_after_the_checkpoints_were_written_keeps_the_acks(procs, tmp_path: Path) -> None:
    port = free_port()
    async with RemotingClient() as client:
        addr = await start_merge_broker(procs, tmp_path, port, popCkStayBufferTime="1000")
        ids, popped = await _send_pop_ack_half(client, addr, "MergeCrash2", "GMC2")
        unacked = sorted(m.uniq_key for m in popped[1::2])
        await asyncio.sleep(OFFSET_FLUSH_SECONDS)  # written at 1 s, committed, then persisted
        assert await revive_records(client, addr) == 8  # four checkpoints, each with its one ack
        await asyncio.to_thread(procs.processes[-1].kill)
        await client.close_channel(addr)
        await start_merge_broker(procs, tmp_path, port, name=BROKER + "-after-crash")
        again = await pop_until(client, addr, "GMC2", "MergeCrash2", len(unacked), within=20)
        assert sorted({m.uniq_key for m in again}) == unacked
        for m in again:
            assert (await ack(client, addr, "GMC2", m)).code == ResponseCode.SUCCESS
