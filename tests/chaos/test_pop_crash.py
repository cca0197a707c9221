"""POP across a broker crash (SIGKILL): every popped message that was not acked is delivered
again after the restart. Offsets are persisted periodically, so a crash may also redeliver
(never lose) messages; acked messages whose offsets were already persisted stay acked.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from orbitmq.remoting import RemotingClient
from orbitmq.remoting.codes import ResponseCode
from tests.integration.test_pop import BROKER, ack, create_topic, pop, pop_until, send, start_broker
from tests.support import free_port

# BrokerConfig.flushConsumerOffsetInterval: after this, pop offsets and revive offsets are on disk.
OFFSET_FLUSH_SECONDS = 5.5


async def test_sigkill_loses_no_in_flight_message(procs, tmp_path: Path) -> None:
    port = free_port()
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path, port)
        await create_topic(client, addr, "PopCrash", queues=2)
        ids = [await send(client, addr, "PopCrash", f"c{i}".encode(), queue_id=i % 2) for i in range(6)]
        response, messages = await pop(client, addr, "GC", "PopCrash", invisible_ms=9000)
        assert response.code == ResponseCode.SUCCESS and sorted(m.uniq_key for m in messages) == sorted(ids)
        by_id = {m.uniq_key: m for m in messages}
        for uniq in ids[:3]:
            assert (await ack(client, addr, "GC", by_id[uniq])).code == ResponseCode.SUCCESS
        await asyncio.sleep(OFFSET_FLUSH_SECONDS)  # still well inside the invisible time
        await asyncio.to_thread(procs.processes[-1].kill)
        await client.close_channel(addr)
        await start_broker(procs, tmp_path, port, name=BROKER + "-after-crash")
        again = await pop_until(client, addr, "GC", "PopCrash", 3, within=20)
        assert sorted({m.uniq_key for m in again}) == sorted(ids[3:])
        for m in again:
            await ack(client, addr, "GC", m)
