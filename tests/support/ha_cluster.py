"""A controller-mode cluster as real processes on loopback, for chaos tests and benchmarks' tests.

Three controllers (Raft peers + Remoting), one NameServer, one broker set of three replicas
(each its own `orbitmq broker`, enableControllerMode, brokerId -1 / SLAVE as RocketMQ's quick
start, allAckInSyncStateSet) and a proxy, every port free-picked, every timing shortened so a
failover takes seconds. Replicas can be killed (SIGKILL), stopped (SIGSTOP/SIGCONT) and
restarted with the same data; the helpers ask the NameServer, the controllers and the brokers
what they see (master, SyncStateSet, epochs).
"""

from __future__ import annotations

import asyncio
import json
import signal
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbitmq.auth.client import install_signing
from orbitmq.client import MQClientAPI
from orbitmq.common.fastjson import loads
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode

from .net import free_port
from .netns import Bridge, Namespace
from .process import ManagedProcess, ProcessRunner
from .services import aboot_broker, astart_namesrv, write_broker_conf, write_properties

CLUSTER = "HACluster"
BROKER_NAME = "broker-ha"
RAFT_GROUP = "OrbitController"
PROXY_BOOT_TEXT = "The proxy boot success"
CONTROLLER_BOOT_TEXT = "The Controller boot success"

# Short timings (RocketMQ's keys): liveness in ~3 s, metadata polls every second, slaves that
# stop acknowledging leave the SyncStateSet after 3 s.
CONTROLLER_TIMINGS = {"scanNotActiveBrokerInterval": "1000", "scanInactiveMasterInterval": "1000"}
BROKER_TIMINGS = {
    "controllerHeartBeatTimeoutMills": "3000", "brokerHeartbeatInterval": "500",
    "syncBrokerMetadataPeriod": "1000", "checkSyncStateSetPeriod": "1000", "syncControllerMetadataPeriod": "2000",
    "registerNameServerPeriod": "2000", "haMaxTimeSlaveNotCatchup": "3000", "haSendHeartbeatInterval": "1000",
    "haHousekeepingInterval": "6000",
}


@dataclass
class Replica:
    index: int
    port: int
    ha_port: int
    store: Path
    conf: Path
    proc: ManagedProcess | None = None
    host: str = "127.0.0.1"
    netns: Namespace | None = None  # its own network namespace when the cluster is isolated

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ControllerNode:
    index: int
    raft_port: int
    port: int
    conf: Path
    proc: ManagedProcess | None = None
    host: str = "127.0.0.1"

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"


