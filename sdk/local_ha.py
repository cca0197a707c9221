"""`orbitmq local --ha`: RocketMQ's controller-mode quick start on one machine.

Three controllers (Raft peers 9877/9867/9857, Remoting 9878/9868/9858), one broker set of three
replicas (10911/10921/10931, HA port +1), each its own `orbitmq controller` / `orbitmq broker`
process, plus a NameServer and a gRPC proxy on this process's event loop. The brokers start as
RocketMQ's quick start does (brokerId -1, brokerRole SLAVE, enableControllerMode): the
controllers elect the master, and kill -9 of it shows a failover. Every child logs to its own
file under the data directory; SIGINT/SIGTERM stop the proxy, the brokers, the controllers and
the NameServer in that order. On Linux the children also get SIGTERM if this process dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from orbitmq.common.net import accepts_connection
from orbitmq.common.runtime import freeze_startup_objects

CLUSTER = "DefaultCluster"
BROKER_NAME = "broker-a"
RAFT_GROUP = "OrbitMQController"
DEFAULT_CONTROLLER_PORTS = (9878, 9868, 9858)
DEFAULT_RAFT_PORTS = (9877, 9867, 9857)
DEFAULT_BROKER_PORTS = (10911, 10921, 10931)
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 60.0
# The replication settings of the broker set, printed at start-up: every send waits for all of
# the SyncStateSet (allAckInSyncStateSet); a replica that stops acknowledging leaves the set after
# haMaxTimeSlaveNotCatchup, so one live replica (minInSyncReplicas) keeps the set writable.
HA_BROKER_SETTINGS = {
    "enableControllerMode": "true", "brokerId": "-1", "brokerRole": "SLAVE", "allAckInSyncStateSet": "true",
    "minInSyncReplicas": "1",
}
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux prctl), so none is orphaned."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass
class ChildProcess:
    """One `orbitmq <service> -c <conf>` child; output goes to ``log_path``."""

    name: str
    argv: list[str]
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    async def start(self) -> None:
        log_file = await asyncio.to_thread(self._open_log)
        try:
            # A session of its own: a terminal's Ctrl-C reaches only this process, which stops
            # the children in order.
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "orbitmq", *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=log_file,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        finally:
            log_file.close()  # the child has its own copy of the descriptor

    def _open_log(self) -> BinaryIO:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        return open(self.log_path, "ab")  # noqa: SIM115 -- closed by start() once the child has it

    async def wait(self) -> int:
        assert self.proc is not None
        code = await self.proc.wait()
        self.exited.set()
        return code

    async def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_SECONDS)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text("utf-8", "replace").splitlines()[-lines:])
        except OSError:
            return ""


async def _wait_port(host: str, port: int, child: ChildProcess, deadline: float) -> None:
    while True:
        assert child.proc is not None
        if child.proc.returncode is not None:
            raise RuntimeError(f"{child.name} exited during start-up (exit code {child.proc.returncode}); "
                               f"log {child.log_path}:\n{child.log_tail()}")
        if await accepts_connection(host, port):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child.name} is not listening on {host}:{port} after {START_TIMEOUT_SECONDS:.0f}s; "
                               f"log {child.log_path}:\n{child.log_tail()}")
        await asyncio.sleep(0.1)


class HALocalCluster:
    """The processes of `orbitmq local --ha`; embeddable with async start/shutdown."""

    def __init__(self, data_dir: str | Path, host: str = "127.0.0.1", namesrv_port: int = 9876,
                 proxy_port: int = 8081, controller_ports: tuple[int, ...] = DEFAULT_CONTROLLER_PORTS,
                 raft_ports: tuple[int, ...] = DEFAULT_RAFT_PORTS,
                 broker_ports: tuple[int, ...] = DEFAULT_BROKER_PORTS, overrides: dict[str, str] | None = None,
                 log_level: str = "INFO") -> None:
        if len(controller_ports) != 3 or len(raft_ports) != 3 or len(broker_ports) != 3:
            raise ValueError("--ha needs three controller ports, three Raft ports and three broker ports")
        self.data_dir = Path(data_dir).expanduser()
        self.host = host
        self.namesrv_port = namesrv_port
        self.proxy_port = proxy_port
        self.controller_ports = tuple(controller_ports)
        self.raft_ports = tuple(raft_ports)
        self.broker_ports = tuple(broker_ports)
        self.overrides = dict(overrides or {})
        self.log_level = log_level
        self.controllers: list[ChildProcess] = []
        self.brokers: list[ChildProcess] = []
        self.namesrv = None
        self.proxy = None
        # metricsExporterType=PROM: each child serves on its own free port, merged into the one
        # endpoint this process serves (metricsPromExporterPort, 5557).
        self.child_metrics_ports: list[int] = []

    @property
    def metrics_enabled(self) -> bool:
        return self.overrides.get("metricsExporterType", "DISABLE").strip().upper() == "PROM"

    @property
    def metrics_endpoint(self) -> str | None:
        if not self.metrics_enabled or self.namesrv is None:
            return None
        return f"http://{self.host}:{self.namesrv.config.metrics_prom_exporter_port}/metrics"

    def metrics_values(self, child: int | None = None) -> dict[str, str]:
        """Metrics keys of this process (child None) or of child number ``child`` (0-2 controllers,
        3-5 brokers), which gets its own port."""
        from orbitmq.local import METRICS_KEYS

        values = {"metricsPromExporterHost": self.host}
        values.update({k: v for k, v in self.overrides.items() if k in METRICS_KEYS})
        if child is not None and self.child_metrics_ports:
            values["metricsPromExporterPort"] = str(self.child_metrics_ports[child])
        return values

    @property
    def namesrv_addr(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    @property
    def controller_addr(self) -> str:
        return ";".join(f"{self.host}:{p}" for p in self.controller_ports)

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.proxy.port if self.proxy else self.proxy_port}"

    def controller_values(self, index: int) -> dict[str, str]:
        peers = ";".join(f"n{i}-{self.host}:{p}" for i, p in enumerate(self.raft_ports))
        return {"controllerDLegerGroup": RAFT_GROUP, "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": f"n{index}", "listenPort": str(self.controller_ports[index]),
                "bindAddress": self.host, "controllerStorePath": str(self.data_dir / f"controller-n{index}"),
                "configStorePath": str(self.data_dir / f"controller-n{index}" / "controller.properties"),
                **self.metrics_values(index)}

    def broker_values(self, index: int) -> dict[str, str]:
        from orbitmq.broker.config import BrokerConfig
        from orbitmq.broker.store.config import MessageStoreConfig

        port = self.broker_ports[index]
        values = {"brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, **HA_BROKER_SETTINGS,
                  "controllerAddr": self.controller_addr, "brokerIP1": self.host, "listenPort": str(port),
                  # haListenPort left to its default, listenPort + 1, which falls back to a free port
                  # when taken (slaves learn it from the NameServer).
                  "namesrvAddr": self.namesrv_addr,
                  "storePathRootDir": str(self.data_dir / f"broker-a-{index}"), "autoCreateTopicEnable": "true",
                  "autoCreateSubscriptionGroup": "true", "flushDiskType": "ASYNC_FLUSH"}
        broker_keys = set(BrokerConfig.config_keys()) | set(MessageStoreConfig.config_keys())
        values.update({k: v for k, v in self.overrides.items() if k in broker_keys})
        values.update(self.metrics_values(3 + index))
        return values

    def _write_conf(self, name: str, values: dict[str, str]) -> Path:
        path = self.data_dir / "conf" / f"{name}.conf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
        return path

    def _proxy_config(self):
        from orbitmq.common.config import load_configs
        from orbitmq.proxy.config import ProxyConfig

        values = {"namesrvAddr": self.namesrv_addr, "grpcServerPort": str(self.proxy_port),
                  "autoCreateTopicEnable": "true", "rocketMQClusterName": CLUSTER,
                  "remotingListenPort": "0"}  # the proxy's Remoting port: ephemeral unless given
        values.update({k: v for k, v in self.overrides.items() if k in ProxyConfig.config_keys()})
        values.update(self.metrics_values())
        (config,) = load_configs(None, values, ProxyConfig)
        return config

    async def start(self) -> None:
        from orbitmq.common.config import load_configs
        from orbitmq.namesrv.config import NamesrvConfig
        from orbitmq.namesrv.controller import NamesrvController
        from orbitmq.proxy.server import ProxyServer

        self.data_dir.mkdir(parents=True, exist_ok=True)
        (namesrv_cfg,) = load_configs(None, {
            "listenPort": str(self.namesrv_port), "bindAddress": self.host,
            "kvConfigPath": str(self.data_dir / "namesrv" / "kvConfig.json"),
            "configStorePath": str(self.data_dir / "namesrv" / "namesrv.properties"),
            **self.metrics_values()}, NamesrvConfig)
        if self.metrics_enabled and not self.child_metrics_ports:
            self.child_metrics_ports = _free_ports(self.host, 6)
        proxy_cfg = self._proxy_config()
        logs = self.data_dir / "logs"
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        try:
            self.namesrv = NamesrvController(namesrv_cfg)
            await self.namesrv.start()
            for i in range(3):
                conf = self._write_conf(f"controller-n{i}", self.controller_values(i))
                child = ChildProcess(f"controller n{i}", ["controller", "-c", str(conf)], logs / f"controller-n{i}.log")
                self.controllers.append(child)
                await child.start()
            for i in range(3):
                conf = self._write_conf(f"broker-a-{i}", self.broker_values(i))
                child = ChildProcess(f"broker-a replica {i}", ["broker", "-c", str(conf), "--log-level", self.log_level],
                                     logs / f"broker-a-{i}.log")
                self.brokers.append(child)
                await child.start()
            await asyncio.gather(*(_wait_port(self.host, p, c, deadline)
                                   for p, c in zip(self.controller_ports, self.controllers, strict=True)))
            await asyncio.gather(*(_wait_port(self.host, p, c, deadline)
                                   for p, c in zip(self.broker_ports, self.brokers, strict=True)))
            await self.wait_master(deadline)
            self._merge_child_metrics()
            self.proxy = ProxyServer(proxy_cfg, host=self.host)
            await self.proxy.start()
        except BaseException:
            await self.shutdown()
            raise

    async def restart_broker(self, index: int) -> None:
        """Start replica ``index`` again on its data (after it was killed); returns once it listens."""
        child = self.brokers[index]
        if child.proc is not None and child.proc.returncode is None:
            raise RuntimeError(f"{child.name} is still running (pid {child.pid})")
        await child.start()
        await _wait_port(self.host, self.broker_ports[index], child, time.monotonic() + START_TIMEOUT_SECONDS)

    async def sync_state_set(self) -> set[str]:
        """The broker set's SyncStateSet as addresses (see sync_state_set)."""
        return await sync_state_set(self.controller_addr.split(";"), BROKER_NAME)

    async def master_addr(self) -> str | None:
        """The broker set's master as the NameServer routes it (brokerId 0)."""
        from orbitmq.client import MQClientAPI

        api = MQClientAPI(timeout=2.0)
        try:
            info = await api.get_cluster_info(self.namesrv_addr)
        except Exception:  # noqa: BLE001 -- asked again until the deadline
            return None
        finally:
            await api.close()
        data = info.broker_addr_table.get(BROKER_NAME)
        return data.master_addr if data else None

    async def wait_master(self, deadline: float) -> str:
        while True:
            addr = await self.master_addr()
            if addr:
                return addr
            for child in self.controllers + self.brokers:
                if child.proc is not None and child.proc.returncode is not None:
                    raise RuntimeError(f"{child.name} exited during start-up (exit code {child.proc.returncode}); "
                                       f"log {child.log_path}:\n{child.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no master was elected within {START_TIMEOUT_SECONDS:.0f}s; logs in "
                                   f"{self.data_dir / 'logs'}")
            await asyncio.sleep(0.2)

    def describe(self) -> str:
        """Every address, pid and log file, and the replication settings."""
        lines = [f"OrbitMQ HA quick start is running. gRPC endpoint: {self.endpoint}",
                 f"  NameServer   {self.namesrv_addr}"]
        for i, child in enumerate(self.controllers):
            lines.append(f"  controller n{i}  Remoting {self.host}:{self.controller_ports[i]}  Raft "
                         f"{self.host}:{self.raft_ports[i]}  (pid {child.pid}, log {child.log_path})")
        for i, child in enumerate(self.brokers):
            port = self.broker_ports[i]
            lines.append(f"  {BROKER_NAME} replica {i}  {self.host}:{port}  HA {self.host}:{port + 1}  "
                         f"(pid {child.pid}, log {child.log_path})")
        lines.append(f"  proxy        {self.endpoint}")
        lines.append(f"  controllerAddr={self.controller_addr}")
        lines.append("  broker settings: " + " ".join(f"{k}={v}" for k, v in HA_BROKER_SETTINGS.items()))
        if self.metrics_endpoint:
            lines.append(f"  Prometheus metrics {self.metrics_endpoint} (all services; readiness "
                         f"{self.metrics_endpoint.removesuffix('/metrics')}/ready)")
        lines.append(f"  data {self.data_dir}")
        return "\n".join(lines)

    def _merge_child_metrics(self) -> None:
        """Every child's /metrics joins this process's endpoint; /ready needs every child running."""
        from orbitmq.common.metrics import hub

        for port, child in zip(self.child_metrics_ports, self.controllers + self.brokers, strict=False):
            hub().add_remote(self.host, port, child.name)
        children = self.controllers + self.brokers
        hub().add_readiness(f"local --ha children:{id(self):x}", lambda: all(
            c.proc is not None and c.proc.returncode is None for c in children) or "a child process exited")

    async def shutdown(self) -> None:
        from orbitmq.common.metrics import hub

        hub().remove_readiness(f"local --ha children:{id(self):x}")
        for port in self.child_metrics_ports:
            hub().remove_remote(self.host, port)
        if self.proxy is not None:
            proxy, self.proxy = self.proxy, None
            with contextlib.suppress(Exception):
                await proxy.shutdown()
        await asyncio.gather(*(c.stop() for c in self.brokers), return_exceptions=True)
        await asyncio.gather(*(c.stop() for c in self.controllers), return_exceptions=True)
        if self.namesrv is not None:
            namesrv, self.namesrv = self.namesrv, None
            with contextlib.suppress(Exception):
                await namesrv.shutdown()


