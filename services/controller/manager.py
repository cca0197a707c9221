"""ControllerManager: one controller node (Remoting server + Raft + heartbeats + elections).

``orbitmq controller`` runs one in its own process; ``orbitmq namesrv`` runs one next to the
NameServer when ``enableControllerInNamesrv=true``.

Writes (register, apply id, elect, alter, clean) run one at a time on the ready leader: check
against the applied state, commit the event through Raft, then answer, as DLedger's single
event thread does. Only a committed event counts, and an event whose epoch guard no longer holds
is refused at apply time, so a deposed leader can never create a second master for an epoch.

The leader also elects on its own (``brokerId=-1``): when a master's heartbeat times out or
its channel closes (``electMasterMaxRetryCount`` tries, 3 s apart), and every
``scanInactiveMasterInterval`` for sets whose master is dead while a member lives. After each
successful election it sends NOTIFY_BROKER_ROLE_CHANGED (1008, oneway) to every live member
of the set; a newer epoch supersedes a pending notify to the same address.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from orbitmq.auth.client import install_signing
from orbitmq.auth.engine import install_bootstrap_guard
from orbitmq.common import atomic_file
from orbitmq.common.aio import cancel_and_wait, periodic
from orbitmq.common.atomic_file import NewestSnapshotWriter
from orbitmq.common.metrics import hub, metrics_enabled
from orbitmq.controller.config import ControllerConfig
from orbitmq.controller.headers import NotifyBrokerRoleChangedRequestHeader
from orbitmq.controller.heartbeat import DefaultBrokerHeartbeatManager
from orbitmq.controller.metrics import ControllerMetrics
from orbitmq.controller.processor import ControllerRequestProcessor
from orbitmq.controller.raft import ControllerRaft, RaftWriteError
from orbitmq.controller.replicas_info import CheckResult, ReplicasInfoManager, sync_state_set_body
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.server import RemotingServer, server_limits
from orbitmq.remoting.tls import client_ssl_context

log = logging.getLogger("orbitmq.controller")

ELECT_RETRY_INTERVAL_SECONDS = 3.0
NOTIFY_TIMEOUT_SECONDS = 3.0
COMPACTION_CHECK_SECONDS = 10.0


class ControllerManager:
    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.heartbeat_manager = DefaultBrokerHeartbeatManager()
        self.heartbeat_manager.register_broker_inactive_listener(self._on_broker_inactive)
        self.remoting_server = RemotingServer(
            config.bind_address, config.listen_port,
            max_concurrent_requests=config.controller_request_thread_pool_queue_capacity,
            **server_limits(config))  # abusive-client limits and tls.server.mode, as every Remoting server
        self.remoting_client = RemotingClient()
        self.remoting_client.ssl_context = client_ssl_context(config)  # tls.enable (calls to brokers)
        # ACL 2.0: authenticate requests; sign the calls to brokers with the inner credentials
        install_bootstrap_guard(self.remoting_server, config)
        install_signing(self.remoting_client, config.inner_credentials())
        self.processor = ControllerRequestProcessor(self)
        self.request_slots = asyncio.Semaphore(config.controller_thread_pool_nums)
        self.raft: ControllerRaft = None  # type: ignore[assignment]  # created in start()
        self._write_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._notifies: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self._config_writer = NewestSnapshotWriter()
        self._started = False
        # metrics (services/controller/metrics.py); None when metricsExporterType=DISABLE
        self.metrics: ControllerMetrics | None = ControllerMetrics(self) if metrics_enabled(config) else None

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self.remoting_server.port

    @property
    def address(self) -> str:
        """This node's Remoting address as brokers dial it (the Raft peer host if bound to any)."""
        host = self.config.bind_address
        if host in ("", "0.0.0.0", "::"):
            raft_addr = self.config.peers()[self.config.controller_d_leger_self_id]
            host = raft_addr.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def start(self) -> None:
        if self._started:
            return
        self.config.validate()
        await self._start_metrics()
        self.remoting_server.register_default(
            self.processor.process if self.metrics is None else self.metrics.timed_processor(self.processor.process))
        self.remoting_server.on_connect(lambda ch: ch.on_close(self.heartbeat_manager.on_channel_close))
        try:
            await self.remoting_server.start()
        except BaseException:
            await self._stop_metrics()
            raise
        try:
            self.raft = ControllerRaft(self.config, self.address)
            self.raft.on_leader_ready = self._on_leader_ready
            self.raft.on_leader_lost = self._on_leader_lost
            await self.raft.start()
        except Exception:
            await self.remoting_server.close()
            await self._stop_metrics()
            raise
        self._tasks = [
            asyncio.create_task(periodic(self._scan_broker_interval, self.heartbeat_manager.scan_not_active_broker,
                                         what="scanNotActiveBroker"), name="ControllerScanNotActiveBroker"),
            asyncio.create_task(periodic(self._scan_master_interval, self.scan_inactive_master,
                                         what="scanInactiveMaster"), name="ControllerScanInactiveMaster"),
            asyncio.create_task(periodic(COMPACTION_CHECK_SECONDS, self.raft.maybe_compact,
                                         what="raftCompaction"), name="ControllerRaftCompaction"),
        ]
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self.remoting_server.close()
        await self.remoting_client.close()
        await self.raft.shutdown()
        await self._stop_metrics()
        log.info("The Controller shutdown OK")

    # ---- metrics and readiness -----------------------------------------------------------------

    async def _start_metrics(self) -> None:
        await hub().attach(self.config, self._readiness_name(), self.readiness,
                           self.metrics.collect if self.metrics is not None else None)

    async def _stop_metrics(self) -> None:
        await hub().detach(self.config, self._readiness_name(),
                           self.metrics.collect if self.metrics is not None else None)

    def _readiness_name(self) -> str:
        return f"controller {self.config.controller_d_leger_self_id}:{id(self):x}"

    def readiness(self) -> bool | str:
        """Ready when this node is in a Raft group that has a leader."""
        if self.raft is None or not self._started:
            return "starting"
        if self.raft.leader_id() is None:
            return "no Raft leader known"
        return True

    def _scan_broker_interval(self) -> float:
        return max(self.config.scan_not_active_broker_interval, 1) / 1000

    def _scan_master_interval(self) -> float:
        return max(self.config.scan_inactive_master_interval, 1) / 1000

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def is_leader_ready(self) -> bool:
        return self.raft is not None and self.raft.is_leader_ready()

    async def persist_config(self) -> None:
        """Write the live config to configStorePath after UPDATE_CONTROLLER_CONFIG."""
        data = self.config.to_properties().encode("utf-8")
        try:
            await self._config_writer.write_async(self.config.config_store_path,
                                                  atomic_file.write_file_atomically, data)
        except OSError:
            log.exception("persist controller config to %s failed", self.config.config_store_path)

    # ---- state access ------------------------------------------------------------------------

    @property
    def replicas(self) -> ReplicasInfoManager:
        return self.raft.state.replicas

    def is_alive(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        return self.heartbeat_manager.is_broker_active(cluster, broker_name, broker_id)

    async def _read(self, fn: Callable[[ReplicasInfoManager], CheckResult]) -> CheckResult:
        if self.config.is_process_read_event:
            await self.raft.read_barrier()
        with self.raft.state.lock:
            return fn(self.replicas)

    async def _write(self, fn: Callable[[ReplicasInfoManager], CheckResult]) -> CheckResult:
        """Check, commit the event, answer; one write at a time on the ready leader."""
        async with self._write_lock:
            if not self.is_leader_ready():
                raise RaftWriteError("not the leader", not_leader=True)
            with self.raft.state.lock:
                result = fn(self.replicas)
            if result.event is not None:
                propose = self.raft.propose(result.event)
                applied = await (propose if self.metrics is None else self.metrics.timed_append(propose))
                if not applied:
                    return CheckResult(ResponseCode.SYSTEM_ERROR,
                                       "The controller state changed before the request committed, retry")
            return result

    # ---- requests ----------------------------------------------------------------------------

    async def alter_sync_state_set(self, broker_name: str, master_broker_id: int, master_epoch: int,
                                   new_set: set[int], new_epoch: int) -> CheckResult:
        return await self._write(lambda r: r.check_alter_sync_state_set(
            broker_name, master_broker_id, master_epoch, new_set, new_epoch, self.is_alive))

    async def elect_master(self, broker_name: str, broker_id: int | None, designate_elect: bool) -> CheckResult:
        result = await self._write(lambda r: r.check_elect_master(
            broker_name, broker_id, designate_elect, self.is_alive,
            self.heartbeat_manager.get_broker_live_info, self.config.enable_elect_unclean_master))
        if self.metrics is not None:
            self.metrics.on_election(result.code, result.ok)
        if result.ok:
            log.info("elected master %s of %s, masterEpoch %s", result.header.get("masterBrokerId"), broker_name,
                     result.header.get("masterEpoch"))
            self._notify_role_changed(broker_name, result)
        return result

    async def register_broker(self, cluster_name: str, broker_name: str, broker_id: int,
                              broker_address: str) -> CheckResult:
        return await self._write(lambda r: r.check_register_broker(
            cluster_name, broker_name, broker_id, broker_address, self.is_alive))

    async def get_replica_info(self, broker_name: str) -> CheckResult:
        return await self._read(lambda r: r.get_replica_info(broker_name))

    async def get_sync_state_data(self, broker_names: list[str]) -> CheckResult:
        return await self._read(lambda r: r.get_sync_state_data(broker_names, self.is_alive))

    async def clean_broker_data(self, cluster_name: str | None, broker_name: str, ids: str | None,
                                clean_living: bool) -> CheckResult:
        return await self._write(lambda r: r.check_clean_broker_data(
            cluster_name, broker_name, ids, clean_living, self.is_alive))

    async def get_next_broker_id(self, cluster_name: str, broker_name: str) -> CheckResult:
        return await self._read(lambda r: r.check_get_next_broker_id(cluster_name, broker_name))

    async def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int,
                              check_code: str) -> CheckResult:
        return await self._write(lambda r: r.check_apply_broker_id(cluster_name, broker_name, broker_id,
                                                                   check_code))

    # ---- controller-triggered elections ------------------------------------------------------

    def _on_leader_ready(self, term: int) -> None:
        log.info("controller %s ready as leader (term %d), serving at %s", self.config.controller_d_leger_self_id,
                 term, self.address)

    def _on_leader_lost(self) -> None:
        log.warning("controller %s is no longer the leader", self.config.controller_d_leger_self_id)

    def _on_broker_inactive(self, cluster: str, broker_name: str, broker_id: int) -> None:
        if not self.is_leader_ready():
            return
        with self.raft.state.lock:
            found = self.replicas.get_set(broker_name)
            is_master = found is not None and found[1].master_broker_id == broker_id
        if is_master:
            log.warning("master %s-%d is inactive, electing a new master", broker_name, broker_id)
            self._spawn(self.trigger_elect_master(broker_name))

    async def trigger_elect_master(self, broker_name: str) -> bool:
        """brokerId=-1 elections, electMasterMaxRetryCount tries 3 s apart; True once a master stands."""
        for attempt in range(max(self.config.elect_master_max_retry_count, 1)):
            if not self.is_leader_ready():
                return False
            try:
                result = await self.elect_master(broker_name, -1, False)
            except RaftWriteError as exc:
                log.warning("elect master of %s failed: %s", broker_name, exc)
            else:
                if result.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
                    return True
                log.warning("elect master of %s: code %d %s (try %d)", broker_name, result.code, result.remark,
                            attempt + 1)
            if attempt + 1 < self.config.elect_master_max_retry_count:
                await asyncio.sleep(ELECT_RETRY_INTERVAL_SECONDS)
        return False

    async def scan_inactive_master(self) -> None:
        """Sets whose master is dead while a member is alive get an election."""
        if not self.is_leader_ready():
            return
        todo = []
        with self.raft.state.lock:
            for name in self.replicas.broker_names():
                replica, info = self.replicas.get_set(name)  # type: ignore[misc]
                cluster = replica.cluster_name
                # a set without a master (never elected, or after "no master") is left to its brokers:
                # electing for it here would bump the epoch and end the first-election rule
                if info.master_broker_id is None or self.is_alive(cluster, name, info.master_broker_id):
                    continue
                if any(self.is_alive(cluster, name, bid) for bid in replica.broker_id_info):
                    todo.append(name)
        for name in todo:
            try:
                result = await self.elect_master(name, -1, False)
                log.info("inactive-master scan elected in %s: code %d", name, result.code)
            except RaftWriteError as exc:
                log.warning("inactive-master scan of %s failed: %s", name, exc)

    # ---- NOTIFY_BROKER_ROLE_CHANGED ----------------------------------------------------------

    def _notify_role_changed(self, broker_name: str, result: CheckResult) -> None:
        if not self.config.notify_broker_role_changed:
            return
        master_id = int(result.header["masterBrokerId"])
        master_epoch = int(result.header["masterEpoch"])
        sss_epoch = int(result.header["syncStateSetEpoch"])
        with self.raft.state.lock:
            found = self.replicas.get_set(broker_name)
            if found is None:
                return
            replica, info = found
            cluster = replica.cluster_name
            members = replica.broker_addrs()
            sss = set(info.sync_state_set) if info.master_epoch == master_epoch else {master_id}
        header = NotifyBrokerRoleChangedRequestHeader(
            master_address=members.get(master_id), master_epoch=master_epoch, sync_state_set_epoch=sss_epoch,
            master_broker_id=master_id).to_ext_fields()
        body = sync_state_set_body(sss, sss_epoch)
        for broker_id, addr in members.items():
            if not self.is_alive(cluster, broker_name, broker_id):
                continue
            pending = self._notifies.get(addr)
            if pending is not None:
                if pending[0] > master_epoch:
                    continue
                pending[1].cancel()
            task = self._spawn(self._send_notify(addr, header, body))
            self._notifies[addr] = (master_epoch, task)
            task.add_done_callback(lambda t, a=addr: self._forget_notify(a, t))

    def _forget_notify(self, addr: str, task: asyncio.Task[Any]) -> None:
        pending = self._notifies.get(addr)
        if pending is not None and pending[1] is task:
            del self._notifies[addr]

    async def _send_notify(self, addr: str, header: dict[str, str], body: bytes) -> None:
        request = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header, body)
        request.mark_oneway()
        try:
            await self.remoting_client.invoke_oneway(addr, request, timeout=NOTIFY_TIMEOUT_SECONDS)
            log.info("notified %s of role change: %s", addr, header)
        except RemotingError as exc:
            log.warning("notify broker role changed to %s failed: %s", addr, exc)
