"""Route data shared by the NameServer, broker, proxy and admin tools, in RocketMQ's JSON shapes.

Every class maps to the Java class of the same name (remoting/protocol/route, .../body) and
reads/writes the same JSON field names, so a NameServer answer is readable by Apache RocketMQ
clients and a Java broker's registration is readable here.

Encoding writes standard JSON (quoted keys). Decoding is tolerant of fastjson, the serializer
Java RocketMQ uses, which writes numeric map keys unquoted (``"brokerAddrs":{0:"1.2.3.4:10911"}``);
plain ``json.loads`` rejects that, so ``parse_json`` quotes bare keys before parsing.
"""

from __future__ import annotations

import io
import json
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from orbitmq.common import fastjson
from orbitmq.common.constants import MASTER_ID
from orbitmq.common.topic_config import SINGLE_TAG, TOPIC_FILTER_TYPES, TopicConfig

METADATA_SCOPE_GLOBAL = "__global__"  # MixAll.METADATA_SCOPE_GLOBAL

# MQVersion.Version ordinals that change how a register-broker body is read.
VERSION_V3_0_11 = 37
VERSION_V5_0_0 = 413


class RouteDataError(ValueError):
    """A route body (JSON or compressed register body) could not be decoded."""


# ---- tolerant JSON ----------------------------------------------------------------------------


