"""Slave Acting Master: the smallest live brokerId of a broker set runs its special services.

Classic master/slave with ``enableSlaveActingMaster=true`` and no controller: when the master is
gone, the slave with the smallest brokerId takes over what needs no new write leader: delay-level
and timer delivery, POP revive, the transaction check (BrokerController#changeSpecialServiceStatus),
and serves reads and consumer offsets as the NameServer routes clients to it (its queues shown
read-only as brokerId 0, RouteInfoManager#pickupTopicRouteData). Its own writes go through the
EscapeBridge. It learns who the smallest live member is in two ways, as upstream:

- NOTIFY_MIN_BROKER_ID_CHANGE (905), which a NameServer with notifyMinBrokerIdChanged sends when
  the set's smallest brokerId changes (AdminBrokerProcessor#notifyMinBrokerIdChange);
- every syncBrokerMemberGroupPeriod, the set's live members from the NameServer
  (BrokerController#syncBrokerMemberGroup).

Brokers with acting master on also heartbeat the NameServers every brokerHeartbeatInterval and
register with heartbeatTimeoutMillis = brokerNotActiveTimeoutMillis (10 s), so a dead master leaves
the route in seconds rather than the default 120 s. When the master is back (smallest id 0 again),
the slave stops acting and copies from it again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from orbitmq.common.aio import cancel_and_wait
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting.headers import NotifyMinBrokerIdChangeRequestHeader
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

MASTER_ID = 0
NOTIFY_LOCK_WAIT_S = 3.0  # updateMinBroker's tryLock(3000 ms) for a notification


class ActingMasterService:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # BrokerController#minBrokerIdInGroup / minBrokerAddrInGroup: 0 until told otherwise.
        self.min_broker_id_in_group = MASTER_ID
        self.min_broker_addr_in_group: str | None = None
        # Not registering or heartbeating until BrokerPreOnlineService says so (pre_online.py).
        self.isolated = False
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def enabled(self) -> bool:
        return self.broker.config.enable_slave_acting_master

    @property
    def acting(self) -> bool:
        """True while this slave is the smallest live brokerId of its set."""
        cfg = self.broker.config
        return self.enabled and cfg.broker_id != MASTER_ID and self.min_broker_id_in_group == cfg.broker_id

    def register_fields(self) -> dict[str, str]:
        """REGISTER_BROKER's enableActingMaster and heartbeatTimeoutMillis (registerBrokerAll)."""
        cfg = self.broker.config
        fields = {"enableActingMaster": "true" if self.enabled else "false"}
        if self.enabled:
            fields["heartbeatTimeoutMillis"] = str(cfg.broker_not_active_timeout_millis)
        return fields

    def start(self) -> None:
        if not self.enabled:
            return
        self._tasks = [asyncio.create_task(self._heartbeat_loop(), name="brokerHeartbeat"),
                       asyncio.create_task(self._member_group_loop(), name="syncBrokerMemberGroup")]

    async def shutdown(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            await cancel_and_wait(task)

    # ---- the loops ----------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            if not self.isolated:
                try:
                    await self.send_heartbeat()
                except Exception:
                    log.exception("sendHeartbeat failed")
            await asyncio.sleep(max(self.broker.config.broker_heartbeat_interval, 100) / 1000.0)

    async def send_heartbeat(self) -> None:
        broker, cfg = self.broker, self.broker.config
        addrs = cfg.namesrv_addr_list()
        if not addrs or broker.fenced:
            return
        version = (broker.topic_config_manager.data_version.to_json_dict()
                   if cfg.compatible_with_old_name_srv else None)
        await broker.outer_api.send_heartbeat(
            addrs, cluster_name=cfg.broker_cluster_name, broker_addr=cfg.broker_addr, broker_name=cfg.broker_name,
            broker_id=cfg.broker_id, timeout_millis=cfg.send_heartbeat_timeout_millis, data_version=version)

    async def _member_group_loop(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            try:
                await self.sync_broker_member_group()
            except Exception:
                log.exception("sync BrokerMemberGroup error.")
            await asyncio.sleep(max(self.broker.config.sync_broker_member_group_period, 100) / 1000.0)

    async def member_group(self) -> dict[int, str] | None:
        cfg = self.broker.config
        return await self.broker.outer_api.sync_broker_member_group(
            cfg.namesrv_addr_list(), cluster_name=cfg.broker_cluster_name, broker_name=cfg.broker_name,
            compatible=cfg.compatible_with_old_name_srv)

    async def sync_broker_member_group(self) -> None:
        addrs = await self.member_group()
        if not addrs:
            log.debug("Couldn't find any broker member from namesrv in %s/%s", self.broker.config.broker_cluster_name,
                      self.broker.config.broker_name)
            return
        if not self.isolated:
            min_id = min(addrs)
            await self.update_min_broker(min_id, addrs[min_id])

    # ---- the change ---------------------------------------------------------------------------

    async def update_min_broker(self, min_broker_id: int, min_broker_addr: str | None,
                                offline_broker_addr: str | None = None, master_ha_addr: str | None = None,
                                *, notified: bool = False) -> None:
        """BrokerController#updateMinBroker: a periodic sync skips when a change is in progress
        (tryLock) and infers the offline broker; a notification waits up to 3 s and says it."""
        cfg = self.broker.config
        if not self.enabled or cfg.broker_id == MASTER_ID:
            return
        if self._lock.locked() and not notified:
            return
        try:
            await asyncio.wait_for(self._lock.acquire(), NOTIFY_LOCK_WAIT_S)
        except TimeoutError:
            log.error("Update min broker error: lock not acquired in %.0f s", NOTIFY_LOCK_WAIT_S)
            return
        try:
            if min_broker_id == self.min_broker_id_in_group:
                return
            if not notified and min_broker_id > self.min_broker_id_in_group:
                offline_broker_addr = self.min_broker_addr_in_group
            await self._on_min_broker_change(min_broker_id, min_broker_addr, offline_broker_addr, master_ha_addr)
        finally:
            self._lock.release()

    async def _on_min_broker_change(self, min_broker_id: int, min_broker_addr: str | None,
                                    offline_broker_addr: str | None, master_ha_addr: str | None) -> None:
        broker = self.broker
        log.info("Min broker changed, old: %s-%s, new %s-%s", self.min_broker_id_in_group,
                 self.min_broker_addr_in_group, min_broker_id, min_broker_addr)
        self.min_broker_id_in_group = min_broker_id
        self.min_broker_addr_in_group = min_broker_addr
        if broker.config.broker_id == min_broker_id:
            # Beyond upstream: the copies taken from the master carry its DataVersion, and a
            # returning master keeps its own table unless the slave's is not older
            # (BrokerPreOnlineService#syncMetadataReverse). A master that died before persisting
            # starts with a fresh, newer version and would throw away every offset committed while
            # the slave acted; one step here makes the acting slave's tables the newer ones.
            broker.consumer_offset_manager.data_version.next_version()
            broker.schedule_message_service.offsets.data_version.next_version()
        await broker.change_special_service_status(broker.config.broker_id == min_broker_id)
        sync = broker.slave_synchronize
        if offline_broker_addr and offline_broker_addr == sync.master_addr:
            self._on_master_offline()
        if min_broker_id == MASTER_ID and min_broker_addr:
            self._on_master_online(min_broker_addr, master_ha_addr)
        if min_broker_id == MASTER_ID:
            # PullRequestHoldService#notifyMasterOnline: held pulls answer now, so their clients
            # go back to the master.
            broker.pull_request_hold_service.notify_master_online()

    def _on_master_offline(self) -> None:
        """Stop copying from the master and stop dialling its HA port."""
        broker = self.broker
        sync = broker.slave_synchronize
        log.info("master %s of %s is offline", sync.master_addr, broker.config.broker_name)
        sync.master_addr = None
        broker.clear_master_ha_address()

    def _on_master_online(self, master_addr: str, master_ha_addr: str | None) -> None:
        """Copy from the master again; its HA address comes with the notification or with the next
        registration's answer (registered every second while unknown)."""
        broker = self.broker
        log.info("master %s of %s is online (HA %s)", master_addr, broker.config.broker_name, master_ha_addr)
        broker.slave_synchronize.master_addr = master_addr
        if master_ha_addr:
            broker.set_master_ha_address(master_ha_addr)
        else:
            broker.wake_register()

    # ---- NOTIFY_MIN_BROKER_ID_CHANGE (905) ----------------------------------------------------

    async def process_notify_min_broker_id_change(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = NotifyMinBrokerIdChangeRequestHeader.from_command(request)
        log.info("min broker id changed, prev %s, new %s (%s), offline %s", self.min_broker_id_in_group,
                 header.min_broker_id, header.min_broker_addr, header.offline_broker_addr)
        if header.min_broker_id is not None:
            await self.update_min_broker(header.min_broker_id, header.min_broker_addr,
                                         header.offline_broker_addr, header.ha_broker_addr, notified=True)
        return request.response_to(0)


def register(broker: BrokerController, service: ActingMasterService) -> None:
    broker.register_processor(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, service.process_notify_min_broker_id_change)
