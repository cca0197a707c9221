"""A BrokerController in this process, on a loopback port: traffic statistics in
GET_BROKER_RUNTIME_INFO, parked pulls/POPs dropped when their client's connection closes, and
topic stats of a queue never written.

In-process (not a subprocess) so the hold tables themselves can be inspected; clients still
talk to the broker over real Remoting connections.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.controller import BrokerController
from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support.broker import in_process_broker

# Parked requests ask for a 15 s hold; "promptly" here means long before that (and before the
# hold service's 5 s periodic check could have swept them).
HOLD_MS = 15_000
PROMPT_SECONDS = 2.0


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerController]:
    async with in_process_broker(tmp_path / "store", "StatsCluster", "broker-stats") as controller:
        yield controller


def addr_of(broker: BrokerController) -> str:
    return f"127.0.0.1:{broker.config.listen_port}"


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int) -> None:
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    response = await client.invoke(addr, request, 5)
    assert response.code == ResponseCode.SUCCESS, response.remark


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, queue_id: int = 0) -> None:
    props = {"UNIQ_KEY": f"{time.time_ns():032X}"}
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_STATS", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
        "k": "false", "m": "false"}, body)
    response = await client.invoke(addr, request, 5)
    assert response.code == ResponseCode.SUCCESS, response.remark


def pull_request(group: str, topic: str, queue_id: int, offset: int, suspend_ms: int) -> RemotingCommand:
    sys_flag = build_pull_sys_flag(commit_offset=False, suspend=True, subscription=True, class_filter=False)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": str(suspend_ms),
        "subscription": "*", "subVersion": "0", "expressionType": "TAG"})


def pop_request(group: str, topic: str, poll_ms: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.POP_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
        "pollTime": str(poll_ms), "bornTime": str(int(time.time() * 1000)), "initMode": "1", "order": "false"})


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), 5)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return json.loads(response.body)["table"]


async def eventually(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return predicate()


async def test_runtime_info_counts_puts_and_pulls(broker: BrokerController) -> None:
    addr = addr_of(broker)
    async with RemotingClient() as client:
        await create_topic(client, addr, "StatsTopic", 2)
        for i in range(20):
            await send(client, addr, "StatsTopic", f"m{i}".encode() * 10, queue_id=i % 2)
        pulled = 0
        for queue_id in (0, 1):
            response = await client.invoke(addr, pull_request("CG_STATS", "StatsTopic", queue_id, 0, 0), 5)
            assert response.code == ResponseCode.SUCCESS, response.remark
            pulled += len(decode_records(response.body, check_crc=False))
        assert pulled == 20
        # An empty pull (nothing past offset 10) is a store miss.
        response = await client.invoke(addr, pull_request("CG_STATS", "StatsTopic", 0, 10, 0), 5)
        assert response.code == ResponseCode.PULL_NOT_FOUND
        table = await runtime_info(client, addr)

    print(f"\nputTps={table['putTps']!r} getTransferedTps={table['getTransferedTps']!r} "
          f"getFoundTps={table['getFoundTps']!r} getMissTps={table['getMissTps']!r}")
    for key in ("putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"):
        rates = [float(x) for x in table[key].split(" ")]
        assert len(rates) == 3 and all(r > 0 for r in rates), (key, table[key])
    assert table["msgPutTotalTodayNow"] == "20" and table["msgGetTotalTodayNow"] == "20"
    for key in ("msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning", "msgGetTotalTodayMorning",
                "msgGetTotalYesterdayMorning"):
        assert table[key] == "0", key
    assert broker.stats.topic_stats("StatsTopic")["putNums"] == 20
    assert broker.stats.topic_stats("StatsTopic")["getNums"] == 20
    assert broker.stats.topic_stats("StatsTopic")["putSize"] > 20 * 20  # whole records, not bodies
    assert broker.stats.group_get_tps("CG_STATS") > 0


async def test_parked_pull_dropped_when_connection_closes(broker: BrokerController) -> None:
    addr = addr_of(broker)
    hold = broker.pull_request_hold_service
    async with RemotingClient() as admin_client:
        await create_topic(admin_client, addr, "ParkTopic", 1)
        client = RemotingClient()
        parked = asyncio.create_task(client.invoke(addr, pull_request("CG_PARK", "ParkTopic", 0, 0, HOLD_MS), 30))
        assert await eventually(lambda: hold.parked_count() == 1, 5)
        assert (await runtime_info(admin_client, addr))["pullRequestHoldCount"] == "1"
        await client.close()
        with pytest.raises(Exception):  # noqa: B017 - the client's own failure type is not the point
            await parked
        assert await eventually(lambda: not hold.pull_request_table, PROMPT_SECONDS), hold.pull_request_table
        assert (await runtime_info(admin_client, addr))["pullRequestHoldCount"] == "0"
        # The broker still parks and answers other clients' pulls.
        other = asyncio.create_task(admin_client.invoke(addr, pull_request("CG_PARK", "ParkTopic", 0, 0, HOLD_MS), 30))
        assert await eventually(lambda: hold.parked_count() == 1, 5)
        await send(admin_client, addr, "ParkTopic", b"wake")
        response = await other
        assert response.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_records(response.body, check_crc=False)] == [b"wake"]
        assert not hold.pull_request_table


async def test_parked_pop_dropped_when_connection_closes(broker: BrokerController) -> None:
    addr = addr_of(broker)
    polling = broker.pop_service.long_polling
    async with RemotingClient() as admin_client:
        await create_topic(admin_client, addr, "ParkPop", 1)
        client = RemotingClient()
        parked = asyncio.create_task(client.invoke(addr, pop_request("CG_POP_PARK", "ParkPop", HOLD_MS), 30))
        assert await eventually(lambda: polling.parked_count() == 1, 5)
        assert (await runtime_info(admin_client, addr))["popRequestHoldCount"] == "1"
        await client.close()
        with pytest.raises(Exception):  # noqa: B017
            await parked
        assert await eventually(lambda: polling.parked_count() == 0, PROMPT_SECONDS)
        assert (await runtime_info(admin_client, addr))["popRequestHoldCount"] == "0"


async def test_topic_stats_min_offset_of_unwritten_queue_is_zero(broker: BrokerController) -> None:
    addr = addr_of(broker)
    async with RemotingClient() as client:
        await create_topic(client, addr, "HalfWritten", 2)
        await send(client, addr, "HalfWritten", b"x", queue_id=1)
        response = await client.invoke(addr, RemotingCommand.request(
            RequestCode.GET_TOPIC_STATS_INFO, {"topic": "HalfWritten"}), 5)
        assert response.code == ResponseCode.SUCCESS, response.remark
        text = response.body.decode()
        # fastjson object keys: {"brokerName":…,"queueId":N,"topic":…}:{"lastUpdateTimestamp":…,…}
        assert '"queueId":0,"topic":"HalfWritten"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}' in text
        assert '"maxOffset":1,"minOffset":0}' in text
        response = await client.invoke(addr, RemotingCommand.request(
            RequestCode.GET_MIN_OFFSET, {"topic": "HalfWritten", "queueId": "0"}), 5)
        assert response.code == ResponseCode.SUCCESS and response.ext_fields["offset"] == "0"
