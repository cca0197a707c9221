"""The 3-replica controller-mode broker set of `orbitmq bench rocketmq` (``--only ...,replicas3``).

Per side, after its single-broker figures: a NameServer, one controller, three brokers of one
broker set in controller mode (``enableControllerMode=true``, brokerId -1, elected by the
controller from the SyncStateSet) and a proxy, all of that side's kind; Apache's controller is
ControllerStartup (DLedger), OrbitMQ's is ``orbitmq controller`` (Raft). Every broker has
``allAckInSyncStateSet=true``, so a send is acknowledged once every replica of the SyncStateSet has
it (AutoSwitchHAService's confirm offset): the figures are the cost of synchronous three-way
replication, not of a master writing alone. Measured once the master is elected and all three
replicas are in its SyncStateSet: grpc.aio sends through the proxy and the Remoting producer's
single sends to the master, each with the server CPU per message of proxy, master, slaves and
controller.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orbitmq.bench.load import LoadOptions, run_send_load

BROKER_NAME = "bench-r3"
CLUSTER = "DefaultCluster"
REPLICAS = 3
# RocketMQ's own keys, the same on both kinds (BrokerConfig, MessageStoreConfig): the set forms
# within seconds; the intervals are those of an idle broker and cost nothing per message.
SET_KEYS: dict[str, object] = {
    "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerId": -1, "brokerRole": "SLAVE",
    "enableControllerMode": "true", "allAckInSyncStateSet": "true", "brokerHeartbeatInterval": 1000,
    "syncBrokerMetadataPeriod": 1000, "checkSyncStateSetPeriod": 1000, "syncControllerMetadataPeriod": 2000,
    "registerNameServerPeriod": 5000, "autoCreateTopicEnable": "false",
}
CONTROLLER_KEYS: dict[str, object] = {"scanNotActiveBrokerInterval": 1000, "scanInactiveMasterInterval": 1000}
FORM_TIMEOUT = 120.0  # four JVMs starting on two cores, then an election
ORBIT_CONTROLLER_BOOT = "The Controller boot success"  # tests/support/ha_cluster.py


def _side_class() -> type:
    from orbitmq.bench.rocketmq import Side  # here: rocketmq.py imports this module
    return Side


async def _set_formed(namesrv: str, controller: str, members: set[str]) -> str:
    """The master's address once the controller's SyncStateSet holds every replica and the
    NameServer routes the master as brokerId 0 (CONTROLLER_GET_SYNC_STATE_DATA, 1006)."""
    from orbitmq.client import MQClientAPI
    from orbitmq.common.fastjson import loads
    from orbitmq.remoting.codes import RequestCode
    api = MQClientAPI(timeout=5)
    deadline = time.monotonic() + FORM_TIMEOUT
    last: object = None
    try:
        while time.monotonic() < deadline:
            try:
                response = await api.call(controller, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                          body=json.dumps([BROKER_NAME]).encode())
                info = loads(response.body.decode("utf-8")).get("replicasInfoTable", {}).get(BROKER_NAME, {})
                in_sync = {m["brokerAddress"] for m in info.get("inSyncReplicas", [])}
                cluster = await api.get_cluster_info(namesrv)
                data = cluster.broker_addr_table.get(BROKER_NAME)
                master = info.get("masterAddress")
                last = (info, dict(data.broker_addrs) if data else {})
                if in_sync == members and master in members and data and data.broker_addrs.get(0) == master:
                    return master
            except Exception as e:  # noqa: BLE001 -- not up yet: asked again
                last = e
            await asyncio.sleep(0.5)
    finally:
        await api.close()
    raise RuntimeError(f"the 3-replica set did not form within {FORM_TIMEOUT:.0f} s: {last}")


def _replica_set(kind: str, workdir: Path, broker_keys: dict[str, object]) -> Any:
    """A Side (orbitmq.bench.rocketmq) whose broker is the elected master of three replicas."""
    side_class = _side_class()

    class ReplicaSet(side_class):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            from tests.support.net import free_port, free_port_pair
            keys = {**SET_KEYS, **broker_keys}
            addrs: list[str] = []
            if kind == "apache":
                from tests.support.apache import Apache, wait_proxy
                apache = Apache(self.runner, fast_start=False)
                ns_proc, self.namesrv = apache.namesrv()
                (ctl_proc, controller), = apache.controllers(1, group="BenchCtl", **CONTROLLER_KEYS)
                brokers = [apache.broker(self.namesrv, f"apache-r{i}", broker_name=BROKER_NAME, broker_id=-1,
                                         store=self.runner.workdir / f"store-{i}", wait=False,
                                         **{**keys, "controllerAddr": controller}) for i in range(REPLICAS)]
                for b in brokers:  # the boot line: the NameServer lists a replica once it has a role
                    b.process.wait_ready(("127.0.0.1", int(b.addr.rsplit(":", 1)[1])), "boot success", FORM_TIMEOUT)
                addrs = [b.addr for b in brokers]
                pids = {b.addr: b.process.pid for b in brokers}
                self.broker = asyncio.run(_set_formed(self.namesrv, controller, set(addrs)))
                proxy_proc, self.endpoint, _ = apache.proxy(self.namesrv, wait=False, **_proxy_keys())
                wait_proxy(proxy_proc, self.endpoint)
                self.store = self.runner.workdir / f"store-{addrs.index(self.broker)}"
            else:
                from tests.support.services import start_broker, start_namesrv, write_properties
                ns_proc, self.namesrv = start_namesrv(self.runner, name="orbit-namesrv")
                raft, port = free_port(), free_port()
                conf = write_properties(self.runner.workdir / "controller.conf", {
                    "controllerDLegerGroup": "BenchCtl", "controllerDLegerPeers": f"n0-127.0.0.1:{raft}",
                    "controllerDLegerSelfId": "n0", "listenPort": port, "bindAddress": "127.0.0.1",
                    "controllerStorePath": self.runner.workdir / "controller-store", **CONTROLLER_KEYS})
                ctl_proc = self.runner.start("controller", ["-c", str(conf)], ready_port=port,
                                             ready_text=ORBIT_CONTROLLER_BOOT, name="orbit-controller")
                controller = f"127.0.0.1:{port}"
                pids = {}
                for i in range(REPLICAS):
                    bport = free_port_pair()
                    proc, addr = start_broker(self.runner, self.runner.workdir, self.namesrv, f"orbit-r{i}",
                                              port=bport, store=self.runner.workdir / f"store-{i}",
                                              haListenPort=bport + 1, mappedFileSizeCommitLog=64 * 1024 * 1024,
                                              controllerAddr=controller, **keys)
                    addrs.append(addr)
                    pids[addr] = proc.pid
                self.broker = asyncio.run(_set_formed(self.namesrv, controller, set(addrs)))
                self.endpoint = f"127.0.0.1:{free_port()}"
                proxy_proc = self.runner.start(
                    "proxy", ["-n", self.namesrv, "--port", self.endpoint.rsplit(":", 1)[1],
                              *(f"{k}={v}" for k, v in _proxy_keys().items())],
                    ready_port=int(self.endpoint.rsplit(":", 1)[1]), name="orbit-proxy")
                self.store = self.runner.workdir / f"store-{addrs.index(self.broker)}"
            slaves = [a for a in addrs if a != self.broker]
            self.pids = {"namesrv": ns_proc.pid, "controller": ctl_proc.pid, "proxy": proxy_proc.pid,
                         "broker": pids[self.broker], **{f"slave{i + 1}": pids[a] for i, a in enumerate(slaves)}}

    return ReplicaSet(kind, workdir, broker_keys)


def _proxy_keys() -> dict[str, object]:
    from orbitmq.bench.rocketmq import PROXY_KEYS
    return PROXY_KEYS


def _fold_slaves(out: dict[str, Any], name: str) -> None:
    """The two slaves' CPU per message as one figure, ``<name>_cpu_us_slaves``."""
    parts = [out.pop(f"{name}_cpu_us_slave{i}", None) for i in range(1, REPLICAS)]
    out[f"{name}_cpu_us_slaves"] = sum(parts) if all(p is not None for p in parts) else None


