"""BrokerPreOnlineService: a broker of a replicated set with acting master goes online last.

With ``enableSlaveActingMaster`` and ``totalReplicas`` > 1 a broker starts isolated: it neither
registers with the NameServers nor heartbeats nor runs its special services. This service asks the
NameServer who else of the set is alive and then brings it online (BrokerController#startService):

- a master first takes back what a slave acting in its absence moved on (#syncMetadataReverse):
  the consumer offsets, the delay-level offsets and the timer's read position, each only when the
  slave's DataVersion is not older than its own, so offsets committed to the acting slave survive
  the master's return instead of being overwritten by the master's stale copy;
- a slave (or a broker of a set with no master) starts directly; its master's HA address comes
  with the registration.

Until that succeeds it retries every second. ``skipPreOnline`` starts without conditions.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.ha.slave_synchronize import _install, _loads
from orbitmq.common.aio import cancel_and_wait
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController
    from orbitmq.broker.failover.acting_master import ActingMasterService

log = logging.getLogger(__name__)

MASTER_ID = 0
RPC_TIMEOUT_S = 3.0
RETRY_S = 1.0


class BrokerPreOnlineService:
    def __init__(self, broker: BrokerController, acting: ActingMasterService) -> None:
        self.broker = broker
        self.acting = acting
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="BrokerPreOnlineService")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while self.acting.isolated:
            try:
                if await self.prepare_for_broker_online():
                    break
            except Exception:
                log.exception("Broker preOnline error")
            await asyncio.sleep(RETRY_S)
        log.info("broker %s is online", self.broker.config.broker_name)

    async def prepare_for_broker_online(self) -> bool:
        cfg = self.broker.config
        addrs = await self.acting.member_group()
        if addrs is None:
            log.error("syncBrokerMemberGroup from namesrv error, start service failed, will try later")
            return False
        others = {k: v for k, v in addrs.items() if k != cfg.broker_id}
        if not others:
            log.info("no other broker online, will start service directly")
            await self.start_service(cfg.broker_id, cfg.broker_addr)
            return True
        if cfg.broker_id == MASTER_ID:
            return await self._prepare_for_master_online(others)
        min_id = min(others)
        if min_id > cfg.broker_id:
            min_id = cfg.broker_id
        log.info("%s start service, min broker id is %d", "slave" if min_id == MASTER_ID else "no master online,",
                 min_id)
        await self.start_service(min_id, addrs.get(min_id, cfg.broker_addr))
        return True

    async def _prepare_for_master_online(self, slaves: dict[int, str]) -> bool:
        for broker_id in sorted(slaves):
            if not await self.sync_metadata_reverse(slaves[broker_id]):
                return False
        log.info("master preOnline complete, start service")
        await self.start_service(MASTER_ID, self.broker.config.broker_addr)
        return True

    async def start_service(self, min_broker_id: int, min_broker_addr: str | None) -> None:
        """BrokerController#startService: special services as the smallest id says, then register."""
        broker = self.broker
        log.info("%s start service, min broker id is %d, min broker addr: %s", broker.config.broker_name,
                 min_broker_id, min_broker_addr)
        self.acting.min_broker_id_in_group = min_broker_id
        self.acting.min_broker_addr_in_group = min_broker_addr
        await broker.change_special_service_status(broker.config.broker_id == min_broker_id)
        self.acting.isolated = False
        await broker.register_broker_all(force=True)

    async def start_service_without_condition(self) -> None:
        """skipPreOnline (BrokerController#startServiceWithoutCondition): a master's services run."""
        broker = self.broker
        log.info("%s start service", broker.config.broker_name)
        await broker.change_special_service_status(broker.config.broker_id == MASTER_ID)
        self.acting.isolated = False
        await broker.register_broker_all(force=True)

    # ---- syncMetadataReverse --------------------------------------------------------------------

    async def _fetch(self, addr: str, code: int, what: str) -> Any:
        client = self.broker.slave_synchronize.client
        response = await client.invoke(addr, RemotingCommand.request(code), RPC_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"{what} from {addr}: code {response.code} {response.remark}")
        return response

    async def sync_metadata_reverse(self, addr: str) -> bool:
        broker = self.broker
        log.info("Get metadata reverse from %s", addr)
        try:
            offsets_response = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET, "consumer offset")
            delay_response = await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET, "delay offset")
            timer_body = b""
            timer = broker.timer_message_store
            if timer.checkpoint is not None:
                timer_body = bytes((await self._fetch(addr, RequestCode.GET_TIMER_CHECK_POINT,
                                                      "timer checkpoint")).body or b"")
            manager = broker.consumer_offset_manager
            obj = await asyncio.to_thread(_loads, offsets_response.body, "consumer offset")
            table, version = await asyncio.to_thread(manager.parse, obj)
            if manager.data_version.compare(version) <= 0:
                log.info("%s's consumerOffset data version is larger than master broker, %s's consumerOffset "
                         "will be used.", addr, addr)
                with manager._lock:
                    manager.offset_table.update(table)
                    manager.data_version.assign_new_one(version)
                await manager.persist_async()
            delay = broker.schedule_message_service.offsets
            delay_obj = await asyncio.to_thread(_loads, delay_response.body, "delay offset")
            remote_delay = await asyncio.to_thread(delay.parse, delay_obj)
            if remote_delay[1] is not None and delay.data_version.compare(remote_delay[1]) <= 0:
                log.info("%s's scheduleMessageService data version is larger than master broker, %s's delayOffset "
                         "will be used.", addr, addr)
                await _install(delay, delay_obj, replace=False)
                await delay.persist_async()
            if timer_body:
                timer.apply_master_checkpoint(timer_body)
        except Exception as exc:
            log.error("GetMetadataReverse from %s failed: %s", addr, exc)
            return False
        return True
