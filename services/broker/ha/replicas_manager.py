"""ReplicasManager: a broker's life in controller mode (RocketMQ's broker/controller/ReplicasManager).

Start-up runs INITIAL -> FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE (leader found) ->
REGISTER_TO_CONTROLLER_DONE (broker id applied and registered) -> RUNNING (role known). Until
RUNNING the broker is fenced: the store refuses puts (14 SERVICE_NOT_AVAILABLE), nothing is
registered with the NameServers and no heartbeat goes to the controllers (bar one just before
the first elect), so clients never see a replica whose role is not settled (upstream #6508).

Role changes come from the controller's push (NOTIFY_BROKER_ROLE_CHANGED, 1008), the periodic
GET_REPLICA_INFO poll (1004) and this broker's own elect (1002); each applies only when its
masterEpoch is newer than the local one, under one lock. A master keeps the SyncStateSet: a
periodic shrink check and the HA service's expand listener both send ALTER (1001) and apply
what the controller answers.

The broker side is reached through a small set of methods (``ReplicaHost``), so the state
machine can be tested against a scripted controller without a whole broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.ha.broker_identity import BrokerIdentityStore, register_check_code
from orbitmq.broker.ha.controller_client import (
    ADDRESS_REFRESH_PERIOD,
    REACHABILITY_SCAN_PERIOD,
    ControllerClient,
    ControllerError,
    MasterInfo,
)
from orbitmq.broker.outer_api import RegisterBrokerResult
from orbitmq.broker.store.config import SLAVE, SYNC_MASTER, MessageStoreConfig
from orbitmq.common.aio import cancel_and_wait
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError

log = logging.getLogger(__name__)

MASTER_ID = 0
# Start-up retries (RocketMQ): leader lookup 3 x 1 s; registration 5 tries with a random sleep
# under 1 s; the whole sequence again every 5 s.
LEADER_LOOKUP_TRIES = 3
LEADER_LOOKUP_PAUSE = 1.0
REGISTER_TRIES = 5
RETRY_SEQUENCE_PERIOD = 5.0
# The first SyncStateSet check after a promotion.
FIRST_SSS_CHECK_DELAY = 3.0
# After 2008 (the controller lost this broker set) the poll re-registers, then pauses.
REREGISTER_PAUSE = 2.0
# A slave without its master's HA address re-registers with the NameServers this often.
HA_ADDRESS_RETRY_PERIOD = 1.0

_CALL_ERRORS = (ControllerError, RemotingError, OSError, TimeoutError)


class State(enum.Enum):
    INITIAL = "INITIAL"
    FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE = "FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE"
    REGISTER_TO_CONTROLLER_DONE = "REGISTER_TO_CONTROLLER_DONE"
    RUNNING = "RUNNING"
    SHUTDOWN = "SHUTDOWN"


class ReplicaHost(Protocol):
    """What the ReplicasManager needs from its broker (BrokerController implements it)."""

    config: BrokerConfig
    store_config: MessageStoreConfig
    message_store: Any

    def set_fenced(self, fenced: bool) -> None:
        """Fenced: the store refuses puts and the broker neither registers nor heartbeats."""

    def update_state_version(self, master_epoch: int) -> None:
        """DataVersion.stateVersion of the NameServer registration := masterEpoch."""

    async def register_broker_all(self) -> dict[str, RegisterBrokerResult | None]:
        """Register with every NameServer now."""

    async def change_special_service_status(self, master: bool) -> None:
        """Delay-level delivery, POP revive…: on only on a master."""

    def start_slave_synchronize(self, master_addr: str | None) -> None:
        """Copy topics, groups and offsets from the master (Remoting address) every 3 s."""

    def stop_slave_synchronize(self) -> None: ...


class ReplicasManager:
    def __init__(self, host: ReplicaHost, ha_service: Any, epoch_cache: Any,
                 client: ControllerClient | None = None) -> None:
        self.host = host
        self.config = host.config
        self.store_config = host.store_config
        self.ha_service = ha_service
        self.epoch_cache = epoch_cache
        self.client = client or ControllerClient(host.config)
        self.identity = BrokerIdentityStore(
            host.config.broker_identity_path(host.store_config.store_path_root_dir),
            host.config.broker_cluster_name, host.config.broker_name)
        self.state = State.INITIAL
        self.broker_controller_id: int | None = None
        self.master_broker_id: int | None = None
        self.master_address: str | None = None
        self.master_epoch = 0
        self.sync_state_set: set[int] = set()
        self.sync_state_set_epoch = 0
        self._register_result: MasterInfo | None = None
        self._role_lock = asyncio.Lock()
        self._alter_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._sss_task: asyncio.Task[None] | None = None
        self._ha_addr_task: asyncio.Task[None] | None = None
        self._master_ha_addr: str | None = None
        self.role_changed = asyncio.Event()  # set on every applied role change (tests, local --ha)
        host.set_fenced(True)

    # ---- lifecycle ------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self.state is State.RUNNING

    @property
    def is_master(self) -> bool:
        return self.broker_controller_id is not None and self.master_broker_id == self.broker_controller_id

    async def start(self) -> None:
        """Begin the start-up sequence in the background (the broker boots meanwhile, fenced)."""
        if self.ha_service is not None:
            self.ha_service.sync_state_set_listener = self._on_sync_state_set_expand
        self._tasks = [
            asyncio.create_task(self._startup_loop(), name="ReplicasManager-startup"),
            asyncio.create_task(self._every(lambda: REACHABILITY_SCAN_PERIOD, self.client.scan_reachable,
                                            "scan controller reachability"), name="ReplicasManager-reachability"),
            asyncio.create_task(self._every(lambda: self.config.broker_heartbeat_interval / 1000.0,
                                            self._heartbeat_if_running, "heartbeat to controller"),
                                name="ReplicasManager-heartbeat"),
            # controllerAddr again (it may be updated at runtime), or its DNS names resolved again.
            asyncio.create_task(self._every(lambda: ADDRESS_REFRESH_PERIOD, self.client.refresh_addresses,
                                            "refresh controller addresses"), name="ReplicasManager-addresses"),
        ]

    async def shutdown(self) -> None:
        self.state = State.SHUTDOWN
        await cancel_and_wait(*self._tasks, self._sss_task, self._ha_addr_task)
        self._tasks = []
        self._sss_task = self._ha_addr_task = None
        await self.client.close()

    async def _every(self, period: Callable[[], float], action: Callable[[], Awaitable[Any]], what: str,
                     first_delay: float | None = None) -> None:
        await asyncio.sleep(period() if first_delay is None else first_delay)
        while True:
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except _CALL_ERRORS as exc:
                log.info("%s failed: %s", what, exc)
            except Exception:
                log.exception("%s failed", what)
            await asyncio.sleep(max(period(), 0.01))

    # ---- start-up state machine -----------------------------------------------------------------

    async def _startup_loop(self) -> None:
        if self.config.fetch_controller_addr_by_dns_lookup:
            with contextlib.suppress(*_CALL_ERRORS):
                await self.client.refresh_addresses()
        while True:
            try:
                if await self.start_basic_service():
                    break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller-mode start-up step failed (state %s)", self.state.value)
            log.info("controller-mode start-up not finished (state %s), retrying in %.0f s",
                     self.state.value, RETRY_SEQUENCE_PERIOD)
            await asyncio.sleep(RETRY_SEQUENCE_PERIOD)
        self._tasks.append(asyncio.create_task(
            self._every(lambda: self.config.sync_broker_metadata_period / 1000.0, self.sync_broker_metadata,
                        "sync broker metadata from controller"), name="ReplicasManager-syncBrokerMetadata"))
        self._tasks.append(asyncio.create_task(
            self._every(lambda: self.config.sync_controller_metadata_period / 1000.0, self._discover_leader,
                        "sync controller metadata"), name="ReplicasManager-syncControllerMetadata"))

    async def _discover_leader(self) -> None:
        await self.client.discover_leader()

    async def start_basic_service(self) -> bool:
        """One pass of the sequence from the current state; True once RUNNING."""
        if self.state is State.INITIAL:
            for attempt in range(LEADER_LOOKUP_TRIES):
                if await self.client.discover_leader() is not None:
                    self.state = State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE
                    break
                if attempt + 1 < LEADER_LOOKUP_TRIES:
                    await asyncio.sleep(LEADER_LOOKUP_PAUSE)
            else:
                log.warning("no controller leader among %s", self.client.controller_addrs)
                return False
        if self.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE:
            for attempt in range(REGISTER_TRIES):
                try:
                    await self.register_to_controller()
                    break
                except _CALL_ERRORS as exc:
                    log.warning("register to controller failed (try %d/%d): %s", attempt + 1, REGISTER_TRIES, exc)
                    await asyncio.sleep(random.random())
            else:
                return False
            self.state = State.REGISTER_TO_CONTROLLER_DONE
        if self.state is State.REGISTER_TO_CONTROLLER_DONE:
            info = self._register_result
            if info is None:  # a retry: ask again, the master may have changed meanwhile
                info = await self._register_broker()
            self._register_result = None
            # One heartbeat before electing, so the controller counts this broker as alive.
            with contextlib.suppress(*_CALL_ERRORS):
                await self._send_heartbeat()
            if info.has_master:
                await self.change_broker_role(info.master_broker_id, info.master_address, info.master_epoch,
                                              info.sync_state_set_epoch,
                                              info.sync_state_set.members if info.sync_state_set else None)
            elif not await self.broker_elect():
                return False
            if self.master_broker_id is None:
                return False  # no role yet (the HA service refused it): try the sequence again
            self.state = State.RUNNING
            self.host.set_fenced(False)
            log.info("controller-mode start-up done: brokerControllerId=%s, master=%s, masterEpoch=%d",
                     self.broker_controller_id, self.master_broker_id, self.master_epoch)
            if self.is_master:
                self._start_sss_check()
            # Registration was skipped while fenced; the role change asked for it.
            await self._register_to_namesrv()
        return self.state is State.RUNNING

    async def register_to_controller(self) -> None:
        """Obtain the persistent broker id (#getNextBrokerId, #applyBrokerId), then CONTROLLER_REGISTER_BROKER."""
        broker_id = await self._obtain_broker_id()
        self.broker_controller_id = broker_id
        if self.ha_service is not None:
            self.ha_service.local_broker_id = broker_id
        self._register_result = await self._register_broker()

    async def _register_broker(self) -> MasterInfo:
        assert self.broker_controller_id is not None
        info = await self.client.register_broker(self.config.broker_cluster_name, self.config.broker_name,
                                                 self.broker_controller_id, self.config.broker_addr)
        log.info("registered to controller as brokerId %d; master %s at %s, epoch %d",
                 self.broker_controller_id, info.master_broker_id, info.master_address, info.master_epoch)
        return info

    async def _obtain_broker_id(self) -> int:
        """The id from brokerIdentity; else finish a pending apply (temp file); else apply anew."""
        cluster, name = self.config.broker_cluster_name, self.config.broker_name
        broker_id = await asyncio.to_thread(self.identity.load_broker_id)
        if broker_id is not None:
            return broker_id
        temp = await asyncio.to_thread(self.identity.load_temp)
        if temp is not None:
            try:
                await self.client.apply_broker_id(cluster, name, temp.broker_id, temp.register_check_code)
            except ControllerError as exc:
                if exc.code == ResponseCode.CONTROLLER_NOT_LEADER:
                    raise
                # Refused (the id went to another broker): start over from GET_NEXT_BROKER_ID.
                log.warning("controller refused pending broker id %d (%s); applying for a new one",
                            temp.broker_id, exc)
                await asyncio.to_thread(self.identity.delete_temp)
            else:
                await asyncio.to_thread(self.identity.write_broker_id, temp.broker_id)
                return temp.broker_id
        next_id = await self.client.get_next_broker_id(cluster, name)
        check_code = register_check_code(self.config.broker_addr, int(time.time() * 1000))
        await asyncio.to_thread(self.identity.write_temp, next_id, check_code)
        try:
            await self.client.apply_broker_id(cluster, name, next_id, check_code)
        except ControllerError as exc:
            if exc.code != ResponseCode.CONTROLLER_NOT_LEADER:
                await asyncio.to_thread(self.identity.delete_temp)
            raise
        # A transport error above leaves the temp file: the retry re-applies the same id and
        # check code, which the controller accepts again (idempotent), so no id is wasted.
        await asyncio.to_thread(self.identity.write_broker_id, next_id)
        log.info("controller assigned brokerId %d to %s/%s", next_id, cluster, name)
        return next_id

    async def broker_elect(self) -> bool:
        """CONTROLLER_ELECT_MASTER with this broker's id; a returned master is adopted."""
        assert self.broker_controller_id is not None
        info = await self.client.elect_master(self.config.broker_cluster_name, self.config.broker_name,
                                              self.broker_controller_id)
        if info.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST) and info.has_master:
            await self.change_broker_role(info.master_broker_id, info.master_address, info.master_epoch,
                                          info.sync_state_set_epoch,
                                          info.sync_state_set.members if info.sync_state_set else None)
            return True
        log.warning("elect master for %s failed: code %s", self.config.broker_name, info.code)
        return False

    # ---- role changes ---------------------------------------------------------------------------

    async def change_broker_role(self, master_broker_id: int | None, master_address: str | None,
                                 master_epoch: int, sync_state_set_epoch: int,
                                 sync_state_set: set[int] | None) -> bool:
        """Apply a (master, epoch) the controller announced; only a newer masterEpoch counts."""
        async with self._role_lock:
            if master_epoch <= self.master_epoch:
                log.debug("ignore role change to master %s epoch %d: local epoch is %d", master_broker_id,
                          master_epoch, self.master_epoch)
                return False
            if master_broker_id is None or self.broker_controller_id is None:
                return False
            if master_broker_id == self.broker_controller_id:
                changed = await self._change_to_master(master_epoch, sync_state_set_epoch, sync_state_set)
            else:
                changed = await self._change_to_slave(master_address, master_epoch, master_broker_id)
            if changed:
                self.role_changed.set()
            return changed

    async def _change_to_master(self, epoch: int, sss_epoch: int, sss: set[int] | None) -> bool:
        log.info("begin to change to master, brokerName=%s, replicas=%s, epoch=%d", self.config.broker_name,
                 self.broker_controller_id, epoch)
        assert self.broker_controller_id is not None
        already_master = (self.master_broker_id == self.broker_controller_id
                          and self.config.broker_id == MASTER_ID)
        if sss is not None and sss_epoch > self.sync_state_set_epoch:
            self._apply_sync_state_set(sss, sss_epoch)
        if not already_master:
            self.host.stop_slave_synchronize()
            self._stop_ha_address_retry()
        if not await self.ha_service.change_to_master(epoch):
            log.error("the HA service refused to become master at epoch %d", epoch)
            return False
        self.config.broker_id = MASTER_ID
        self.store_config.broker_role = SYNC_MASTER
        self.master_broker_id = self.broker_controller_id
        self.master_address = self.config.broker_addr
        self.master_epoch = epoch
        if not already_master:
            await self.host.change_special_service_status(True)
        if self.is_running:
            self._start_sss_check()
        self.host.update_state_version(epoch)
        log.info("change to master done, brokerName=%s, brokerControllerId=%s, epoch=%d, syncStateSet=%s",
                 self.config.broker_name, self.broker_controller_id, epoch, sorted(self.sync_state_set))
        if self.is_running:
            self._spawn(self.check_sync_state_set)
            await self._register_to_namesrv()
        return True

    async def _change_to_slave(self, master_address: str | None, epoch: int, master_id: int) -> bool:
        log.info("begin to change to slave, brokerName=%s, brokerControllerId=%s, master=%d at %s, epoch=%d",
                 self.config.broker_name, self.broker_controller_id, master_id, master_address, epoch)
        assert self.broker_controller_id is not None
        if master_id == self.master_broker_id and self.config.broker_id != MASTER_ID:
            # The same master under a newer epoch: nothing to reconnect.
            self.master_epoch = epoch
            self.host.update_state_version(epoch)
            if self.is_running:
                await self._register_to_namesrv()
            return True
        self._stop_sss_check()
        was_master = self.store_config.broker_role != SLAVE
        self.store_config.broker_role = SLAVE
        if was_master:
            await self.host.change_special_service_status(False)
        self.config.broker_id = self.broker_controller_id
        # The HA address is learned from the NameServer registration (the master's haServerAddr).
        self._master_ha_addr = None
        if not await self.ha_service.change_to_slave(None, epoch, self.broker_controller_id):
            log.error("the HA service refused to become slave at epoch %d", epoch)
            return False
        self.master_broker_id = master_id
        self.master_address = master_address
        self.master_epoch = epoch
        self.host.start_slave_synchronize(master_address)
        self.host.update_state_version(epoch)
        log.info("change to slave done, brokerName=%s, brokerId=%d, master=%s, epoch=%d",
                 self.config.broker_name, self.broker_controller_id, master_address, epoch)
        if self.is_running:
            await self._register_to_namesrv()
        return True

    # ---- NameServer: the slave's master HA address ----------------------------------------------

    async def _register_to_namesrv(self) -> None:
        try:
            results = await self.host.register_broker_all()
        except Exception:
            log.exception("register to name servers after a role change failed")
            return
        self.on_register_results(results)

    def on_register_results(self, results: dict[str, RegisterBrokerResult | None] | None) -> None:
        """A slave takes its master's HA address from a REGISTER_BROKER answer, but only one whose
        masterAddr is the master the controller named (a stale entry of a dead master is not)."""
        if self.is_master or self.master_broker_id is None or self.state is not State.RUNNING:
            return
        for result in (results or {}).values():
            if result is None or not result.ha_server_addr:
                continue
            if self.master_address and result.master_addr and result.master_addr != self.master_address:
                continue
            if result.ha_server_addr != self._master_ha_addr:
                log.info("master HA address of %s is %s", self.config.broker_name, result.ha_server_addr)
                self._master_ha_addr = result.ha_server_addr
                self.ha_service.update_master_address(result.ha_server_addr)
            self._stop_ha_address_retry()
            return
        # Better than upstream, which waits for the next periodic registration (30 s) when the
        # slave registered before its new master did: ask again every second until it is known.
        if self._master_ha_addr is None and (self._ha_addr_task is None or self._ha_addr_task.done()):
            self._ha_addr_task = asyncio.get_running_loop().create_task(self._retry_ha_address(),
                                                                          name="ReplicasManager-haAddress")

    async def _retry_ha_address(self) -> None:
        while self._master_ha_addr is None and not self.is_master and self.state is State.RUNNING:
            await asyncio.sleep(HA_ADDRESS_RETRY_PERIOD)
            try:
                results = await self.host.register_broker_all()
            except Exception as exc:
                log.info("re-register for the master HA address failed: %s", exc)
                continue
            self.on_register_results(results)  # idempotent: the broker may have applied them already

    def _stop_ha_address_retry(self) -> None:
        task, self._ha_addr_task = self._ha_addr_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    # ---- metadata poll (1004) -------------------------------------------------------------------

    async def sync_broker_metadata(self) -> None:
        """GET_REPLICA_INFO: a newer masterEpoch changes the role (or elects when there is no
        master); on a master with the same epoch a newer SyncStateSet is adopted."""
        info = await self.client.get_replica_info(self.config.broker_name)
        if info.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            log.warning("controller has no metadata for %s: registering again", self.config.broker_name)
            with contextlib.suppress(*_CALL_ERRORS):
                await self._register_broker()
            await asyncio.sleep(REREGISTER_PAUSE)
            return
        if info.code != ResponseCode.SUCCESS:
            raise ControllerError(info.code, "get replica info failed")
        if info.master_epoch > self.master_epoch:
            if info.has_master:
                await self.change_broker_role(info.master_broker_id, info.master_address, info.master_epoch,
                                              info.sync_state_set.epoch if info.sync_state_set else 0,
                                              info.sync_state_set.members if info.sync_state_set else None)
            else:
                await self.broker_elect()
        elif info.master_epoch == self.master_epoch and self.is_master and info.sync_state_set is not None:
            if info.sync_state_set.epoch > self.sync_state_set_epoch:
                self._apply_sync_state_set(info.sync_state_set.members, info.sync_state_set.epoch)

    # ---- SyncStateSet (master) ------------------------------------------------------------------

    def _apply_sync_state_set(self, members: set[int], epoch: int) -> None:
        self.sync_state_set = set(members)
        self.sync_state_set_epoch = epoch
        if self.ha_service is not None:
            self.ha_service.set_sync_state_set(set(members), epoch)

    def _start_sss_check(self) -> None:
        if self._sss_task is None or self._sss_task.done():
            self._sss_task = asyncio.get_running_loop().create_task(
                self._every(lambda: self.config.check_sync_state_set_period / 1000.0, self.check_sync_state_set,
                            "check SyncStateSet", first_delay=FIRST_SSS_CHECK_DELAY),
                name="ReplicasManager-checkSyncStateSet")

    def _stop_sss_check(self) -> None:
        task, self._sss_task = self._sss_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def check_sync_state_set(self) -> None:
        """Shrink: drop slaves that fell behind (haMaxTimeSlaveNotCatchup) via ALTER."""
        if not self.is_master:
            return
        proposed = set(self.ha_service.maybe_shrink_sync_state_set())
        if proposed and proposed != self.sync_state_set:
            await self.alter_sync_state_set(proposed, self.sync_state_set_epoch)

    async def _on_sync_state_set_expand(self, proposed: set[int], sss_epoch: int) -> None:
        """The HA service's expand listener: a slave caught up. The ALTER carries the epoch of
        the set this manager last applied (the controller's), whatever the listener says."""
        try:
            await self.alter_sync_state_set(set(proposed), sss_epoch)
        except _CALL_ERRORS as exc:
            log.warning("expand SyncStateSet to %s failed: %s", sorted(proposed), exc)

    async def alter_sync_state_set(self, proposed: set[int], sss_epoch: int) -> bool:
        """CONTROLLER_ALTER_SYNC_STATE_SET; the controller's answer becomes the local set."""
        if not self.is_master:
            return False
        async with self._alter_lock:
            assert self.broker_controller_id is not None
            if not self.is_master:
                return False
            # An ALTER queued behind another carries the epoch that one produced.
            sss_epoch = max(sss_epoch, self.sync_state_set_epoch)
            if proposed == self.sync_state_set:
                self.ha_service.set_sync_state_set(set(proposed), sss_epoch)  # nothing left to ask
                return True
            epoch_at_send = self.master_epoch
            try:
                new = await self.client.alter_sync_state_set(self.config.broker_name, self.broker_controller_id,
                                                             self.master_epoch, proposed, sss_epoch)
            except ControllerError as exc:
                log.warning("alter SyncStateSet %s (epoch %d) refused: %s", sorted(proposed), sss_epoch, exc)
                if self.ha_service is not None:
                    # Leave "synchronizing": the local set stays what the controller last agreed.
                    self.ha_service.set_sync_state_set(set(self.sync_state_set), self.sync_state_set_epoch)
                return False
            if not self.is_master or self.master_epoch != epoch_at_send:
                return False  # the role changed while the request was out
            log.info("SyncStateSet of %s is now %s (epoch %d)", self.config.broker_name, sorted(new.members),
                     new.epoch)
            self._apply_sync_state_set(new.members, new.epoch)
            return True

    # ---- heartbeats ---------------------------------------------------------------------------

    async def _heartbeat_if_running(self) -> None:
        if self.state is State.RUNNING:
            await self._send_heartbeat()

    async def _send_heartbeat(self) -> None:
        if self.broker_controller_id is None:
            return
        store = self.host.message_store
        await self.client.send_heartbeat(
            cluster_name=self.config.broker_cluster_name, broker_name=self.config.broker_name,
            broker_addr=self.config.broker_addr, broker_id=self.broker_controller_id,
            epoch=self._last_epoch(), max_offset=int(store.get_max_phy_offset()) if store is not None else 0,
            confirm_offset=int(store.replication.get_confirm_offset()) if store is not None else 0,
            heartbeat_timeout_millis=self.config.controller_heart_beat_timeout_mills,
            election_priority=self.config.broker_election_priority)

    def _last_epoch(self) -> int:
        """The last epoch of the epoch file (what the controller's election compares first)."""
        if self.epoch_cache is None:
            return self.master_epoch
        return int(self.epoch_cache.last_epoch())

    def _spawn(self, action: Callable[[], Awaitable[Any]]) -> None:
        async def guarded() -> None:
            try:
                await action()
            except _CALL_ERRORS as exc:
                log.info("background controller call failed: %s", exc)
            except Exception:
                log.exception("background controller call failed")

        task = asyncio.get_running_loop().create_task(guarded())
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)
