"""`orbitmq proxy --workers N` (issue 17, lever 1): N proxy processes on one gRPC port.

Connections spread over the workers (SO_REUSEPORT), each worker's metrics appear in the one
/metrics of the supervisor with process=proxy-worker-<i>, a worker killed by SIGKILL is started
again while the others keep serving, and SIGTERM to the supervisor stops every worker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.support import ProcessRunner, free_port, start_broker, start_namesrv

TOPIC = "WorkersTopic"


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found.update(int(p) for p in f.read().split())
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _send_on_new_connection(endpoint: str, body: bytes) -> None:
    # A subchannel pool of its own: a connection of its own, as another client process has.
    with grpc.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        request = spb.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name=TOPIC), body=body,
            system_properties=pb.SystemProperties(message_id=f"WORKERS{time.time_ns():024d}",
                                                  body_encoding=pb.Encoding.IDENTITY,
                                                  message_type=pb.MessageType.NORMAL))])
        # wait_for_ready: a connection whose handshake the killed worker had queued is reset; the
        # channel connects again (to a live worker), as a client's retry would.
        response = stub.SendMessage(request, metadata=(("x-mq-client-id", "workers-test"),), timeout=15,
                                    wait_for_ready=True)
        assert response.status.code == pb.Code.OK, response.status


def _sent_by_worker(metrics_url: str) -> dict[str, float]:
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("rocketmq_proxy_messages_sent_total{") and f'topic="{TOPIC}"' in line:
            process = line.split('process="', 1)[1].split('"', 1)[0]
            out[process] = out.get(process, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


@pytest.fixture
def backend(procs: ProcessRunner, tmp_path: Path) -> tuple[ProcessRunner, str]:
    _, namesrv = start_namesrv(procs, name="namesrv")
    start_broker(procs, tmp_path, namesrv)
    return procs, namesrv


def test_two_workers_share_the_port_restart_and_stop(backend: tuple[ProcessRunner, str]) -> None:
    runner, namesrv = backend
    port, metrics_port = free_port(), free_port()
    supervisor = runner.start("proxy", ["-n", namesrv, "--port", str(port), "--workers", "2",
                                        "autoCreateTopicEnable=true", "metricsExporterType=PROM",
                                        f"metricsPromExporterPort={metrics_port}", "metricsPromExporterHost=127.0.0.1"],
                              ready_port=port, ready_text="2 workers", name="proxy-workers", timeout=60)
    endpoint = f"127.0.0.1:{port}"
    workers = _children(supervisor.pid)
    assert len(workers) == 2, workers

    # 24 connections: the kernel spreads them over both workers (all on one: 2 in 2**24).
    for i in range(24):
        _send_on_new_connection(endpoint, f"spread {i}".encode())
    sent = _sent_by_worker(f"http://127.0.0.1:{metrics_port}/metrics")
    assert set(sent) == {"proxy-worker-0", "proxy-worker-1"} and sum(sent.values()) == 24, sent

    # kill -9 one worker: the other keeps serving, and the supervisor starts a new one.
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    for i in range(5):
        _send_on_new_connection(endpoint, f"during restart {i}".encode())
    deadline = time.monotonic() + 30
    while (len(_children(supervisor.pid)) < 2 or victim in _children(supervisor.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    now = _children(supervisor.pid)
    assert len(now) == 2 and victim not in now and (now - workers), (workers, now)
    for i in range(24):
        _send_on_new_connection(endpoint, f"after restart {i}".encode())
    assert "exited with code -9; starting it again" in supervisor.log_text()

    # SIGTERM to the supervisor stops every worker.
    assert supervisor.stop() == 0
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in now) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in now), now


def test_workers_need_a_fixed_port(backend: tuple[ProcessRunner, str]) -> None:
    _, namesrv = backend
    run = subprocess.run([sys.executable, "-m", "orbitmq", "proxy", "-n", namesrv, "--port", "0", "--workers", "2"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "--workers needs a fixed gRPC port" in run.stderr
    run = subprocess.run([sys.executable, "-m", "orbitmq", "proxy", "-n", namesrv, "--workers", "0"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "--workers must be at least 1, got 0" in run.stderr


@pytest.mark.timeout(360)  # above the run's own 300 s limit, which reports its output
def test_bench_proxy_workers_runs_orbitmq_local_with_each_count() -> None:
    """`orbitmq bench proxy-workers` (the scaling figure of docs/benchmarks.md), cut short: each
    count boots `orbitmq local --proxy-workers N`, sends over several connections, stops."""
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", "proxy-workers", "--workers", "1,2", "-d", "1",
                          "-r", "1", "-c", "4", "-w", "8", "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    for count in ("1", "2"):
        (only,) = summary["runs"][count]
        assert only["messages"] > 0 and only["errors"] == 0, only
    assert summary["ratio_to_first"]["1"] == 1.0 and summary["ratio_to_first"]["2"] > 0
