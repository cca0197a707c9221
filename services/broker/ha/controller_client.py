"""The broker's Remoting calls to the controllers (RocketMQ's BrokerOuterAPI controller half).

Reads and writes go to the leader; any node answers GET_METADATA_INFO (1005), which names the
leader. A leader-only call answered with CONTROLLER_NOT_LEADER (2007), or one that cannot reach
the node it thought was the leader, rediscovers the leader over every ``controllerAddr`` entry
and is sent once more. Heartbeats (904) are oneway and go to every *reachable* controller, so
a follower that becomes leader already knows which brokers are alive
(ReplicasManager#sendHeartbeatToController; DefaultBrokerHeartbeatManager on the controller).

Header fields and bodies are upstream's (the ``header/controller`` classes, ``SyncStateSet``,
``ElectMasterResponseBody``, ``BrokerReplicasInfo``); bodies are parsed leniently because a Java
controller writes fastjson (``{1:"addr"}`` map keys).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from orbitmq.auth.client import install_signing
from orbitmq.broker.config import BrokerConfig
from orbitmq.common import fastjson
from orbitmq.remoting.client import RemotingClient, split_address
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.tls import client_ssl_context

log = logging.getLogger(__name__)

RPC_TIMEOUT = 3.0
# Reachability of each controller is rescanned this often (RocketMQ: 3 s).
REACHABILITY_SCAN_PERIOD = 3.0
# With fetchControllerAddrByDnsLookup the list is refreshed this often (RocketMQ: 2 min).
ADDRESS_REFRESH_PERIOD = 120.0


class ControllerError(Exception):
    """A controller answered with a code other than the one the call needs (or no leader)."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"controller answered {code}: {remark}")
        self.code = code
        self.remark = remark


@dataclass
class SyncStateSet:
    """Body ``{"syncStateSet":[1,2],"syncStateSetEpoch":3}``."""

    members: set[int] = field(default_factory=set)
    epoch: int = 0

    def encode(self) -> bytes:
        return fastjson.dumps({"syncStateSet": sorted(self.members), "syncStateSetEpoch": self.epoch}).encode()

    @classmethod
    def decode(cls, body: bytes | None) -> SyncStateSet | None:
        if not body:
            return None
        try:
            obj = fastjson.loads(bytes(body))
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        try:
            return cls({int(x) for x in obj.get("syncStateSet") or []}, int(obj.get("syncStateSetEpoch") or 0))
        except (TypeError, ValueError):
            return None


@dataclass
class MasterInfo:
    """What register (1003), elect (1002) and get-replica-info (1004) say about the master."""

    code: int = ResponseCode.SUCCESS
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: SyncStateSet | None = None
    # Elect only: all registered replicas {id: address} when a new master was elected.
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @property
    def has_master(self) -> bool:
        return self.master_broker_id is not None and self.master_broker_id >= 0 and bool(self.master_address)


@dataclass
class ControllerMetadata:
    """GET_METADATA_INFO (1005) response header."""

    group: str | None
    leader_id: str | None
    leader_address: str | None
    is_leader: bool
    peers: str | None


def _opt_int(fields: dict[str, str], name: str) -> int | None:
    raw = fields.get(name)
    if raw is None or raw == "" or raw == "null":
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def _master_info(response: RemotingCommand) -> MasterInfo:
    fields = response.ext_fields or {}
    info = MasterInfo(code=response.code, master_broker_id=_opt_int(fields, "masterBrokerId"),
                      master_address=fields.get("masterAddress") or None,
                      master_epoch=_opt_int(fields, "masterEpoch") or 0,
                      sync_state_set_epoch=_opt_int(fields, "syncStateSetEpoch") or 0)
    return info


def _elect_body(info: MasterInfo, body: bytes | None) -> None:
    """ElectMasterResponseBody: brokerMemberGroup (only when a master was elected) + syncStateSet."""
    if not body:
        return
    try:
        obj = fastjson.loads(bytes(body))
    except ValueError:
        return
    if not isinstance(obj, dict):
        return
    try:
        group = obj.get("brokerMemberGroup")
        if isinstance(group, dict) and isinstance(group.get("brokerAddrs"), dict):
            info.broker_addrs = {int(k): str(v) for k, v in group["brokerAddrs"].items()}
        if obj.get("syncStateSet") is not None:
            info.sync_state_set = SyncStateSet({int(x) for x in obj["syncStateSet"]}, info.sync_state_set_epoch)
    except (TypeError, ValueError):
        log.warning("malformed ElectMasterResponseBody ignored: %r", bytes(body)[:200])


