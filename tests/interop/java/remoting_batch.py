"""One run of every Java Remoting client scenario (tests/interop/java/remoting4, run by 4.9.8 and 5.5.0).

A cluster of its own (NameServer; broker sets broker-a and broker-b with short delay levels and
transaction checks, trace topic on; broker-c with ACL 2.0 on; a proxy for a gRPC consumer), then
one JVM per client version running all scenarios at once (orbitmq.remoting.Main), both JVMs side by
side. Barriers a scenario prints ("WAIT name") are answered here: the queue-lock probes of the
orderly scenario, the broker set going down for the failover one. What only the cluster can tell
(DLQ contents, committed offsets, trace records, a gRPC consumer's view) is collected before the
cluster stops. The tests in test_java_remoting.py assert on the result.

The run costs about a minute, so it happens once per pytest run: under xdist the first worker to
ask computes it under a file lock and writes it as JSON beside the workers' temp dirs; the others
read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orbitmq.client import MQClientAPI
from orbitmq.client.api import MessageQueueRef
from orbitmq.common.message_codec import decode_records
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode
from tests.interop.harness import CLUSTER_BROKER_KEYS, _run, unique
from tests.support import ProcessRunner, free_port, jvm, port_open, start_broker

VERSIONS = {"4.9.8": "remoting4", "5.5.0": "remoting5"}
ADMIN = {"username": "admin", "password": "admin-secret"}
INNER = {"accessKey": "inner", "secretKey": "inner-secret"}
CLUSTER = "DefaultCluster"
# Every broker set: short delay levels (retries in seconds) and transaction checks, trace topic on.
BROKER_KEYS = {**CLUSTER_BROKER_KEYS, "messageDelayLevel": "1s 1s 1s", "transactionCheckInterval": 1000,
               "transactionTimeOut": 3000, "traceTopicEnable": "true", "enablePropertyFilter": "true"}
AUTH_KEYS = {"authenticationEnabled": "true", "authorizationEnabled": "true",
             "initAuthenticationUser": json.dumps(ADMIN), "innerClientAuthenticationCredentials": json.dumps(INNER)}
JVM_TIMEOUT = 240
FLAG_SUBSCRIPTION = 0x1 << 2  # PullSysFlag: the pull carries its subscription


class RemotingCluster:
    def __init__(self, runner: ProcessRunner, namesrv: str, brokers: dict[str, str], proxy: str) -> None:
        self.runner, self.namesrv, self.brokers, self.proxy = runner, namesrv, brokers, proxy
        self.procs = {p.name: p for p in runner.processes}

    def admin(self, fn: Callable[[MQClientAPI], Any], signed: bool = False) -> Any:
        async def go() -> Any:
            api = MQClientAPI(timeout=10)
            if signed:
                from orbitmq.auth.client import install_signing
                install_signing(api.remoting, (ADMIN["username"], ADMIN["password"]))
            try:
                return await fn(api)
            finally:
                await api.close()
        return _run(go())

    def topic(self, name: str, on: tuple[str, ...] = ("broker-a",), queues: int = 4, perm: int = 6) -> str:
        async def go(api: MQClientAPI) -> None:
            for broker in on:
                await api.create_topic(self.brokers[broker], TopicConfig(name, queues, queues, perm=perm))
            deadline = time.monotonic() + 10
            while True:  # the route names every broker set the topic is on
                try:
                    route = await api.get_topic_route(self.namesrv, name)
                    if len(route.queue_datas) == len(on):
                        return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                await _sleep(0.1)
        self.admin(go, signed="broker-c" in on)
        return name

    def group(self, name: str, on: tuple[str, ...] = ("broker-a",)) -> str:
        async def go(api: MQClientAPI) -> None:
            for broker in on:
                await api.create_subscription_group(self.brokers[broker], SubscriptionGroupConfig(name))
        self.admin(go, signed="broker-c" in on)
        return name


async def _sleep(seconds: float) -> None:
    import asyncio
    await asyncio.sleep(seconds)


@contextlib.contextmanager
def remoting_cluster(workdir: Path):
    from tests.support.process import running
    with running(workdir) as runner:
        ns_port = free_port()
        namesrv = f"127.0.0.1:{ns_port}"
        runner.start("namesrv", [f"listenPort={ns_port}"], ready_port=ns_port, name="namesrv")
        brokers = {}
        for name, keys in (("broker-a", BROKER_KEYS), ("broker-b", BROKER_KEYS),
                           ("broker-c", {**CLUSTER_BROKER_KEYS, **AUTH_KEYS})):
            _proc, addr = start_broker(runner, workdir, namesrv, name=name, store=workdir / name,
                                       brokerName=name, **keys)
            brokers[name] = addr
        proxy_port = free_port()
        runner.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "grpcClientConsumerMinLongPollingTimeoutMillis=1000",
                               "minInvisibleTimeMillsForRecv=1000"], ready_port=proxy_port, name="proxy")
        yield RemotingCluster(runner, namesrv, brokers, f"127.0.0.1:{proxy_port}")


# ---- the scenarios' topics and groups ----------------------------------------------------------

def prepare(cluster: RemotingCluster, version: str, barriers: Path) -> tuple[list[str], dict[str, Any]]:
    """Create what every scenario of ``version`` needs; returns Main's arguments and the names."""
    v = version.replace(".", "")
    ab = ("broker-a", "broker-b")
    names: dict[str, Any] = {}

    def scenario(kind: str, label: str = "", **args: str) -> list[str]:
        sid = f"{label or kind}{v}"
        names[sid] = {"kind": label or kind, **args}
        return [kind, sid, f"ns={cluster.namesrv}", f"barriers={barriers}", *(f"{k}={a}" for k, a in args.items())]

    def tg(prefix: str, on: tuple[str, ...] = ("broker-a",), queues: int = 4) -> dict[str, str]:
        return {"topic": cluster.topic(unique(f"J{prefix}T{v}"), on, queues),
                "group": cluster.group(unique(f"J{prefix}G{v}"), on)}

    default_vip = "true" if version.startswith("4.") else "false"
    other_vip = "false" if default_vip == "true" else "true"
    phase1 = [
        scenario("send", **tg("Send", ab)),
        scenario("send", "vip", **tg("Vip", ab), vip=other_vip),  # the VIP channel the other way round
        scenario("bigbody", **tg("Big"), grpc_group=cluster.group(unique(f"JBigGrpc{v}"))),
        scenario("orderly", **tg("Ord")),
        scenario("share", **tg("Share", ab)),
        scenario("broadcast", **tg("Bc")),
        scenario("retry", **tg("Retry")),
        scenario("litepull", **tg("Lite"), group_assign=cluster.group(unique(f"JLiteAG{v}"))),
        scenario("tx", **tg("Tx")),
        scenario("reqreply", **tg("Req")),
        scenario("trace", **tg("Trace")),
        scenario("sql", **tg("Sql", queues=2)),
        scenario("bad", **tg("Bad"), missing_topic=unique(f"JMissingT{v}"),
                 readonly_topic=cluster.topic(unique(f"JReadOnlyT{v}"), perm=4), missing_group=unique(f"JMissingG{v}")),
    ]
    phase1.append(scenario("from", topic=cluster.topic(unique(f"JFromT{v}"), queues=2),
                           **{f"group_{m}": cluster.group(unique(f"JFrom{m}G{v}")) for m in ("first", "last", "timestamp")}))
    acl_topic = cluster.topic(unique(f"JAclT{v}"), ("broker-c",))
    acl_group = cluster.group(unique(f"JAclG{v}"), ("broker-c",))
    phase1.append(scenario("acl", topic=acl_topic, group=acl_group, ak=f"alice{v}", sk="alice-secret",
                           reader_ak=f"reader{v}", reader_sk="reader-secret"))
    _acl_users(cluster, v, acl_topic, acl_group)
    failover = scenario("failover", topic=cluster.topic(unique(f"JFailT{v}"), ab))
    argv: list[str] = []
    for s in phase1:
        argv += [*s, "--"]
    argv += ["==", *failover]
    return argv, names


