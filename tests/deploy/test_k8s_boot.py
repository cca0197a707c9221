"""The `ha` overlay booted as local processes, the way a kubelet would run its pods.

Every pod of the rendered manifests (2 NameServers, 3 controllers, the broker set's 3
replicas, 2 proxies) becomes an `orbitmq` process started from its container's command, args,
env and mounted ConfigMap files, in a network namespace of its own (tests/support/netns.py).
What Kubernetes would provide is substituted, and only that:

- **pod IPs and DNS**: each pod gets an address on the test bridge; the downward API values
  (status.podIP, metadata.name, the StatefulSet pod-index label) are that IP, the pod name and the
  ordinal. The stable names `<pod>.<headless Service>` (and their `.orbitmq.svc.cluster.local`
  forms) resolve through a hosts file that `ip netns exec` bind-mounts over /etc/hosts inside each
  namespace (/etc/netns/<ns>/hosts), so the processes resolve the very names the config files
  hold; nothing in the configs is rewritten for addressing.
- **volumes**: each volumeMount's mountPath is a directory of this test (ConfigMap files written
  into it, emptyDir and PersistentVolumeClaims as empty directories, the claim named
  `<template>-<pod>` as the StatefulSet controller would); occurrences of mount paths in args,
  env values and the ConfigMap files are replaced by those directories in one pass.
- **the image**: its ENTRYPOINT `orbitmq` is `python -m orbitmq` of this checkout, its HOME
  (/home/orbitmq, a mounted emptyDir) the mapped directory.
- **the proxy Service**: a TCP relay on 127.0.0.1 forwarding to the proxy pods whose readiness
  probe passes, refreshed every second (kube-proxy and the endpoints controller in short).
- **probes** run as the kubelet runs them (tcpSocket connect, httpGet status 200-399, grpc
  health Check of the named service) against the pod IP and the declared port, polled faster
  than periodSeconds so the test stays short.

Then the official Python client sends and receives through the Service address, the master
broker pod is killed (SIGKILL), the set elects a new master and the same client carries on; the
killed pod is recreated (same name and claim, a new IP, as a StatefulSet does) and rejoins; every
metric the PrometheusRule queries is in a live scrape; SIGTERM stops every pod cleanly. The `dev`
overlay (one of each) boots and serves the same way.
Needs root and iproute2 (`make tools`); skipped, with the reason, where namespaces are refused.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

from orbitmq.client import MQClientAPI
from orbitmq.common.fastjson import loads
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode
from tests.deploy import k8s_model as km
from tests.support import ProcessRunner, free_port
from tests.support.netns import Bridge, Namespace, netns_unavailable
from tests.support.process import ManagedProcess

NAMESPACE = "orbitmq"
CLUSTER_DOMAIN = "cluster.local"
BOOT_TIMEOUT = 60.0
FAILOVER_TIMEOUT = 45.0


@dataclass
class Pod:
    name: str
    workload: km.Obj
    container: km.Obj
    ns: Namespace
    root: Path
    mounts: dict[str, Path] = field(default_factory=dict)
    proc: ManagedProcess | None = None

    @property
    def ip(self) -> str:
        return self.ns.ip

    @property
    def sub(self) -> str:
        return km.sub_command(self.container)

    def port(self, port: int | str) -> int:
        return km.resolve_port(self.container, port)

    def local_paths(self, text: str) -> str:
        """Mount paths in ``text`` replaced by this pod's directories (longest first, one pass)."""
        if not self.mounts:
            return text
        paths = sorted(self.mounts, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, paths)) + r")(?![\w.-])")
        return pattern.sub(lambda m: str(self.mounts[m.group(1)]), text)