def parse_json(data: bytes | str) -> Any:
    """Parse standard JSON or fastjson's unquoted-key dialect; RouteDataError on garbage."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    except UnicodeDecodeError as exc:
        raise RouteDataError(f"body is not UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return fastjson.loads(text)
    except ValueError as exc:
        raise RouteDataError(f"body is not valid JSON: {exc}") from None


def dump_json(obj: Any) -> bytes:
    """Standard, compact JSON (what RocketMQ's QuoteFieldNames/BrowserCompatible mode emits)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _expect_dict(d: Any, what: str) -> dict[str, Any]:
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise RouteDataError(f"{what}: expected a JSON object, got {type(d).__name__}")
    return d


def _expect_list(d: Any, what: str) -> list[Any]:
    if d is None:
        return []
    if not isinstance(d, list):
        raise RouteDataError(f"{what}: expected a JSON array, got {type(d).__name__}")
    return d


def _int(d: dict[str, Any], key: str, default: int = 0) -> int:
    value = d.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RouteDataError(f"field {key}: expected a number, got {value!r:.50}")
    try:
        return int(value)
    except ValueError:
        raise RouteDataError(f"field {key}: expected a number, got {value!r:.50}") from None


def _str(d: dict[str, Any], key: str, default: str | None = None) -> str | None:
    value = d.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise RouteDataError(f"field {key}: expected a string, got {value!r:.50}")
    return value


def _bool(d: dict[str, Any], key: str, default: bool = False) -> bool:
    value = d.get(key, default)
    if value is None:
        return default
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---- DataVersion ------------------------------------------------------------------------------


@dataclass
class DataVersion:
    """A broker's config version; the NameServer compares it to skip unchanged re-registrations."""

    state_version: int = 0
    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0

    def next_version(self, state_version: int = 0) -> None:
        self.timestamp = _now_ms()
        self.state_version = state_version
        self.counter += 1

    def assign_new_one(self, other: DataVersion) -> None:
        self.state_version, self.timestamp, self.counter = other.state_version, other.timestamp, other.counter

    def compare(self, other: DataVersion) -> int:
        """-1/0/1 by stateVersion, then counter, then timestamp (DataVersion.compare)."""
        mine = (self.state_version, self.counter, self.timestamp)
        theirs = (other.state_version, other.counter, other.timestamp)
        return (mine > theirs) - (mine < theirs)

    def copy(self) -> DataVersion:
        return DataVersion(self.state_version, self.timestamp, self.counter)

    def to_json_dict(self) -> dict[str, Any]:
        return {"stateVersion": self.state_version, "timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json_dict(cls, d: Any) -> DataVersion:
        d = _expect_dict(d, "DataVersion")
        return cls(state_version=_int(d, "stateVersion"), timestamp=_int(d, "timestamp"),
                   counter=_int(d, "counter"))

    def encode(self) -> bytes:
        return dump_json(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | str) -> DataVersion:
        return cls.from_json_dict(parse_json(data))


# ---- QueueData / BrokerData -------------------------------------------------------------------


@dataclass
class QueueData:
    """One broker group's queues of a topic (brokerName is the replica group, not an address)."""

    broker_name: str
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    topic_sys_flag: int = 0

    @classmethod
    def from_topic_config(cls, broker_name: str, tc: TopicConfig) -> QueueData:
        return cls(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)

    def copy(self) -> QueueData:
        return QueueData(self.broker_name, self.read_queue_nums, self.write_queue_nums, self.perm,
                         self.topic_sys_flag)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }

    @classmethod
    def from_json_dict(cls, d: Any) -> QueueData:
        d = _expect_dict(d, "QueueData")
        return cls(
            broker_name=_str(d, "brokerName", "") or "",
            read_queue_nums=_int(d, "readQueueNums"),
            write_queue_nums=_int(d, "writeQueueNums"),
            perm=_int(d, "perm"),
            topic_sys_flag=_int(d, "topicSysFlag"),
        )


def _broker_addrs_from_json(raw: Any) -> dict[int, str]:
    addrs: dict[int, str] = {}
    for key, addr in _expect_dict(raw, "brokerAddrs").items():
        try:
            broker_id = int(key)
        except (TypeError, ValueError):
            raise RouteDataError(f"brokerAddrs: broker id {key!r} is not a number") from None
        if not isinstance(addr, str):
            raise RouteDataError(f"brokerAddrs[{key}]: expected an address string, got {addr!r:.50}")
        addrs[broker_id] = addr
    return addrs


@dataclass
class BrokerData:
    """A broker group: its cluster, name and brokerId -> "host:port" of each live member."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None

    def copy(self) -> BrokerData:
        return BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs), self.enable_acting_master,
                          self.zone_name)

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """The master if present, else any member (BrokerData.selectBrokerAddr)."""
        if MASTER_ID in self.broker_addrs:
            return self.broker_addrs[MASTER_ID]
        if not self.broker_addrs:
            return None
        return self.broker_addrs[min(self.broker_addrs)]

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            d["zoneName"] = self.zone_name
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> BrokerData:
        d = _expect_dict(d, "BrokerData")
        return cls(
            cluster=_str(d, "cluster", "") or "",
            broker_name=_str(d, "brokerName", "") or "",
            broker_addrs=_broker_addrs_from_json(d.get("brokerAddrs")),
            enable_acting_master=_bool(d, "enableActingMaster"),
            zone_name=_str(d, "zoneName"),
        )


# ---- static topics ------------------------------------------------------------------------------


@dataclass
class TopicQueueMappingInfo:
    """Logical-queue mapping of a static topic on one broker (statictopic.TopicQueueMappingInfo)."""

    topic: str | None = None
    scope: str = METADATA_SCOPE_GLOBAL
    total_queues: int = 0
    bname: str | None = None
    epoch: int = 0
    dirty: bool = False
    curr_id_map: dict[int, int] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "scope": self.scope,
            "totalQueues": self.total_queues,
            "epoch": self.epoch,
            "dirty": self.dirty,
            "currIdMap": {str(k): v for k, v in sorted(self.curr_id_map.items())},
        }
        if self.topic is not None:
            d["topic"] = self.topic
        if self.bname is not None:
            d["bname"] = self.bname
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> TopicQueueMappingInfo:
        d = _expect_dict(d, "TopicQueueMappingInfo")
        try:
            ids = {int(k): int(v) for k, v in _expect_dict(d.get("currIdMap"), "currIdMap").items()}
        except (TypeError, ValueError):
            raise RouteDataError("currIdMap: ids must be numbers") from None
        return cls(
            topic=_str(d, "topic"),
            scope=_str(d, "scope", METADATA_SCOPE_GLOBAL) or METADATA_SCOPE_GLOBAL,
            total_queues=_int(d, "totalQueues"),
            bname=_str(d, "bname"),
            epoch=_int(d, "epoch"),
            dirty=_bool(d, "dirty"),
            curr_id_map=ids,
        )


# ---- TopicRouteData -----------------------------------------------------------------------------


@dataclass
class TopicRouteData:
    """The answer to GET_ROUTEINFO_BY_TOPIC: which broker groups serve a topic, and where they are."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    topic_queue_mapping_by_broker: dict[str, TopicQueueMappingInfo] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        d["queueDatas"] = [q.to_json_dict() for q in self.queue_datas]
        d["brokerDatas"] = [b.to_json_dict() for b in self.broker_datas]
        d["filterServerTable"] = {k: list(v) for k, v in self.filter_server_table.items()}
        if self.topic_queue_mapping_by_broker is not None:
            d["topicQueueMappingByBroker"] = {
                k: v.to_json_dict() for k, v in self.topic_queue_mapping_by_broker.items()
            }
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> TopicRouteData:
        d = _expect_dict(d, "TopicRouteData")
        filters: dict[str, list[str]] = {}
        for addr, servers in _expect_dict(d.get("filterServerTable"), "filterServerTable").items():
            filters[str(addr)] = [str(s) for s in _expect_list(servers, "filterServerTable")]
        mapping_raw = d.get("topicQueueMappingByBroker")
        mapping = None
        if mapping_raw is not None:
            mapping = {
                str(k): TopicQueueMappingInfo.from_json_dict(v)
                for k, v in _expect_dict(mapping_raw, "topicQueueMappingByBroker").items()
            }
        return cls(
            queue_datas=[QueueData.from_json_dict(q) for q in _expect_list(d.get("queueDatas"), "queueDatas")],
            broker_datas=[BrokerData.from_json_dict(b) for b in _expect_list(d.get("brokerDatas"), "brokerDatas")],
            order_topic_conf=_str(d, "orderTopicConf"),
            filter_server_table=filters,
            topic_queue_mapping_by_broker=mapping,
        )

    def encode(self) -> bytes:
        return dump_json(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | str) -> TopicRouteData:
        return cls.from_json_dict(parse_json(data))

    def broker_data(self, broker_name: str) -> BrokerData | None:
        for bd in self.broker_datas:
            if bd.broker_name == broker_name:
                return bd
        return None


# ---- ClusterInfo / TopicList / KVTable -------------------------------------------------------------


@dataclass
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: every broker group and which cluster it belongs to."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def retrieve_all_addr_by_cluster(self, cluster: str) -> list[str]:
        addrs: list[str] = []
        for name in sorted(self.cluster_addr_table.get(cluster, ())):
            bd = self.broker_addr_table.get(name)
            if bd is not None:
                addrs.extend(bd.broker_addrs[k] for k in sorted(bd.broker_addrs))
        return addrs

    def retrieve_all_cluster_names(self) -> list[str]:
        return sorted(self.cluster_addr_table)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_json_dict() for k, v in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {k: sorted(v) for k, v in sorted(self.cluster_addr_table.items())},
        }

    @classmethod
    def from_json_dict(cls, d: Any) -> ClusterInfo:
        d = _expect_dict(d, "ClusterInfo")
        return cls(
            broker_addr_table={
                str(k): BrokerData.from_json_dict(v)
                for k, v in _expect_dict(d.get("brokerAddrTable"), "brokerAddrTable").items()
            },
            cluster_addr_table={
                str(k): {str(n) for n in _expect_list(v, "clusterAddrTable")}
                for k, v in _expect_dict(d.get("clusterAddrTable"), "clusterAddrTable").items()
            },
        )

    def encode(self) -> bytes:
        return dump_json(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | str) -> ClusterInfo:
        return cls.from_json_dict(parse_json(data))


