"""The proxy across a broker's death, with real processes: two broker sets (one master each), a
NameServer and a proxy. kill -9 of one master under continuous sends: the proxy notices at once
(reset / refused connection), drops the dead set's routes and sends on the other set, so the
client sees no failed send; every acknowledged message that lives on the surviving set is
consumed and acked; the proxy's failover counters are in its log.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from orbitmq.bench.proxy_client import ProxyClient
from orbitmq.client import MQClientAPI
from orbitmq.common.topic_config import TopicConfig
from tests.support import ProcessRunner, astart_broker, astart_namesrv, free_port
from tests.support.checker import DeliveryChecker

TOPIC, GROUP = "FailoverTopic", "GFailover"


async def test_sends_move_to_the_surviving_broker_set_at_once(procs: ProcessRunner, tmp_path: Path) -> None:
    _ns, namesrv = await astart_namesrv(procs)
    ports = {"broker-a": free_port(), "broker-b": free_port()}
    brokers = {}
    for name, port in ports.items():
        brokers[name], _addr = await astart_broker(
            procs, tmp_path, namesrv, name, port=port, store=tmp_path / f"store-{name}",
            brokerClusterName="FailoverCluster", brokerName=name, registerNameServerPeriod=1000,
            autoCreateSubscriptionGroup="true")
    api = MQClientAPI()
    try:
        for port in ports.values():
            await api.create_topic(f"127.0.0.1:{port}", TopicConfig(TOPIC, 4, 4))
        deadline = time.monotonic() + 20
        while len((await api.get_topic_route(namesrv, TOPIC)).broker_datas) < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
    finally:
        await api.close()
    proxy_port = free_port()
    proxy = await procs.astart("proxy", ["-n", namesrv, "--port", str(proxy_port), "--log-level", "INFO",
                                         "rocketMQClusterName=FailoverCluster"],
                               ready_port=proxy_port, ready_text="The proxy boot success", timeout=30)
    checker = DeliveryChecker()
    async with ProxyClient(f"127.0.0.1:{proxy_port}", request_timeout=15) as client:
        outcomes = []
        warm = asyncio.Event()

        async def sender(n: int) -> None:
            for seq in range(60):
                outcome = await client.send(TOPIC, f"p{n}-{seq}")
                outcomes.append((time.monotonic(), outcome))
                if len(outcomes) >= 40:
                    warm.set()
                if outcome.message_id:
                    checker.sent(outcome.key, outcome.message_id)
                await asyncio.sleep(0.02)

        senders = [asyncio.create_task(sender(n)) for n in range(4)]
        await asyncio.wait_for(warm.wait(), 30)
        killed_at = time.monotonic()
        await asyncio.to_thread(brokers["broker-a"].kill)
        await asyncio.gather(*senders)
        failed = [o for _t, o in outcomes if o.message_id is None]
        assert not failed, failed[:3]
        assert sum(1 for t, _o in outcomes if t > killed_at) >= 100

        # What broker-b stored is all consumed; broker-a's share died with its process.
        deadline = time.monotonic() + 30
        seen: set[str] = set()
        while time.monotonic() < deadline:
            deliveries, _error = await client.receive(TOPIC, GROUP, 32, 10_000, 1000)
            for d in deliveries:
                checker.consumed(d.key)
                seen.add(d.key)
            assert not any(await client.ack(TOPIC, GROUP, deliveries))
            after_kill = {o.key for t, o in outcomes if t > killed_at + 1}
            if after_kill <= seen:
                break
        assert {o.key for t, o in outcomes if t > killed_at + 1} <= seen
    log = proxy.log_text()
    assert "broker broker-a" in log and "re-resolving" in log