class _Loop:
    """An event loop on a thread of its own: the official client is synchronous and blocks."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="k8s-boot-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(_cancel_all(), 10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


# -- probes, as the kubelet runs them ------------------------------------------------------------


async def probe_once(pod: Pod, probe: km.Obj) -> bool:
    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        if "tcpSocket" in probe:
            _r, writer = await asyncio.wait_for(
                asyncio.open_connection(pod.ip, pod.port(probe["tcpSocket"]["port"])), timeout)
            writer.close()
            return True
        if "httpGet" in probe:
            get = probe["httpGet"]
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(pod.ip, pod.port(get["port"])), timeout)
            try:
                writer.write(f"GET {get.get('path', '/')} HTTP/1.0\r\nHost: {pod.ip}\r\n\r\n".encode())
                status = await asyncio.wait_for(reader.readline(), timeout)
            finally:
                writer.close()
            code = int(status.split()[1]) if status.startswith(b"HTTP/") else 0
            return 200 <= code < 400
        if "grpc" in probe:
            async with grpc.aio.insecure_channel(f"{pod.ip}:{probe['grpc']['port']}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=probe["grpc"].get("service", "")),
                                         timeout=timeout)
                return reply.status == health_pb2.HealthCheckResponse.SERVING
    except (TimeoutError, OSError, grpc.RpcError, ValueError, IndexError):
        return False
    raise AssertionError(f"{pod.name}: probe kind not modelled: {sorted(probe)}")


async def wait_probe(pod: Pod, kind: str, deadline: float) -> float:
    """Poll until the probe passes; returns when (monotonic). Fails with the pod's log tail."""
    probe = pod.container[kind]
    while True:
        if pod.proc is not None and not pod.proc.is_running():
            raise AssertionError(f"{pod.name} exited ({pod.proc.returncode}) before its {kind} passed:\n"
                                 f"{pod.proc.log_tail()}")
        if await probe_once(pod, probe):
            return time.monotonic()
        if time.monotonic() > deadline:
            tail = pod.proc.log_tail() if pod.proc else ""
            raise AssertionError(f"{pod.name}: {kind} {probe} still failing:\n{tail}")
        await asyncio.sleep(0.25)


async def wait_started_and_ready(pod: Pod, deadline: float) -> None:
    """startupProbe first (liveness and readiness wait for it, as in the kubelet), then both."""
    if "startupProbe" in pod.container:
        await wait_probe(pod, "startupProbe", deadline)
    await wait_probe(pod, "livenessProbe", deadline)
    await wait_probe(pod, "readinessProbe", deadline)


# -- the proxy Service -----------------------------------------------------------------------------


class ServiceRelay:
    """The ClusterIP Service in short: 127.0.0.1:<port> to the ready pods' target port."""

    def __init__(self, service: km.Obj, pods: list[Pod]) -> None:
        (self.port_spec,) = [p for p in service["spec"]["ports"] if p["name"] == "grpc"]
        self.pods = pods
        self.ready: list[Pod] = []
        self._rr = itertools.count()
        self.server: asyncio.AbstractServer | None = None
        self.port = free_port()

    async def start(self) -> None:
        await self.refresh()
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        asyncio.get_running_loop().create_task(self._endpoints_loop())

    async def refresh(self) -> None:
        ready = []
        for pod in self.pods:
            if pod.proc is not None and pod.proc.is_running() and await probe_once(pod, pod.container["readinessProbe"]):
                ready.append(pod)
        self.ready = ready

    async def _endpoints_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            await self.refresh()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.ready:
            writer.close()
            return
        pod = self.ready[next(self._rr) % len(self.ready)]
        try:
            up_reader, up_writer = await asyncio.open_connection(pod.ip, pod.port(self.port_spec["targetPort"]))
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


# -- booting the rendered pods ---------------------------------------------------------------------


def hosts_file(pods: list[Pod]) -> str:
    lines = ["127.0.0.1 localhost"]
    for pod in pods:
        names = [pod.name]
        if pod.workload["kind"] == "StatefulSet":
            base = f"{pod.name}.{pod.workload['spec']['serviceName']}"
            names += [base, f"{base}.{NAMESPACE}", f"{base}.{NAMESPACE}.svc",
                      f"{base}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"]
        lines.append(f"{pod.ip} {' '.join(names)}")
    return "\n".join(lines) + "\n"


def lay_out_volumes(objects: list[km.Obj], pod: Pod, pvc_root: Path) -> None:
    """A directory per mountPath; ConfigMap files written with mount paths mapped (see module doc)."""
    spec = km.pod_spec(pod.workload)
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    claims = {c["metadata"]["name"] for c in pod.workload["spec"].get("volumeClaimTemplates", [])}
    config_maps = km.config_maps(objects)
    pending: list[tuple[Path, dict[str, str]]] = []
    for mount in pod.container.get("volumeMounts", []):
        name = mount["name"]
        if name in claims:
            local = pvc_root / f"{name}-{pod.name}"
        elif name in volumes and ("emptyDir" in volumes[name] or "configMap" in volumes[name]):
            local = pod.root / "volumes" / name
        else:
            raise AssertionError(f"{pod.name}: volume {name} not modelled")
        local.mkdir(parents=True, exist_ok=True)
        pod.mounts[mount["mountPath"]] = local
        cm = volumes.get(name, {}).get("configMap")
        if cm is not None:
            data = config_maps[cm["name"]]
            items = cm.get("items") or [{"key": k, "path": k} for k in data]
            pending.append((local, {i["path"]: data[i["key"]] for i in items}))
    for local, files in pending:  # after every mount is known: the files may name any of them
        for path, content in files.items():
            (local / path).write_text(pod.local_paths(content))