@dataclass
class TopicList:
    """A set of topic names (body of the topic-list requests); brokerAddr only for system topics."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"topicList": list(self.topic_list)}
        if self.broker_addr is not None:
            d["brokerAddr"] = self.broker_addr
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> TopicList:
        d = _expect_dict(d, "TopicList")
        return cls([str(t) for t in _expect_list(d.get("topicList"), "topicList")], _str(d, "brokerAddr"))

    def encode(self) -> bytes:
        return dump_json(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | str) -> TopicList:
        return cls.from_json_dict(parse_json(data))


@dataclass
class KVTable:
    """One KV-config namespace, e.g. ORDER_TOPIC_CONFIG returned to brokers on registration."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return {"table": dict(self.table)}

    @classmethod
    def from_json_dict(cls, d: Any) -> KVTable:
        d = _expect_dict(d, "KVTable")
        return cls({str(k): str(v) for k, v in _expect_dict(d.get("table"), "table").items()})

    def encode(self) -> bytes:
        return dump_json(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | str) -> KVTable:
        return cls.from_json_dict(parse_json(data))


# ---- broker registration ----------------------------------------------------------------------------


def _topic_config_from_json(d: Any) -> TopicConfig:
    try:
        return TopicConfig.from_json_dict(d)
    except (ValueError, TypeError) as exc:
        raise RouteDataError(str(exc)) from None


