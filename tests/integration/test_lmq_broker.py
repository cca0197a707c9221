"""Light Message Queue (RIP-28) on a real broker process: a send to a normal topic naming two
LMQs in INNER_MULTI_DISPATCH is readable from each LMQ (no topic config, an auto-allowed
%LMQ% group), offsets and LMQ consumer offsets survive a restart and a kill -9, a parked pull
on an LMQ wakes up, and bad input is answered as upstream answers it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import ProcessRunner
from tests.support.net import free_port_pair
from tests.support.services import aboot_broker, write_broker_conf

MULTI = MessageConst.INNER_MULTI_DISPATCH
OFFSETS = MessageConst.INNER_MULTI_QUEUE_OFFSET
TOPIC = "LmqSourceTopic"
GROUP = "%LMQ%group"


async def send(client: RemotingClient, addr: str, body: bytes, lmq: str | None) -> RemotingCommand:
    props = {"UNIQ_KEY": f"{time.time_ns():032X}", "TAGS": "t"}
    if lmq is not None:
        props[MULTI] = lmq
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_LMQ", "b": TOPIC, "c": "TBW102", "d": "1", "e": "0", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
        "k": "false", "m": "false"}, body)
    return await client.invoke(addr, request, 5)


async def pull(client: RemotingClient, addr: str, topic: str, offset: int, suspend_ms: int = 0,
               group: str = GROUP) -> RemotingCommand:
    sys_flag = build_pull_sys_flag(commit_offset=False, suspend=suspend_ms > 0, subscription=True, class_filter=False)
    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": str(suspend_ms),
        "subscription": "*", "subVersion": "0", "expressionType": "TAG"})
    return await client.invoke(addr, request, 30)


async def pulled(client: RemotingClient, addr: str, topic: str, offset: int = 0,
                 group: str = GROUP) -> list[tuple[bytes, str]]:
    response = await pull(client, addr, topic, offset, group=group)
    if response.code == ResponseCode.PULL_NOT_FOUND:
        return []
    assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
    return [(m.body, m.properties.get(OFFSETS, "")) for m in decode_records(response.body)]


async def offset_query(client: RemotingClient, addr: str, code: int, topic: str, **extra: str) -> RemotingCommand:
    fields = {"topic": topic, "queueId": "0", **extra}
    return await client.invoke(addr, RemotingCommand.request(code, fields), 5)


async def max_offset(client: RemotingClient, addr: str, topic: str) -> int:
    response = await offset_query(client, addr, RequestCode.GET_MAX_OFFSET, topic)
    assert response.code == ResponseCode.SUCCESS
    return int(response.ext_fields["offset"])


async def test_lmq_send_pull_restart_crash_and_bad_input(procs: ProcessRunner, tmp_path: Path) -> None:
    port = free_port_pair()
    addr = f"127.0.0.1:{port}"
    store = tmp_path / "store"
    conf = write_broker_conf(tmp_path / "broker.conf", port, store, enableLmq="true", enableMultiDispatch="true",
                             maxLmqConsumeQueueNum="4", longPollingEnable="true")
    broker = await aboot_broker(procs, conf, port)
    async with RemotingClient() as client:
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        assert (await client.invoke(addr, create, 5)).code == ResponseCode.SUCCESS
        for i in range(3):
            response = await send(client, addr, b"m%d" % i, "%LMQ%a,%LMQ%b")
            assert response.code == ResponseCode.SUCCESS, response.remark
        assert (await send(client, addr, b"only-b", "%LMQ%b")).code == ResponseCode.SUCCESS
        for _ in range(100):
            if await max_offset(client, addr, "%LMQ%b") == 4:
                break
            await asyncio.sleep(0.02)
        a = [(b"m0", "0,0"), (b"m1", "1,1"), (b"m2", "2,2")]
        b = [*a, (b"only-b", "3")]
        assert await pulled(client, addr, "%LMQ%a") == a
        assert await pulled(client, addr, "%LMQ%b") == b
        assert [body for body, _ in await pulled(client, addr, TOPIC, group="plainGroup")] == [m for m, _ in b]
        assert await max_offset(client, addr, "%LMQ%a") == 3
        response = await offset_query(client, addr, RequestCode.GET_MIN_OFFSET, "%LMQ%a")
        assert response.code == ResponseCode.SUCCESS and response.ext_fields["offset"] == "0"
        # An LMQ group's offset: one per topic, kept in lmqConsumerOffset.json.
        response = await offset_query(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, "%LMQ%a",
                                      consumerGroup=GROUP, commitOffset="2")
        assert response.code == ResponseCode.SUCCESS, response.remark
        response = await offset_query(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, "%LMQ%a", consumerGroup=GROUP)
        assert response.code == ResponseCode.SUCCESS and response.ext_fields["offset"] == "2"
        # A parked pull on an LMQ is answered by the next message dispatched to it.
        parked = asyncio.ensure_future(pull(client, addr, "%LMQ%a", 3, suspend_ms=15_000))
        await asyncio.sleep(0.3)
        assert not parked.done()
        started = time.monotonic()
        assert (await send(client, addr, b"wake", "%LMQ%a")).code == ResponseCode.SUCCESS
        response = await asyncio.wait_for(parked, 10)
        assert response.code == ResponseCode.SUCCESS and time.monotonic() - started < 5
        assert [m.body for m in decode_records(response.body)] == [b"wake"]

        # A clean restart: the queues, their offsets and the LMQ group's offset come back.
        assert await broker.async_stop() == 0, broker.log_tail()
        saved = json.loads((store / "config" / "lmqConsumerOffset.json").read_text())
        assert saved["lmqOffsetTable"] == {f"%LMQ%a@{GROUP}": 2}
        broker = await aboot_broker(procs, conf, port)
        assert await pulled(client, addr, "%LMQ%a") == [*a, (b"wake", "3")]
        assert await pulled(client, addr, "%LMQ%b") == b
        response = await offset_query(client, addr, RequestCode.QUERY_CONSUMER_OFFSET, "%LMQ%a", consumerGroup=GROUP)
        assert response.ext_fields["offset"] == "2"
        assert (await send(client, addr, b"after-restart", "%LMQ%a,%LMQ%b")).code == ResponseCode.SUCCESS
        for _ in range(100):
            if await max_offset(client, addr, "%LMQ%b") == 5:
                break
            await asyncio.sleep(0.02)

        # kill -9: recovery dispatches the CommitLog again; the offsets go on from there.
        await asyncio.to_thread(broker.kill)
        broker = await aboot_broker(procs, conf, port)
        assert (await pulled(client, addr, "%LMQ%a", 4)) == [(b"after-restart", "4,4")]
        assert (await pulled(client, addr, "%LMQ%b", 4)) == [(b"after-restart", "4,4")]
        assert (await send(client, addr, b"after-crash", "%LMQ%b")).code == ResponseCode.SUCCESS
        for _ in range(100):
            if await max_offset(client, addr, "%LMQ%b") == 6:
                break
            await asyncio.sleep(0.02)
        assert (await pulled(client, addr, "%LMQ%b", 5)) == [(b"after-crash", "5")]

        # Bad input: a name with a path separator gets an offset but no queue, as upstream.
        assert (await send(client, addr, b"sep", "%LMQ%x/y,%LMQ%a")).code == ResponseCode.SUCCESS
        for _ in range(100):
            if await max_offset(client, addr, "%LMQ%a") == 6:
                break
            await asyncio.sleep(0.02)
        assert (await pulled(client, addr, "%LMQ%a", 5)) == [(b"sep", "0,5")]
        assert not (store / "consumequeue" / "%LMQ%x").exists()
        # Three LMQ queues now (%LMQ%x/y counted): multi-dispatch sends are taken until more than
        # maxLmqConsumeQueueNum (4) exist, then refused with SendMessageProcessor's answer.
        assert (await send(client, addr, b"c", "%LMQ%c")).code == ResponseCode.SUCCESS
        assert (await send(client, addr, b"d", "%LMQ%d")).code == ResponseCode.SUCCESS
        response = await send(client, addr, b"refused", "%LMQ%a")
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert response.remark.startswith("[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and "
                                          "enableMultiDispatch")
        assert (await send(client, addr, b"plain", None)).code == ResponseCode.SUCCESS
    assert await broker.async_stop() == 0, broker.log_tail()