def start_pod(runner: ProcessRunner, pod: Pod) -> None:
    env = km.env_values(pod.container, pod.name, pod.ip, NAMESPACE)
    env = {k: pod.local_paths(v) for k, v in env.items()}
    env["HOME"] = pod.local_paths(km.IMAGE_HOME)
    argv = [pod.local_paths(km.expand(a, env)) for a in km.argv(pod.container)]
    assert argv[0] == "orbitmq"
    pod.proc = runner.spawn(argv[1], argv[2:], name=pod.name, env=env, prefix=pod.ns.exec_prefix)


def broker_addr(pod: Pod) -> str:
    return f"{pod.ip}:{pod.port('remoting')}"


async def route_master(api: MQClientAPI, namesrv: str) -> str | None:
    try:
        info = await api.get_cluster_info(namesrv)
    except Exception:  # noqa: BLE001 -- polled until it answers
        return None
    data = info.broker_addr_table.get("broker-a")
    return data.broker_addrs.get(0) if data else None


async def wait_new_master(api: MQClientAPI, namesrvs: list[str], old: str | None, timeout: float) -> str:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        for namesrv in namesrvs:
            master = await route_master(api, namesrv)
            if master and master != old:
                return master
        if time.monotonic() > deadline:
            raise AssertionError(f"no master other than {old} after {timeout}s")
        await asyncio.sleep(0.3)


async def sync_state_set(api: MQClientAPI, controllers: list[str]) -> set[str]:
    """The broker set's SyncStateSet as addresses, from whichever controller (the leader) answers."""
    for addr in controllers:
        try:
            response = await api.call(addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                      body=json.dumps(["broker-a"]).encode())
            table = loads(response.body.decode("utf-8")).get("replicasInfoTable", {})
            return {m["brokerAddress"] for m in table.get("broker-a", {}).get("inSyncReplicas", [])}
        except Exception:  # noqa: BLE001 -- not the leader, or none yet: ask the next
            continue
    return set()


async def wait_all_in_sync(api: MQClientAPI, controllers: list[str], everyone: set[str], timeout: float) -> None:  # noqa: ASYNC109
    """A master alone in its SyncStateSet has nobody to hand over to: wait for the replicas."""
    deadline = time.monotonic() + timeout
    while (last := await sync_state_set(api, controllers)) != everyone:
        if time.monotonic() > deadline:
            raise AssertionError(f"SyncStateSet {sorted(last)} after {timeout}s, expected {sorted(everyone)}")
        await asyncio.sleep(0.3)


