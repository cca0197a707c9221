"""Apache RocketMQ's own servers as test and bench peers (issue 24): NameServer, broker, proxy in
cluster mode and controller, unmodified, from the jars of tests/compat/apache/pom.xml.

`make apache` fetches org.apache.rocketmq:rocketmq-{namesrv,broker,proxy,controller} at
:data:`VERSION` with their dependencies into the ignored .cache/m2 and writes their classpath to
tests/compat/apache/target/classpath.txt. 5.5.0 is the newest rocketmq-namesrv and rocketmq-proxy
the package mirror serves: it stands in for 5.5.1.

Every server is one JVM on free 127.0.0.1 ports, started through a :class:`ProcessRunner` (stopped
by PID at its teardown), with a small heap (the four: about 0.9 GiB resident idle, heaps 1 GiB in
all), its ``user.home`` and ROCKETMQ_HOME in a directory of its own under the runner's work dir so
that its logback files (``<home>/logs/rocketmqlogs/*.log``) land there; a failure's report prints the tail
of its stdout and of its main log. Readiness is probed, never slept for: the boot line, the port,
and for a broker its address in the NameServer's GET_BROKER_CLUSTER_INFO.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from orbitmq.client import MQClientAPI

from .net import free_port, free_port_pair
from .process import ManagedProcess, ProcessFailed, ProcessRunner
from .services import write_properties
from .source_roots import REPO

VERSION = "5.5.0"  # stands in for 5.5.1 (not served by the package mirror)
SUITE_DIR = REPO / "tests" / "compat" / "apache"
# Apache's boot lines (NamesrvStartup#main0, BrokerStartup#start, ProxyStartup#main,
# ControllerStartup#start), printed on stdout.
NAMESRV_BOOT = "The Name Server boot success"
BROKER_BOOT = "boot success. serializeType="
PROXY_BOOT = "rocketmq-proxy startup successfully"
CONTROLLER_BOOT = "The Controller Server boot success"
BOOT_TIMEOUT = 90.0  # a JVM's cold start on two busy cores
# What runserver.sh/runbroker.sh would give, shrunk: a serial GC, C1 only (quicker to start, less
# CPU beside the tests), and the opens Hessian (the controller's ReplicasInfoManager) needs on 17.
COMMON_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-OmitStackTraceInFastThrow",
                "--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED",
                "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED"]
HEAPS = {
    "namesrv": ["-Xms64m", "-Xmx128m"],
    "broker": ["-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m"],
    "proxy": ["-Xms128m", "-Xmx256m", "-XX:MaxDirectMemorySize=128m"],
    "controller": ["-Xms64m", "-Xmx128m"],
}
MAIN_CLASS = {
    "namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
    "broker": "org.apache.rocketmq.broker.BrokerStartup",
    "proxy": "org.apache.rocketmq.proxy.ProxyStartup",
    "controller": "org.apache.rocketmq.controller.ControllerStartup",
}
MAIN_LOG = {"namesrv": "namesrv.log", "broker": "broker.log", "proxy": "proxy.log", "controller": "controller.log"}
# A broker in a test writes little: 64 MiB CommitLog segments (1 GiB by default, mapped per segment).
COMMITLOG_SIZE = 64 * 1024 * 1024
# BrokerConfig#waitTimeMillsInSendQueue (200 ms) sheds a send that waited longer in the send
# thread pool's queue with SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]" (BrokerFastFailure), and a send to
# a chosen queue is not retried by the client. On a 2-core machine running two test workers, a JVM
# pausing for 250 ms is ordinary: the tests' brokers wait 5 s, as they are not testing load shedding.
SEND_QUEUE_WAIT_MS = 5000


def classpath() -> list[str]:
    """The servers' classpath; an AssertionError saying what to run when it was not fetched."""
    path = SUITE_DIR / "target" / "classpath.txt"
    assert path.is_file(), f"Apache RocketMQ {VERSION} is not fetched ({path} is missing): run `make apache`"
    return path.read_text().strip().split(os.pathsep)


