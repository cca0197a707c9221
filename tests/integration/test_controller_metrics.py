"""Controller metrics with upstream's names from a 3-controller Raft group (metricsExporterType=PROM
on each `orbitmq controller` process), and the HA figures and readiness of the controller-mode
broker set of two replicas under it."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from tests.support import ProcessRunner, free_port
from tests.support.ha_cluster import BROKER_NAME, CLUSTER, RAFT_GROUP, HACluster
from tests.support.prom import Scrape, scrape, wait_ready


async def _scrape(endpoint: str) -> Scrape:
    return await asyncio.to_thread(scrape, endpoint)


async def _roles(endpoints: list[str]) -> list[float]:
    return [(await _scrape(e)).value("role") for e in endpoints]


async def test_controller_group_metrics(procs: ProcessRunner, tmp_path: Path) -> None:
    # port 0: each replica logs the port it got
    cluster = HACluster(procs, tmp_path / "ha", replicas=2,
                        extra_broker={"metricsExporterType": "PROM", "metricsPromExporterPort": "0"})
    endpoints = []
    for c in cluster.controllers:
        port = free_port()
        extra = f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\nmetricsPromExporterPort={port}\n"
        c.conf.write_text(c.conf.read_text(encoding="utf-8") + extra, encoding="utf-8")  # noqa: ASYNC240
        endpoints.append(f"127.0.0.1:{port}")
    try:
        await cluster.start()
        for endpoint in endpoints:
            assert (await asyncio.to_thread(wait_ready, endpoint)).strip() == "ready"
        # one leader (3), two followers (2), as upstream's role values
        deadline = time.monotonic() + 30
        while sorted(roles := await _roles(endpoints)) != [2, 2, 3]:
            assert time.monotonic() < deadline, roles
            await asyncio.sleep(0.5)
        leader = endpoints[roles.index(3)]
        for index, endpoint in enumerate(endpoints):
            s = await _scrape(endpoint)
            (role,) = s.samples("role")
            assert role.labels == {"address": f"127.0.0.1:{cluster.controllers[index].raft_port}",
                                   "group": RAFT_GROUP, "peer_id": f"n{index}"}
            assert s.family("role").type == "gauge"
            assert s.value("dledger_disk_usage_bytes") > 0
        s = await _scrape(leader)
        deadline = time.monotonic() + 20
        while s.value("active_broker_num", default=0, cluster=CLUSTER, broker_set=BROKER_NAME) != 2:
            assert time.monotonic() < deadline, s.samples("active_broker_num")
            await asyncio.sleep(0.5)
            s = await _scrape(leader)
        assert s.family("active_broker_num").type == "gauge"
        assert s.family("election_total").type == "counter"
        assert s.value("election_total", election_result="new_master_elected") >= 1
        assert s.family("dledger_op_total").type == "counter"
        assert s.value("dledger_op_total", dledger_operation="append", dLedger_operation_status="success") >= 1
        assert s.family("dledger_op_latency_microseconds").type == "histogram"
        assert s.family("request_total").type == "counter"
        assert s.total("request_total", request_type="CONTROLLER_BROKER_HEARTBEAT",
                       request_handle_status="success") > 0
        assert s.total("request_total", request_type="CONTROLLER_REGISTER_BROKER", request_handle_status="success") >= 2
        latency = s.family("request_latency_microseconds")
        assert latency.type == "histogram"
        les = {x.labels["le"] for x in s.samples("request_latency_microseconds_bucket",
                                                   request_type="CONTROLLER_REGISTER_BROKER")}
        # upstream's view: 1 µs … 500 ms, 1 s, 3 s, 5 s, 10 s (in µs)
        assert {"1.0", "3.0", "500.0", "1000.0", "500000.0", "1000000.0", "10000000.0", "+Inf"} <= les
        assert len(les) == 23

        # the broker set: ready once the controller assigned the roles; one master, in sync
        master = await cluster.wait_master()
        await cluster.wait_all_in_sync()
        figures = {}
        for r in cluster.replicas:
            port = re.search(r"metrics endpoint http://127\.0\.0\.1:(\d+)/metrics", r.proc.log_text()).group(1)
            assert (await asyncio.to_thread(wait_ready, f"127.0.0.1:{port}")).strip() == "ready"
            b = await _scrape(f"127.0.0.1:{port}")
            figures[r.addr] = {name: b.value(name, node_id=BROKER_NAME) for name in (
                "rocketmq_ha_master", "rocketmq_ha_master_epoch", "rocketmq_ha_sync_state_set_size")}
        assert figures[master]["rocketmq_ha_master"] == 1
        assert [f["rocketmq_ha_master"] for a, f in figures.items() if a != master] == [0]
        assert figures[master]["rocketmq_ha_master_epoch"] >= 1
        assert figures[master]["rocketmq_ha_sync_state_set_size"] == 2

        # the leader dies: another node reports the leader role
        dead = cluster.controllers[endpoints.index(leader)]
        await cluster.kill(dead)
        rest = [e for e in endpoints if e != leader]
        deadline = time.monotonic() + 30
        while 3 not in (roles := await _roles(rest)):
            assert time.monotonic() < deadline, roles
            await asyncio.sleep(0.5)
    finally:
        await cluster.close()