async def scrape(pod: Pod) -> str:
    reader, writer = await asyncio.wait_for(asyncio.open_connection(pod.ip, pod.port("metrics")), 3)
    try:
        writer.write(f"GET /metrics HTTP/1.0\r\nHost: {pod.ip}\r\n\r\n".encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    return data.decode("utf-8", "replace")


def _send(producer: Producer, topic: str, body: bytes, deadline: float) -> None:
    """Send, retrying while the set fails over (the client's own retries may run out)."""
    while True:
        msg = Message()
        msg.topic, msg.body = topic, body
        try:
            producer.send(msg)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _receive(consumer: SimpleConsumer, wanted: set[bytes], deadline: float) -> set[bytes]:
    got: set[bytes] = set()
    while not wanted <= got and time.monotonic() < deadline:
        try:
            for m in consumer.receive(16, 15):
                got.add(bytes(m.body))
                consumer.ack(m)
        except Exception:
            time.sleep(0.5)
    return got


@pytest.fixture
def bridge():
    reason = netns_unavailable()
    if reason:
        pytest.skip(f"network namespaces unavailable here ({reason}): the pods need one each")
    br = Bridge()
    try:
        yield br
    finally:
        for ns in br.namespaces:
            shutil.rmtree(Path("/etc/netns") / ns.name, ignore_errors=True)
        br.close()


class BootedCluster:
    """The rendered overlay's pods laid out (namespaces, hosts files, volumes), then started."""

    def __init__(self, overlay: str, runner: ProcessRunner, bridge: Bridge, root: Path) -> None:
        self.objects = km.rendered(overlay)
        self.runner = runner
        self.pods: list[Pod] = []
        for workload in km.of_kind(self.objects, *km.WORKLOAD_KINDS):
            (container,) = km.pod_spec(workload)["containers"]
            for name in km.pod_names(workload):
                self.pods.append(Pod(name, workload, container, bridge.add_namespace(), root / "pods" / name))
        self.bridge = bridge
        self.write_hosts()
        for pod in self.pods:
            lay_out_volumes(self.objects, pod, root / "pvc")
        self.loop = _Loop()
        self.api = MQClientAPI(timeout=3.0)
        self.relay: ServiceRelay | None = None

    def write_hosts(self) -> None:
        """The cluster DNS: rewritten in place, so running pods see a recreated pod's new IP."""
        hosts = hosts_file(self.pods)
        for pod in self.pods:
            etc = Path("/etc/netns") / pod.ns.name
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts)

    def recreate(self, pod: Pod) -> None:
        """A deleted pod recreated by its StatefulSet: a new IP, the same volumes and claims."""
        assert pod.proc is not None and not pod.proc.is_running()
        pod.ns = self.bridge.add_namespace()
        self.write_hosts()
        start_pod(self.runner, pod)

    def of(self, sub: str) -> list[Pod]:
        return [p for p in self.pods if p.sub == sub]

    @property
    def namesrvs(self) -> list[str]:
        return [f"{p.ip}:{p.port('remoting')}" for p in self.of("namesrv")]

    @property
    def controllers(self) -> list[str]:
        return [f"{p.ip}:{p.port('remoting')}" for p in self.of("controller")]

    def start(self) -> str:
        """`kubectl apply`: every pod at once; returns the proxy Service's address once every
        pod's startup, liveness and readiness probes pass."""
        for pod in self.pods:
            start_pod(self.runner, pod)
        deadline = time.monotonic() + BOOT_TIMEOUT

        async def boot() -> None:
            await asyncio.gather(*(wait_started_and_ready(p, deadline) for p in self.pods))

        self.loop.run(boot())
        self.relay = ServiceRelay(km.one(self.objects, "Service", "proxy"), self.of("proxy"))
        self.loop.run(self.relay.start())
        assert len(self.relay.ready) == len(self.of("proxy")), "every ready proxy pod is a Service endpoint"
        return f"127.0.0.1:{self.relay.port}"

    def create_topic(self, topic: str, group: str) -> str:
        """Topics are created explicitly (autoCreateTopicEnable=false), on every replica of the set,
        as `orbitmq admin updateTopic -b` would; returns the master's address."""

        async def create() -> str:
            master = await wait_new_master(self.api, self.namesrvs, None, 30)
            for pod in self.of("broker"):
                await self.api.create_topic(broker_addr(pod), TopicConfig(topic, 4, 4))
                await self.api.create_subscription_group(broker_addr(pod), SubscriptionGroupConfig(group))
            return master

        return self.loop.run(create())

    def terminate_all(self) -> None:
        """SIGTERM to every pod (a namespace deletion); each exits 0 within its
        terminationGracePeriodSeconds (capped here: they need far less)."""
        for pod in self.pods:
            if pod.proc is not None:
                pod.proc.signal(signal.SIGTERM)
        for pod in self.pods:
            if pod.proc is None:
                continue
            grace = min(km.pod_spec(pod.workload)["terminationGracePeriodSeconds"], 20)
            try:
                code = pod.proc.popen.wait(grace)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{pod.name} still running {grace}s after SIGTERM") from None
            assert code == 0, f"{pod.name} exited {code} on SIGTERM:\n{pod.proc.log_tail()}"

    def close(self) -> None:
        if self.relay is not None:
            self.loop.run(self.relay.close())
        self.loop.run(self.api.close())
        self.loop.close()
        for pod in self.pods:
            if pod.proc is not None:
                pod.proc.signal(signal.SIGTERM)
        self.runner.stop_all()


@pytest.fixture
def boot(procs: ProcessRunner, bridge: Bridge, tmp_path: Path):
    clusters: list[BootedCluster] = []

    def make(overlay: str) -> BootedCluster:
        clusters.append(BootedCluster(overlay, procs, bridge, tmp_path))
        return clusters[-1]

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.close()


