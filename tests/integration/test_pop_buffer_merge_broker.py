"""POP with enablePopBufferMerge=true on a real broker process over Remoting: batches acked in
time never reach the revive topic, consecutive pops do not hand the uncommitted batches out
again, the pop offset is committed once the batches are done, a partly acked batch is written
after popCkStayBufferTime and revives only its un-acked messages, and a clean restart writes
what was buffered first."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from orbitmq.common.constants import revive_topic
from orbitmq.common.message import MessageConst
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.integration.test_pop import BROKER, CLUSTER, ack, create_topic, pop, pop_until, send
from tests.support import astart_broker, free_port

REVIVE_QUEUES = 8  # reviveQueueNum's default


async def start_merge_broker(procs, tmp_path: Path, port: int | None = None, name: str = BROKER,
                             **keys: object) -> str:
    """A POP broker with buffer merge on; ``keys`` are more broker.conf keys."""
    _proc, addr = await astart_broker(procs, tmp_path, name=name, port=port, brokerClusterName=CLUSTER,
                                      brokerName=BROKER, enablePopBufferMerge="true", **keys)
    return addr


async def max_offset(client: RemotingClient, addr: str, topic: str, queue_id: int) -> int:
    request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    response = await client.invoke(addr, request, 5)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return int(response.ext_fields["offset"])


async def revive_records(client: RemotingClient, addr: str) -> int:
    """How many checkpoints and acks the revive topic holds, over all its queues."""
    topic = revive_topic(CLUSTER)
    return sum([await max_offset(client, addr, topic, q) for q in range(REVIVE_QUEUES)])


async def committed(client: RemotingClient, addr: str, group: str, topic: str, queue_id: int) -> int:
    request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET,
                                      {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)})
    response = await client.invoke(addr, request, 5)
    return int(response.ext_fields["offset"]) if response.code == ResponseCode.SUCCESS else -1


async def batch_ack(client: RemotingClient, addr: str, group: str, messages: list) -> None:
    """One BATCH_ACK_MESSAGE entry per checkpoint (start offset) among ``messages``."""
    by_ck: dict[tuple[str, str], list] = {}
    for m in messages:
        extra = m.properties[MessageConst.POP_CK].split(" ")
        by_ck.setdefault((extra[0], extra[6]), []).append(extra)
    entries = []
    for (start, _qid), extras in by_ck.items():
        bits = [int(e[7]) - int(start) for e in extras]
        data = bytearray(max(bits) // 8 + 1)
        for i in bits:
            data[i // 8] |= 1 << (i % 8)
        e = extras[0]
        entries.append({"c": group, "t": messages[0].topic, "r": e[4], "so": int(start), "q": int(e[6]),
                        "rq": int(e[3]), "pt": int(e[1]), "it": int(e[2]), "b": base64.b64encode(bytes(data)).decode()})
    body = json.dumps({"brokerName": BROKER, "acks": entries}).encode()
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body), 5)
    assert response.code == ResponseCode.SUCCESS, response.remark


async def wait_committed(client: RemotingClient, addr: str, group: str, topic: str, want: dict[int, int],
                         within: float = 5.0) -> dict[int, int]:
    got: dict[int, int] = {}
    for _ in range(int(within * 10)):
        got = {q: await committed(client, addr, group, topic, q) for q in want}
        if got == want:
            break
        await asyncio.sleep(0.1)
    return got


async def test_acked_batches_never_reach_the_revive_topic(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_merge_broker(procs, tmp_path, popCkStayBufferTime="3000")
        await create_topic(client, addr, "MergeT1", queues=2)
        ids = [await send(client, addr, "MergeT1", f"m{i}".encode(), queue_id=i % 2) for i in range(12)]
        popped: list = []
        for _ in range(4):  # three messages a pop: the offsets stay uncommitted meanwhile
            response, messages = await pop(client, addr, "GM1", "MergeT1", max_nums=3)
            assert response.code == ResponseCode.SUCCESS, response.remark
            popped.extend(messages)
        assert sorted(m.uniq_key for m in popped) == sorted(ids)  # none handed out twice
        response, messages = await pop(client, addr, "GM1", "MergeT1")
        assert response.code == ResponseCode.POLLING_TIMEOUT and messages == []
        for m in popped[:6]:
            assert (await ack(client, addr, "GM1", m)).code == ResponseCode.SUCCESS
        await batch_ack(client, addr, "GM1", popped[6:])
        assert await wait_committed(client, addr, "GM1", "MergeT1", {0: 6, 1: 6}) == {0: 6, 1: 6}
        await asyncio.sleep(3.5)  # past popCkStayBufferTime: nothing was left to write
        assert await revive_records(client, addr) == 0
        response, messages = await pop(client, addr, "GM1", "MergeT1")
        assert messages == []


async def test_a_partly_acked_batch_is_written_and_revives_only_the_rest(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_merge_broker(procs, tmp_path, popCkStayBufferTime="2000")
        await create_topic(client, addr, "MergeT2", queues=1)
        ids = [await send(client, addr, "MergeT2", f"p{i}".encode()) for i in range(4)]
        response, messages = await pop(client, addr, "GM2", "MergeT2", invisible_ms=6000)
        assert [m.uniq_key for m in messages] == ids
        assert (await ack(client, addr, "GM2", messages[0])).code == ResponseCode.SUCCESS
        await batch_ack(client, addr, "GM2", messages[1:2])
        assert await revive_records(client, addr) == 0 and await committed(client, addr, "GM2", "MergeT2", 0) == 0
        await asyncio.sleep(2.5)  # flushed: the checkpoint and its two buffered acks
        assert await revive_records(client, addr) == 3
        assert await wait_committed(client, addr, "GM2", "MergeT2", {0: 4}) == {0: 4}
        again = await pop_until(client, addr, "GM2", "MergeT2", 2, within=15)
        assert sorted(m.uniq_key for m in again) == sorted(ids[2:])
        assert all(m.reconsume_times == 1 for m in again)
        for m in again:  # the retry topic's batches are buffered the same way
            assert (await ack(client, addr, "GM2", m)).code == ResponseCode.SUCCESS
        response, late = await pop(client, addr, "GM2", "MergeT2", poll_ms=3000)
        assert late == [], [m.uniq_key for m in late]


async def test_a_clean_restart_writes_the_buffered_checkpoints_first(procs, tmp_path: Path) -> None:
    port = free_port()
    async with RemotingClient() as client:
        addr = await start_merge_broker(procs, tmp_path, port)
        await create_topic(client, addr, "MergeRestart", queues=2)
        ids = [await send(client, addr, "MergeRestart", f"r{i}".encode(), queue_id=i % 2) for i in range(4)]
        response, messages = await pop(client, addr, "GM3", "MergeRestart", invisible_ms=8000)
        assert sorted(m.uniq_key for m in messages) == sorted(ids)
        by_id = {m.uniq_key: m for m in messages}
        for uniq in ids[:2]:
            assert (await ack(client, addr, "GM3", by_id[uniq])).code == ResponseCode.SUCCESS
        assert await revive_records(client, addr) == 0  # all still in memory (popCkStayBufferTime 10 s)
        await procs.processes[-1].async_stop()
        await client.close_channel(addr)
        addr = await start_merge_broker(procs, tmp_path, port, name=BROKER + "-restarted")
        assert await revive_records(client, addr) == 4  # two checkpoints, each with its one ack
        assert await committed(client, addr, "GM3", "MergeRestart", 0) == 2
        again = await pop_until(client, addr, "GM3", "MergeRestart", 2, within=20)
        assert sorted(m.uniq_key for m in again) == sorted(ids[2:])
        for m in again:
            assert (await ack(client, addr, "GM3", m)).code == ResponseCode.SUCCESS
        response, late = await pop(client, addr, "GM3", "MergeRestart", poll_ms=3000)
        assert late == [], [m.uniq_key for m in late]
