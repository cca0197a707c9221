"""`orbitmq local` and `orbitmq local --ha` serve ONE metrics endpoint for all their services
(the broker child's and the HA children's families merged in) and print it."""

from __future__ import annotations

import asyncio

from orbitmq.bench.proxy_client import ProxyClient
from tests.support import ProcessRunner, free_port
from tests.support.prom import get, scrape, wait_ready


def test_local_serves_one_endpoint_for_namesrv_broker_child_and_proxy(procs: ProcessRunner, tmp_path) -> None:
    ports = [free_port() for _ in range(4)]
    proc = procs.start("local", ["--data-dir", str(tmp_path / "data"), "--namesrv-port", str(ports[0]),
                                 "--broker-port", str(ports[1]), "--proxy-port", str(ports[2]),
                                 f"metricsPromExporterPort={ports[3]}"],
                       ready_text="Press Ctrl-C", ready_port=ports[2], timeout=60)
    endpoint = f"127.0.0.1:{ports[3]}"
    assert f"Prometheus metrics: http://{endpoint}/metrics" in proc.log_text()
    assert wait_ready(endpoint).strip() == "ready"

    async def send() -> None:
        async with ProxyClient(f"127.0.0.1:{ports[2]}") as client:
            for i in range(5):
                assert (await client.send("LocalMetricsTopic", f"body{i}")).message_id

    asyncio.run(send())
    s = scrape(endpoint)
    assert s.value("rocketmq_namesrv_up", node_type="namesrv") == 1
    assert s.value("rocketmq_proxy_up", node_type="proxy") == 1
    # the broker runs in a child process: its families come through the parent's endpoint
    assert s.value("rocketmq_broker_permission", node_type="broker", node_id="broker-a", process="broker child") == 6
    assert s.value("rocketmq_messages_in_total", topic="LocalMetricsTopic", node_id="broker-a") == 5
    assert s.value("rocketmq_proxy_messages_sent_total", topic="LocalMetricsTopic") == 5
    assert s.text.count("# TYPE rocketmq_messages_in_total counter") == 1


def test_local_metrics_can_be_disabled(procs: ProcessRunner, tmp_path) -> None:
    ports = [free_port() for _ in range(4)]
    proc = procs.start("local", ["--one-process", "--data-dir", str(tmp_path / "data"),
                                 "--namesrv-port", str(ports[0]), "--broker-port", str(ports[1]),
                                 "--proxy-port", str(ports[2]), "metricsExporterType=DISABLE",
                                 f"metricsPromExporterPort={ports[3]}"],
                       ready_text="Press Ctrl-C", ready_port=ports[2], timeout=60)
    assert "Prometheus metrics" not in proc.log_text()
    try:
        get(f"http://127.0.0.1:{ports[3]}/metrics", timeout=2)
    except OSError:
        pass
    else:
        raise AssertionError("metrics served although metricsExporterType=DISABLE")


def test_local_ha_merges_every_child(procs: ProcessRunner, tmp_path) -> None:
    ports = {name: [free_port() for _ in range(3)] for name in ("controller", "raft", "broker")}
    namesrv_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    proc = procs.start("local", [
        "--ha", "--data-dir", str(tmp_path / "data"), "--namesrv-port", str(namesrv_port),
        "--proxy-port", str(proxy_port), "--controller-ports", ",".join(map(str, ports["controller"])),
        "--raft-ports", ",".join(map(str, ports["raft"])), "--broker-ports", ",".join(map(str, ports["broker"])),
        f"metricsPromExporterPort={metrics_port}"],
        ready_text="Press Ctrl-C", ready_port=proxy_port, timeout=120)
    endpoint = f"127.0.0.1:{metrics_port}"
    assert f"Prometheus metrics http://{endpoint}/metrics" in proc.log_text()
    assert wait_ready(endpoint).strip() == "ready"
    s = scrape(endpoint)
    roles = sorted(x.value for x in s.samples("role"))
    assert len(roles) == 3 and roles[-1] == 3, roles  # three controllers, one of them the leader
    assert {x.labels["peer_id"] for x in s.samples("role")} == {"n0", "n1", "n2"}
    permissions = s.samples("rocketmq_broker_permission", node_type="broker", node_id="broker-a")
    # the three replicas of the broker set, told apart by the process label of the merged endpoint
    assert len({x.labels["process"] for x in permissions}) == 3
    assert s.value("rocketmq_proxy_up") == 1 and s.value("rocketmq_namesrv_up") == 1


async def test_one_process_local_cluster_shares_one_endpoint(tmp_path) -> None:
    from orbitmq.common.metrics import hub
    from orbitmq.local import LocalCluster

    ports = [free_port() for _ in range(4)]
    cluster = LocalCluster(tmp_path / "data", namesrv_port=ports[0], broker_port=ports[1], proxy_port=ports[2],
                           overrides={"metricsExporterType": "PROM", "metricsPromExporterPort": str(ports[3])})
    await cluster.start()
    try:
        assert cluster.metrics_endpoint == f"http://127.0.0.1:{ports[3]}/metrics"
        assert hub().endpoints() == [cluster.metrics_endpoint]
        await asyncio.to_thread(wait_ready, f"127.0.0.1:{ports[3]}")
        s = await asyncio.to_thread(scrape, f"127.0.0.1:{ports[3]}")
        for node_type in ("namesrv", "broker", "proxy"):
            assert s.samples(f"rocketmq_{node_type}_up" if node_type != "broker" else "rocketmq_broker_permission",
                             node_type=node_type)
    finally:
        await cluster.shutdown()
    assert hub().endpoints() == []