def _jar(entries: list[str], module: str) -> str:
    name = f"rocketmq-{module}-{VERSION}.jar"
    for entry in entries:
        if entry.endswith("/" + name):
            return entry
    raise AssertionError(f"{name} is not on the classpath of tests/compat/apache: run `make apache`")


def _run(coro):
    """Run a coroutine from sync code, in its own loop and thread (a fixture may sit in a loop)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class ApacheProcess(ManagedProcess):
    """One Apache server: its stdout is ``log_path``; its logback files are under ``home``."""

    def __init__(self, *args, home: Path, main_log: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.home = home
        self.main_log = home / "logs" / "rocketmqlogs" / main_log

    def log_tail(self, lines: int = 60) -> str:
        # stdout without logback's own status lines (it prints them for a deprecation warning of
        # Apache's logback files), then the server's main log.
        out = [line for line in self.log_text().splitlines() if " |-" not in line[:40]]
        try:
            main = self.main_log.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            main = []
        return "\n".join([*out[-lines:], f"--- {self.main_log}", *main[-lines:]])


@dataclass
class ApacheBroker:
    process: ApacheProcess
    addr: str
    conf: Path
    store: Path
    name: str
    cluster: str


# TlsSystemConfig's system properties for servers that take TLS only (with the self-signed test
# certificate) and connect to each other over TLS, as tls.server.mode=enforcing does on OrbitMQ.
TLS_FLAGS = ["-Dtls.server.mode=enforcing", "-Dtls.test.mode.enable=true", "-Dtls.enable=true",
             "-Dtls.client.authServer=false"]


class Apache:
    """Starts Apache RocketMQ servers under ``runner`` (which stops them by PID), each in
    ``runner.workdir/<name>``. ``fast_start=False`` drops the C1-only flag (for benchmarks);
    ``tls=True`` gives every server TLS_FLAGS (and the readiness probes speak TLS)."""

    def __init__(self, runner: ProcessRunner, fast_start: bool = True, tls: bool = False) -> None:
        self.runner = runner
        self.entries = classpath()
        self.cp = os.pathsep.join(self.entries)
        self.tls = tls
        self.flags = [f for f in COMMON_FLAGS if fast_start or f != "-XX:TieredStopAtLevel=1"]
        if tls:
            self.flags += TLS_FLAGS

    def spawn(self, kind: str, name: str, args: list[str], jvm_flags: list[str] | None = None) -> ApacheProcess:
        """Start ``kind``'s main class without waiting; ``jvm_flags`` come after the defaults."""
        home = self.runner.workdir / name
        # java.io.tmpdir inside the test's own directory: the broker unpacks librocksdbjni (13 MB)
        # and a TLS server writes its self-signed keyutil_* pair there on every start, and a
        # killed JVM never deletes them; under /tmp they would pile up across runs.
        java_tmp = home / "java-tmp"
        java_tmp.mkdir(parents=True, exist_ok=True)
        logback = f"jar:file:{_jar(self.entries, kind)}!/rmq.{kind}.logback.xml"
        argv = [shutil.which("java") or "java", *self.flags, *HEAPS[kind], f"-Duser.home={home}",
                f"-Djava.io.tmpdir={java_tmp}", f"-Drmq.logback.configurationFile={logback}", *(jvm_flags or []),
                "-cp", self.cp, MAIN_CLASS[kind], *args]
        env = {**os.environ, "ROCKETMQ_HOME": str(home), "RMQ_PROXY_HOME": str(home), "HOME": str(home)}
        log_path = self.runner.workdir / f"{name}.log"
        log_start = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as log_file:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                     cwd=home, env=env, start_new_session=True)
        proc = ApacheProcess(name, argv, log_path, popen, log_start, home=home, main_log=MAIN_LOG[kind])
        self.runner.processes.append(proc)
        return proc

    # ---- NameServer --------------------------------------------------------------------------

    def namesrv(self, name: str = "apache-namesrv", timeout: float = BOOT_TIMEOUT,
                port: int | None = None) -> tuple[ApacheProcess, str]:
        """NamesrvStartup on ``port`` (default: a free one); returns the process and its "host:port"."""
        port = port or free_port()
        home = self.runner.workdir / name
        conf = write_properties(home / "namesrv.conf", {
            "listenPort": port, "bindAddress": "127.0.0.1", "kvConfigPath": home / "kvConfig.json"})
        proc = self.spawn("namesrv", name, ["-c", str(conf)])
        proc.wait_ready(("127.0.0.1", port), NAMESRV_BOOT, timeout)
        return proc, f"127.0.0.1:{port}"

    # ---- broker ------------------------------------------------------------------------------

    def broker_conf(self, name: str, namesrv: str, broker_name: str, cluster: str, broker_id: int,
                    store: Path, port: int, keys: dict[str, object]) -> Path:
        """broker.conf for one broker; ``keys`` are Apache's (BrokerConfig, MessageStoreConfig,
        NettyServerConfig) and win. listenPort - 2 (the fast server) and + 1 (haListenPort) are
        free: :func:`free_port_pair` reserves them."""
        values: dict[str, object] = {
            "brokerClusterName": cluster, "brokerName": broker_name, "brokerId": broker_id,
            "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1", "listenPort": port, "haListenPort": port + 1,
            "namesrvAddr": namesrv, "storePathRootDir": store, "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": COMMITLOG_SIZE, "flushDiskType": "ASYNC_FLUSH",
            "waitTimeMillsInSendQueue": SEND_QUEUE_WAIT_MS, **keys}
        return write_properties(self.runner.workdir / name / "broker.conf",
                                {k: v for k, v in values.items() if v is not None})

    def broker(self, namesrv: str, name: str = "apache-broker", *, broker_name: str = "apache-a",
               cluster: str = "DefaultCluster", broker_id: int = 0, store: Path | None = None,
               port: int | None = None, timeout: float = BOOT_TIMEOUT, wait: bool = True,
               **keys: object) -> ApacheBroker:
        """BrokerStartup registered with ``namesrv`` (a NameServer of either kind), returned once
        the NameServer's cluster info lists it (so routes and clusterList show it); ``wait=False``
        returns at once (start others meanwhile, then :meth:`wait_broker`)."""
        port = port or free_port_pair()
        store = store or self.runner.workdir / name / "store"
        conf = self.broker_conf(name, namesrv, broker_name, cluster, broker_id, store, port, keys)
        broker = ApacheBroker(self.start_broker_conf(conf, name, timeout=0), f"127.0.0.1:{port}", conf, store,
                              broker_name, cluster)
        if wait:
            self.wait_broker(broker, namesrv, timeout)
        return broker

    def start_broker_conf(self, conf: Path, name: str, timeout: float = BOOT_TIMEOUT) -> ApacheProcess:
        """BrokerStartup on a written ``conf`` (e.g. again on a store another broker left); with a
        ``timeout`` it waits for the boot line."""
        proc = self.spawn("broker", name, ["-c", str(conf)])
        if timeout:
            proc.wait_ready(None, BROKER_BOOT, timeout)
        return proc

    def wait_broker(self, broker: ApacheBroker, namesrv: str, timeout: float = BOOT_TIMEOUT) -> None:
        """Until the broker logged its boot, listens, and ``namesrv`` (if any) lists its address."""
        host, port = broker.addr.rsplit(":", 1)
        broker.process.wait_ready((host, int(port)), BROKER_BOOT, timeout)
        if namesrv:
            wait_registered(namesrv, broker.name, broker.addr, broker.process, timeout, tls=self.tls)

    # ---- proxy -------------------------------------------------------------------------------

    def proxy(self, namesrv: str, name: str = "apache-proxy", timeout: float = BOOT_TIMEOUT, wait: bool = True,
              **keys: object) -> tuple[ApacheProcess, str, str]:
        """ProxyStartup in cluster mode in front of ``namesrv``; ``keys`` go into rmq-proxy.json
        (ProxyConfig's names). Returns the process, its gRPC and its Remoting "host:port";
        ``wait=False`` returns at once (then :func:`wait_proxy`)."""
        grpc_port, remoting_port = free_port(), free_port()
        home = self.runner.workdir / name
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "rmq-proxy.json"
        conf.write_text(json.dumps({"rocketMQClusterName": "DefaultCluster", "namesrvAddr": namesrv,
                                    "grpcServerPort": grpc_port, "remotingListenPort": remoting_port,
                                    "proxyMode": "cluster", **keys}), encoding="utf-8")
        proc = self.spawn("proxy", name, ["-pc", str(conf), "-pm", "cluster"])
        if wait:
            wait_proxy(proc, f"127.0.0.1:{grpc_port}", timeout)
        return proc, f"127.0.0.1:{grpc_port}", f"127.0.0.1:{remoting_port}"

    # ---- controller --------------------------------------------------------------------------

    def controllers(self, count: int = 1, name: str = "apache-controller", group: str = "group1",
                    timeout: float = BOOT_TIMEOUT, **keys: object) -> list[tuple[ApacheProcess, str]]:
        """``count`` ControllerStartup peers of one DLedger group; a controller serves its Remoting
        requests on its DLedger peer port (DLedgerController#getRemotingServer), so each address is
        that. Returns each process and "host:port"."""
        ports = [free_port() for _ in range(count)]
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
        started = []
        for i, port in enumerate(ports):
            peer = f"{name}-{i}" if count > 1 else name
            home = self.runner.workdir / peer
            conf = write_properties(home / "controller.conf", {
                "controllerDLegerGroup": group, "controllerDLegerPeers": peers, "controllerDLegerSelfId": f"n{i}",
                "controllerStorePath": home / "controller-store", **keys})
            started.append((self.spawn("controller", peer, ["-c", str(conf)]), f"127.0.0.1:{port}"))
        for proc, addr in started:
            proc.wait_ready(("127.0.0.1", int(addr.rsplit(":", 1)[1])), CONTROLLER_BOOT, timeout)
        return started


