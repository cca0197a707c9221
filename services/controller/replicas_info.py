"""ReplicasInfoManager: the controller's replicated state, as a pure state machine (upstream's class of the name).

Per broker set (keyed by brokerName) a BrokerReplicaInfo (registered ids and addresses) and a
SyncStateInfo (master, epochs, SyncStateSet). Requests are first *checked* against the state:
a check returns a :class:`CheckResult` (response code, remark, response header/body) and, when
the state must change, an *event*. Only events change the state, through :meth:`apply_event`,
which every Raft node runs in log order, so all nodes hold the same state. Liveness is not
replicated: checks that need it take an ``is_alive`` function from the caller (the heartbeat table).

Events are encoded like upstream's EventSerializer, ``[2-byte big-endian type][JSON]``, and carry
optional guard keys (``expectMasterEpoch``, ``expectSyncStateSetEpoch``): an event checked by a
leader that has since been deposed finds the epochs moved on and is refused at apply time, so
one epoch never gets two masters.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from orbitmq.common import fastjson
from orbitmq.controller import elect_policy
from orbitmq.controller.elect_policy import LiveInfoFn
from orbitmq.remoting.codes import ResponseCode

# (clusterName, brokerName, brokerId) -> alive?
IsAliveFn = Callable[[str, str, int], bool]
# (clusterName, brokerName, brokerId) -> heartbeat live info or None
LiveInfoLookup = Callable[[str, str, int], Any]


# ---- state ---------------------------------------------------------------------------------------

@dataclass
class BrokerReplicaInfo:
    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = 1
    # brokerId -> (address, registerCheckCode)
    broker_id_info: dict[int, tuple[str, str]] = field(default_factory=dict)

    def address(self, broker_id: int | None) -> str | None:
        entry = self.broker_id_info.get(broker_id) if broker_id is not None else None
        return entry[0] if entry else None

    def broker_addrs(self) -> dict[int, str]:
        return {bid: entry[0] for bid, entry in sorted(self.broker_id_info.items())}


@dataclass
class SyncStateInfo:
    cluster_name: str
    broker_name: str
    master_broker_id: int | None = None
    master_epoch: int = 0
    sync_state_set_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)

    def is_first_time_for_elect(self) -> bool:
        return self.master_epoch == 0


# ---- events --------------------------------------------------------------------------------------

ALTER_SYNC_STATE_SET_EVENT = 1
APPLY_BROKER_ID_EVENT = 2
ELECT_MASTER_EVENT = 3
READ_EVENT = 4
CLEAN_BROKER_DATA_EVENT = 5
UPDATE_BROKER_ADDRESS_EVENT = 6


@dataclass(frozen=True)
class AlterSyncStateSetEvent:
    broker_name: str
    new_sync_state_set: frozenset[int]
    expect_sync_state_set_epoch: int | None = None
    type_code = ALTER_SYNC_STATE_SET_EVENT

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "newSyncStateSet": sorted(self.new_sync_state_set),
                "expectSyncStateSetEpoch": self.expect_sync_state_set_epoch}


@dataclass(frozen=True)
class ApplyBrokerIdEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    new_broker_id: int
    register_check_code: str
    type_code = APPLY_BROKER_ID_EVENT

    def to_json(self) -> dict[str, Any]:
        return {"clusterName": self.cluster_name, "brokerName": self.broker_name,
                "brokerAddress": self.broker_address, "newBrokerId": self.new_broker_id,
                "registerCheckCode": self.register_check_code}


@dataclass(frozen=True)
class ElectMasterEvent:
    new_master_elected: bool
    broker_name: str
    new_master_broker_id: int | None = None
    expect_master_epoch: int | None = None
    type_code = ELECT_MASTER_EVENT

    def to_json(self) -> dict[str, Any]:
        return {"newMasterElected": self.new_master_elected, "brokerName": self.broker_name,
                "newMasterBrokerId": self.new_master_broker_id, "expectMasterEpoch": self.expect_master_epoch}


@dataclass(frozen=True)
class CleanBrokerDataEvent:
    broker_name: str
    broker_id_set_to_clean: frozenset[int] | None = None
    type_code = CLEAN_BROKER_DATA_EVENT

    def to_json(self) -> dict[str, Any]:
        ids = None if self.broker_id_set_to_clean is None else sorted(self.broker_id_set_to_clean)
        return {"brokerName": self.broker_name, "brokerIdSetToClean": ids}


@dataclass(frozen=True)
class UpdateBrokerAddressEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int
    type_code = UPDATE_BROKER_ADDRESS_EVENT

    def to_json(self) -> dict[str, Any]:
        return {"clusterName": self.cluster_name, "brokerName": self.broker_name,
                "brokerAddress": self.broker_address, "brokerId": self.broker_id}


Event = (AlterSyncStateSetEvent | ApplyBrokerIdEvent | ElectMasterEvent | CleanBrokerDataEvent
         | UpdateBrokerAddressEvent)


class EventDecodeError(ValueError):
    pass


def encode_event(event: Event) -> bytes:
    """EventSerializer: 2-byte big-endian type, then the event's JSON."""
    return struct.pack(">h", event.type_code) + fastjson.dumps(event.to_json()).encode("utf-8")


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def decode_event(data: bytes) -> Event | None:
    """The event in a log entry; None for an empty entry (leader no-op, read event)."""
    if len(data) < 2:
        return None
    (type_code,) = struct.unpack(">h", data[:2])
    if type_code == READ_EVENT or len(data) == 2:
        return None
    try:
        obj = fastjson.loads(data[2:].decode("utf-8"))
        if not isinstance(obj, dict):  # fuzz finding: AttributeError on a JSON number
            raise EventDecodeError(f"bad event of type {type_code}: not a JSON object")
        if type_code == ALTER_SYNC_STATE_SET_EVENT:
            return AlterSyncStateSetEvent(obj["brokerName"], frozenset(int(x) for x in obj["newSyncStateSet"]),
                                          _opt_int(obj.get("expectSyncStateSetEpoch")))
        if type_code == APPLY_BROKER_ID_EVENT:
            return ApplyBrokerIdEvent(obj["clusterName"], obj["brokerName"], obj["brokerAddress"],
                                      int(obj["newBrokerId"]), obj["registerCheckCode"])
        if type_code == ELECT_MASTER_EVENT:
            return ElectMasterEvent(bool(obj["newMasterElected"]), obj["brokerName"],
                                    _opt_int(obj.get("newMasterBrokerId")), _opt_int(obj.get("expectMasterEpoch")))
        if type_code == CLEAN_BROKER_DATA_EVENT:
            ids = obj.get("brokerIdSetToClean")
            return CleanBrokerDataEvent(obj["brokerName"], None if ids is None else frozenset(int(x) for x in ids))
        if type_code == UPDATE_BROKER_ADDRESS_EVENT:
            return UpdateBrokerAddressEvent(obj["clusterName"], obj["brokerName"], obj["brokerAddress"],
                                            int(obj["brokerId"]))
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise EventDecodeError(f"bad event of type {type_code}: {exc}") from None
    raise EventDecodeError(f"unknown event type {type_code}")


