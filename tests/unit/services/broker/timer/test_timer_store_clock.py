"""TimerMessageStore in process over a real MessageStore, driven by a test clock.

The clock is an injected ``now_ms`` (the constructor's seam), so a 3 h delay can be walked
through in seconds: with a 20-minute roll window the message is parked and rolled 9 or more times,
and it must not reach its real topic before its time, then arrive within one precision of it.
A restart of the timer store in the middle (files reopened, recovery) changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

from orbitmq.broker.controller import BrokerController
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.timer.metrics import timer_gauges
from orbitmq.broker.timer.timer_message_store import TimerMessageStore
from orbitmq.common.message_codec import decode_record

START = 1_795_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


def _broker(store: MessageStore, config: MessageStoreConfig) -> SimpleNamespace:
    broker = SimpleNamespace(store_config=config, register_processor=lambda code, fn: None)
    broker.put_message = store.put_message
    broker.escape_bridge = broker  # a master: deliveries are local puts
    broker.new_inner_message = lambda **kw: BrokerController.new_inner_message(broker, **kw)
    return broker


def _messages(store: MessageStore, topic: str) -> list:
    cq = store.get_consume_queue(topic, 0)
    if cq is None:
        return []
    out = []
    for i in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()):
        phy, size, _ = cq.get_entry(i)
        out.append(decode_record(store.commit_log.get_message(phy, size), 0, check_crc=False))
    return out


async def _settle(timer: TimerMessageStore, store: MessageStore) -> None:
    """Let the enqueue and dequeue services catch up with the clock."""
    for _ in range(200):
        await asyncio.sleep(0.005)
        cq = store.get_consume_queue("rmq_sys_wheel_timer", 0)
        queued = cq.get_max_offset_in_queue() if cq is not None else 0
        if (timer.commit_queue_offset >= queued and timer.curr_write_time_ms >= timer.floor_now()
                and timer.curr_read_time_ms >= timer.curr_write_time_ms):
            return


@contextlib.asynccontextmanager
async def _timer_store(tmp_path: Path, **config: int) -> AsyncIterator[SimpleNamespace]:
    """A started MessageStore and TimerMessageStore on a test clock: (clock, store, broker, timer);
    a test restarting the timer store puts the new one in ``timer`` for the shutdown."""
    store_config = MessageStoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=8 * 1024 * 1024,
                                      **config)
    clock = Clock()
    store = MessageStore(store_config)
    await store.start()
    broker = _broker(store, store_config)
    env = SimpleNamespace(clock=clock, store=store, broker=broker, timer=TimerMessageStore(broker, now_ms=clock))
    await env.timer.start(store)
    try:
        yield env
    finally:
        await env.timer.shutdown()
        await store.shutdown()


async def test_three_hours_with_rolls_never_early(tmp_path: Path) -> None:
    async with _timer_store(tmp_path, timer_roll_window_slot=1200, mapped_file_size_timer_log=52 * 200) as env:
        await _walk_three_hours(env)


async def _walk_three_hours(env: SimpleNamespace) -> None:
    clock, store, broker, timer = env.clock, env.store, env.broker, env.timer
    deliver = START + 3 * 3600 * 1000 + 250
    inner = broker.new_inner_message(topic="Real", queue_id=0, body=b"3h", flag=0,
                                     properties={"TIMER_DELIVER_MS": str(deliver), "UNIQ_KEY": "U3H"},
                                     sys_flag=0, born_timestamp=START, born_host="127.0.0.1:1",
                                     reconsume_times=0)
    assert (await store.put_message(inner)).is_ok()
    restarted = False
    while clock.now < deliver + 2000:
        left = deliver - clock.now
        clock.now += 90_000 if left > 100_000 else 5_000 if left > 6_000 else 250
        await _settle(timer, store)
        delivered = _messages(store, "Real")
        if clock.now < deliver:
            assert delivered == [], f"delivered {deliver - clock.now} ms early"
        if not restarted and clock.now > START + 3600 * 1000:
            # A clean restart of the timer store halfway: files reopened and recovered.
            await timer.shutdown()
            timer = TimerMessageStore(broker, now_ms=clock)
            store.put_message_hooks.clear()
            await timer.start(store)
            env.timer = timer
            restarted = True
    delivered = _messages(store, "Real")
    assert len(delivered) == 1
    msg = delivered[0]
    assert msg.body == b"3h" and msg.properties["UNIQ_KEY"] == "U3H"
    assert int(msg.properties["TIMER_DEQUEUE_MS"]) >= deliver
    assert int(msg.properties["TIMER_DEQUEUE_MS"]) - deliver <= 1000 + 500
    assert int(msg.properties["TIMER_ROLL_TIMES"]) >= 8
    # The scrape-time gauges: nothing waits any more, the read time is current.
    manager = SimpleNamespace(label_names=("cluster",), common_labels=("c",))
    families = {f.name: f for f in timer_gauges(timer, manager)}
    assert [s.value for s in families["rocketmq_timer_enqueue_lag"].samples] == [0]
    assert [s.value for s in families["rocketmq_timer_dequeue_latency"].samples] == [0]
    timing = families["rocketmq_timing_messages"].samples
    assert [(s.labels["topic"], s.value) for s in timing] == [("Real", 0)]


def _gauges(timer: TimerMessageStore) -> dict:
    manager = SimpleNamespace(label_names=("cluster",), common_labels=("c",))
    return {f.name: f for f in timer_gauges(timer, manager)}


def _snapshot(families: dict) -> dict[str, float]:
    return {s.labels["timer_bound_s"]: s.value for s in families["rocketmq_timer_message_snapshot"].samples}


async def test_dequeue_lag_and_message_snapshot_count_the_wheel(tmp_path: Path) -> None:
    async with _timer_store(tmp_path) as env:
        await _count_the_wheel(env.clock, env.store, env.broker, env.timer)


async def _count_the_wheel(clock: Clock, store: MessageStore, broker: SimpleNamespace,
                           timer: TimerMessageStore) -> None:
    delays_s = (3, 30, 30, 200, 7200)
    for i, delay in enumerate(delays_s):
        inner = broker.new_inner_message(
            topic="Real", queue_id=0, body=b"t", flag=0, sys_flag=0, born_timestamp=START,
            properties={"TIMER_DELIVER_MS": str(START + delay * 1000), "UNIQ_KEY": f"U{i}"},
            born_host="127.0.0.1:1", reconsume_times=0)
        assert (await store.put_message(inner)).is_ok()
    await _settle(timer, store)
    # The first scrape starts the scan on a worker thread and shows no wheel figures yet.
    assert "rocketmq_timer_dequeue_lag" not in _gauges(timer)
    for _ in range(500):
        if timer.wheel_figures() is not None:
            break
        await asyncio.sleep(0.01)
    families = _gauges(timer)
    assert [s.value for s in families["rocketmq_timer_dequeue_lag"].samples] == [5]
    assert _snapshot(families) == {"5": 1, "60": 2, "300": 1, "900": 0, "3600": 0, "14400": 1, "28800": 0,
                                   "86400": 0}
    clock.now += 10_000  # the 3 s message is delivered; the others move closer
    await _settle(timer, store)
    assert len(_messages(store, "Real")) == 1
    timer.refresh_wheel_figures()  # what the next stale scrape does on its worker thread
    families = _gauges(timer)
    assert [s.value for s in families["rocketmq_timer_dequeue_lag"].samples] == [4]
    assert _snapshot(families) == {"5": 0, "60": 2, "300": 1, "900": 0, "3600": 0, "14400": 1, "28800": 0,
                                   "86400": 0}
