"""POP consumption on a real broker process over Remoting: pop/ack round trip, redelivery after
the invisible time, change of invisible time, batch ack, the DLQ after retryMaxTimes, long
polling, a broker restart with messages in flight, orderly (FIFO) pops and bad requests.

Helpers live in this file on purpose (the broker test files share no module).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path

from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import astart_broker, free_port

CLUSTER = "PopCluster"
BROKER = "broker-pop"


async def start_broker(procs, tmp_path: Path, port: int | None = None, name: str = BROKER) -> str:
    """The POP broker (no NameServer), its store in ``tmp_path/store``: a restart passes the same port."""
    _proc, addr = await astart_broker(procs, tmp_path, name=name, port=port, brokerClusterName=CLUSTER,
                                      brokerName=BROKER)
    return addr


async def create_topic(client: RemotingClient, addr: str, topic: str, queues: int = 1) -> None:
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    response = await client.invoke(addr, request, 5)
    assert response.code == ResponseCode.SUCCESS, response.remark


async def create_group(client: RemotingClient, addr: str, group: str, retry_max_times: int = 16,
                       orderly: bool = False) -> None:
    body = json.dumps({"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                       "consumeBroadcastEnable": True, "consumeMessageOrderly": orderly, "retryQueueNums": 1,
                       "retryMaxTimes": retry_max_times, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                       "notifyConsumerIdsChangedEnable": True}).encode()
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    response = await client.invoke(addr, request, 5)
    assert response.code == ResponseCode.SUCCESS, response.remark


async def send(client: RemotingClient, addr: str, topic: str, body: bytes, queue_id: int = 0,
               tags: str | None = None, **user_props: str) -> str:
    uniq = f"{time.time_ns():032X}"
    props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq, **user_props}
    if tags:
        props[MessageConst.TAGS] = tags
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PG_POP", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
        "k": "false", "m": "false"}, body)
    response = await client.invoke(addr, request, 5)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return uniq


async def pop(client: RemotingClient, addr: str, group: str, topic: str, *, max_nums: int = 32,
              invisible_ms: int = 60_000, poll_ms: int = 0, queue_id: int = -1, order: bool = False,
              exp: str | None = None, exp_type: str = "TAG", init_mode: int = 1):
    fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "maxMsgNums": str(max_nums),
              "invisibleTime": str(invisible_ms), "pollTime": str(poll_ms), "bornTime": str(int(time.time() * 1000)),
              "initMode": str(init_mode), "order": "true" if order else "false"}
    if exp is not None:
        fields.update(exp=exp, expType=exp_type)
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.POP_MESSAGE, fields),
                                   poll_ms / 1000 + 10)
    messages = decode_records(response.body, check_crc=False) if response.body else []
    return response, messages


def ack_fields(group: str, msg) -> dict[str, str]:
    extra = msg.properties[MessageConst.POP_CK]
    return {"consumerGroup": group, "topic": msg.topic, "queueId": extra.split(" ")[6],
            "offset": extra.split(" ")[7], "extraInfo": extra}


async def ack(client: RemotingClient, addr: str, group: str, msg) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack_fields(group, msg)), 5)


async def change_invisible(client: RemotingClient, addr: str, group: str, msg, invisible_ms: int) -> RemotingCommand:
    fields = ack_fields(group, msg) | {"invisibleTime": str(invisible_ms)}
    return await client.invoke(addr, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, fields), 5)


async def pop_until(client: RemotingClient, addr: str, group: str, topic: str, want: int, within: float,
                    **kwargs) -> list:
    """Pops (long polling) until ``want`` messages arrived or ``within`` seconds passed."""
    got: list = []
    deadline = time.monotonic() + within
    while len(got) < want and time.monotonic() < deadline:
        poll = max(100, int((deadline - time.monotonic()) * 1000))
        response, messages = await pop(client, addr, group, topic, poll_ms=min(poll, 3000), **kwargs)
        assert response.code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), response.remark
        got.extend(messages)
    return got


async def test_pop_ack_round_trip(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopT1", queues=2)
        sent = {await send(client, addr, "PopT1", f"m{i}".encode(), queue_id=i % 2) for i in range(4)}
        response, messages = await pop(client, addr, "G1", "PopT1")
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert {m.uniq_key for m in messages} == sent
        assert all(m.topic == "PopT1" and m.reconsume_times == 0 for m in messages)
        header = response.ext_fields
        assert int(header["invisibleTime"]) == 60_000 and int(header["restNum"]) == 0
        assert header["startOffsetInfo"] and header["msgOffsetInfo"]
        extra = messages[0].properties[MessageConst.POP_CK].split(" ")
        assert extra[1] == header["popTime"] and extra[3] == header["reviveQid"] and extra[5] == BROKER
        for m in messages:
            assert (await ack(client, addr, "G1", m)).code == ResponseCode.SUCCESS
        # Everything was handed out once: a second pop finds nothing.
        response, messages = await pop(client, addr, "G1", "PopT1")
        assert response.code == ResponseCode.POLLING_TIMEOUT and messages == []
        # SQL92 and TAG filters select on the broker.
        await create_topic(client, addr, "PopSql")
        await send(client, addr, "PopSql", b"no", region="eu", tags="A")
        wanted = await send(client, addr, "PopSql", b"yes", region="us", tags="B")
        response, messages = await pop(client, addr, "G1sql", "PopSql", exp="region = 'us'", exp_type="SQL92")
        assert [m.uniq_key for m in messages] == [wanted]
        response, messages = await pop(client, addr, "G1tag", "PopSql", exp="B || C")
        assert [m.uniq_key for m in messages] == [wanted]


async def test_unacked_message_is_redelivered_with_reconsume_times_plus_one(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopRedeliver")
        acked = await send(client, addr, "PopRedeliver", b"acked")
        dropped = await send(client, addr, "PopRedeliver", b"dropped")
        response, messages = await pop(client, addr, "G2", "PopRedeliver", invisible_ms=1000)
        assert response.code == ResponseCode.SUCCESS and len(messages) == 2
        by_id = {m.uniq_key: m for m in messages}
        assert (await ack(client, addr, "G2", by_id[acked])).code == ResponseCode.SUCCESS
        again = await pop_until(client, addr, "G2", "PopRedeliver", 1, within=15, invisible_ms=60_000)
        assert [m.uniq_key for m in again] == [dropped]
        retry = again[0]
        assert retry.reconsume_times == 1 and retry.body == b"dropped" and retry.topic == "PopRedeliver"
        extra = retry.properties[MessageConst.POP_CK].split(" ")
        assert extra[4] == "1"  # the handle points into the pop retry topic
        assert (await ack(client, addr, "G2", retry)).code == ResponseCode.SUCCESS
        # Acked both times: nothing comes back even after the first invisible time passed again.
        await asyncio.sleep(3)
        response, messages = await pop(client, addr, "G2", "PopRedeliver")
        assert response.code == ResponseCode.POLLING_TIMEOUT and messages == []


async def test_change_invisible_time_extends_and_shortens(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopChange")
        extended = await send(client, addr, "PopChange", b"extend")
        shortened = await send(client, addr, "PopChange", b"shorten")
        _, messages = await pop(client, addr, "G3", "PopChange", invisible_ms=1500)
        by_id = {m.uniq_key: m for m in messages}
        r1 = await change_invisible(client, addr, "G3", by_id[extended], 30_000)
        assert r1.code == ResponseCode.SUCCESS, r1.remark
        assert int(r1.ext_fields["invisibleTime"]) == 30_000 and int(r1.ext_fields["popTime"]) > 0
        # A long original invisible time made short: back within a few seconds.
        _, messages2 = await pop(client, addr, "G3b", "PopChange", invisible_ms=600_000)
        short = {m.uniq_key: m for m in messages2}[shortened]
        r2 = await change_invisible(client, addr, "G3b", short, 500)
        assert r2.code == ResponseCode.SUCCESS, r2.remark
        again_b = await pop_until(client, addr, "G3b", "PopChange", 1, within=15)
        assert [m.uniq_key for m in again_b] == [shortened] and again_b[0].reconsume_times == 1
        # In G3 only the message whose invisible time was not extended comes back.
        again = await pop_until(client, addr, "G3", "PopChange", 1, within=15)
        assert [m.uniq_key for m in again] == [shortened]
        await asyncio.sleep(2.5)
        response, late = await pop(client, addr, "G3", "PopChange")
        assert late == [], [m.uniq_key for m in late]
        # The new handle from the change acks the extended message for good.
        info = by_id[extended].properties[MessageConst.POP_CK].split(" ")
        new_extra = " ".join([info[7], r1.ext_fields["popTime"], r1.ext_fields["invisibleTime"],
                              r1.ext_fields["reviveQid"], info[4], info[5], info[6], info[7]])
        response = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, {
            "consumerGroup": "G3", "topic": "PopChange", "queueId": info[6], "offset": info[7],
            "extraInfo": new_extra}), 5)
        assert response.code == ResponseCode.SUCCESS


async def test_batch_ack(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopBatch")
        ids = [await send(client, addr, "PopBatch", f"b{i}".encode()) for i in range(4)]
        response, messages = await pop(client, addr, "G4", "PopBatch", invisible_ms=1000)
        assert [m.uniq_key for m in messages] == ids
        extra = messages[0].properties[MessageConst.POP_CK].split(" ")
        start = int(extra[0])
        bits = [int(m.properties[MessageConst.POP_CK].split(" ")[7]) - start for m in messages[:3]]
        data = bytearray(max(bits) // 8 + 1)
        for i in bits:
            data[i // 8] |= 1 << (i % 8)
        body = json.dumps({"brokerName": BROKER, "acks": [{
            "c": "G4", "t": "PopBatch", "r": extra[4], "so": start, "q": int(extra[6]), "rq": int(extra[3]),
            "pt": int(extra[1]), "it": int(extra[2]), "b": base64.b64encode(bytes(data)).decode()}]}).encode()
        response = await client.invoke(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, body), 5)
        assert response.code == ResponseCode.SUCCESS, response.remark
        again = await pop_until(client, addr, "G4", "PopBatch", 1, within=15)
        assert [m.uniq_key for m in again] == [ids[3]]
        empty = await client.invoke(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {},
                                                                  b'{"acks": []}'), 5)
        assert empty.code == ResponseCode.NO_MESSAGE


async def test_never_acked_message_reaches_dlq(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopDlq")
        await create_group(client, addr, "G5", retry_max_times=1)
        uniq = await send(client, addr, "PopDlq", b"poison")
        attempts = []
        for _ in range(2):  # first delivery + retryMaxTimes redeliveries
            got = await pop_until(client, addr, "G5", "PopDlq", 1, within=15, invisible_ms=500)
            assert [m.uniq_key for m in got] == [uniq]
            attempts.append(got[0].reconsume_times)
        assert attempts == [0, 1]
        for _ in range(300):  # the revive service creates the DLQ topic when it moves the message
            response, dlq = await pop(client, addr, "G5_DLQ_READER", "%DLQ%G5", poll_ms=100)
            if response.code != ResponseCode.TOPIC_NOT_EXIST:
                break
            await asyncio.sleep(0.05)
        if not dlq:
            dlq = await pop_until(client, addr, "G5_DLQ_READER", "%DLQ%G5", 1, within=15)
        assert [m.uniq_key for m in dlq] == [uniq] and dlq[0].body == b"poison"
        assert dlq[0].properties.get(MessageConst.DLQ_ORIGIN_TOPIC) == "PopDlq"
        response, again = await pop(client, addr, "G5", "PopDlq", poll_ms=2500)
        assert again == []


async def test_long_polling_pop_answered_on_arrival(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopLong", queues=4)
        # An empty pop with a poll time waits and then answers POLLING_TIMEOUT.
        started = time.monotonic()
        response, messages = await pop(client, addr, "G6", "PopLong", poll_ms=800)
        assert response.code == ResponseCode.POLLING_TIMEOUT and messages == []
        assert time.monotonic() - started >= 0.7
        waiter = asyncio.create_task(pop(client, addr, "G6", "PopLong", poll_ms=20_000))
        await asyncio.sleep(0.5)
        assert not waiter.done()
        sent_at = time.monotonic()
        uniq = await send(client, addr, "PopLong", b"wake", queue_id=3)
        response, messages = await waiter
        print(f"parked pop answered {time.monotonic() - sent_at:.3f}s after the send")
        assert response.code == ResponseCode.SUCCESS and [m.uniq_key for m in messages] == [uniq]
        # A filtered waiter is not answered by a message it does not want.
        waiter = asyncio.create_task(pop(client, addr, "G6", "PopLong", poll_ms=20_000, exp="TagA"))
        await asyncio.sleep(0.3)
        await send(client, addr, "PopLong", b"other", tags="TagB")
        await asyncio.sleep(0.5)
        assert not waiter.done()
        wanted = await send(client, addr, "PopLong", b"wanted", tags="TagA")
        response, messages = await waiter
        assert [m.uniq_key for m in messages] == [wanted]
        # NOTIFICATION: hasMsg once something is there for the group.
        note = asyncio.create_task(client.invoke(addr, RemotingCommand.request(RequestCode.NOTIFICATION, {
            "consumerGroup": "G6n", "topic": "PopLong", "queueId": "-1", "pollTime": "20000",
            "bornTime": str(int(time.time() * 1000))}), 30))
        response = await note
        assert response.code == ResponseCode.SUCCESS and response.ext_fields["hasMsg"] == "true"


async def test_broker_restart_keeps_in_flight_messages_and_acks(procs, tmp_path: Path) -> None:
    port = free_port()
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path, port)
        await create_topic(client, addr, "PopRestart", queues=2)
        ids = [await send(client, addr, "PopRestart", f"r{i}".encode(), queue_id=i % 2) for i in range(4)]
        response, messages = await pop(client, addr, "G7", "PopRestart", invisible_ms=2500)
        assert sorted(m.uniq_key for m in messages) == sorted(ids)
        by_id = {m.uniq_key: m for m in messages}
        for uniq in ids[:2]:
            assert (await ack(client, addr, "G7", by_id[uniq])).code == ResponseCode.SUCCESS
        await procs.processes[-1].async_stop()
        await client.close_channel(addr)
        await start_broker(procs, tmp_path, port, name=BROKER + "-restarted")
        again = await pop_until(client, addr, "G7", "PopRestart", 2, within=20)
        assert sorted(m.uniq_key for m in again) == sorted(ids[2:])
        assert all(m.reconsume_times == 1 for m in again)
        for m in again:
            assert (await ack(client, addr, "G7", m)).code == ResponseCode.SUCCESS
        response, late = await pop(client, addr, "G7", "PopRestart", poll_ms=3000)
        assert late == [], [m.uniq_key for m in late]


async def test_orderly_pop_holds_the_queue_until_ack(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopFifo")
        await create_group(client, addr, "G8", orderly=True)
        ids = [await send(client, addr, "PopFifo", f"f{i}".encode()) for i in range(5)]
        response, first = await pop(client, addr, "G8", "PopFifo", max_nums=2, order=True, invisible_ms=8000)
        assert response.code == ResponseCode.SUCCESS and [m.uniq_key for m in first] == ids[:2]
        assert response.ext_fields["reviveQid"] == "999" and response.ext_fields["orderCountInfo"]
        # The batch is in flight: the queue is held, even for a long poll.
        response, held = await pop(client, addr, "G8", "PopFifo", order=True, poll_ms=300)
        assert response.code == ResponseCode.POLLING_TIMEOUT and held == []
        assert (await ack(client, addr, "G8", first[0])).code == ResponseCode.SUCCESS
        response, held = await pop(client, addr, "G8", "PopFifo", order=True)
        assert held == []
        # Acking the last message of the batch releases the queue: a parked pop gets the next ones.
        waiter = asyncio.create_task(pop(client, addr, "G8", "PopFifo", max_nums=2, order=True, poll_ms=10_000,
                                         invisible_ms=1000))
        await asyncio.sleep(0.3)
        assert (await ack(client, addr, "G8", first[1])).code == ResponseCode.SUCCESS
        response, second = await waiter
        assert [m.uniq_key for m in second] == ids[2:4] and all(m.reconsume_times == 0 for m in second)
        # Not acked: after the invisible time the same messages come again, in order, attempt + 1.
        again = await pop_until(client, addr, "G8", "PopFifo", 2, within=10, max_nums=2, order=True)
        assert [m.uniq_key for m in again] == ids[2:4] and all(m.reconsume_times == 1 for m in again)
        for m in again:
            assert (await ack(client, addr, "G8", m)).code == ResponseCode.SUCCESS
        response, last = await pop(client, addr, "G8", "PopFifo", order=True)
        assert [m.uniq_key for m in last] == ids[4:]


async def test_bad_requests_get_error_codes_and_the_broker_keeps_serving(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopBad")
        uniq = await send(client, addr, "PopBad", b"ok")

        async def call(code: int, fields: dict[str, str], body: bytes = b"") -> RemotingCommand:
            return await client.invoke(addr, RemotingCommand.request(code, fields, body), 5)

        base = {"consumerGroup": "G9", "topic": "PopBad", "queueId": "-1", "maxMsgNums": "1",
                "invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "1"}
        assert (await call(RequestCode.POP_MESSAGE, base | {"maxMsgNums": "33"})).code == ResponseCode.INVALID_PARAMETER
        assert (await call(RequestCode.POP_MESSAGE, base | {"queueId": "7"})).code == ResponseCode.INVALID_PARAMETER
        assert (await call(RequestCode.POP_MESSAGE, base | {"invisibleTime": "x"})).code == ResponseCode.SYSTEM_ERROR
        assert (await call(RequestCode.POP_MESSAGE, base | {"topic": "NoSuchTopic"})).code == ResponseCode.TOPIC_NOT_EXIST
        bad_sql = base | {"expType": "SQL92", "exp": "a >>> 1"}
        assert (await call(RequestCode.POP_MESSAGE, bad_sql)).code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        missing = {k: v for k, v in base.items() if k != "topic"}
        assert (await call(RequestCode.POP_MESSAGE, missing)).code == ResponseCode.SYSTEM_ERROR

        ack_base = {"consumerGroup": "G9", "topic": "PopBad", "queueId": "0", "offset": "0",
                    "extraInfo": f"0 {int(time.time() * 1000)} 60000 0 0 {BROKER} 0 0"}
        for extra in ("", "garbage", "1 2 3", "a b c d e f g h", "0 1 2 3 9 b 0 0"):
            response = await call(RequestCode.ACK_MESSAGE, ack_base | {"extraInfo": extra})
            assert response.code in (ResponseCode.INVALID_PARAMETER, ResponseCode.SYSTEM_ERROR), extra
        assert (await call(RequestCode.ACK_MESSAGE, ack_base | {"offset": "99"})).code == ResponseCode.NO_MESSAGE
        assert (await call(RequestCode.ACK_MESSAGE, ack_base | {"queueId": "4"})).code == ResponseCode.MESSAGE_ILLEGAL
        wrong_rq = ack_base | {"extraInfo": f"0 1 60000 77 0 {BROKER} 0 0"}
        assert (await call(RequestCode.ACK_MESSAGE, wrong_rq)).code == ResponseCode.INVALID_PARAMETER
        assert (await call(RequestCode.ACK_MESSAGE, ack_base | {"topic": "Nope"})).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await call(RequestCode.BATCH_ACK_MESSAGE, {}, b"{not json")).code == ResponseCode.INVALID_PARAMETER
        assert (await call(RequestCode.BATCH_ACK_MESSAGE, {}, b'{"acks": [1]}')).code == ResponseCode.INVALID_PARAMETER
        change = ack_base | {"invisibleTime": "1000", "offset": "5"}
        assert (await call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change)).code == ResponseCode.NO_MESSAGE
        note = {"consumerGroup": "G9", "topic": "Nope", "queueId": "-1", "pollTime": "0", "bornTime": "0"}
        assert (await call(RequestCode.NOTIFICATION, note)).code == ResponseCode.TOPIC_NOT_EXIST

        # An ack of a handle that was never handed out is harmless, as upstream.
        assert (await call(RequestCode.ACK_MESSAGE, ack_base)).code == ResponseCode.SUCCESS
        response, messages = await pop(client, addr, "G9", "PopBad")
        assert response.code == ResponseCode.SUCCESS and [m.uniq_key for m in messages] == [uniq]


async def test_orderly_poison_message_goes_to_dlq_and_frees_its_queue(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopFifoDlq")
        await create_group(client, addr, "G10", retry_max_times=1, orderly=True)
        poison = await send(client, addr, "PopFifoDlq", b"poison")
        attempts = []
        for _ in range(2):
            got = await pop_until(client, addr, "G10", "PopFifoDlq", 1, within=10, max_nums=1, order=True,
                                  invisible_ms=400)
            assert [m.uniq_key for m in got] == [poison]
            attempts.append(got[0].reconsume_times)
        assert attempts == [0, 1]
        after = await send(client, addr, "PopFifoDlq", b"after")
        got = await pop_until(client, addr, "G10", "PopFifoDlq", 1, within=10, max_nums=1, order=True)
        assert [m.uniq_key for m in got] == [after]
        dlq = await pop_until(client, addr, "G10_DLQ_READER", "%DLQ%G10", 1, within=10)
        assert [m.uniq_key for m in dlq] == [poison]


async def test_concurrent_pops_of_one_group_share_messages_without_duplicates(procs, tmp_path: Path) -> None:
    async with RemotingClient() as client:
        addr = await start_broker(procs, tmp_path)
        await create_topic(client, addr, "PopShare", queues=2)
        ids = [await send(client, addr, "PopShare", f"s{i}".encode(), queue_id=i % 2) for i in range(40)]
        seen: list[str] = []

        async def consumer() -> None:
            while True:
                response, messages = await pop(client, addr, "G11", "PopShare", max_nums=3, poll_ms=500)
                if not messages:
                    return
                for m in messages:
                    seen.append(m.uniq_key)
                    assert (await ack(client, addr, "G11", m)).code == ResponseCode.SUCCESS

        await asyncio.gather(*(consumer() for _ in range(4)))
        assert sorted(seen) == sorted(ids)