def measure_replicas(kind: str, args: argparse.Namespace, broker_keys: dict[str, object]) -> dict[str, Any]:
    """Start ``kind``'s 3-replica set, measure its two loads, stop it -> figures keyed ``replicas3_*``."""
    from orbitmq.bench.rocketmq import TOPICS, _remoting, _with_cpu
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"orbitmq-bench-rocketmq-r3-{kind}-") as tmp:
        side = _replica_set(kind, Path(tmp), broker_keys)
        print(f"== {kind}: starting NameServer, controller, {REPLICAS} brokers in controller mode, proxy",
              flush=True)
        started = time.monotonic()
        try:
            side.start()
            asyncio.run(side.create_topics())
            asyncio.run(side.first_ack())
            out["replicas3_startup_s"] = time.monotonic() - started
            print(f"  master {side.broker} elected, SyncStateSet of {REPLICAS}, first acknowledged send after "
                  f"{out['replicas3_startup_s']:.1f} s", flush=True)
            if args.warmup > 0:
                asyncio.run(run_send_load(LoadOptions(endpoint=side.endpoint, topic=TOPICS[0], size=args.size,
                                                      concurrency=args.window, duration=args.warmup)))

            def grpc_load() -> tuple[float, int]:
                s = asyncio.run(run_send_load(LoadOptions(endpoint=side.endpoint, topic=TOPICS[0], size=args.size,
                                                          concurrency=args.window, duration=args.duration)))
                out["replicas3_grpc_sends_errors"] = s.errors
                return s.summary()["tps"], s.messages
            _with_cpu(side.pids, out, "replicas3_grpc_sends", grpc_load)
            _fold_slaves(out, "replicas3_grpc_sends")
            _remoting(side, args, b"x" * args.size, out, modes=(("single", "replicas3_remoting_sends"),))
            _fold_slaves(out, "replicas3_remoting_sends")
        except Exception:
            print(side.runner.report()[-6000:], file=sys.stderr)
            raise
        finally:
            side.stop()
    return out
