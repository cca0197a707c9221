"""Subscribed PullConsumers of one group share the topic's queues (issue 22 item 2), across
proxy processes (services/proxy/heartbeat_syncer.py, pull_assignment.py).

Three instances as processes spread over two proxies, one killed with SIGKILL, then a fourth
started, under a steady stream of messages: the live instances always split the queues between
them, every message is consumed by the group, and the only messages consumed twice are ones a
killed instance had polled past its last commit (its uncommitted window: a kill -9 cannot commit
them). Graceful leaves commit first, so nothing else comes twice. Committed offsets never go
back. Then one proxy is killed -9: its members' queues reach the instances on the other proxy
once the brokers' locks lapse. The same run against `orbitmq proxy --workers 2` (the kernel
spreads the instances' connections over the two worker processes).
"""

from __future__ import annotations

import asyncio
import collections
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq import AsyncProducer, AsyncPullConsumer, ClientConfig, Message, MessageQueue
from tests.interop.harness import Cluster, start_cluster, unique
from tests.support import free_port

MEMBER = Path(__file__).with_name("pull_group_member.py")
QUEUES = 8
# Short sync period and lock life keep the proxy kill quick: a killed proxy's members expire after
# three periods (6 s), its clients' broker locks after rebalanceLockMaxLiveTime (8 s).
SYNC_KEYS = {"heartbeatIntervalMillis": "2000"}
BROKER_KEYS = {"rebalanceLockMaxLiveTime": "8000"}


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line cut by the kill
    return out


def share(path: Path) -> list[str] | None:
    assigns = [r for r in records(path) if r["kind"] == "assign"]
    return assigns[-1]["queues"] if assigns else None


def wait_for(predicate, what: str, deadline_s: float = 90.0) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < end, f"not in time: {what}"
        time.sleep(0.2)


def partitioned(paths: list[Path]) -> bool:
    """The live instances' shares are disjoint, non-empty and cover every queue."""
    shares = [share(p) for p in paths]
    if any(not s for s in shares):
        return False
    flat = [q for s in shares for q in s]  # type: ignore[union-attr]
    return len(flat) == len(set(flat)) == QUEUES


class Sender(threading.Thread):
    """Sends one message every few ms, round robin over the queues, until stopped."""

    def __init__(self, config: ClientConfig, topic: str) -> None:
        super().__init__(daemon=True)
        self.config, self.topic = config, topic
        self.sent: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        async def go() -> None:
            async with AsyncProducer(self.config, [self.topic], max_batch_messages=1) as producer:
                i = 0
                while not self.stop.is_set():
                    body = f"m{i}"
                    await producer.send(Message(self.topic, body.encode()))
                    self.sent.append(body)
                    i += 1
                    await asyncio.sleep(0.005)
        try:
            asyncio.run(go())
        except BaseException as exc:  # reported by the test
            self.error = exc


class OffsetWatch(threading.Thread):
    """Samples the group's committed offsets; any offset lower than one seen before is a regression."""

    def __init__(self, config: ClientConfig, group: str, queues: list[MessageQueue]) -> None:
        super().__init__(daemon=True)
        self.config, self.group, self.queues = config, group, queues
        self.stop = threading.Event()
        self.regressions: list[tuple[MessageQueue, int, int]] = []
        self.samples = 0

    def run(self) -> None:
        async def go() -> None:
            seen: dict[MessageQueue, int] = {}
            async with AsyncPullConsumer(self.config, self.group) as watcher:  # assigns nothing: no member
                while not self.stop.is_set():
                    for mq in self.queues:
                        offset = await watcher.committed(mq)
                        if offset is None:
                            continue
                        if offset < seen.get(mq, -1):
                            self.regressions.append((mq, seen[mq], offset))
                        seen[mq] = max(offset, seen.get(mq, -1))
                    self.samples += 1
                    await asyncio.sleep(0.2)
        asyncio.run(go())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """NameServer, broker, two proxy processes, and a third proxy as `--workers 2`."""
    workdir = tmp_path_factory.mktemp("pull-group")
    cluster = start_cluster(workdir, proxies=2, broker_extra=BROKER_KEYS, proxy_extra=SYNC_KEYS)
    try:
        port, metrics_port = free_port(), free_port()
        cluster.runner.start("proxy", ["-n", cluster.namesrv, "--port", str(port), "--workers", "2",
                                       "metricsExporterType=PROM", f"metricsPromExporterPort={metrics_port}",
                                       "metricsPromExporterHost=127.0.0.1",
                                       *(f"{k}={v}" for k, v in SYNC_KEYS.items())],
                             ready_port=port, ready_text="2 workers", name="proxy-workers", timeout=60)
        cluster.proxies.append(f"127.0.0.1:{port}")
        cluster.workers_metrics = f"http://127.0.0.1:{metrics_port}/metrics"  # type: ignore[attr-defined]
        yield cluster
    finally:
        cluster.runner.stop_all()


