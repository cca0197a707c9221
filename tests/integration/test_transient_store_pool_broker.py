"""A broker process with transientStorePoolEnable=true: sends are stored, pulled back whole, and a
kill -9 after the acknowledgements loses nothing a consumer had already seen.

What "acknowledged" means with the pool (as upstream, ASYNC_FLUSH): SEND_OK says the record is
in the broker's write buffer, in process memory. CommitRealTimeService copies it into the file
(the OS page cache) within commitIntervalCommitLog ms; the flusher makes it durable later.
kill -9 ends the process, not the machine: the page cache survives, the buffer does not. So a
kill -9 may drop the records acknowledged in the last commit interval; everything committed
survives. Readers (pull, dispatch, HA) only ever see committed records, hence the invariant
checked here: whatever a consumer could read before the kill is there after it, and what
remains of the sends after the last read is a prefix of them, in order, never a hole.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import aboot_broker, write_broker_conf
from tests.support.net import free_port_pair

TOPIC = "PoolTopic"
QUEUES = 2


async def call(client: RemotingClient, addr: str, code: int, fields: dict[str, str],
               body: bytes = b"") -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, fields, body), 10)


def send_fields(queue_id: int) -> dict[str, str]:
    props = {"UNIQ_KEY": f"{time.time_ns():032X}", "WAIT": "true"}
    return {"a": "PG_POOL", "b": TOPIC, "c": "TBW102", "d": str(QUEUES), "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
            "k": "false", "m": "false"}


async def send_all(client: RemotingClient, addr: str, bodies: list[bytes]) -> None:
    for i, body in enumerate(bodies):
        r = await call(client, addr, RequestCode.SEND_MESSAGE_V2, send_fields(i % QUEUES), body)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)


async def pull_all(client: RemotingClient, addr: str, queue_id: int) -> list[bytes]:
    sys_flag = build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True, class_filter=False)
    out: list[bytes] = []
    offset = 0
    while True:
        fields = {"consumerGroup": "CG_POOL", "topic": TOPIC, "queueId": str(queue_id), "queueOffset": str(offset),
                  "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0",
                  "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
        r = await call(client, addr, RequestCode.PULL_MESSAGE, fields)
        if r.code != ResponseCode.SUCCESS:
            return out
        out.extend(m.body for m in decode_records(r.body))
        offset = int(r.ext_fields["nextBeginOffset"])


async def read_everything(client: RemotingClient, addr: str) -> list[list[bytes]]:
    return [await pull_all(client, addr, q) for q in range(QUEUES)]


async def wait_readable(client: RemotingClient, addr: str, want: list[list[bytes]], timeout: float = 20) -> None:  # noqa: ASYNC109
    """Until a consumer sees ``want`` (the pool commits every commitIntervalCommitLog ms)."""
    deadline = time.monotonic() + timeout
    while True:
        got = await read_everything(client, addr)
        if got == want or time.monotonic() > deadline:
            assert got == want
            return
        await asyncio.sleep(0.1)


def per_queue(bodies: list[bytes]) -> list[list[bytes]]:
    return [bodies[q::QUEUES] for q in range(QUEUES)]


async def test_pool_broker_round_trip_and_kill_9(procs, tmp_path: Path) -> None:
    keys = dict(brokerClusterName="PoolCluster", brokerName="broker-pool", autoCreateTopicEnable="true",
                autoCreateSubscriptionGroup="true", flushDiskType="ASYNC_FLUSH", transientStorePoolEnable="true",
                transientStorePoolSize="3", mappedFileSizeCommitLog=str(256 * 1024), commitIntervalCommitLog="50",
                commitCommitLogThoroughInterval="100")
    port = free_port_pair()  # listenPort - 2 and + 1: the fast server, the HA port
    conf = write_broker_conf(tmp_path / "broker-pool.conf", port, tmp_path / "store", **keys)
    addr = f"127.0.0.1:{port}"
    proc = await aboot_broker(procs, conf, port, name="broker-pool")
    first = [f"first-{i}-".encode() * 40 for i in range(600)]  # ~540 KiB: rolls over segments
    second = [f"second-{i}-".encode() * 40 for i in range(300)]
    async with RemotingClient() as client:
        await send_all(client, addr, first)
        await wait_readable(client, addr, per_queue(first))
        runtime = await call(client, addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})
        assert runtime.code == ResponseCode.SUCCESS
        assert b"remainTransientStoreBufferNumbs" in runtime.body
        # Acknowledged, then the process dies at once: no commit, flush or shutdown runs.
        await send_all(client, addr, second)
    await asyncio.to_thread(proc.kill)

    proc = await aboot_broker(procs, conf, port, name="broker-pool-2")
    third = [f"third-{i}-".encode() * 40 for i in range(50)]
    async with RemotingClient() as client:
        after = await read_everything(client, addr)
        for q in range(QUEUES):
            assert after[q][: len(first[q::QUEUES])] == first[q::QUEUES]  # all seen before: kept
            rest = after[q][len(first[q::QUEUES]):]
            assert rest == second[q::QUEUES][: len(rest)]  # of the rest a prefix, never a hole
        survived = [len(after[q]) - len(first[q::QUEUES]) for q in range(QUEUES)]
        await send_all(client, addr, third)
        want = [after[q] + third[q::QUEUES] for q in range(QUEUES)]
        await wait_readable(client, addr, want)
    assert await proc.async_stop() == 0, proc.log_tail()
    log_text = proc.log_text()
    assert "transient store pool: 3 buffers" in log_text and "Traceback" not in log_text, proc.log_tail()
    print(f"second batch records surviving kill -9 per queue: {survived} of {len(second) // QUEUES}")


async def test_exhausted_pool_answers_system_busy(procs, tmp_path: Path) -> None:
    """SendMessageProcessor#rejectRequest while isTransientStorePoolDeficient: SYSTEM_BUSY
    "[REJECTREQUEST]…"; everything acknowledged before is kept by a clean stop."""
    keys = dict(brokerClusterName="PoolCluster", brokerName="broker-pool-busy", autoCreateTopicEnable="true",
                autoCreateSubscriptionGroup="true", transientStorePoolEnable="true", transientStorePoolSize="2",
                mappedFileSizeCommitLog=str(64 * 1024), commitIntervalCommitLog="3600000",
                commitCommitLogThoroughInterval="3600000", commitCommitLogLeastPages="100000")
    port = free_port_pair()
    conf = write_broker_conf(tmp_path / "broker-pool-busy.conf", port, tmp_path / "store", **keys)
    addr = f"127.0.0.1:{port}"
    proc = await aboot_broker(procs, conf, port, name="broker-pool-busy")
    acked: list[bytes] = []
    async with RemotingClient() as client:
        # The first segment keeps its buffer (never committed here), the second takes the last
        # one, and from then on the pool is deficient. (With transientStorePoolSize=1 the active
        # segment alone exhausts it: every send is refused, as upstream.)
        for i in range(200):
            body = f"busy-{i}-".encode() * 100
            r = await call(client, addr, RequestCode.SEND_MESSAGE_V2, send_fields(0), body)
            if r.code != ResponseCode.SUCCESS:
                break
            acked.append(body)
        assert r.code == ResponseCode.SYSTEM_BUSY, (r.code, r.remark)
        assert r.remark == "[REJECTREQUEST]system busy, start flow control for a while"
        assert 40 < len(acked) < 200
    assert await proc.async_stop() == 0, proc.log_tail()  # shutdown commits, then flushes
    proc = await aboot_broker(procs, conf, port, name="broker-pool-busy-2")
    async with RemotingClient() as client:
        await wait_readable(client, addr, [acked, []])
    assert await proc.async_stop() == 0, proc.log_tail()