@dataclass
class TopicConfigSerializeWrapper:
    """A broker's whole topic table plus its DataVersion (topics.json, register-broker body)."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "topicConfigTable": {k: v.to_json_dict() for k, v in self.topic_config_table.items()},
            "dataVersion": self.data_version.to_json_dict(),
        }

    @classmethod
    def _table_from_json(cls, d: dict[str, Any]) -> dict[str, TopicConfig]:
        table: dict[str, TopicConfig] = {}
        for name, raw in _expect_dict(d.get("topicConfigTable"), "topicConfigTable").items():
            table[str(name)] = _topic_config_from_json(raw)
        return table

    @classmethod
    def from_json_dict(cls, d: Any) -> TopicConfigSerializeWrapper:
        d = _expect_dict(d, "TopicConfigSerializeWrapper")
        return cls(cls._table_from_json(d), DataVersion.from_json_dict(d.get("dataVersion")))

    def encode(self) -> bytes:
        return dump_json(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | str) -> TopicConfigSerializeWrapper:
        return cls.from_json_dict(parse_json(data))


@dataclass
class TopicConfigAndMappingSerializeWrapper(TopicConfigSerializeWrapper):
    """TopicConfigSerializeWrapper plus static-topic mappings, as 5.x brokers register it.

    topicQueueMappingDetailMap is carried through as raw JSON: the NameServer never reads it.
    """

    topic_queue_mapping_info_map: dict[str, TopicQueueMappingInfo] = field(default_factory=dict)
    topic_queue_mapping_detail_map: dict[str, Any] = field(default_factory=dict)
    mapping_data_version: DataVersion = field(default_factory=DataVersion)

    def to_json_dict(self) -> dict[str, Any]:
        d = super().to_json_dict()
        d["topicQueueMappingInfoMap"] = {k: v.to_json_dict() for k, v in self.topic_queue_mapping_info_map.items()}
        d["topicQueueMappingDetailMap"] = dict(self.topic_queue_mapping_detail_map)
        d["mappingDataVersion"] = self.mapping_data_version.to_json_dict()
        return d

    @classmethod
    def from_json_dict(cls, d: Any) -> TopicConfigAndMappingSerializeWrapper:
        d = _expect_dict(d, "TopicConfigAndMappingSerializeWrapper")
        infos = {
            str(k): TopicQueueMappingInfo.from_json_dict(v)
            for k, v in _expect_dict(d.get("topicQueueMappingInfoMap"), "topicQueueMappingInfoMap").items()
        }
        return cls(
            topic_config_table=cls._table_from_json(d),
            data_version=DataVersion.from_json_dict(d.get("dataVersion")),
            topic_queue_mapping_info_map=infos,
            topic_queue_mapping_detail_map=dict(
                _expect_dict(d.get("topicQueueMappingDetailMap"), "topicQueueMappingDetailMap")),
            mapping_data_version=DataVersion.from_json_dict(d.get("mappingDataVersion") or {}),
        )


# Compressed register bodies store each TopicConfig as TopicConfig.encode()'s space-separated
# line: "name read write perm FILTERTYPE {attributes json}". topicSysFlag and order are not in
# that line upstream either, so they arrive as defaults.
_INT = struct.Struct(">i")


def _topic_config_to_line(tc: TopicConfig) -> str:
    attrs = json.dumps(tc.attributes, separators=(",", ":"), ensure_ascii=False)
    return f"{tc.topic_name} {tc.read_queue_nums} {tc.write_queue_nums} {tc.perm} {tc.topic_filter_type} {attrs}"


def _topic_config_from_line(line: str) -> TopicConfig:
    parts = line.split(" ")
    if len(parts) < 5:
        raise RouteDataError(f"compressed topic config has {len(parts)} fields, expected 5 or 6: {line!r:.80}")
    try:
        read, write, perm = int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        raise RouteDataError(f"compressed topic config has a non-numeric field: {line!r:.80}") from None
    filter_type = parts[4] if parts[4] in TOPIC_FILTER_TYPES else SINGLE_TAG
    attributes: dict[str, str] = {}
    if len(parts) >= 6:
        try:
            raw = json.loads(" ".join(parts[5:]))
            if isinstance(raw, dict):
                attributes = {str(k): str(v) for k, v in raw.items()}
        except json.JSONDecodeError:
            pass  # upstream ignores undecodable attributes the same way
    return TopicConfig(topic_name=parts[0], read_queue_nums=read, write_queue_nums=write, perm=perm,
                       topic_filter_type=filter_type, attributes=attributes)


def _write_chunk(out: io.BytesIO, data: bytes) -> None:
    out.write(_INT.pack(len(data)))
    out.write(data)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int32(self) -> int:
        if self.remaining() < 4:
            raise RouteDataError("compressed register body truncated")
        (value,) = _INT.unpack_from(self.data, self.pos)
        self.pos += 4
        return value

    def chunk(self) -> bytes:
        length = self.int32()
        if length < 0 or length > self.remaining():
            raise RouteDataError(f"compressed register body: bad chunk length {length}")
        piece = self.data[self.pos : self.pos + length]
        self.pos += length
        return piece


@dataclass
class RegisterBrokerBody:
    """REGISTER_BROKER body: the topic table with its DataVersion, and the filter servers."""

    topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper = field(
        default_factory=TopicConfigAndMappingSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json_dict(),
            "filterServerList": list(self.filter_server_list),
        }

    @classmethod
    def from_json_dict(cls, d: Any) -> RegisterBrokerBody:
        d = _expect_dict(d, "RegisterBrokerBody")
        return cls(
            TopicConfigAndMappingSerializeWrapper.from_json_dict(d.get("topicConfigSerializeWrapper")),
            [str(s) for s in _expect_list(d.get("filterServerList"), "filterServerList")],
        )

    def encode(self, compress: bool = False) -> bytes:
        """Plain JSON, or RocketMQ's zlib-deflated length-prefixed layout when ``compress``."""
        if not compress:
            return dump_json(self.to_json_dict())
        wrapper = self.topic_config_serialize_wrapper
        out = io.BytesIO()
        _write_chunk(out, wrapper.data_version.encode())
        out.write(_INT.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            _write_chunk(out, _topic_config_to_line(tc).encode("utf-8"))
        _write_chunk(out, dump_json(list(self.filter_server_list)))
        out.write(_INT.pack(len(wrapper.topic_queue_mapping_info_map)))
        for info in wrapper.topic_queue_mapping_info_map.values():
            _write_chunk(out, dump_json(info.to_json_dict()))
        return zlib.compress(out.getvalue(), 9)

    @classmethod
    def decode(cls, data: bytes, compressed: bool = False, broker_version: int | None = None) -> RegisterBrokerBody:
        """Read either form; the mapping section of a compressed body exists from V5_0_0 on."""
        if not compressed:
            return cls.from_json_dict(parse_json(data))
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise RouteDataError(f"compressed register body does not inflate: {exc}") from None
        reader = _Reader(raw)
        wrapper = TopicConfigAndMappingSerializeWrapper(data_version=DataVersion.decode(reader.chunk()))
        count = reader.int32()
        if count < 0:
            raise RouteDataError(f"compressed register body: bad topic count {count}")
        for _ in range(count):
            try:
                line = reader.chunk().decode("utf-8")
            except UnicodeDecodeError:
                raise RouteDataError("compressed topic config is not UTF-8") from None
            tc = _topic_config_from_line(line)
            wrapper.topic_config_table[tc.topic_name] = tc
        filters_raw = parse_json(reader.chunk())
        filters = [str(s) for s in filters_raw] if isinstance(filters_raw, list) else []
        with_mapping = broker_version is None or broker_version >= VERSION_V5_0_0
        if with_mapping and reader.remaining() >= 4:
            for _ in range(reader.int32()):
                info = TopicQueueMappingInfo.from_json_dict(parse_json(reader.chunk()))
                wrapper.topic_queue_mapping_info_map[info.topic or ""] = info
        return cls(wrapper, filters)