def pull_clients_by_worker(metrics_url: str) -> dict[str, int]:
    """The PULL_CONSUMER clients each worker of `--workers` knows (rocketmq_proxy_active_clients)."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("rocketmq_proxy_active_clients{") and 'client_type="pull_consumer"' in line:
            process = line.split('process="', 1)[1].split('"', 1)[0]
            out[process] = out.get(process, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


def _proxy_process(cluster: Cluster, name: str):
    return next(p for p in cluster.runner.processes if p.name == name)


@pytest.mark.parametrize("deployment", ["workers", "two-proxies"])
def test_pull_group_shares_queues_across_a_kill_and_a_join(cluster: Cluster, tmp_path: Path,
                                                           deployment: str) -> None:
    members: dict[str, subprocess.Popen] = {}
    p0, p1, workers = cluster.proxies
    # A, C on proxy 0 and B, D on proxy 1; or all on the workers' port
    endpoint_of = dict(zip("ABCD", [p0, p1, p0, p1], strict=True)) if deployment == "two-proxies" else \
        dict.fromkeys("ABCD", workers)
    try:
        topic = cluster.create_topic(unique("PullGroup"), queues=QUEUES)
        group = cluster.create_group(unique("PullGroupG"))
        config = ClientConfig(endpoint_of["A"])
        logs = {name: tmp_path / f"member-{name}.jsonl" for name in "ABCD"}

        def start(name: str) -> None:
            members[name] = subprocess.Popen(
                [sys.executable, str(MEMBER), "--endpoints", endpoint_of[name], "--group", group, "--topic", topic,
                 "--out", str(logs[name]), "--refresh", "1.0", "--commit-every", "3"],
                stdout=subprocess.DEVNULL, stderr=open(tmp_path / f"member-{name}.err", "w"))  # noqa: SIM115

        def polls(name: str) -> int:
            return sum(r["kind"] == "poll" for r in records(logs[name]))

        if deployment == "workers":
            # The kernel picks a worker per connection: B is started again until it is on the
            # other worker than A (before any message is sent), so the group spans both processes.
            start("A")
            wait_for(lambda: sum(pull_clients_by_worker(cluster.workers_metrics).values()) == 1, "A connects")
            where_a = pull_clients_by_worker(cluster.workers_metrics)
            for _attempt in range(12):
                start("B")
                wait_for(lambda: sum(pull_clients_by_worker(cluster.workers_metrics).values()) == 2, "B connects")
                if len([n for n in pull_clients_by_worker(cluster.workers_metrics).values() if n]) == 2:
                    break
                members["B"].send_signal(signal.SIGTERM)
                assert members["B"].wait(30) == 0
                logs["B"].unlink()
                wait_for(lambda: pull_clients_by_worker(cluster.workers_metrics) == where_a, "B leaves")
            else:
                raise AssertionError("B never reached the second worker")
            start("C")
        else:
            for name in "ABC":
                start(name)
        wait_for(lambda: partitioned([logs[n] for n in "ABC"]), "three instances share the queues")
        queues = [MessageQueue(topic, q.split("/")[0], int(q.split("/")[1]))
                  for n in "ABC" for q in share(logs[n]) or []]
        watch = OffsetWatch(config, group, queues)
        watch.start()
        sender = Sender(config, topic)
        sender.start()
        # killed between two commits (it commits every third batch), so that it dies holding polled,
        # uncommitted messages
        wait_for(lambda: polls("B") >= 50 and records(logs["B"])[-1]["kind"] == "poll", "B consumes")
        members["B"].send_signal(signal.SIGKILL)
        members["B"].wait(10)
        wait_for(lambda: partitioned([logs[n] for n in "AC"]), "two instances share the queues after the kill")
        wait_for(lambda: len(sender.sent) > 0 and polls("C") >= 100, "C goes on consuming")
        start("D")
        wait_for(lambda: partitioned([logs[n] for n in "ACD"]), "three instances share the queues after the join")
        wait_for(lambda: polls("D") >= 50 and records(logs["D"])[-1]["kind"] == "poll", "D consumes")
        killed = ["B"]
        if deployment == "two-proxies":
            # proxy 1 dies with D on it: D can read and commit no more; A and C take its queues once
            # proxy 0 stops counting D (three sync periods) and the broker lets D's locks lapse
            _proxy_process(cluster, "proxy-1").kill()
            killed.append("D")
            wait_for(lambda: partitioned([logs[n] for n in "AC"]), "A and C take the killed proxy's queues")
            members["D"].kill()
            members["D"].wait(10)
            before = polls("A") + polls("C")
            wait_for(lambda: polls("A") + polls("C") >= before + 100, "A and C go on consuming")
        sender.stop.set()
        sender.join(30)
        assert sender.error is None, sender.error
        sent = set(sender.sent)
        graceful = [n for n in "ABCD" if n not in killed]

        def consumed() -> set[str]:
            return {r["body"] for n in "ABCD" for r in records(logs[n]) if r["kind"] == "poll"}
        wait_for(lambda: sent <= consumed(), "every message consumed")
        for name in graceful:
            members[name].send_signal(signal.SIGTERM)
        for name in graceful:
            assert members[name].wait(30) == 0
            assert records(logs[name])[-1]["kind"] == "bye"
        watch.stop.set()
        watch.join(30)

        rows = {n: [r for r in records(logs[n]) if r["kind"] == "poll"] for n in "ABCD"}
        by_body = collections.defaultdict(list)
        for name, polled in rows.items():
            for r in polled:
                by_body[r["body"]].append((name, r["q"], r["offset"]))
        assert set(by_body) == sent
        # A killed instance's uncommitted window: what it polled at or past its last commit per queue.
        window: set[tuple[str, str, int]] = set()
        for name in killed:
            last_commit: dict[str, int] = {}
            for r in records(logs[name]):
                if r["kind"] == "commit":
                    last_commit.update(r["offsets"])
            window |= {(name, r["q"], r["offset"]) for r in rows[name] if r["offset"] >= last_commit.get(r["q"], 0)}
        duplicates = {body: where for body, where in by_body.items() if len(where) > 1}
        for body, where in duplicates.items():
            assert len(where) == 2, (body, where)
            assert any(w in window for w in where), (body, where)
        print(f"\n{deployment}: {len(sent)} sent, {len(duplicates)} consumed twice "
              f"(uncommitted windows of {'+'.join(killed)}: {len(window)})")
        assert watch.samples > 0 and watch.regressions == []

        async def final() -> list[tuple[int | None, int]]:
            async with AsyncPullConsumer(config, group) as c:
                return [(await c.committed(mq), await c.max_offset(mq)) for mq in queues]
        assert all(committed == end for committed, end in asyncio.run(final()))
    finally:
        for p in members.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)
