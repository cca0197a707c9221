"""Typed custom headers: dataclasses mapped onto a RemotingCommand's extFields.

Each field declares its extFields name (RocketMQ's camelCase Java field name) and wire type; one
generic codec handles every header, so a header class is only its field list. Required fields
(CFNotNull upstream) have no default; decoding a command that lacks one, or carries a value of the
wrong type, raises RemotingCommandError naming the field so the caller can answer with a proper
response code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from typing import Any, Self

from orbitmq.remoting.errors import RemotingCommandError

_KIND = "orbitmq.kind"
_WIRE = "orbitmq.wire"


def _field(wire: str, kind: type, default: Any = MISSING) -> Any:
    return dataclasses.field(default=default, metadata={_WIRE: wire, _KIND: kind})


def s(wire: str, default: Any = MISSING) -> Any:
    """A String extField."""
    return _field(wire, str, default)


def i(wire: str, default: Any = MISSING) -> Any:
    """An Integer/Long extField (Python ints cover both)."""
    return _field(wire, int, default)


def b(wire: str, default: Any = MISSING) -> Any:
    """A Boolean extField, written "true"/"false" like Java's String.valueOf."""
    return _field(wire, bool, default)


def _to_wire(value: Any, kind: type) -> str:
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(int(value))
    return str(value)


def _from_wire(cls_name: str, wire: str, raw: str, kind: type) -> Any:
    if kind is str:
        return raw
    if kind is bool:
        # Java's Boolean.parseBoolean: anything but "true" (any case) is false.
        return raw.strip().lower() == "true"
    try:
        return int(raw.strip())
    except ValueError:
        raise RemotingCommandError(
            f"{cls_name}: the custom field <{wire}> is not a number: {raw!r}") from None


@dataclass(kw_only=True)
class CommandCustomHeader:
    """Base of all headers; subclasses are kw-only dataclasses built from s()/i()/b() fields."""

    @classmethod
    def _wire_fields(cls) -> tuple[tuple[str, str, type, bool], ...]:
        cached = cls.__dict__.get("_wire_cache")
        if cached is None:
            cached = tuple(
                (f.name, f.metadata[_WIRE], f.metadata[_KIND],
                 f.default is MISSING and f.default_factory is MISSING)
                for f in dataclasses.fields(cls) if _WIRE in f.metadata)
            cls._wire_cache = cached  # type: ignore[attr-defined]
        return cached

    def to_ext_fields(self) -> dict[str, str]:
        encode = type(self).__dict__.get("_encode_cache")
        if encode is None:
            encode = _compile_codec(type(self))[0]
        return encode(self)

    @classmethod
    def from_ext_fields(cls, ext_fields: dict[str, str] | None) -> Self:
        decode = cls.__dict__.get("_decode_cache")
        if decode is None:
            decode = _compile_codec(cls)[1]
        return decode(cls, ext_fields)

    @classmethod
    def from_command(cls, command: Any) -> Self:
        """Decode this header from a RemotingCommand's extFields."""
        return cls.from_ext_fields(command.ext_fields)


def _not_a_number(cls: type, wire: str, raw: str) -> None:
    raise RemotingCommandError(f"{cls.__name__}: the custom field <{wire}> is not a number: {raw!r}") from None


def _is_null(cls: type, wire: str) -> None:
    raise RemotingCommandError(f"{cls.__name__}: the custom field <{wire}> is null")