# ---- check results -------------------------------------------------------------------------------

@dataclass
class CheckResult:
    """What to answer, and the event (if any) that must be committed before answering SUCCESS."""

    code: int
    remark: str | None = None
    event: Event | None = None
    header: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def sync_state_set_body(members: Iterable[int], epoch: int) -> bytes:
    """SyncStateSet JSON: {"syncStateSet":[1,2],"syncStateSetEpoch":3}."""
    return fastjson.dumps({"syncStateSet": sorted(members), "syncStateSetEpoch": epoch}).encode("utf-8")


def parse_sync_state_set_body(body: bytes) -> tuple[set[int], int]:
    """Lenient SyncStateSet parse; ValueError on anything that is not one."""
    obj = fastjson.loads(bytes(body).decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("SyncStateSet body is not a JSON object")
    members = obj.get("syncStateSet") or []
    if not isinstance(members, list):
        raise ValueError("syncStateSet is not an array")
    try:
        return {int(x) for x in members}, int(obj.get("syncStateSetEpoch") or 0)
    except TypeError as exc:  # a list or an object where a number belongs
        raise ValueError(f"SyncStateSet body is malformed: {exc}") from None


def _java(value: Any) -> str:
    """A value as Java's String.format prints it (null for None)."""
    return "null" if value is None else str(value)


def _master_header(info: SyncStateInfo, replica: BrokerReplicaInfo) -> dict[str, str]:
    header = {"masterEpoch": str(info.master_epoch), "syncStateSetEpoch": str(info.sync_state_set_epoch)}
    if info.master_broker_id is not None:
        header["masterBrokerId"] = str(info.master_broker_id)
        address = replica.address(info.master_broker_id)
        if address:
            header["masterAddress"] = address
    return header


# ---- the state machine ---------------------------------------------------------------------------

class ReplicasInfoManager:
    def __init__(self) -> None:
        self.replica_info_table: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_set_info_table: dict[str, SyncStateInfo] = {}

    def _set(self, broker_name: str) -> tuple[BrokerReplicaInfo, SyncStateInfo] | None:
        replica = self.replica_info_table.get(broker_name)
        sync = self.sync_state_set_info_table.get(broker_name)
        if replica is None or sync is None:
            return None
        return replica, sync

    def is_contains_broker(self, broker_name: str) -> bool:
        return self._set(broker_name) is not None

    def broker_names(self) -> list[str]:
        return sorted(name for name in self.replica_info_table if name in self.sync_state_set_info_table)

    def get_set(self, broker_name: str) -> tuple[BrokerReplicaInfo, SyncStateInfo] | None:
        return self._set(broker_name)

    # -- checks --------------------------------------------------------------------------------

    def check_alter_sync_state_set(self, broker_name: str, master_broker_id: int, master_epoch: int,
                                   new_set: set[int], new_set_epoch: int, is_alive: IsAliveFn) -> CheckResult:
        """#alterSyncStateSet's checks, in upstream's order."""
        found = self._set(broker_name)
        if found is None:
            return CheckResult(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
        replica, info = found
        if set(new_set) == info.sync_state_set:
            return CheckResult(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                               "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")
        if info.master_broker_id is None or info.master_broker_id != master_broker_id:
            return CheckResult(ResponseCode.CONTROLLER_INVALID_MASTER,
                               f"Rejecting alter syncStateSet request because the current leader is:"
                               f"{{{_java(info.master_broker_id)}}}, not {{{_java(master_broker_id)}}}")
        if master_epoch != info.master_epoch:
            return CheckResult(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                               f"Rejecting alter syncStateSet request because the current master epoch is:"
                               f"{{{info.master_epoch}}}, not {{{master_epoch}}}")
        if new_set_epoch != info.sync_state_set_epoch:
            return CheckResult(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                               f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                               f"{{{info.sync_state_set_epoch}}}, not {{{new_set_epoch}}}")
        for broker_id in sorted(new_set):
            if broker_id not in replica.broker_id_info:
                return CheckResult(ResponseCode.CONTROLLER_INVALID_REPLICAS,
                                   f"Rejecting alter syncStateSet request because the replicas {{{broker_id}}} "
                                   f"don't exist")
            if not is_alive(replica.cluster_name, broker_name, broker_id):
                return CheckResult(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                                   f"Rejecting alter syncStateSet request because the replicas {{{broker_id}}} "
                                   f"don't alive")
        if info.master_broker_id not in new_set:
            return CheckResult(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                               f"Rejecting alter syncStateSet request because the newSyncStateSet don't "
                               f"contains origin leader {{{info.master_broker_id}}}")
        epoch = info.sync_state_set_epoch + 1
        return CheckResult(ResponseCode.SUCCESS, None,
                           AlterSyncStateSetEvent(broker_name, frozenset(new_set), info.sync_state_set_epoch),
                           {"newSyncStateSetEpoch": str(epoch)}, sync_state_set_body(new_set, epoch))

    def check_elect_master(self, broker_name: str, broker_id: int | None, designate_elect: bool,
                           is_alive: IsAliveFn, live_info: LiveInfoLookup,
                           enable_elect_unclean_master: bool) -> CheckResult:
        """#electMaster. ``broker_id`` None or -1 means the controller itself asks (inactive master)."""
        found = self._set(broker_name)
        if found is None:
            return CheckResult(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
        replica, info = found
        controller_triggered = broker_id is None or broker_id < 0
        cluster = replica.cluster_name
        if info.is_first_time_for_elect() and not controller_triggered:
            if broker_id not in replica.broker_id_info:
                return CheckResult(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                   f"Broker {broker_name}-{broker_id} hasn't been registered")
            new_master: int | None = broker_id
        else:
            preferred = broker_id if designate_elect and not controller_triggered else None
            new_master = elect_policy.elect(
                info.sync_state_set, replica.broker_id_info.keys(), info.master_broker_id, preferred,
                lambda bid: is_alive(cluster, broker_name, bid),
                _bind_live_info(live_info, cluster, broker_name), enable_elect_unclean_master)
        if new_master is not None and new_master == info.master_broker_id:
            return CheckResult(ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                               f"The old master {info.master_broker_id} is still alive, not need to elect new "
                               f"master for broker {broker_name}",
                               None, _master_header(info, replica),
                               fastjson.dumps({"syncStateSet": sorted(info.sync_state_set)}).encode("utf-8"))
        if new_master is not None:
            header = {"masterBrokerId": str(new_master), "masterEpoch": str(info.master_epoch + 1),
                      "syncStateSetEpoch": str(info.sync_state_set_epoch + 1)}
            address = replica.address(new_master)
            if address:
                header["masterAddress"] = address
            body = {"brokerMemberGroup": {"cluster": cluster, "brokerName": broker_name,
                                          "brokerAddrs": replica.broker_addrs()},
                    "syncStateSet": [new_master]}
            return CheckResult(ResponseCode.SUCCESS, None,
                               ElectMasterEvent(True, broker_name, new_master, info.master_epoch),
                               header, fastjson.dumps(body).encode("utf-8"))
        if controller_triggered:
            # upstream answers with an empty header: no master, and the epochs are not reported
            return CheckResult(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                               "Old master has down and failed to elect a new broker master",
                               ElectMasterEvent(False, broker_name, None, info.master_epoch))
        return CheckResult(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")

    def check_get_next_broker_id(self, cluster_name: str, broker_name: str) -> CheckResult:
        replica = self.replica_info_table.get(broker_name)
        next_id = 1 if replica is None else replica.next_assign_broker_id
        return CheckResult(ResponseCode.SUCCESS, None, None,
                           {"clusterName": cluster_name, "brokerName": broker_name, "nextBrokerId": str(next_id)})

    def check_apply_broker_id(self, cluster_name: str, broker_name: str, applied_broker_id: int,
                              register_check_code: str) -> CheckResult:
        """#applyBrokerId: the first id of a new set is 1; later ones must be unused, or ours already."""
        header = {"clusterName": cluster_name, "brokerName": broker_name}
        address = register_check_code.split(";", 1)[0]
        event = ApplyBrokerIdEvent(cluster_name, broker_name, address, applied_broker_id, register_check_code)
        replica = self.replica_info_table.get(broker_name)
        if replica is None:
            if applied_broker_id != 1:
                return CheckResult(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                                   f"Broker-set: {broker_name} hasn't been registered in controller, but broker "
                                   f"try to apply brokerId: {applied_broker_id}", None, header)
            return CheckResult(ResponseCode.SUCCESS, None, event, header)
        existing = replica.broker_id_info.get(applied_broker_id)
        if existing is None and applied_broker_id >= 1:
            return CheckResult(ResponseCode.SUCCESS, None, event, header)
        if existing is not None and existing[1] == register_check_code:
            return CheckResult(ResponseCode.SUCCESS, None, None, header)
        return CheckResult(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                           f"Fail to apply brokerId: {applied_broker_id} in broker-set: {broker_name}",
                           None, header)

    def check_register_broker(self, cluster_name: str, broker_name: str, broker_id: int, broker_address: str,
                              is_alive: IsAliveFn) -> CheckResult:
        """#registerBroker: the set and id must exist; master info only if that master is alive."""
        found = self._set(broker_name)
        if found is None:
            return CheckResult(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"Broker-set: {broker_name} hasn't been registered in controller",
                               header={"clusterName": cluster_name, "brokerName": broker_name})
        if broker_id not in found[0].broker_id_info:
            return CheckResult(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"BrokerId: {broker_id} hasn't been registered in broker-set: {broker_name}",
                               header={"clusterName": cluster_name, "brokerName": broker_name})
        replica, info = found
        header = {"clusterName": cluster_name, "brokerName": broker_name}
        if info.master_broker_id is not None and is_alive(replica.cluster_name, broker_name,
                                                          info.master_broker_id):
            header.update(_master_header(info, replica))
        event = None
        if replica.address(broker_id) != broker_address:
            event = UpdateBrokerAddressEvent(replica.cluster_name, broker_name, broker_address, broker_id)
            if info.master_broker_id == broker_id and "masterAddress" in header:
                header["masterAddress"] = broker_address
        return CheckResult(ResponseCode.SUCCESS, None, event, header,
                           sync_state_set_body(info.sync_state_set, info.sync_state_set_epoch))

    def get_replica_info(self, broker_name: str) -> CheckResult:
        found = self._set(broker_name)
        if found is None:
            return CheckResult(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        replica, info = found
        header = {"masterEpoch": str(info.master_epoch)}
        if info.master_broker_id is not None:
            header["masterBrokerId"] = str(info.master_broker_id)
            address = replica.address(info.master_broker_id)
            if address:
                header["masterAddress"] = address
        return CheckResult(ResponseCode.SUCCESS, None, None, header,
                           sync_state_set_body(info.sync_state_set, info.sync_state_set_epoch))

    def get_sync_state_data(self, broker_names: Iterable[str], is_alive: IsAliveFn) -> CheckResult:
        """BrokerReplicasInfo for the known names among ``broker_names``."""
        table: dict[str, Any] = {}
        for name in broker_names:
            found = self._set(name)
            if found is None:
                continue
            replica, info = found
            in_sync, not_in_sync = [], []
            for bid, (address, _code) in sorted(replica.broker_id_info.items()):
                member = {"brokerName": name, "brokerId": bid, "brokerAddress": address,
                          "alive": is_alive(replica.cluster_name, name, bid)}
                (in_sync if bid in info.sync_state_set else not_in_sync).append(member)
            # fastjson leaves null fields out: no master, no masterBrokerId/masterAddress keys
            entry: dict[str, Any] = {}
            if info.master_broker_id is not None:
                entry["masterBrokerId"] = info.master_broker_id
            master_address = replica.address(info.master_broker_id)
            if master_address is not None:
                entry["masterAddress"] = master_address
            entry.update({"masterEpoch": info.master_epoch, "syncStateSetEpoch": info.sync_state_set_epoch,
                          "inSyncReplicas": in_sync, "notInSyncReplicas": not_in_sync})
            table[name] = entry
        return CheckResult(ResponseCode.SUCCESS, None, None, {},
                           fastjson.dumps({"replicasInfoTable": table}).encode("utf-8"))

    def check_clean_broker_data(self, cluster_name: str | None, broker_name: str, ids_to_clean: str | None,
                                clean_living_broker: bool, is_alive: IsAliveFn) -> CheckResult:
        """CLEAN_BROKER_DATA (1011), upstream's checks in upstream's order.

        Without ``isCleanLivingBroker``: no id list while the set has a master (alive or not) is
        refused; an id list must parse and name no living broker. Then the set must exist. An id
        list cleans those ids; no list cleans the whole set. (OrbitMQ keeps an id list given with
        ``-l``; upstream ignores it there and drops the whole set. Liveness is looked up under the
        set's own cluster when the request names none.)
        """
        info = self.sync_state_set_info_table.get(broker_name)
        replica = self.replica_info_table.get(broker_name)
        cluster = cluster_name or (replica.cluster_name if replica is not None else "")
        blank = ids_to_clean is None or not ids_to_clean.strip()
        ids: set[int] | None = None
        if not blank:
            parts = ids_to_clean.split(";")  # type: ignore[union-attr]
            while parts and parts[-1] == "":  # Java's split drops trailing empty strings
                parts.pop()
            ids = set()
            for part in parts:
                try:
                    ids.add(int(part.strip()))
                except ValueError:
                    return CheckResult(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                       f"Please set the option <brokerControllerIdsToClean> according to the "
                                       f"format, exception: java.lang.NumberFormatException: For input string: "
                                       f"\"{part}\"")
        if not clean_living_broker:
            if blank and info is not None and info.master_broker_id is not None:
                return CheckResult(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                   f"Broker {broker_name} is still alive, clean up failure")
            for bid in sorted(ids or ()):
                if is_alive(cluster, broker_name, bid):
                    return CheckResult(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                       f"Broker [{broker_name},  {bid}] is still alive, clean up failure")
        if self._set(broker_name) is None:
            return CheckResult(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                               f"Broker {broker_name} is not existed,clean broker data failure.")
        return CheckResult(ResponseCode.SUCCESS, None,
                           CleanBrokerDataEvent(broker_name, None if ids is None else frozenset(ids)))

    # -- apply ---------------------------------------------------------------------------------

    def apply_event(self, event: Event) -> bool:
        """Apply one committed event; False if its guard no longer holds (nothing changes then)."""
        if isinstance(event, AlterSyncStateSetEvent):
            return self._apply_alter(event)
        if isinstance(event, ApplyBrokerIdEvent):
            return self._apply_broker_id(event)
        if isinstance(event, ElectMasterEvent):
            return self._apply_elect(event)
        if isinstance(event, CleanBrokerDataEvent):
            return self._apply_clean(event)
        if isinstance(event, UpdateBrokerAddressEvent):
            return self._apply_update_address(event)
        raise TypeError(f"not an event: {event!r}")

    def _apply_alter(self, event: AlterSyncStateSetEvent) -> bool:
        found = self._set(event.broker_name)
        if found is None:
            return False
        info = found[1]
        if event.expect_sync_state_set_epoch is not None and \
                info.sync_state_set_epoch != event.expect_sync_state_set_epoch:
            return False
        info.sync_state_set = set(event.new_sync_state_set)
        info.sync_state_set_epoch += 1
        return True

    def _apply_broker_id(self, event: ApplyBrokerIdEvent) -> bool:
        replica = self.replica_info_table.get(event.broker_name)
        if replica is None:
            if event.new_broker_id != 1:
                return False
            replica = BrokerReplicaInfo(event.cluster_name, event.broker_name)
            self.replica_info_table[event.broker_name] = replica
            self.sync_state_set_info_table[event.broker_name] = SyncStateInfo(event.cluster_name, event.broker_name)
        existing = replica.broker_id_info.get(event.new_broker_id)
        if existing is not None:
            return existing[1] == event.register_check_code
        replica.broker_id_info[event.new_broker_id] = (event.broker_address, event.register_check_code)
        replica.next_assign_broker_id += 1
        self.sync_state_set_info_table.setdefault(
            event.broker_name, SyncStateInfo(event.cluster_name, event.broker_name))
        return True

    def _apply_elect(self, event: ElectMasterEvent) -> bool:
        found = self._set(event.broker_name)
        if found is None:
            return False
        info = found[1]
        if event.expect_master_epoch is not None and info.master_epoch != event.expect_master_epoch:
            return False
        if event.new_master_elected and event.new_master_broker_id is not None:
            info.master_broker_id = event.new_master_broker_id
            info.master_epoch += 1
            info.sync_state_set = {event.new_master_broker_id}
            info.sync_state_set_epoch += 1
        else:
            info.master_broker_id = None
            info.master_epoch += 1
        return True

    def _apply_clean(self, event: CleanBrokerDataEvent) -> bool:
        found = self._set(event.broker_name)
        if found is None:
            return False
        replica, info = found
        if not event.broker_id_set_to_clean:  # None or empty: the whole set, as upstream
            del self.replica_info_table[event.broker_name]
            del self.sync_state_set_info_table[event.broker_name]
            return True
        for bid in event.broker_id_set_to_clean:
            replica.broker_id_info.pop(bid, None)
            info.sync_state_set.discard(bid)
            if info.master_broker_id == bid:
                info.master_broker_id = None
        if not replica.broker_id_info:
            del self.replica_info_table[event.broker_name]
            del self.sync_state_set_info_table[event.broker_name]
        return True

    def _apply_update_address(self, event: UpdateBrokerAddressEvent) -> bool:
        found = self._set(event.broker_name)
        if found is None or event.broker_id not in found[0].broker_id_info:
            return False
        _old, code = found[0].broker_id_info[event.broker_id]
        found[0].broker_id_info[event.broker_id] = (event.broker_address, code)
        return True

    # -- snapshot ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot of the whole state (Raft full dump)."""
        sets = {}
        for name in sorted(set(self.replica_info_table) | set(self.sync_state_set_info_table)):
            replica = self.replica_info_table.get(name)
            info = self.sync_state_set_info_table.get(name)
            sets[name] = {
                "replica": None if replica is None else {
                    "clusterName": replica.cluster_name, "nextAssignBrokerId": replica.next_assign_broker_id,
                    "brokerIdInfo": [[bid, addr, code] for bid, (addr, code) in sorted(replica.broker_id_info.items())],
                },
                "syncState": None if info is None else {
                    "clusterName": info.cluster_name, "masterBrokerId": info.master_broker_id,
                    "masterEpoch": info.master_epoch, "syncStateSetEpoch": info.sync_state_set_epoch,
                    "syncStateSet": sorted(info.sync_state_set),
                },
            }
        return {"version": 1, "brokerSets": sets}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicasInfoManager:
        manager = cls()
        for name, entry in (data.get("brokerSets") or {}).items():
            replica = entry.get("replica")
            if replica is not None:
                manager.replica_info_table[name] = BrokerReplicaInfo(
                    replica["clusterName"], name, int(replica["nextAssignBrokerId"]),
                    {int(bid): (addr, code) for bid, addr, code in replica["brokerIdInfo"]})
            info = entry.get("syncState")
            if info is not None:
                master = info.get("masterBrokerId")
                manager.sync_state_set_info_table[name] = SyncStateInfo(
                    info["clusterName"], name, None if master is None else int(master), int(info["masterEpoch"]),
                    int(info["syncStateSetEpoch"]), {int(x) for x in info["syncStateSet"]})
        return manager


def _bind_live_info(live_info: LiveInfoLookup, cluster: str, broker_name: str) -> LiveInfoFn:
    return lambda bid: live_info(cluster, broker_name, bid)