def _acl_users(cluster: RemotingCluster, v: str, topic: str, group: str) -> None:
    def entry(resource: str, actions: list[str]) -> dict[str, Any]:
        return {"resource": resource, "actions": actions, "decision": "Allow", "sourceIps": []}

    users = {f"alice{v}": ("alice-secret", [entry(f"Topic:{topic}", ["Pub", "Sub"]), entry(f"Group:{group}", ["Sub"])]),
             f"reader{v}": ("reader-secret", [entry(f"Topic:{topic}", ["Sub"])])}

    async def go(api: MQClientAPI) -> None:
        broker = cluster.brokers["broker-c"]
        for name, (password, entries) in users.items():
            await api.call(broker, RequestCode.AUTH_CREATE_USER, {"username": name}, json.dumps(
                {"username": name, "password": password, "userType": "Normal"}).encode())
            await api.call(broker, RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{name}"}, json.dumps(
                {"subject": f"User:{name}", "policies": [{"policyType": "Custom", "entries": entries}]}).encode())
    cluster.admin(go, signed=True)


# ---- running the JVMs ------------------------------------------------------------------------------

class Run:
    """One JVM's output, split by scenario id; barrier requests go to ``on_wait``."""

    def __init__(self, version: str, argv: list[str], workdir: Path, on_wait: Callable[[str, str], None]) -> None:
        self.version = version
        self.lines: dict[str, list[str]] = {}
        self.stderr = workdir / f"jvm-{version}.err"
        logs = workdir / f"client-logs-{version}"
        flags = ["-Drocketmq.client.rebalance.waitInterval=1000", f"-Drocketmq.client.logRoot={logs}",
                 "-Drocketmq.client.logLevel=WARN", f"-Drocketmq.client.localOffsetStoreDir={logs}/offsets",
                 f"-Duser.home={logs}"]
        command = jvm.suite(VERSIONS[version]).command("orbitmq.remoting.Main", *argv, jvm_flags=flags)
        with open(self.stderr, "wb") as err:
            self.popen = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        self._on_wait = on_wait
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for raw in self.popen.stdout:
            sid, _, line = raw.rstrip("\n").partition(" ")
            self.lines.setdefault(sid, []).append(line)
            if line.startswith("WAIT "):
                threading.Thread(target=self._on_wait, args=(sid, line[5:]), daemon=True).start()

    def wait(self) -> None:
        try:
            self.popen.wait(JVM_TIMEOUT)
        finally:
            if self.popen.poll() is None:
                self.popen.kill()
                self.popen.wait()
            self.reader.join(10)