def _compile_codec(cls: type[CommandCustomHeader]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """to_ext_fields/from_ext_fields of one header class as straight-line code (like dataclass's
    generated __init__): the same results as looping over _wire_fields with _to_wire/_from_wire,
    without the per-field loop, tuple unpacking and calls."""
    enc = ["def to_ext_fields(self):", "    out = {}"]
    dec = ["def from_ext_fields(cls, ext_fields):", "    get = (ext_fields or {}).get", "    kwargs = {}"]
    for attr, wire, kind, required in cls._wire_fields():
        if not (attr.isidentifier() and isinstance(wire, str)):
            raise TypeError(f"{cls.__name__}: bad header field {attr!r}")
        w = repr(wire)
        value = '"true" if v else "false"' if kind is bool else "str(int(v))" if kind is int else "str(v)"
        enc += [f"    v = self.{attr}", "    if v is not None:", f"        out[{w}] = {value}"]
        dec += [f"    raw = get({w})", "    if raw is None:",
                f"        _is_null(cls, {w})" if required else "        pass", "    else:"]
        if kind is str:
            dec += [f"        kwargs[{attr!r}] = raw"]
        elif kind is bool:  # Java's Boolean.parseBoolean: anything but "true" (any case) is false
            dec += [f'        kwargs[{attr!r}] = raw.strip().lower() == "true"']
        else:
            dec += ["        try:", f"            kwargs[{attr!r}] = int(raw.strip())",
                    "        except ValueError:", f"            _not_a_number(cls, {w}, raw)"]
    enc.append("    return out")
    dec.append("    return cls(**kwargs)")
    namespace: dict[str, Any] = {"_is_null": _is_null, "_not_a_number": _not_a_number}
    exec("\n".join(enc) + "\n\n" + "\n".join(dec), namespace)  # noqa: S102 -- our own field names
    encode, decode = namespace["to_ext_fields"], namespace["from_ext_fields"]
    cls._encode_cache = encode  # type: ignore[attr-defined]
    cls._decode_cache = decode  # type: ignore[attr-defined]
    return encode, decode


# ---- send ----------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class SendMessageRequestHeader(CommandCustomHeader):
    producer_group: str = s("producerGroup")
    topic: str = s("topic")
    default_topic: str = s("defaultTopic")
    default_topic_queue_nums: int = i("defaultTopicQueueNums")
    queue_id: int = i("queueId")
    sys_flag: int = i("sysFlag")
    born_timestamp: int = i("bornTimestamp")
    flag: int = i("flag")
    properties: str | None = s("properties", None)
    reconsume_times: int | None = i("reconsumeTimes", None)
    unit_mode: bool | None = b("unitMode", None)
    batch: bool | None = b("batch", None)
    max_reconsume_times: int | None = i("maxReconsumeTimes", None)
    broker_name: str | None = s("bname", None)  # TopicQueueRequestHeader's broker name

    def to_v2(self) -> SendMessageRequestHeaderV2:
        return SendMessageRequestHeaderV2(
            a=self.producer_group, b=self.topic, c=self.default_topic, d=self.default_topic_queue_nums,
            e=self.queue_id, f=self.sys_flag, g=self.born_timestamp, h=self.flag, i=self.properties,
            j=self.reconsume_times, k=self.unit_mode, l=self.max_reconsume_times, m=self.batch,
            n=self.broker_name)


@dataclass(kw_only=True)
class SendMessageRequestHeaderV2(CommandCustomHeader):
    """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header: V1's fields under one-letter names."""

    a: str = _field("a", str)  # producerGroup
    b: str = _field("b", str)  # topic
    c: str = _field("c", str)  # defaultTopic
    d: int = _field("d", int)  # defaultTopicQueueNums
    e: int = _field("e", int)  # queueId
    f: int = _field("f", int)  # sysFlag
    g: int = _field("g", int)  # bornTimestamp
    h: int = _field("h", int)  # flag
    i: str | None = _field("i", str, None)  # properties
    j: int | None = _field("j", int, None)  # reconsumeTimes
    k: bool | None = _field("k", bool, None)  # unitMode
    l: int | None = _field("l", int, None)  # noqa: E741 -- maxReconsumeTimes
    m: bool | None = _field("m", bool, None)  # batch
    n: str | None = _field("n", str, None)  # brokerName

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=self.a, topic=self.b, default_topic=self.c, default_topic_queue_nums=self.d,
            queue_id=self.e, sys_flag=self.f, born_timestamp=self.g, flag=self.h, properties=self.i,
            reconsume_times=self.j, unit_mode=self.k, max_reconsume_times=self.l, batch=self.m,
            broker_name=self.n)


@dataclass(kw_only=True)
class SendMessageResponseHeader(CommandCustomHeader):
    msg_id: str = s("msgId")
    queue_id: int = i("queueId")
    queue_offset: int = i("queueOffset")
    transaction_id: str | None = s("transactionId", None)
    batch_uniq_id: str | None = s("batchUniqId", None)
    recall_handle: str | None = s("recallHandle", None)