class HACluster:
    """Build with ``HACluster(procs, tmp_path)``, then ``await start()``; ``procs`` stops everything."""

    def __init__(self, runner: ProcessRunner, root: Path, replicas: int = 3, *, all_ack: bool = True,
                 extra_broker: dict[str, str] | None = None, log_level: str = "INFO",
                 isolated: bool = False, extra_proxy: list[str] | None = None,
                 admin_credentials: tuple[str, str] | None = None) -> None:
        """``isolated``: every replica in its own network namespace (see netns.py), so that
        ``partition``/``heal`` can cut one off; the other services listen on the bridge address."""
        self.runner = runner
        self.bridge = Bridge() if isolated else None
        host = self.bridge.ip if self.bridge else "127.0.0.1"
        self.host = host
        self.root = Path(root)
        self.log_level = log_level
        self.api = MQClientAPI(timeout=3.0)
        self.extra_proxy = list(extra_proxy or [])
        if admin_credentials is not None:  # brokers with ACL 2.0 on: the test's own calls are signed
            install_signing(self.api.remoting, admin_credentials)
        self.namesrv_addr = ""
        self.proxy: ManagedProcess | None = None
        self.proxy_port = free_port()
        self.controllers = [ControllerNode(i, free_port(), free_port(), self.root / f"controller-{i}.conf",
                                           host=host) for i in range(3)]
        peers = ";".join(f"n{c.index}-127.0.0.1:{c.raft_port}" for c in self.controllers)
        for c in self.controllers:
            values = {"controllerDLegerGroup": RAFT_GROUP, "controllerDLegerPeers": peers,
                      "controllerDLegerSelfId": f"n{c.index}", "listenPort": str(c.port), "bindAddress": host,
                      "controllerStorePath": str(self.root / f"controller-{c.index}-store"), **CONTROLLER_TIMINGS}
            write_properties(c.conf, values)
        self.controller_addr = ";".join(c.addr for c in self.controllers)
        self.replicas: list[Replica] = []
        for i in range(replicas):
            port = free_port()
            replica = Replica(i, port, free_port(), self.root / f"broker-{i}", self.root / f"broker-{i}.conf")
            if self.bridge is not None:
                replica.netns = self.bridge.add_namespace()
                replica.host = replica.netns.ip
            self.replicas.append(replica)
        self.broker_values = {
            "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerId": "-1", "brokerRole": "SLAVE",
            "enableControllerMode": "true", "controllerAddr": self.controller_addr,
            "allAckInSyncStateSet": str(all_ack).lower(), "flushDiskType": "ASYNC_FLUSH",
            "mappedFileSizeCommitLog": str(16 * 1024 * 1024), "autoCreateTopicEnable": "false",
            **BROKER_TIMINGS, **(extra_broker or {}),
        }

    # ---- start / stop ----------------------------------------------------------------------------

    async def start(self, *, wait_master: float = 60.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        await asyncio.gather(*(self.start_controller(c) for c in self.controllers))
        overrides = ("bindAddress=0.0.0.0",) if self.bridge is not None else ()  # namespaces dial it
        _proc, namesrv_addr = await astart_namesrv(self.runner, *overrides, name="namesrv")
        self.namesrv_addr = namesrv_addr.replace("127.0.0.1", self.host)
        for r in self.replicas:
            write_broker_conf(r.conf, r.port, r.store, **{**self.broker_values, "brokerIP1": r.host,
                                                          "haListenPort": r.ha_port, "namesrvAddr": self.namesrv_addr})
        await asyncio.gather(*(self.start_replica(r) for r in self.replicas))
        await self.wait_master(timeout=wait_master)
        # Healthy before any fault: every replica in the SyncStateSet (a master alone in it has
        # nobody to hand over to, as upstream).
        await self.wait_all_in_sync(timeout=wait_master)
        self.proxy = await self.runner.astart(
            "proxy", ["-n", self.namesrv_addr, "--port", str(self.proxy_port), "--log-level", self.log_level,
                      f"rocketMQClusterName={CLUSTER}", *self.extra_proxy],
            ready_port=self.proxy_port, ready_text=PROXY_BOOT_TEXT, timeout=30, name="proxy")

    async def start_controller(self, c: ControllerNode) -> None:
        c.proc = await self.runner.astart("controller", ["-c", str(c.conf), "--log-level", self.log_level],
                                          ready_port=(c.host, c.port), ready_text=CONTROLLER_BOOT_TEXT, timeout=30,
                                          name=f"controller-{c.index}")

    async def start_replica(self, r: Replica, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        r.proc = await aboot_broker(self.runner, r.conf, r.port, "--log-level", self.log_level, host=r.host,
                                    timeout=timeout, name=f"broker-{r.index}",
                                    prefix=r.netns.exec_prefix if r.netns else ())

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.proxy_port}"

    async def close(self) -> None:
        await self.api.close()
        if self.bridge is not None:
            # Replicas stop while their network is still up: without it each one's shutdown
            # (unregister from the NameServer) waits out a 3 s timeout.
            for r in reversed(self.replicas):
                if r.proc is not None:
                    await r.proc.async_stop()
            self.bridge.close()

    # ---- faults ---------------------------------------------------------------------------------

    def replica_at(self, addr: str) -> Replica:
        return next(r for r in self.replicas if r.addr == addr)

    async def kill(self, target: Replica | ControllerNode) -> None:
        assert target.proc is not None
        await asyncio.to_thread(target.proc.kill)
        await self.api.remoting.close_channel(target.addr)

    def pause(self, target: Replica | ControllerNode) -> None:
        assert target.proc is not None
        target.proc.signal(signal.SIGSTOP)

    def resume(self, target: Replica | ControllerNode) -> None:
        assert target.proc is not None
        target.proc.signal(signal.SIGCONT)

    @property
    def partition_mode(self) -> str:
        return "network namespace" if self.bridge is not None else "SIGSTOP"

    def partition(self, target: Replica) -> None:
        """Cut a replica off the network; it keeps running. Without namespaces (a machine that
        does not allow them) the nearest substitute: SIGSTOP, which freezes it instead."""
        if self.bridge is not None and target.netns is not None:
            self.bridge.partition(target.netns)
        else:
            self.pause(target)

    def heal(self, target: Replica) -> None:
        if self.bridge is not None and target.netns is not None:
            self.bridge.heal(target.netns)
        else:
            self.resume(target)

    # ---- what the cluster says ------------------------------------------------------------------

    async def route_members(self) -> dict[int, str]:
        """brokerId -> address of the broker set in the NameServer ({} when unknown)."""
        try:
            info = await self.api.get_cluster_info(self.namesrv_addr)
        except Exception:  # noqa: BLE001 -- a test polls until it answers
            return {}
        data = info.broker_addr_table.get(BROKER_NAME)
        return dict(data.broker_addrs) if data else {}

    async def master_addr(self) -> str | None:
        return (await self.route_members()).get(0)

    async def wait_master(self, timeout: float = 30.0, not_addr: str | None = None) -> str:  # noqa: ASYNC109
        """The master address once the NameServer routes one (other than ``not_addr``)."""
        deadline = time.monotonic() + timeout
        while True:
            addr = await self.master_addr()
            if addr and addr != not_addr:
                return addr
            if time.monotonic() > deadline:
                raise TimeoutError(f"no master (other than {not_addr}) after {timeout}s; route "
                                   f"{await self.route_members()}")
            await asyncio.sleep(0.2)

    async def controller_metadata(self, c: ControllerNode) -> dict[str, str] | None:
        try:
            response = await self.api.invoke(c.addr, RequestCode.CONTROLLER_GET_METADATA_INFO, timeout=2)
        except Exception:  # noqa: BLE001
            return None
        return dict(response.ext_fields or {}) if response.code == ResponseCode.SUCCESS else None

    async def controller_leader(self, timeout: float = 30.0) -> ControllerNode:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while True:
            for c in self.controllers:
                if c.proc is None or not c.proc.is_running():
                    continue
                meta = await self.controller_metadata(c)
                if meta and meta.get("isLeader") == "true":
                    return c
            if time.monotonic() > deadline:
                raise TimeoutError("no controller leader")
            await asyncio.sleep(0.2)

    async def replicas_info(self) -> dict[str, Any]:
        """The leader's BrokerReplicasInfo entry of the broker set (CONTROLLER_GET_SYNC_STATE_DATA)."""
        leader = await self.controller_leader()
        response = await self.api.call(leader.addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                       body=json.dumps([BROKER_NAME]).encode())
        table = loads(response.body.decode("utf-8")).get("replicasInfoTable", {})
        return table.get(BROKER_NAME, {})

    async def sync_state_addrs(self) -> set[str]:
        info = await self.replicas_info()
        return {m["brokerAddress"] for m in info.get("inSyncReplicas", [])}

    async def wait_sync_state(self, predicate, timeout: float = 30.0) -> set[str]:  # noqa: ASYNC109
        """Poll the SyncStateSet (as addresses) until ``predicate(set)`` holds."""
        deadline = time.monotonic() + timeout
        last: set[str] = set()
        while True:
            try:
                last = await self.sync_state_addrs()
                if predicate(last):
                    return last
            except Exception:  # noqa: BLE001 -- leader changing: ask again
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"SyncStateSet still {sorted(last)} after {timeout}s")
            await asyncio.sleep(0.3)

    async def wait_all_in_sync(self, timeout: float = 40.0) -> set[str]:  # noqa: ASYNC109
        everyone = {r.addr for r in self.replicas}
        return await self.wait_sync_state(lambda sss: sss == everyone, timeout=timeout)

    async def epoch_cache(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_EPOCH_CACHE (1007) of one replica."""
        response = await self.api.call(addr, RequestCode.GET_BROKER_EPOCH_CACHE, timeout=3)
        return loads(response.body.decode("utf-8"))

    # ---- resources ------------------------------------------------------------------------------

    async def create_topic(self, topic: str, queues: int = 4, fifo: bool = False) -> None:
        """On every live replica (slaves copy it too, but a new master must have it at once)."""
        attributes = {"message.type": "FIFO"} if fifo else {}
        config = TopicConfig(topic, queues, queues, attributes=attributes, order=fifo)
        for r in self.replicas:
            if r.proc is not None and r.proc.is_running():
                await self.api.create_topic(r.addr, config)

    async def create_group(self, group: str, orderly: bool = False) -> None:
        config = SubscriptionGroupConfig(group)
        config.consume_message_orderly = orderly
        for r in self.replicas:
            if r.proc is not None and r.proc.is_running():
                await self.api.create_subscription_group(r.addr, config)

    async def wait_topic_routed(self, topic: str, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while True:
            try:
                route = await self.api.get_topic_route(self.namesrv_addr, topic)
                if any(0 in bd.broker_addrs for bd in route.broker_datas):
                    return
            except Exception:  # noqa: BLE001
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} not routed after {timeout}s")
            await asyncio.sleep(0.2)

    def consume_queue_blanks(self, topic: str) -> dict[str, int]:
        """Per replica, how many ConsumeQueue entries of ``topic`` are blank fillers (offset 0, size
        2^31-1) below the last real one: messages there cannot be consumed (a diagnosis for a loss)."""
        out: dict[str, int] = {}
        for r in self.replicas:
            blanks = 0
            for queue_dir in sorted((r.store / "consumequeue" / topic).glob("*")):
                entries = []
                for segment in sorted(queue_dir.iterdir()):
                    data = segment.read_bytes()
                    entries += [struct.unpack_from(">qiq", data, at) for at in range(0, len(data) - 19, 20)]
                while entries and entries[-1] == (0, 0, 0):
                    entries.pop()
                blanks += sum(1 for e in entries if e[0] == 0 and e[1] == 0x7FFFFFFF)
            out[r.addr] = blanks
        return out

    def proxy_possible_duplicates(self) -> int:
        """The proxy's own count, from its last "possible duplicates, N so far" log line."""
        if self.proxy is None:
            return 0
        count = 0
        for line in self.proxy.log_text().splitlines():
            if "possible duplicates, " in line and " so far" in line:
                try:
                    count = int(line.rsplit("possible duplicates, ", 1)[1].split()[0])
                except (IndexError, ValueError):
                    continue
        return count

