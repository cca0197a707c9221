"""Controller request/response headers (upstream's ``protocol/header/controller``), with its extFields names.

Required fields are the ones upstream marks @CFNotNull; ``invokeTime`` is informational and
optional here so a hand-written request (tests, scripts) does not need it.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.remoting.headers import CommandCustomHeader, b, i, s


@dataclass(kw_only=True)
class AlterSyncStateSetRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")
    master_broker_id: int = i("masterBrokerId")
    master_epoch: int = i("masterEpoch")
    invoke_time: int = i("invokeTime", 0)


@dataclass(kw_only=True)
class ElectMasterRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName", "")
    broker_name: str = s("brokerName")
    broker_id: int = i("brokerId", -1)
    designate_elect: bool = b("designateElect", False)
    invoke_time: int = i("invokeTime", 0)


@dataclass(kw_only=True)
class RegisterBrokerToControllerRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName")
    broker_name: str = s("brokerName")
    broker_id: int = i("brokerId")
    broker_address: str = s("brokerAddress")
    invoke_time: int = i("invokeTime", 0)


@dataclass(kw_only=True)
class GetReplicaInfoRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class GetNextBrokerIdRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName")
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class ApplyBrokerIdRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName")
    broker_name: str = s("brokerName")
    applied_broker_id: int = i("appliedBrokerId")
    register_check_code: str = s("registerCheckCode")


@dataclass(kw_only=True)
class CleanControllerBrokerDataRequestHeader(CommandCustomHeader):
    cluster_name: str | None = s("clusterName", None)
    broker_name: str = s("brokerName")
    broker_controller_ids_to_clean: str | None = s("brokerControllerIdsToClean", None)
    is_clean_living_broker: bool = b("isCleanLivingBroker", False)
    invoke_time: int = i("invokeTime", 0)


@dataclass(kw_only=True)
class NotifyBrokerRoleChangedRequestHeader(CommandCustomHeader):
    master_address: str | None = s("masterAddress", None)
    master_epoch: int = i("masterEpoch")
    sync_state_set_epoch: int = i("syncStateSetEpoch")
    master_broker_id: int | None = i("masterBrokerId", None)


@dataclass(kw_only=True)
class GetMetaDataResponseHeader(CommandCustomHeader):
    group: str | None = s("group", None)
    controller_leader_id: str | None = s("controllerLeaderId", None)
    controller_leader_address: str | None = s("controllerLeaderAddress", None)
    is_leader: bool = b("isLeader", False)
    peers: str | None = s("peers", None)