def _clients(endpoint: str, topic: str, group: str) -> tuple[Producer, SimpleConsumer]:
    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,))
    producer.startup()
    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), group,
                              {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    return producer, consumer


def _shutdown(*clients: Any) -> None:
    for client in clients:
        try:
            client.shutdown()
        except Exception:  # noqa: BLE001 -- teardown goes on
            pass


def test_ha_overlay_boots_serves_and_fails_over(boot):
    started = time.monotonic()
    cluster: BootedCluster = boot("ha")
    pods = cluster.pods
    assert sorted(p.sub for p in pods) == ["broker"] * 3 + ["controller"] * 3 + ["namesrv"] * 2 + ["proxy"] * 2
    # The processes resolve the pods' DNS names, not IPs substituted into their config.
    controller_conf = (cluster.of("controller")[0].mounts["/etc/orbitmq"] / "controller.conf").read_text()
    assert "n0-controller-0.controller:9877" in controller_conf

    endpoint = cluster.start()
    booted = time.monotonic()
    loop, api, brokers, namesrvs = cluster.loop, cluster.api, cluster.of("broker"), cluster.namesrvs
    topic, group = "K8sBootTopic", "K8sBootGroup"
    master = cluster.create_topic(topic, group)

    producer, consumer = _clients(endpoint, topic, group)
    try:
        first = {f"before-{i}".encode() for i in range(10)}
        for body in sorted(first):
            _send(producer, topic, body, time.monotonic() + 20)
        assert first <= _receive(consumer, first, time.monotonic() + 20)

        # Kill the master's pod; the controllers elect a replica of its SyncStateSet.
        everyone = {broker_addr(p) for p in brokers}
        loop.run(wait_all_in_sync(api, cluster.controllers, everyone, 30))
        (master_pod,) = [p for p in brokers if broker_addr(p) == master]
        assert master_pod.proc is not None
        master_pod.proc.kill()
        killed = time.monotonic()
        new_master = loop.run(wait_new_master(api, namesrvs, master, FAILOVER_TIMEOUT))
        elected = time.monotonic()
        assert new_master in everyone - {master}

        second = {f"after-{i}".encode() for i in range(10)}
        for body in sorted(second):
            _send(producer, topic, body, time.monotonic() + 30)
        assert second <= _receive(consumer, second, time.monotonic() + 30)
    finally:
        _shutdown(producer, consumer)

    # The surviving pods still pass their probes, the new master's readiness included.
    survivors = [p for p in pods if p is not master_pod]

    async def still_healthy() -> None:
        late = time.monotonic() + 20
        await asyncio.gather(*(wait_probe(p, kind, late) for p in survivors
                               for kind in ("livenessProbe", "readinessProbe")))

    loop.run(still_healthy())

    # Every metric the PrometheusRule alerts on is exported by some pod (kubelet's aside).
    async def scrape_all() -> str:
        return "\n".join(await asyncio.gather(*(scrape(p) for p in survivors)))

    exposition = loop.run(scrape_all())
    exported = set(re.findall(r"^# TYPE (\S+)", exposition, re.M))
    exported |= {n.removesuffix("_total") for n in exported} | {f"{n}_total" for n in exported}
    missing = km.rule_metric_names(cluster.objects) - exported
    assert not missing, f"alert rules query metrics no pod exports: {sorted(missing)}"

    # The StatefulSet recreates the killed pod, same name and claim, with a new pod IP (a fresh
    # namespace here): it recovers its store, registers its new address and rejoins as a replica
    # of the new master (its probes pass again).
    cluster.recreate(master_pod)
    loop.run(wait_started_and_ready(master_pod, time.monotonic() + 30))
    everyone = {broker_addr(p) for p in brokers}
    loop.run(wait_all_in_sync(api, cluster.controllers, everyone, 30))
    assert loop.run(route_master(api, namesrvs[0])) == new_master

    cluster.terminate_all()
    print(f"\nk8s boot (ha): master {master_pod.name} killed, new master {new_master} "
          f"{elected - killed:.1f}s later; ready in {booted - started:.1f}s, total {time.monotonic() - started:.1f}s")


def test_dev_overlay_boots_and_serves(boot):
    """One of each: the dev overlay's single-controller and single-NameServer overrides work."""
    started = time.monotonic()
    cluster: BootedCluster = boot("dev")
    assert sorted(p.sub for p in cluster.pods) == ["broker", "controller", "namesrv", "proxy"]
    endpoint = cluster.start()
    topic, group = "K8sDevTopic", "K8sDevGroup"
    master = cluster.create_topic(topic, group)
    assert master == broker_addr(cluster.of("broker")[0])
    producer, consumer = _clients(endpoint, topic, group)
    try:
        bodies = {f"dev-{i}".encode() for i in range(5)}
        for body in sorted(bodies):
            _send(producer, topic, body, time.monotonic() + 20)
        assert bodies <= _receive(consumer, bodies, time.monotonic() + 20)
    finally:
        _shutdown(producer, consumer)
    cluster.terminate_all()
    print(f"\nk8s boot (dev): total {time.monotonic() - started:.1f}s")