async def sync_state_set(controller_addrs: list[str], broker_name: str) -> set[str]:
    """A broker set's SyncStateSet as addresses, asked of the controller leader (1005, then 1006);
    empty when no controller answers."""
    from orbitmq.client import MQClientAPI
    from orbitmq.common.fastjson import loads
    from orbitmq.remoting.codes import RequestCode, ResponseCode

    api = MQClientAPI(timeout=2.0)
    try:
        for addr in controller_addrs:
            try:
                meta = await api.invoke(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
            except Exception:  # noqa: BLE001 -- a dead controller: ask the next
                continue
            fields = meta.ext_fields or {} if meta.code == ResponseCode.SUCCESS else {}
            leader = fields.get("controllerLeaderAddress")
            if not leader:
                continue
            response = await api.call(leader, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                      body=f'["{broker_name}"]'.encode())
            info = loads(response.body.decode("utf-8")).get("replicasInfoTable", {}).get(broker_name, {})
            return {m["brokerAddress"] for m in info.get("inSyncReplicas", [])}
        return set()
    finally:
        await api.close()


def _free_ports(host: str, count: int) -> list[int]:
    """Ports the OS hands out now (held together, so they differ), for the children's metrics."""
    import socket

    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            socks.append(sock)
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _ports(text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    if not text:
        return default
    return tuple(int(p) for p in text.split(","))


async def run_ha(args) -> int:
    """`orbitmq local --ha`: start, print, wait for Ctrl-C / SIGTERM, stop everything."""
    from orbitmq.common.config import parse_cli_overrides
    from orbitmq.common.runtime import stop_on_signals
    from orbitmq.local import client_example, with_default_metrics

    cluster = HALocalCluster(args.data_dir, args.host, args.namesrv_port, args.proxy_port,
                             _ports(args.controller_ports, DEFAULT_CONTROLLER_PORTS),
                             _ports(args.raft_ports, DEFAULT_RAFT_PORTS),
                             _ports(args.broker_ports, DEFAULT_BROKER_PORTS),
                             with_default_metrics(parse_cli_overrides(args.overrides), args.host),
                             log_level=args.log_level)
    stop = asyncio.Event()
    stop_on_signals(stop)
    await cluster.start()
    freeze_startup_objects()
    print(cluster.describe(), flush=True)
    print(f"Broker master: {await cluster.master_addr()} (kill -9 its pid to watch a failover)", flush=True)
    print("Send a first message with the official client (pip install rocketmq-python-client):", flush=True)
    print(client_example(cluster.endpoint), flush=True)
    print("Press Ctrl-C to stop.", flush=True)
    watchers = [asyncio.create_task(c.wait()) for c in cluster.controllers + cluster.brokers]

    def exited(task: asyncio.Task[int]) -> None:
        if not stop.is_set() and not task.cancelled() and task.exception() is None:
            child = (cluster.controllers + cluster.brokers)[watchers.index(task)]
            print(f"orbitmq local --ha: {child.name} (pid {child.pid}) exited with code {task.result()}; "
                  f"the others keep running", file=sys.stderr, flush=True)

    for task in watchers:
        task.add_done_callback(exited)
    try:
        await stop.wait()
    finally:
        stop.set()
        await cluster.shutdown()
        for task in watchers:
            task.cancel()
        print("OrbitMQ stopped.", flush=True)
    return 0