def compute(workdir: Path) -> dict[str, Any]:
    barriers = workdir / "barriers"
    barriers.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    with remoting_cluster(workdir / "cluster") as cluster:
        prepared = {v: prepare(cluster, v, barriers) for v in VERSIONS}
        names = {sid: info for _argv, n in prepared.values() for sid, info in n.items()}
        probes: dict[str, Any] = {}
        after: dict[str, Any] = {}
        down_waiting: set[str] = set()
        down_lock = threading.Lock()

        def open_barrier(sid: str, name: str) -> None:
            (barriers / f"{sid}.{name}").touch()

        def on_wait(sid: str, name: str) -> None:
            info = names[sid]
            if info["kind"] == "orderly":
                probes[f"{sid}.{name}"] = _lock_probe(cluster, info["topic"], info["group"])
                open_barrier(sid, name)
            elif info["kind"] == "trace":
                _await_trace(cluster, name.removeprefix("traced-"), ("Pub", "SubBefore", "SubAfter"))
                open_barrier(sid, name)
            elif info["kind"] == "retry":
                _await_dlq(cluster, info["group"], ("retry-0", "retry-1"))
                open_barrier(sid, name)
            elif info["kind"] == "failover":
                with down_lock:
                    down_waiting.add(sid)
                    if len(down_waiting) < len(VERSIONS):
                        return  # the other JVM still runs scenarios on broker-b
                    # every other scenario is done: look at what they left while broker-b still runs
                    after.update(_after(cluster, {v: {"lines": r.lines, "names": prepared[v][1]} for v, r in runs.items()}))
                    cluster.procs["broker-b"].kill()
                    for waiting in down_waiting:
                        open_barrier(waiting, name)

        runs = {v: Run(v, argv, workdir, on_wait) for v, (argv, _n) in prepared.items()}
        for run in runs.values():
            run.wait()
        for run in runs.values():
            result[run.version] = {"lines": run.lines, "names": prepared[run.version][1],
                                   "stderr": run.stderr.read_text(errors="replace")[-4000:],
                                   "returncode": run.popen.returncode,
                                   "client_log": _client_log_warnings(workdir / f"client-logs-{run.version}")}
        result["membership"] = _membership_lines(cluster)
        result["probes"] = probes
        result["after"] = after
        result["brokers"] = cluster.brokers
        result["namesrv"] = cluster.namesrv
    return result