def decode_send_request_header(command: Any) -> SendMessageRequestHeader:
    """The V1 header of a SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE request."""
    from orbitmq.remoting.codes import RequestCode

    if command.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                        RequestCode.SEND_REPLY_MESSAGE_V2):
        return SendMessageRequestHeaderV2.from_ext_fields(command.ext_fields).to_v1()
    return SendMessageRequestHeader.from_ext_fields(command.ext_fields)


# ---- pull / pop ----------------------------------------------------------------------------------

@dataclass(kw_only=True)
class PullMessageRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i("queueId")
    queue_offset: int = i("queueOffset")
    max_msg_nums: int = i("maxMsgNums")
    sys_flag: int = i("sysFlag")
    commit_offset: int = i("commitOffset")
    suspend_timeout_millis: int = i("suspendTimeoutMillis")
    subscription: str | None = s("subscription", None)
    sub_version: int = i("subVersion")
    expression_type: str | None = s("expressionType", None)
    max_msg_bytes: int | None = i("maxMsgBytes", None)
    request_source: int | None = i("requestSource", None)
    proxy_forward_client_id: str | None = s("proxyFrowardClientId", None)  # upstream's spelling
    broker_name: str | None = s("bname", None)


@dataclass(kw_only=True)
class PullMessageResponseHeader(CommandCustomHeader):
    suggest_which_broker_id: int = i("suggestWhichBrokerId")
    next_begin_offset: int = i("nextBeginOffset")
    min_offset: int = i("minOffset")
    max_offset: int = i("maxOffset")
    offset_delta: int | None = i("offsetDelta", None)
    topic_sys_flag: int | None = i("topicSysFlag", None)
    group_sys_flag: int | None = i("groupSysFlag", None)
    forbidden_type: int | None = i("forbiddenType", None)


@dataclass(kw_only=True)
class PopMessageRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i("queueId")
    max_msg_nums: int = i("maxMsgNums")
    invisible_time: int = i("invisibleTime")
    poll_time: int = i("pollTime")
    born_time: int = i("bornTime")
    init_mode: int = i("initMode")
    exp_type: str | None = s("expType", None)
    exp: str | None = s("exp", None)
    order: bool | None = b("order", False)
    attempt_id: str | None = s("attemptId", None)
    broker_name: str | None = s("bname", None)


@dataclass(kw_only=True)
class PopMessageResponseHeader(CommandCustomHeader):
    pop_time: int = i("popTime")
    invisible_time: int = i("invisibleTime")
    revive_qid: int = i("reviveQid")
    rest_num: int = i("restNum")
    start_offset_info: str | None = s("startOffsetInfo", None)
    msg_offset_info: str | None = s("msgOffsetInfo", None)
    order_count_info: str | None = s("orderCountInfo", None)


@dataclass(kw_only=True)
class AckMessageRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i("queueId")
    extra_info: str = s("extraInfo")
    offset: int = i("offset")
    broker_name: str | None = s("bname", None)


@dataclass(kw_only=True)
class ChangeInvisibleTimeRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i("queueId")
    extra_info: str = s("extraInfo")
    offset: int = i("offset")
    invisible_time: int = i("invisibleTime")
    broker_name: str | None = s("bname", None)


@dataclass(kw_only=True)
class ChangeInvisibleTimeResponseHeader(CommandCustomHeader):
    pop_time: int = i("popTime")
    invisible_time: int = i("invisibleTime")
    revive_qid: int = i("reviveQid")


# ---- offsets -------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class QueryConsumerOffsetRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i("queueId")
    set_zero_if_not_found: bool | None = b("setZeroIfNotFound", None)


@dataclass(kw_only=True)
class QueryConsumerOffsetResponseHeader(CommandCustomHeader):
    offset: int = i("offset")


@dataclass(kw_only=True)
class UpdateConsumerOffsetRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")
    topic: str = s("topic")
    queue_id: int = i("queueId")
    commit_offset: int = i("commitOffset")


@dataclass(kw_only=True)
class GetMaxOffsetRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    queue_id: int = i("queueId")
    committed: bool = b("committed", True)


@dataclass(kw_only=True)
class GetMaxOffsetResponseHeader(CommandCustomHeader):
    offset: int = i("offset")


@dataclass(kw_only=True)
class GetMinOffsetRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    queue_id: int = i("queueId")


@dataclass(kw_only=True)
class GetMinOffsetResponseHeader(CommandCustomHeader):
    offset: int = i("offset")


