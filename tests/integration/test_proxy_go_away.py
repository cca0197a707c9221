"""A proxy's graceful shutdown moves Remoting clients to another proxy without a failed send.

Two proxies behind a round-robin TCP balancer (a Kubernetes Service or cloud load balancer in
production, which stops sending new connections to a terminating pod), `enableShutdownGracefully=true`: the proxy a producer is connected to gets SIGTERM
while the producer sends; its Remoting port answers GO_AWAY, the client reconnects through the
balancer to the other proxy and retries, and every send is acknowledged once.
"""

from __future__ import annotations

import asyncio
import threading
import time

from rocketmq import ClientConfiguration, Credentials, Producer
from rocketmq import Message as GrpcMessage

from orbitmq.client import MQClientAPI, SendStatus
from orbitmq.common.message import Message
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.producer import AsyncDefaultMQProducer
from tests.support import astart_broker, astart_namesrv, free_port, start_broker, start_namesrv
from tests.support.tcp_balancer import TcpBalancer

TOPIC, QUEUES = "GoAwayTopic", 2
WAIT_SECONDS = 3


async def test_sigterm_proxy_moves_remoting_producer(procs, tmp_path) -> None:
    _, namesrv = await astart_namesrv(procs, name="namesrv")
    _, broker = await astart_broker(procs, tmp_path, namesrv, "broker", brokerName="broker-a",
                                    autoCreateTopicEnable="false")
    api = MQClientAPI(timeout=5)
    await api.create_topic(broker, TopicConfig(TOPIC, QUEUES, QUEUES))
    # One Remoting port on three loopback addresses: the balancer on 127.0.0.2, the proxies behind
    # it on .3 and .4, each telling clients to dial the balancer (remotingAccessAddr), as proxies
    # behind a Kubernetes Service are told the Service's name.
    port = free_port()
    proxies = {}
    for host in ("127.0.0.3", "127.0.0.4"):
        proxies[f"{host}:{port}"] = await procs.astart(
            "proxy", ["-n", namesrv, "--host", host, "--port", str(free_port()), f"remotingListenPort={port}",
                      "remotingAccessAddr=127.0.0.2", "enableShutdownGracefully=true",
                      f"shutdownWaitTimeSeconds={WAIT_SECONDS}"],
            ready_port=(host, port), ready_text="The proxy boot success", name=f"proxy-{host}", timeout=30)
    balancer = await TcpBalancer(list(proxies), host="127.0.0.2", port=port).start()
    producer = AsyncDefaultMQProducer("PG_GoAway", RemotingClientConfig(namesrv_addr=balancer.address,
                                                                          client_ip="127.0.0.1"))
    results, errors = [], []
    try:
        await producer.start()
        loop = asyncio.get_running_loop()

        async def send_for(seconds: float) -> None:
            until = loop.time() + seconds
            while loop.time() < until:
                try:
                    results.append(await producer.send(Message(TOPIC, b"m-%d" % len(results))))
                except Exception as exc:  # counted: the assertion says what failed
                    errors.append(repr(exc))
                await asyncio.sleep(0.02)

        await send_for(1.0)
        first_addr = balancer.connections[0]
        first = proxies[first_addr]
        balancer.drain(first_addr)  # the terminating pod leaves the Service's endpoints
        first.signal(15)  # SIGTERM: graceful shutdown
        await send_for(WAIT_SECONDS + 2.0)
        assert await asyncio.to_thread(first.popen.wait, 30) == 0, first.log_tail()
        await send_for(0.5)
    finally:
        await producer.shutdown()
        await balancer.close()
    assert errors == [], (balancer.connections, first_addr, errors[:3])
    assert results and all(r.status == SendStatus.SEND_OK for r in results)
    assert "GO_AWAY" in first.own_log_text(), "the stopped proxy never answered GO_AWAY"
    assert len(set(balancer.connections)) == 2  # the producer moved to the other proxy
    stored = sum([await api.get_max_offset(broker, TOPIC, q) for q in range(QUEUES)])
    await api.close()
    assert stored == len(results)  # each acknowledged send stored once: none lost, none doubled


def test_sigterm_proxy_moves_grpc_producer(procs, tmp_path) -> None:
    """The same for the official Python gRPC client: the stopping proxy's HTTP/2 GOAWAY (its
    grpcShutdownTimeSeconds drain) sends new calls to a new connection, which the balancer gives
    the other proxy; calls in flight finish on the old one."""
    _, namesrv = start_namesrv(procs, name="namesrv")
    _, broker = start_broker(procs, tmp_path, namesrv, "broker", brokerName="broker-a", autoCreateTopicEnable="false")

    async def create() -> None:
        api = MQClientAPI(timeout=5)
        await api.create_topic(broker, TopicConfig(TOPIC, QUEUES, QUEUES))
        await api.close()
    asyncio.run(create())
    port = free_port()
    proxies = {}
    for host in ("127.0.0.3", "127.0.0.4"):
        proxies[f"{host}:{port}"] = procs.start(
            "proxy", ["-n", namesrv, "--host", host, "--port", str(port), f"grpcShutdownTimeSeconds={WAIT_SECONDS}"],
            ready_port=(host, port), ready_text="The proxy boot success", name=f"proxy-{host}", timeout=30)
    loop = asyncio.new_event_loop()
    balancer = loop.run_until_complete(TcpBalancer(list(proxies), host="127.0.0.2", port=port).start())
    pump = threading.Thread(target=loop.run_forever, daemon=True)
    pump.start()
    producer = Producer(ClientConfiguration(balancer.address, Credentials(), request_timeout=10), (TOPIC,))
    receipts, errors = [], []
    try:
        producer.startup()

        def send_for(seconds: float) -> None:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                msg = GrpcMessage()
                msg.topic, msg.body = TOPIC, b"g-%d" % len(receipts)
                try:
                    receipts.append(producer.send(msg))
                except Exception as exc:  # counted: the assertion says what failed
                    errors.append(repr(exc))
                time.sleep(0.02)

        send_for(1.0)
        first_addr = balancer.connections[0]
        first = proxies[first_addr]
        balancer.drain(first_addr)
        first.signal(15)
        send_for(WAIT_SECONDS + 2.0)
        assert first.popen.wait(30) == 0, first.log_tail()
        send_for(0.5)
    finally:
        producer.shutdown()
        asyncio.run_coroutine_threadsafe(balancer.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        pump.join(10)
    assert errors == []
    assert receipts and len(set(balancer.connections)) == 2

    async def stored() -> int:
        api = MQClientAPI(timeout=5)
        try:
            return sum([await api.get_max_offset(broker, TOPIC, q) for q in range(QUEUES)])
        finally:
            await api.close()
    assert asyncio.run(stored()) == len(receipts)  # each acknowledged send stored once
