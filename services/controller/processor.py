"""ControllerRequestProcessor: the controller's Remoting handlers (RocketMQ's ControllerRequestProcessor).

Any node answers GET_METADATA_INFO (1005), BROKER_HEARTBEAT (904, recorded locally), and the
config commands 1009/1010. Every other code is served by the ready Raft leader only; other
nodes answer CONTROLLER_NOT_LEADER (2007). A state change commits through Raft before the
answer; a commit that fails answers 2007 if leadership was lost meanwhile, else SYSTEM_ERROR
with the reason (DLedger's behaviour). Bad headers and bodies get SYSTEM_ERROR with the reason;
an unknown code gets REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from orbitmq.common import fastjson
from orbitmq.common.config import parse_properties_text
from orbitmq.controller.config import ControllerConfig
from orbitmq.controller.headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from orbitmq.controller.raft import RaftWriteError
from orbitmq.controller.replicas_info import CheckResult, parse_sync_state_set_body
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingCommandError
from orbitmq.remoting.headers import BrokerHeartbeatRequestHeader
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.controller.manager import ControllerManager

log = logging.getLogger("orbitmq.controller")

NOT_LEADER_REMARK = "The controller is not in leader state"

Handler = Callable[[RemotingCommand, Any], Awaitable[RemotingCommand | None]]


class ControllerRequestProcessor:
    def __init__(self, manager: ControllerManager) -> None:
        self.manager = manager
        self.local_handlers: dict[int, Handler] = {
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.CONTROLLER_GET_METADATA_INFO: self.get_metadata_info,
            RequestCode.UPDATE_CONTROLLER_CONFIG: self.update_controller_config,
            RequestCode.GET_CONTROLLER_CONFIG: self.get_controller_config,
        }
        self.leader_handlers: dict[int, Handler] = {
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_REGISTER_BROKER: self.register_broker,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
        }

    @property
    def config(self) -> ControllerConfig:
        return self.manager.config

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        code = request.code
        handler = self.local_handlers.get(code)
        leader_only = False
        if handler is None:
            handler = self.leader_handlers.get(code)
            leader_only = True
        if handler is None:
            return request.response_to(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                       f" request type {code} not supported")
        if leader_only and not self.manager.is_leader_ready():
            return request.response_to(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        try:
            async with self.manager.request_slots:
                return await handler(request, channel)
        except RemotingCommandError as exc:
            log.warning("bad controller request code=%s from %s: %s", code,
                        getattr(channel, "remote_address", "?"), exc)
            return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
        except RaftWriteError as exc:
            if exc.not_leader:
                return request.response_to(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
            return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))

    @staticmethod
    def _answer(request: RemotingCommand, result: CheckResult) -> RemotingCommand:
        return request.response_to(result.code, result.remark, result.header, result.body)

    # ---- any node ----------------------------------------------------------------------------

    async def broker_heartbeat(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = BrokerHeartbeatRequestHeader.from_command(request)
        if header.broker_id is None:
            return request.response_to(ResponseCode.CONTROLLER_INVALID_REQUEST,
                                       "Heart beat with empty brokerId")
        self.manager.heartbeat_manager.on_broker_heartbeat(
            header.cluster_name, header.broker_name, header.broker_addr, header.broker_id,
            header.heartbeat_timeout_mills, channel, header.epoch, header.max_offset, header.confirm_offset,
            header.election_priority)
        return request.response_to(ResponseCode.SUCCESS, "Heart beat success")

    async def get_metadata_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        raft = self.manager.raft
        if raft is None:  # the Remoting server is up a moment before Raft is
            header = GetMetaDataResponseHeader(group=self.config.controller_d_leger_group, is_leader=False)
            return request.response_to(ResponseCode.SUCCESS, None, header.to_ext_fields())
        header = GetMetaDataResponseHeader(
            group=self.config.controller_d_leger_group, controller_leader_id=raft.leader_id(),
            controller_leader_address=raft.leader_remoting_address(), is_leader=raft.is_leader_ready(),
            peers=raft.peers_text())
        return request.response_to(ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def update_controller_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        log.info("updateConfig called by %s", getattr(channel, "remote_address", "?"))
        if not request.body:
            return request.response_to(ResponseCode.SUCCESS)
        try:
            updates = parse_properties_text(bytes(request.body).decode("utf-8"))
        except UnicodeDecodeError as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {exc}")
        if any(key in self.config.black_listed_keys() for key in updates):
            return request.response_to(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        # Upstream merges only the keys its config already has (Configuration.mergeIfExist) and
        # answers SUCCESS: an unknown key is ignored, not refused.
        unknown = sorted(k for k in updates if k not in ControllerConfig.config_keys())
        if unknown:
            log.warning("updateControllerConfig ignores unknown keys: %s", ", ".join(unknown))
            updates = {k: v for k, v in updates.items() if k not in unknown}
            if not updates:
                return request.response_to(ResponseCode.SUCCESS)
        try:
            fresh = ControllerConfig.from_mapping({**self.config.to_dict(), **updates})
            fresh.validate()
        except ValueError as exc:
            return request.response_to(ResponseCode.INVALID_PARAMETER, str(exc))
        for fld in dataclasses.fields(fresh):
            setattr(self.config, fld.name, getattr(fresh, fld.name))
        await self.manager.persist_config()
        return request.response_to(ResponseCode.SUCCESS)

    async def get_controller_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        return request.response_to(ResponseCode.SUCCESS, None, None, self.config.to_properties().encode("utf-8"))

    # ---- leader only -------------------------------------------------------------------------

    async def alter_sync_state_set(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = AlterSyncStateSetRequestHeader.from_command(request)
        try:
            new_set, new_epoch = parse_sync_state_set_body(request.body or b"")
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"bad SyncStateSet body: {exc}")
        result = await self.manager.alter_sync_state_set(header.broker_name, header.master_broker_id,
                                                         header.master_epoch, new_set, new_epoch)
        # AlterSyncStateSetResponseHeader.newSyncStateSetEpoch is a primitive int: upstream sends it
        # (as 0) on every answer the state machine gives, refusals included
        result.header.setdefault("newSyncStateSetEpoch", "0")
        return self._answer(request, result)

    async def elect_master(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = ElectMasterRequestHeader.from_command(request)
        result = await self.manager.elect_master(header.broker_name, header.broker_id, header.designate_elect)
        return self._answer(request, result)

    async def register_broker(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = RegisterBrokerToControllerRequestHeader.from_command(request)
        result = await self.manager.register_broker(header.cluster_name, header.broker_name, header.broker_id,
                                                    header.broker_address)
        return self._answer(request, result)

    async def get_replica_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = GetReplicaInfoRequestHeader.from_command(request)
        return self._answer(request, await self.manager.get_replica_info(header.broker_name))

    async def get_sync_state_data(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        names: Any = None
        if request.body:
            try:
                names = fastjson.loads(bytes(request.body).decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                return request.response_to(ResponseCode.SYSTEM_ERROR, f"bad broker name list: {exc}")
        if not isinstance(names, list) or not names:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "not set any response code")
        return self._answer(request, await self.manager.get_sync_state_data([str(n) for n in names]))

    async def clean_broker_data(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = CleanControllerBrokerDataRequestHeader.from_command(request)
        result = await self.manager.clean_broker_data(header.cluster_name, header.broker_name,
                                                      header.broker_controller_ids_to_clean,
                                                      header.is_clean_living_broker)
        return self._answer(request, result)

    async def get_next_broker_id(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = GetNextBrokerIdRequestHeader.from_command(request)
        return self._answer(request, await self.manager.get_next_broker_id(header.cluster_name, header.broker_name))

    async def apply_broker_id(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = ApplyBrokerIdRequestHeader.from_command(request)
        result = await self.manager.apply_broker_id(header.cluster_name, header.broker_name,
                                                    header.applied_broker_id, header.register_check_code)
        return self._answer(request, result)