@dataclass(kw_only=True)
class SearchOffsetRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    queue_id: int = i("queueId")
    timestamp: int = i("timestamp")
    boundary_type: str | None = s("boundaryType", None)  # "LOWER" / "UPPER"


@dataclass(kw_only=True)
class SearchOffsetResponseHeader(CommandCustomHeader):
    offset: int = i("offset")


@dataclass(kw_only=True)
class GetEarliestMsgStoretimeRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    queue_id: int = i("queueId")


@dataclass(kw_only=True)
class GetEarliestMsgStoretimeResponseHeader(CommandCustomHeader):
    timestamp: int = i("timestamp")


@dataclass(kw_only=True)
class ResetOffsetRequestHeader(CommandCustomHeader):
    group: str = s("group")
    topic: str = s("topic")
    queue_id: int = i("queueId", -1)
    offset: int | None = i("offset", None)
    timestamp: int = i("timestamp")
    is_force: bool = b("isForce")


# ---- query ---------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class ViewMessageRequestHeader(CommandCustomHeader):
    offset: int = i("offset")
    topic: str | None = s("topic", None)


@dataclass(kw_only=True)
class QueryMessageRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    key: str = s("key")
    max_num: int = i("maxNum")
    begin_timestamp: int = i("beginTimestamp")
    end_timestamp: int = i("endTimestamp")


@dataclass(kw_only=True)
class QueryMessageResponseHeader(CommandCustomHeader):
    index_last_update_timestamp: int = i("indexLastUpdateTimestamp")
    index_last_update_phyoffset: int = i("indexLastUpdatePhyoffset")


# ---- retry / transactions ------------------------------------------------------------------------

@dataclass(kw_only=True)
class ConsumerSendMsgBackRequestHeader(CommandCustomHeader):
    offset: int = i("offset")
    group: str = s("group")
    delay_level: int = i("delayLevel")
    origin_msg_id: str | None = s("originMsgId", None)
    origin_topic: str | None = s("originTopic", None)
    unit_mode: bool = b("unitMode", False)
    max_reconsume_times: int | None = i("maxReconsumeTimes", None)


@dataclass(kw_only=True)
class EndTransactionRequestHeader(CommandCustomHeader):
    producer_group: str = s("producerGroup")
    tran_state_table_offset: int = i("tranStateTableOffset")
    commit_log_offset: int = i("commitLogOffset")
    commit_or_rollback: int = i("commitOrRollback")  # MessageSysFlag TRANSACTION_*_TYPE
    msg_id: str = s("msgId")
    topic: str | None = s("topic", None)
    from_transaction_check: bool = b("fromTransactionCheck", False)
    transaction_id: str | None = s("transactionId", None)


@dataclass(kw_only=True)
class CheckTransactionStateRequestHeader(CommandCustomHeader):
    tran_state_table_offset: int = i("tranStateTableOffset")
    commit_log_offset: int = i("commitLogOffset")
    topic: str | None = s("topic", None)
    msg_id: str | None = s("msgId", None)
    transaction_id: str | None = s("transactionId", None)
    offset_msg_id: str | None = s("offsetMsgId", None)


# ---- clients -------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class GetConsumerListByGroupRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")


@dataclass(kw_only=True)
class NotifyConsumerIdsChangedRequestHeader(CommandCustomHeader):
    consumer_group: str = s("consumerGroup")


@dataclass(kw_only=True)
class UnregisterClientRequestHeader(CommandCustomHeader):
    client_id: str = s("clientID")
    producer_group: str | None = s("producerGroup", None)
    consumer_group: str | None = s("consumerGroup", None)


# ---- topics --------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class CreateTopicRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    default_topic: str = s("defaultTopic")
    read_queue_nums: int = i("readQueueNums")
    write_queue_nums: int = i("writeQueueNums")
    perm: int = i("perm")
    topic_filter_type: str = s("topicFilterType")
    topic_sys_flag: int | None = i("topicSysFlag", None)
    order: bool = b("order", False)
    attributes: str | None = s("attributes", None)
    force: bool | None = b("force", False)


@dataclass(kw_only=True)
class DeleteTopicRequestHeader(CommandCustomHeader):
    topic: str = s("topic")


# ---- name server ---------------------------------------------------------------------------------