class ControllerClient:
    """Leader discovery, the broker-side controller requests and the heartbeat fan-out."""

    def __init__(self, config: BrokerConfig, client: RemotingClient | None = None,
                 timeout: float = RPC_TIMEOUT) -> None:
        self.config = config
        self.client = client or RemotingClient(connect_timeout=timeout)
        self._own_client = client is None
        if self._own_client:
            install_signing(self.client, config.inner_credentials())  # ACL 2.0 inner credentials
            self.client.ssl_context = client_ssl_context(config)  # tls.enable, as the broker's other calls
        self.timeout = timeout
        self.controller_addrs: list[str] = config.controller_addr_list()
        self.reachable: set[str] = set(self.controller_addrs)
        self.leader_addr: str | None = None

    async def close(self) -> None:
        if self._own_client:
            await self.client.close()

    # ---- addresses ----------------------------------------------------------------------

    async def refresh_addresses(self) -> list[str]:
        """controllerAddr split on ';', or with fetchControllerAddrByDnsLookup every address the
        names resolve to (one controller per A record, as a headless Kubernetes service)."""
        entries = self.config.controller_addr_list()
        if not self.config.fetch_controller_addr_by_dns_lookup:
            self.controller_addrs = entries
            return entries
        loop = asyncio.get_running_loop()
        found: list[str] = []
        for entry in entries:
            try:
                host, port = split_address(entry)
                infos = await loop.getaddrinfo(host, port, type=1)  # SOCK_STREAM
            except (OSError, RemotingError) as exc:
                log.warning("DNS lookup of controller address %s failed: %s", entry, exc)
                continue
            for info in infos:
                addr = f"{info[4][0]}:{port}"
                if addr not in found:
                    found.append(addr)
        if found:
            self.controller_addrs = found
        return self.controller_addrs

    async def scan_reachable(self) -> set[str]:
        """Which controllers accept a connection now; heartbeats go only to those, so a dead or
        partitioned node cannot stall them (upstream #5929)."""

        async def probe(addr: str) -> str | None:
            try:
                await asyncio.wait_for(self.client.get_channel(addr), self.timeout)
                return addr
            except (OSError, RemotingError, TimeoutError):
                return None

        results = await asyncio.gather(*(probe(a) for a in self.controller_addrs))
        self.reachable = {a for a in results if a is not None}
        return self.reachable

    # ---- leader discovery -----------------------------------------------------------------

    async def get_metadata(self, addr: str) -> ControllerMetadata:
        response = await self.client.invoke(
            addr, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise ControllerError(response.code, response.remark)
        f = response.ext_fields or {}
        return ControllerMetadata(group=f.get("group"), leader_id=f.get("controllerLeaderId"),
                                  leader_address=f.get("controllerLeaderAddress") or None,
                                  is_leader=str(f.get("isLeader", "false")).lower() == "true",
                                  peers=f.get("peers"))

    async def discover_leader(self) -> str | None:
        """Ask every controllerAddr entry (1005) and take the first non-empty leader address."""
        addrs = list(self.controller_addrs)
        if self.leader_addr in addrs:  # the known leader first: usually still right
            addrs.remove(self.leader_addr)
            addrs.insert(0, self.leader_addr)
        for addr in addrs:
            try:
                meta = await self.get_metadata(addr)
            except (OSError, RemotingError, ControllerError, TimeoutError) as exc:
                log.debug("get controller metadata from %s failed: %s", addr, exc)
                continue
            if meta.leader_address:
                if meta.leader_address != self.leader_addr:
                    log.info("controller leader is %s (%s)", meta.leader_address, meta.leader_id)
                self.leader_addr = meta.leader_address
                return self.leader_addr
        self.leader_addr = None
        return None

    async def _invoke_leader(self, code: int, fields: dict[str, str] | None = None,
                             body: bytes = b"") -> RemotingCommand:
        """Send to the leader; on 2007 or a broken leader connection, rediscover and retry once."""
        last_error: Exception | None = None
        for attempt in range(2):
            if self.leader_addr is None or attempt > 0:
                if await self.discover_leader() is None:
                    break
            assert self.leader_addr is not None
            request = RemotingCommand.request(code, dict(fields or {}), body)
            try:
                response = await self.client.invoke(self.leader_addr, request, self.timeout)
            except (OSError, RemotingError, TimeoutError) as exc:
                last_error = exc
                log.info("controller request %s to %s failed: %s", code, self.leader_addr, exc)
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                last_error = ControllerError(response.code, response.remark)
                continue
            return response
        if isinstance(last_error, ControllerError):
            raise last_error
        raise ControllerError(ResponseCode.CONTROLLER_NOT_LEADER,
                              f"no controller leader reachable among {self.controller_addrs}: {last_error}")

    # ---- broker id (1012, 1013) ---------------------------------------------------------------

    async def get_next_broker_id(self, cluster_name: str, broker_name: str) -> int:
        response = await self._invoke_leader(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                             {"clusterName": cluster_name, "brokerName": broker_name})
        if response.code != ResponseCode.SUCCESS:
            raise ControllerError(response.code, response.remark)
        next_id = _opt_int(response.ext_fields or {}, "nextBrokerId")
        if next_id is None:
            raise ControllerError(ResponseCode.SYSTEM_ERROR, "no nextBrokerId in the response")
        return next_id

    async def apply_broker_id(self, cluster_name: str, broker_name: str, broker_id: int, check_code: str) -> None:
        response = await self._invoke_leader(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
            "clusterName": cluster_name, "brokerName": broker_name, "appliedBrokerId": str(broker_id),
            "registerCheckCode": check_code})
        if response.code != ResponseCode.SUCCESS:
            raise ControllerError(response.code, response.remark)

    # ---- register, elect, replica info, alter (1003, 1002, 1004, 1001) -------------------------

    async def register_broker(self, cluster_name: str, broker_name: str, broker_id: int,
                              broker_address: str) -> MasterInfo:
        response = await self._invoke_leader(RequestCode.CONTROLLER_REGISTER_BROKER, {
            "clusterName": cluster_name, "brokerName": broker_name, "brokerId": str(broker_id),
            "brokerAddress": broker_address, "invokeTime": str(int(time.time() * 1000))})
        if response.code != ResponseCode.SUCCESS:
            raise ControllerError(response.code, response.remark)
        info = _master_info(response)
        info.sync_state_set = SyncStateSet.decode(response.body)
        return info

    async def elect_master(self, cluster_name: str, broker_name: str, broker_id: int) -> MasterInfo:
        """1002 with this broker's id (designateElect=false): SUCCESS (new master) and 2011
        (master still exists) both carry the master; other codes are returned for the caller."""
        response = await self._invoke_leader(RequestCode.CONTROLLER_ELECT_MASTER, {
            "clusterName": cluster_name, "brokerName": broker_name, "brokerId": str(broker_id),
            "designateElect": "false", "invokeTime": str(int(time.time() * 1000))})
        info = _master_info(response)
        _elect_body(info, response.body)
        return info

    async def get_replica_info(self, broker_name: str) -> MasterInfo:
        """1004; a 2008 (unknown broker set) is returned in ``code`` for the caller to re-register."""
        response = await self._invoke_leader(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": broker_name})
        info = _master_info(response)
        if response.code == ResponseCode.SUCCESS:
            info.sync_state_set = SyncStateSet.decode(response.body)
        return info

    async def alter_sync_state_set(self, broker_name: str, master_broker_id: int, master_epoch: int,
                                   proposed: set[int], sync_state_set_epoch: int) -> SyncStateSet:
        """1001: header (brokerName, masterBrokerId, masterEpoch, invokeTime), body = the proposed
        set with the CURRENT syncStateSetEpoch; success returns the new set and epoch."""
        body = SyncStateSet(set(proposed), sync_state_set_epoch).encode()
        response = await self._invoke_leader(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
            "brokerName": broker_name, "masterBrokerId": str(master_broker_id), "masterEpoch": str(master_epoch),
            "invokeTime": str(int(time.time() * 1000))}, body)
        if response.code != ResponseCode.SUCCESS:
            raise ControllerError(response.code, response.remark)
        new = SyncStateSet.decode(response.body)
        new_epoch = _opt_int(response.ext_fields or {}, "newSyncStateSetEpoch")
        if new is None:
            new = SyncStateSet(set(proposed), new_epoch if new_epoch is not None else sync_state_set_epoch + 1)
        elif new_epoch is not None:
            new.epoch = new_epoch
        return new

    # ---- heartbeat (904) ---------------------------------------------------------------------

    async def send_heartbeat(self, *, cluster_name: str, broker_name: str, broker_addr: str, broker_id: int,
                             epoch: int, max_offset: int, confirm_offset: int, heartbeat_timeout_millis: int,
                             election_priority: int) -> None:
        """Oneway BROKER_HEARTBEAT to every reachable controller; failures are only logged."""
        fields = {"clusterName": cluster_name, "brokerAddr": broker_addr, "brokerName": broker_name,
                  "brokerId": str(broker_id), "epoch": str(epoch), "maxOffset": str(max_offset),
                  "confirmOffset": str(confirm_offset), "heartbeatTimeoutMills": str(heartbeat_timeout_millis),
                  "electionPriority": str(election_priority)}

        async def one(addr: str) -> None:
            request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, dict(fields))
            try:
                await asyncio.wait_for(self.client.invoke_oneway(addr, request, self.timeout), self.timeout)
            except (OSError, RemotingError, TimeoutError) as exc:
                log.debug("heartbeat to controller %s failed: %s", addr, exc)
                with contextlib.suppress(Exception):
                    self.reachable.discard(addr)

        targets = [a for a in self.controller_addrs if a in self.reachable] or list(self.controller_addrs)
        await asyncio.gather(*(one(a) for a in targets))