MEMBERSHIP = ("new consumer connected", "consumer channel closed", "unregister consumer", "consumer channel expired")


def _membership_lines(cluster: RemotingCluster) -> list[str]:
    """Every consumer-group membership change the broker sets logged: when a test sees a rebalance
    it did not expect, its report shows who joined or left (and when)."""
    lines = []
    for name in ("broker-a", "broker-b"):
        text = cluster.procs[name].log_text() if name in cluster.procs else ""
        lines += [f"{name}: {line}" for line in text.splitlines() if any(m in line for m in MEMBERSHIP)]
    return lines


def _client_log_warnings(logs: Path) -> list[str]:
    """The WARN and ERROR lines of the JVM's rocketmq client log, for failure reports (5.x logs INFO
    whatever rocketmq.client.logLevel says)."""
    lines: list[str] = []
    for path in sorted(logs.rglob("*.log")):
        lines += [line for line in path.read_text(errors="replace").splitlines()
                  if " WARN " in line or " ERROR " in line]
    return lines


def _trace_rows(cluster: RemotingCluster, msg_id: str) -> str:
    """`orbitmq admin queryMsgTraceById`'s output for ``msg_id``."""
    proc = subprocess.run([sys.executable, "-m", "orbitmq", "admin", "queryMsgTraceById", "-n", cluster.namesrv,
                           "-i", msg_id], capture_output=True, text=True, timeout=60, check=False)
    return proc.stdout + proc.stderr


def _await_trace(cluster: RemotingCluster, msg_id: str, kinds: tuple[str, ...], timeout: float = 60.0) -> None:
    """Until the trace topic holds a record of every kind for ``msg_id`` (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = {line.split()[0] for line in _trace_rows(cluster, msg_id).splitlines()[1:] if line.strip()}
        if set(kinds) <= rows:
            return
        time.sleep(0.5)


def _await_dlq(cluster: RemotingCluster, group: str, keys: tuple[str, ...], timeout: float = 60.0) -> None:
    """Until every key is in %DLQ%<group> (then the scenario may shut its consumer down)."""
    broker = cluster.brokers["broker-a"]

    async def go(api: MQClientAPI) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [await api.query_message(broker, f"%DLQ%{group}", key, 32, 0, 2**62) for key in keys]
            if all(found):
                return
            await asyncio.sleep(0.2)
    cluster.admin(go)


def _lock_probe(cluster: RemotingCluster, topic: str, group: str) -> int:
    """How many of the topic's queues another client gets locked for the group (then unlocked)."""
    broker = cluster.brokers["broker-a"]
    queues = [MessageQueueRef(topic, "broker-a", q) for q in range(4)]

    async def go(api: MQClientAPI) -> int:
        locked = await api.lock_batch_mq(broker, group, "127.0.0.1@probe", queues)
        await api.unlock_batch_mq(broker, group, "127.0.0.1@probe", locked)
        return len(locked)
    return cluster.admin(go)