@dataclass(kw_only=True)
class RegisterBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")
    broker_addr: str = s("brokerAddr")
    cluster_name: str = s("clusterName")
    ha_server_addr: str = s("haServerAddr")
    broker_id: int = i("brokerId")
    heartbeat_timeout_millis: int | None = i("heartbeatTimeoutMillis", None)
    enable_acting_master: bool | None = b("enableActingMaster", None)
    compressed: bool = b("compressed", False)
    body_crc32: int | None = i("bodyCrc32", 0)


@dataclass(kw_only=True)
class RegisterBrokerResponseHeader(CommandCustomHeader):
    ha_server_addr: str | None = s("haServerAddr", None)
    master_addr: str | None = s("masterAddr", None)


@dataclass(kw_only=True)
class UnRegisterBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")
    broker_addr: str = s("brokerAddr")
    cluster_name: str = s("clusterName")
    broker_id: int = i("brokerId")


@dataclass(kw_only=True)
class GetRouteInfoRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    accept_standard_json_only: bool | None = b("acceptStandardJsonOnly", None)


@dataclass(kw_only=True)
class PutKVConfigRequestHeader(CommandCustomHeader):
    namespace: str = s("namespace")
    key: str = s("key")
    value: str = s("value")


@dataclass(kw_only=True)
class GetKVConfigRequestHeader(CommandCustomHeader):
    namespace: str = s("namespace")
    key: str = s("key")


@dataclass(kw_only=True)
class GetKVConfigResponseHeader(CommandCustomHeader):
    value: str | None = s("value", None)


@dataclass(kw_only=True)
class DeleteKVConfigRequestHeader(CommandCustomHeader):
    namespace: str = s("namespace")
    key: str = s("key")


@dataclass(kw_only=True)
class DeleteTopicFromNamesrvRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    cluster_name: str | None = s("clusterName", None)


@dataclass(kw_only=True)
class RegisterTopicRequestHeader(CommandCustomHeader):
    topic: str = s("topic")


@dataclass(kw_only=True)
class GetKVListByNamespaceRequestHeader(CommandCustomHeader):
    namespace: str = s("namespace")


@dataclass(kw_only=True)
class GetTopicsByClusterRequestHeader(CommandCustomHeader):
    cluster: str = s("cluster")


@dataclass(kw_only=True)
class BrokerHeartbeatRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName")
    broker_addr: str = s("brokerAddr")
    broker_name: str = s("brokerName")
    broker_id: int | None = i("brokerId", None)
    epoch: int | None = i("epoch", None)
    max_offset: int | None = i("maxOffset", None)
    confirm_offset: int | None = i("confirmOffset", None)
    heartbeat_timeout_mills: int | None = i("heartbeatTimeoutMills", None)
    election_priority: int | None = i("electionPriority", None)


@dataclass(kw_only=True)
class QueryDataVersionRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")
    broker_addr: str = s("brokerAddr")
    cluster_name: str = s("clusterName")
    broker_id: int = i("brokerId")


@dataclass(kw_only=True)
class QueryDataVersionResponseHeader(CommandCustomHeader):
    changed: bool = b("changed")


@dataclass(kw_only=True)
class WipeWritePermOfBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class WipeWritePermOfBrokerResponseHeader(CommandCustomHeader):
    wipe_topic_count: int = i("wipeTopicCount")


@dataclass(kw_only=True)
class AddWritePermOfBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class AddWritePermOfBrokerResponseHeader(CommandCustomHeader):
    add_topic_count: int = i("addTopicCount")


@dataclass(kw_only=True)
class GetBrokerMemberGroupRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName")
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class NotifyMinBrokerIdChangeRequestHeader(CommandCustomHeader):
    min_broker_id: int | None = i("minBrokerId", None)
    broker_name: str | None = s("brokerName", None)
    min_broker_addr: str | None = s("minBrokerAddr", None)
    offline_broker_addr: str | None = s("offlineBrokerAddr", None)
    ha_broker_addr: str | None = s("haBrokerAddr", None)


ALL_HEADERS: tuple[type[CommandCustomHeader], ...] = tuple(
    obj for obj in list(globals().values())
    if isinstance(obj, type) and issubclass(obj, CommandCustomHeader) and obj is not CommandCustomHeader)
