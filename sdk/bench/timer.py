"""`orbitmq bench timer`: the timer wheel's intake rate and its delivery lateness.

In one `orbitmq local` (child process, temporary data dir, free ports), over Remoting:

1. **Into the wheel**: with `timerStopEnqueue=true` N timer messages (due in a day, spread over
   an hour of slots) pile up in rmq_sys_wheel_timer; enqueueing is switched back on and the
   rate at which the timercheck's queue offset advances (GET_TIMER_CHECK_POINT) is the number of
   scheduled messages/s filed into the timer log and wheel.
2. **Lateness**: for D seconds, timer messages are sent at a target rate, each due 1 to 60 s
   after its send; once all are due they are pulled from their real topic and each one's
   lateness is its delivery (store) timestamp minus its TIMER_DELIVER_MS, both on the broker
   host's clock. Prints the achieved rate, p50/p99/max lateness, early and missing counts.

Never asserts. The sender is one Python process: where it cannot reach the target rate, the
rate it reached is what is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench.local_process import launch_local, local_ports_args
from orbitmq.bench.scenario import stop_local
from orbitmq.bench.stats import percentile
from orbitmq.client import MQClientAPI
from orbitmq.common.message import Message
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.net import free_ports
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode

TOPIC = "OrbitTimerBench"
GROUP = "OrbitTimerBenchGroup"
QUEUES = 8


def start_local(data_dir: str, overrides: list[str]) -> tuple[subprocess.Popen, str]:
    """`orbitmq local` with broker overrides; (process, broker address) once ready."""
    ports = free_ports(3)
    proc = launch_local(data_dir, [*local_ports_args(*ports), *overrides])
    return proc, f"127.0.0.1:{ports[1]}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _checkpoint_queue_offset(api: MQClientAPI, broker: str) -> int:
    response = await api.call(broker, RequestCode.GET_TIMER_CHECK_POINT)
    return struct.unpack_from(">qqq", response.body, 0)[2]


async def _send(api: MQClientAPI, broker: str, broker_name: str, deliver_ms: int, queue_id: int) -> bool:
    msg = Message(TOPIC, b"t" * 64, properties={"UNIQ_KEY": create_uniq_id(), "TIMER_DELIVER_MS": str(deliver_ms)})
    try:
        result = await api.send_message(broker, broker_name, msg, "OrbitTimerBenchProducer", queue_id)
    except Exception:
        return False
    return result.status.value == "SEND_OK"


async def intake(api: MQClientAPI, broker: str, broker_name: str, count: int, workers: int) -> dict:
    """Phase 1: messages/s filed into the wheel from a backlog of ``count``."""
    await api.update_broker_config(broker, {"timerStopEnqueue": "true"})
    base = await _checkpoint_queue_offset(api, broker)
    day = 86_400_000
    sent = 0

    async def worker(index: int) -> None:
        nonlocal sent
        while sent < count:
            sent += 1
            deliver = _now_ms() + day + random.randrange(3_600_000)
            await _send(api, broker, broker_name, deliver, index % QUEUES)

    started = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(workers)))
    send_rate = count / (time.monotonic() - started)
    target = base + count
    # The backlog waits in rmq_sys_wheel_timer while enqueue is stopped: timed from the resume to
    # the checkpoint passing all of it (polled every 50 ms, so a small backlog reads as a floor).
    await api.update_broker_config(broker, {"timerStopEnqueue": "false"})
    resumed = time.monotonic()
    while True:
        if await _checkpoint_queue_offset(api, broker) >= target:
            break
        await asyncio.sleep(0.05)
    rate = count / max(time.monotonic() - resumed, 1e-3)
    return {"messages": count, "sendRate": round(send_rate), "wheelIntakeRate": round(rate)}


async def lateness(api: MQClientAPI, broker: str, broker_name: str, rate: int, duration: float,
                   workers: int) -> dict:
    """Phase 2: send at ``rate`` timers/s for ``duration`` s, each due within a minute; lateness."""
    deliveries: dict[str, int] = {}
    interval = 1.0 / rate
    start = time.monotonic()
    next_slot = start
    lock = asyncio.Lock()
    sent = failed = 0

    async def worker(index: int) -> None:
        nonlocal next_slot, sent, failed
        while True:
            async with lock:
                slot = next_slot
                next_slot += interval
            if slot - start >= duration or time.monotonic() - start >= duration:
                return  # the window is over, whether or not the target rate was reached
            wait = slot - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            deliver = _now_ms() + random.randrange(1000, 60_000)
            uniq = create_uniq_id()
            msg = Message(TOPIC, b"t" * 64, properties={"UNIQ_KEY": uniq, "TIMER_DELIVER_MS": str(deliver)})
            try:
                result = await api.send_message(broker, broker_name, msg, "OrbitTimerBenchProducer", index % QUEUES)
                ok = result.status.value == "SEND_OK"
            except Exception:
                ok = False
            if ok:
                deliveries[uniq] = deliver
                sent += 1
            else:
                failed += 1

    await asyncio.gather(*(worker(i) for i in range(workers)))
    elapsed = time.monotonic() - start
    last_due = max(deliveries.values(), default=_now_ms())
    await asyncio.sleep(max(last_due - _now_ms(), 0) / 1000.0 + 3.0)
    late_ms: list[float] = []
    after_slot_ms: list[float] = []
    early = 0
    seen: set[str] = set()
    for queue_id in range(QUEUES):
        offset = 0
        while True:
            header = h.PullMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=queue_id,
                                                queue_offset=offset, max_msg_nums=32, sys_flag=0x4,
                                                commit_offset=0, suspend_timeout_millis=0, subscription="*",
                                                sub_version=0)
            result = await api.pull_message(broker, header)
            if not result.messages:
                break
            for m in result.messages:
                uniq = m.properties.get("UNIQ_KEY", "")
                due = deliveries.get(uniq)
                if due is None or uniq in seen:
                    continue
                seen.add(uniq)
                late = m.store_timestamp - due
                if late < 0:
                    early += 1
                late_ms.append(late)
                # Past the moment its slot could fire (TIMER_OUT_MS + 1 s precision): the wheel's own delay.
                after_slot_ms.append(m.store_timestamp - int(m.properties.get("TIMER_OUT_MS", due)) - 1000)
            offset = result.next_begin_offset
    late_ms.sort()
    after_slot_ms.sort()
    return {"targetRate": rate, "achievedRate": round(sent / min(elapsed, duration)), "sent": sent, "sendFailures": failed,
            "delivered": len(seen), "missing": sent - len(seen), "early": early,
            "latenessP50Ms": percentile(late_ms, 50), "latenessP99Ms": percentile(late_ms, 99),
            "latenessMaxMs": late_ms[-1] if late_ms else 0,
            "afterSlotFireP50Ms": percentile(after_slot_ms, 50), "afterSlotFireP99Ms": percentile(after_slot_ms, 99)}


async def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-timer-") as data_dir:
        proc, broker = start_local(data_dir, ["timerFlushIntervalMs=100"])
        api = MQClientAPI(timeout=10)
        try:
            await api.create_topic(broker, TopicConfig(TOPIC, QUEUES, QUEUES))
            await api.create_subscription_group(broker, SubscriptionGroupConfig(GROUP))
            broker_name = (await api.get_broker_config(broker)).get("brokerName", "")
            result = {"intake": await intake(api, broker, broker_name, args.messages, args.workers)}
            print(json.dumps(result["intake"]), flush=True)
            result["lateness"] = await lateness(api, broker, broker_name, args.rate, args.duration, args.workers)
            print(json.dumps(result["lateness"]), flush=True)
            return result
        finally:
            await api.close()
            stop_local(proc)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench timer", description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--messages", type=int, default=50_000, help="backlog filed into the wheel (phase 1)")
    p.add_argument("-r", "--rate", type=int, default=10_000, help="target timers/s of phase 2")
    p.add_argument("-d", "--duration", type=float, default=20.0, help="seconds of sending in phase 2")
    p.add_argument("-w", "--workers", type=int, default=64, help="concurrent sends")
    args = p.parse_args(list(argv))
    result = asyncio.run(run(args))
    intake_r, late = result["intake"], result["lateness"]
    print(f"timer wheel intake: {intake_r['wheelIntakeRate']:,} msgs/s filed from a backlog of "
          f"{intake_r['messages']:,} (sent at {intake_r['sendRate']:,} msgs/s)")
    print(f"delivery lateness at {late['achievedRate']:,} timers/s (target {late['targetRate']:,}), due within "
          f"1 min: p50 {late['latenessP50Ms']:.0f} ms, p99 {late['latenessP99Ms']:.0f} ms, max "
          f"{late['latenessMaxMs']:.0f} ms; {late['delivered']:,}/{late['sent']:,} delivered, "
          f"{late['early']} early, {late['missing']} missing")
    print(f"  of which after the slot's fire time (the precision's rounding excluded): p50 "
          f"{late['afterSlotFireP50Ms']:.0f} ms, p99 {late['afterSlotFireP99Ms']:.0f} ms")
    return 0