def _after(cluster: RemotingCluster, result: dict[str, Any]) -> dict[str, Any]:
    """What the cluster shows once the clients are done."""
    after: dict[str, Any] = {}
    broker_a = cluster.brokers["broker-a"]
    for version in VERSIONS:
        for sid, info in result[version]["names"].items():
            kind = info["kind"]
            if kind == "retry":
                async def dlq(api: MQClientAPI, group: str = info["group"]) -> list[str]:
                    found = []
                    for key in ("retry-0", "retry-1"):
                        msgs = await api.query_message(broker_a, f"%DLQ%{group}", key, 32, 0, 2**62)
                        found += [f"{key} {m.reconsume_times}" for m in msgs]
                    return sorted(found)
                after[sid] = cluster.admin(dlq)
            elif kind == "litepull":
                async def offsets(api: MQClientAPI, group: str = info["group_assign"], topic: str = info["topic"]):
                    out = {}
                    for q in range(4):
                        out[f"broker-a:{q}"] = [await api.query_consumer_offset(broker_a, group, topic, q),
                                                await api.get_max_offset(broker_a, topic, q)]
                    return out
                after[sid] = cluster.admin(offsets)
            elif kind == "trace":
                sent = [line.split() for line in result[version]["lines"].get(sid, []) if line.startswith("SENT ")]
                if sent:
                    after[sid] = _trace_rows(cluster, sent[0][3])
            elif kind == "bigbody":
                async def stored(api: MQClientAPI, topic: str = info["topic"],
                                 group: str = info["group"]) -> list[list[Any]]:
                    out = []  # the records as the broker keeps them: [key, compressed flag, body length]
                    for q in range(4):
                        header = h.PullMessageRequestHeader(
                            consumer_group=group, topic=topic, queue_id=q, queue_offset=0, max_msg_nums=8,
                            sys_flag=FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription="*",
                            sub_version=0, expression_type="TAG")
                        response = await api.invoke(broker_a, RequestCode.PULL_MESSAGE, header)
                        if response.code == 0 and response.body:
                            out += [[m.properties.get("KEYS"), m.sys_flag & 1, len(m.body)]
                                    for m in decode_records(response.body)]
                    return out
                after[sid] = {"stored": cluster.admin(stored),
                              "grpc": _grpc_receive(cluster, info["topic"], info["grpc_group"])}
            elif kind in ("send", "vip"):
                async def route(api: MQClientAPI, topic: str = info["topic"]) -> list[str]:
                    data = await api.get_topic_route(cluster.namesrv, topic)
                    return sorted(a for b in data.broker_datas for a in b.broker_addrs.values())
                after[sid] = cluster.admin(route)
    after["fast_ports"] = {name: port_open("127.0.0.1", int(addr.rsplit(":", 1)[1]) - 2)
                           for name, addr in cluster.brokers.items()}
    return after


def _grpc_receive(cluster: RemotingCluster, topic: str, group: str) -> list[list[Any]]:
    """The official Python gRPC client receives through the proxy: [key, length, sha256] per message."""
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    consumer.startup()
    got: list[list[Any]] = []
    try:
        end = time.monotonic() + 20
        while not got and time.monotonic() < end:
            for m in consumer.receive(16, 15):
                got.append([sorted(m.keys)[0] if m.keys else "", len(m.body), hashlib.sha256(m.body).hexdigest()])
                consumer.ack(m)
    finally:
        consumer.shutdown()
    return got


def shared_result(basetemp: Path) -> dict[str, Any]:
    """The run's result, computed once per pytest run (per xdist run: under a lock beside the workers)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = basetemp.parent if worker else basetemp
    path = root / "java-remoting.json"
    with open(root / "java-remoting.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            try:
                data = compute(basetemp / "java-remoting")
            except Exception as exc:  # every worker's tests then fail with the same cause
                data = {"error": f"{type(exc).__name__}: {exc}"}
            path.write_text(json.dumps(data))
        return json.loads(path.read_text())
