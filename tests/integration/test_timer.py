"""Timer messages (TimerMessageStore) with a real NameServer and broker process, over Remoting.

A message with TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS is parked in
rmq_sys_wheel_timer and reaches its real topic not before its time and within one precision
(plus a little scheduling slack) after it. The wheel's roll window is made small here
(timerRollWindowSlot=4), so delays longer than 4 s are rolled: that is how a 3 h delay is shown
not to be delivered early without waiting 3 h, across a clean restart and a SIGKILL. Bad timer
properties are refused with RocketMQ's response codes and nothing reaches the real topic.

Times are read from the broker's own clock: a delivered record's store timestamp is the time of
its delivery.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
import uuid
from pathlib import Path

import pytest

from orbitmq.client import MQBrokerError, MQClientAPI
from orbitmq.common.message import Message, MessageExt
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import BrokerCluster

# Its assertions are about time (a delay delivered neither early nor late): `make test` runs it in
# the serial pass, not beside another test on the two-worker one.
pytestmark = pytest.mark.serial

TOPIC = "TimerTopic"
GROUP = "CG_TIMER"
TIMER_TOPIC = "rmq_sys_wheel_timer"
PRECISION_MS = 1000
SLACK_MS = 600  # event-loop and polling slack on top of one precision
ROLL_WINDOW = 4


TIMER_BROKER = {"brokerClusterName": "TimerCluster", "brokerName": "broker-timer",
                "mappedFileSizeTimerLog": 52 * 64, "timerRollWindowSlot": ROLL_WINDOW, "timerFlushIntervalMs": 200}


async def _cluster(broker_cluster, api: MQClientAPI, **extra: object) -> BrokerCluster:
    c = await broker_cluster(**TIMER_BROKER, **extra)
    await api.create_topic(c.addr, TopicConfig(TOPIC, 4, 4))
    await api.create_subscription_group(c.addr, SubscriptionGroupConfig(GROUP))
    return c


@pytest.fixture
async def cluster(broker_cluster, mq_api: MQClientAPI):
    return await _cluster(broker_cluster, mq_api), mq_api


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def send(api: MQClientAPI, addr: str, queue_id: int, props: dict[str, str], body: bytes | None = None) -> str:
    uniq = props.get("UNIQ_KEY") or uuid.uuid4().hex.upper()
    msg = Message(TOPIC, body or uniq.encode(), properties={"UNIQ_KEY": uniq, "TAGS": "timer", **props})
    result = await api.send_message(addr, "broker-timer", msg, "PG_TIMER", queue_id)
    assert result.status.value == "SEND_OK"
    return uniq


async def pull_all(api: MQClientAPI, addr: str, topic: str, queue_id: int) -> list[MessageExt]:
    out: list[MessageExt] = []
    offset = 0
    while True:
        header = h.PullMessageRequestHeader(consumer_group=GROUP, topic=topic, queue_id=queue_id,
                                            queue_offset=offset, max_msg_nums=32, sys_flag=0x4, commit_offset=0,
                                            suspend_timeout_millis=0, subscription="*", sub_version=0)
        result = await api.pull_message(addr, header)
        if not result.messages:
            return out
        out.extend(result.messages)
        offset = result.next_begin_offset


async def wait_count(api: MQClientAPI, addr: str, queue_id: int, count: int, timeout: float) -> list[MessageExt]:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        got = await pull_all(api, addr, TOPIC, queue_id)
        if len(got) >= count or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.05)


def assert_on_time(msg: MessageExt, deliver_ms: int) -> None:
    late = msg.store_timestamp - deliver_ms
    print(f"{msg.uniq_key}: delivered {late} ms after its time")
    assert 0 <= late <= PRECISION_MS + SLACK_MS, late


async def test_deliver_ms_delay_sec_and_delay_ms_are_on_time(cluster) -> None:
    c, api = cluster
    base = now_ms()
    deliver = base + 3000
    await send(api, c.addr, 0, {"TIMER_DELIVER_MS": str(deliver)})
    sent_sec = now_ms()
    await send(api, c.addr, 1, {"TIMER_DELAY_SEC": "2"})
    sent_ms = now_ms()
    await send(api, c.addr, 2, {"TIMER_DELAY_MS": "2500"})
    exact = (now_ms() // 1000 + 3) * 1000  # an exact multiple of the precision fires on the dot
    await send(api, c.addr, 3, {"TIMER_DELIVER_MS": str(exact)})
    # Parked in the timer topic, nothing in the real topic yet.
    assert await api.get_max_offset(c.addr, TIMER_TOPIC, 0) == 4
    assert await pull_all(api, c.addr, TOPIC, 0) == []

    got = {q: await wait_count(api, c.addr, q, 1, 10) for q in range(4)}
    assert_on_time(got[0][0], deliver)
    # TIMER_DELAY_* count from the broker's receipt, just after the client's sent time.
    assert_on_time(got[1][0], sent_sec + 2000)
    assert_on_time(got[2][0], sent_ms + 2500)
    assert_on_time(got[3][0], exact)
    msg = got[0][0]
    assert msg.topic == TOPIC and msg.queue_id == 0 and msg.tags == "timer"
    assert "REAL_TOPIC" not in msg.properties and "REAL_QID" not in msg.properties
    assert int(msg.properties["TIMER_OUT_MS"]) == deliver // 1000 * 1000
    assert msg.properties["TIMER_DELIVER_MS"] == str(deliver)
    assert "TIMER_ENQUEUE_MS" in msg.properties and "TIMER_DEQUEUE_MS" in msg.properties
    # Delivered once each.
    await asyncio.sleep(1.5)
    assert [len(await pull_all(api, c.addr, TOPIC, q)) for q in range(4)] == [1, 1, 1, 1]
    # GET_TIMER_CHECK_POINT: the timercheck's 7 longs, the read time past every delivery.
    response = await api.call(c.addr, RequestCode.GET_TIMER_CHECK_POINT)
    read_ms, log_pos, queue_offset, master_offset, _, _, counter = struct.unpack(">qqqqqqq", response.body)
    assert read_ms > deliver and log_pos >= 4 * 52 and queue_offset == master_offset == 4 and counter > 0
    on_disk = (c.conf.parent / "store" / "config" / "timercheck").read_bytes()
    assert len(on_disk) == 4096
    # GET_TIMER_METRICS: four filed, four delivered, none waiting.
    metrics = json.loads((await api.call(c.addr, RequestCode.GET_TIMER_METRICS)).body)
    assert metrics["timingCount"][TOPIC]["count"] == 0 and "dataVersion" in metrics


async def test_rolled_delay_is_on_time(cluster) -> None:
    c, api = cluster
    deliver = now_ms() + 9000  # beyond the 4-slot roll window: parked and rolled at least once
    await send(api, c.addr, 0, {"TIMER_DELIVER_MS": str(deliver)})
    got = await wait_count(api, c.addr, 0, 1, 15)
    assert got, "not delivered"
    assert_on_time(got[0], deliver)
    assert int(got[0].properties["TIMER_ROLL_TIMES"]) >= 1
    assert await api.get_max_offset(c.addr, TIMER_TOPIC, 0) >= 2  # the roll re-put it to the timer topic


async def test_bad_timer_properties_are_refused(cluster) -> None:
    c, api = cluster
    cases = [
        {"TIMER_DELIVER_MS": "soon"},
        {"TIMER_DELAY_SEC": "1.5"},
        {"TIMER_DELAY_MS": ""},
        {"TIMER_DELIVER_MS": str(now_ms() + 3 * 86_400_000 + 60_000)},  # beyond timerMaxDelaySec
        {"TIMER_DELAY_SEC": str(3 * 86_400 + 60)},
        {"TIMER_DELIVER_MS": str(now_ms() - 1000), "TIMER_DEL_UNIQKEY": f"{TOPIC}+X"},  # delete in the past
    ]
    for props in cases:
        with pytest.raises(MQBrokerError) as refused:
            await send(api, c.addr, 0, props)
        assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL, props
        assert "timer message illegal" in str(refused.value), refused.value
    # A batch cannot carry timer messages.
    batch = [Message(TOPIC, b"b1", properties={"TIMER_DELAY_SEC": "5"}), Message(TOPIC, b"b2")]
    with pytest.raises(MQBrokerError) as refused:
        await api.send_batch(c.addr, "broker-timer", batch, "PG_TIMER", 0)
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert await api.get_max_offset(c.addr, TIMER_TOPIC, 0) == 0
    assert await api.get_max_offset(c.addr, TOPIC, 0) == 0
    # A time in the past is delivered at once; DELAY wins over the timer properties.
    await send(api, c.addr, 1, {"TIMER_DELIVER_MS": str(now_ms() - 5000)})
    assert len(await pull_all(api, c.addr, TOPIC, 1)) == 1
    await send(api, c.addr, 2, {"TIMER_DELIVER_MS": str(now_ms() + 60_000), "DELAY": "1"})
    assert await api.get_max_offset(c.addr, TIMER_TOPIC, 0) == 0
    got = await wait_count(api, c.addr, 2, 1, 5)
    assert len(got) == 1 and "TIMER_DELIVER_MS" not in got[0].properties


async def test_cancel_by_timer_del_uniqkey(cluster) -> None:
    c, api = cluster
    deliver = now_ms() + 3000
    target = await send(api, c.addr, 0, {"TIMER_DELIVER_MS": str(deliver)})
    kept = await send(api, c.addr, 0, {"TIMER_DELIVER_MS": str(deliver)})
    # The marker: same real topic, UNIQ_KEY of the target, a time in the target's slot.
    await send(api, c.addr, 0, {"TIMER_DELIVER_MS": str(deliver), "UNIQ_KEY": target,
                                "TIMER_DEL_UNIQKEY": f"{TOPIC}+{target}"}, body=b"marker")
    got = await wait_count(api, c.addr, 0, 1, 10)
    await asyncio.sleep(1.5)
    got = await pull_all(api, c.addr, TOPIC, 0)
    assert [m.uniq_key for m in got] == [kept]
    assert_on_time(got[0], deliver)


async def test_three_hour_delay_is_not_delivered_early_across_restart_and_sigkill(cluster) -> None:
    c, api = cluster
    far = now_ms() + 3 * 3600 * 1000
    await send(api, c.addr, 0, {"TIMER_DELIVER_MS": str(far)})
    soon = now_ms() + 12_000
    await send(api, c.addr, 1, {"TIMER_DELIVER_MS": str(soon)})
    await asyncio.sleep(9)  # two roll windows: the far message has been rolled

    rolled = await api.get_max_offset(c.addr, TIMER_TOPIC, 0)
    assert rolled >= 4, rolled  # 2 originals + at least one roll of each
    await api.remoting.close_channel(c.addr)
    assert await c.broker.async_stop() == 0, c.broker.log_tail()
    await c.start_broker()
    await asyncio.sleep(3)
    await api.remoting.close_channel(c.addr)
    c.broker.kill()
    await c.start_broker()

    got = await wait_count(api, c.addr, 1, 1, 15)
    assert got, "the 12 s message was lost across the restarts"
    assert got[0].store_timestamp >= soon  # never early; duplicates allowed as upstream
    await asyncio.sleep(ROLL_WINDOW * 2)
    assert await pull_all(api, c.addr, TOPIC, 0) == []
    # Still rolling in the wheel: its roll count goes on growing.
    records = await pull_all(api, c.addr, TIMER_TOPIC, 0)
    far_rolls = [int(m.properties.get("TIMER_ROLL_TIMES", "0")) for m in records
                 if m.properties.get("TIMER_DELIVER_MS") == str(far)]
    assert max(far_rolls) >= 3, far_rolls
    assert all(int(m.properties["TIMER_OUT_MS"]) == far // 1000 * 1000 for m in records
               if m.properties.get("TIMER_DELIVER_MS") == str(far))


async def test_due_messages_survive_clean_restart_and_sigkill(cluster) -> None:
    c, api = cluster
    deliveries = {}
    for i in range(10):
        deliver = now_ms() + 4000 + i * 700
        deliveries[await send(api, c.addr, i % 4, {"TIMER_DELIVER_MS": str(deliver)})] = deliver
    await asyncio.sleep(1.2)
    await api.remoting.close_channel(c.addr)
    assert await c.broker.async_stop() == 0, c.broker.log_tail()
    await c.start_broker()
    for i in range(10):
        deliver = now_ms() + 3000 + i * 500
        deliveries[await send(api, c.addr, i % 4, {"TIMER_DELIVER_MS": str(deliver)})] = deliver
    await asyncio.sleep(1.0)
    await api.remoting.close_channel(c.addr)
    c.broker.kill()
    await c.start_broker()
    deadline = time.monotonic() + 20
    seen: dict[str, MessageExt] = {}
    while time.monotonic() < deadline and len(seen) < len(deliveries):
        for q in range(4):
            for m in await pull_all(api, c.addr, TOPIC, q):
                seen.setdefault(m.uniq_key, m)
        await asyncio.sleep(0.2)
    assert set(seen) == set(deliveries), "timer messages lost across a restart and a SIGKILL"
    for key, m in seen.items():
        assert m.store_timestamp >= deliveries[key], (key, m.store_timestamp - deliveries[key])


async def test_timer_wheel_disabled_refuses_timer_messages(broker_cluster, mq_api: MQClientAPI,
                                                           tmp_path: Path) -> None:
    c, api = await _cluster(broker_cluster, mq_api, timerWheelEnable="false"), mq_api
    with pytest.raises(MQBrokerError) as refused:
        await send(api, c.addr, 0, {"TIMER_DELAY_SEC": "5"})
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    assert "timerWheelEnable is false" in str(refused.value)
    assert not (tmp_path / "store" / "timerwheel").exists()
    response = await api.invoke(c.addr, RequestCode.GET_TIMER_CHECK_POINT)
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
    await send(api, c.addr, 0, {"DELAY": "1"})  # delay levels keep working
    assert len(await wait_count(api, c.addr, 0, 1, 5)) == 1


async def test_sigkill_during_dequeue_loses_nothing(cluster) -> None:
    """5000 messages in one slot; the broker is killed while it is putting them back."""
    c, api = cluster
    count = 5000
    due = (now_ms() // 1000 + 6) * 1000
    keys = [uuid.uuid4().hex.upper() for _ in range(count)]
    sem = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with sem:
            await send(api, c.addr, i % 4, {"TIMER_DELIVER_MS": str(due), "UNIQ_KEY": keys[i]})

    await asyncio.gather(*(one(i) for i in range(count)))
    assert now_ms() < due - 500, "sending took too long for this test"
    delivered = 0
    while delivered == 0:
        delivered = sum([await api.get_max_offset(c.addr, TOPIC, q) for q in range(4)])
        await asyncio.sleep(0.002)
    c.broker.kill()
    print(f"killed after {delivered} of {count} were put back")
    await api.remoting.close_channel(c.addr)
    await c.start_broker()
    seen: dict[str, MessageExt] = {}
    deadline = time.monotonic() + 20
    while len(seen) < count and time.monotonic() < deadline:
        for q in range(4):
            for m in await pull_all(api, c.addr, TOPIC, q):
                seen.setdefault(m.uniq_key, m)
        await asyncio.sleep(0.2)
    assert set(seen) == set(keys), f"{count - len(seen)} lost"
    assert all(m.store_timestamp >= due for m in seen.values())