def wait_proxy(proc: ManagedProcess, grpc_addr: str, timeout: float = BOOT_TIMEOUT) -> None:
    """Until an Apache proxy logged its start and its gRPC port accepts connections."""
    host, port = grpc_addr.rsplit(":", 1)
    proc.wait_ready((host, int(port)), PROXY_BOOT, timeout)


def wait_registered(namesrv: str, broker_name: str, addr: str, proc: ManagedProcess | None = None,
                    timeout: float = BOOT_TIMEOUT, tls: bool = False) -> None:
    """Until GET_BROKER_CLUSTER_INFO of ``namesrv`` (over TLS with ``tls``) lists ``addr`` under
    ``broker_name``."""
    async def probe() -> None:
        api = MQClientAPI(timeout=3)
        if tls:
            from orbitmq.remoting.tls import client_ssl_context
            api.remoting.ssl_context = client_ssl_context(type("Tls", (), {"tls_enable": True})())
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    info = await api.get_cluster_info(namesrv)
                    data = info.broker_addr_table.get(broker_name)
                    if data is not None and addr in data.broker_addrs.values():
                        return
                except Exception:  # not up yet: probe again
                    pass
                if proc is not None and not proc.is_running():
                    raise ProcessFailed(f"{proc.name} exited with code {proc.returncode}:\n{proc.log_tail()}")
                if time.monotonic() >= deadline:
                    raise ProcessFailed(f"{broker_name} {addr} not in {namesrv}'s cluster info after {timeout:.0f}s"
                                        + (f":\n{proc.log_tail()}" if proc else ""))
                await asyncio.sleep(0.2)
        finally:
            await api.close()

    _run(probe())
