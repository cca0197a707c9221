"""Replication requests a broker serves: GET_BROKER_EPOCH_CACHE (1007) and
NOTIFY_BROKER_ROLE_CHANGED (1008) in controller mode, GET_BROKER_HA_STATUS (907) in both modes.

1008 is the controller leader's oneway push after an election
(``ControllerManager#doNotifyBrokerRoleChanged``, served by
``AdminBrokerProcessor#notifyBrokerRoleChanged``): the header names the master and its epochs,
the body is the new SyncStateSet; the ReplicasManager applies it only when the epoch is newer.
1007 answers mqadmin getBrokerEpoch with the epoch file (``EpochEntryCache`` JSON,
``AdminBrokerProcessor#getBrokerEpochCache``). Both exist only in controller mode.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.ha.controller_client import SyncStateSet
from orbitmq.broker.ha.runtime_info import TransferRateSampler, ha_runtime_info
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .base import Fields, RequestError, encode_json_body

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1


class ReplicaProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._rates = TransferRateSampler()

    def register(self) -> None:
        self.broker.register_processor(RequestCode.GET_BROKER_HA_STATUS, self.get_broker_ha_status)
        self.broker.register_processor(RequestCode.GET_BROKER_EPOCH_CACHE, self.get_broker_epoch_cache)
        self.broker.register_processor(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self.notify_broker_role_changed)

    def _replicas_manager(self) -> Any:
        manager = getattr(self.broker, "replicas_manager", None)
        if manager is None or not self.broker.config.enable_controller_mode:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
        return manager

    async def get_broker_ha_status(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """HARuntimeInfo; a broker with no HA service (none started yet) answers as upstream's
        AdminBrokerProcessor does when the store has no HA service: 1 SYSTEM_ERROR."""
        if getattr(self.broker, "ha_service", None) is None or self.broker.message_store is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "haService is null")
        body = ha_runtime_info(self.broker, self._rates)
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(body))

    async def get_broker_epoch_cache(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        self._replicas_manager()
        broker = self.broker
        entries = broker.epoch_cache.all_entries() if broker.epoch_cache is not None else []
        epoch_list = []
        for entry in entries:
            epoch_list.append({"epoch": int(entry.epoch), "startOffset": int(entry.start_offset),
                               "endOffset": int(entry.end_offset) if entry.end_offset is not None else LONG_MAX})
        body = {
            "clusterName": broker.config.broker_cluster_name,
            "brokerName": broker.config.broker_name,
            "brokerId": broker.config.broker_id,
            "epochList": epoch_list,
            "maxOffset": int(broker.message_store.get_max_phy_offset()),
        }
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(body))

    async def notify_broker_role_changed(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        manager = self._replicas_manager()
        fields = Fields(request.ext_fields)
        master_address = fields.opt_str("masterAddress")
        master_epoch = fields.int("masterEpoch")
        sss_epoch = fields.int("syncStateSetEpoch", 0)
        master_broker_id = fields.long("masterBrokerId", -1)
        sss = SyncStateSet.decode(request.body)
        log.info("receive notifyBrokerRoleChanged from controller %s: master %s at %s, epoch %d, "
                 "syncStateSet %s", getattr(channel, "remote_address", "?"), master_broker_id, master_address,
                 master_epoch, sorted(sss.members) if sss else None)
        if master_broker_id >= 0:
            await manager.change_broker_role(master_broker_id, master_address, master_epoch, sss_epoch,
                                             sss.members if sss is not None else None)
        if request.is_oneway:
            return None
        return request.response_to(ResponseCode.SUCCESS)
