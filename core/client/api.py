"""MQClientAPI: RocketMQ's MQClientAPIImpl over an asyncio RemotingClient.

One method per Remoting request; each returns a typed result or raises MQBrokerError carrying
the server's response code, so callers (proxy, admin CLI, tools) can map codes to their own
protocol. Transport failures surface as the Remoting layer's RemotingError subclasses.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from orbitmq.client.batch import encode_batch, encode_messages
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.results import (
    AckResult,
    AckStatus,
    PopResult,
    PopStatus,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from orbitmq.common import extra_info as ei
from orbitmq.common import fastjson
from orbitmq.common.constants import AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.common.java_hash import java_string_hash
from orbitmq.common.message import (
    Message,
    MessageConst,
    MessageExt,
    properties_to_string,
)
from orbitmq.common.message_codec import (
    decode_pop_records,
    decode_records,
)
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.route import (
    ClusterInfo,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    dump_json,
    parse_json,
)
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

_SEND_OK_CODES = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX


# One handle to batch-ack: (retry flag, queue id, check-point start offset, pop time, revive queue id,
# invisible time, message queue offset), the ExtraInfo fields BATCH_ACK_MESSAGE needs.
AckPoint = tuple[str, int, int, int, int, int, int]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class MessageQueueRef:
    """A (topic, brokerName, queueId) triple, RocketMQ's MessageQueue."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json_dict(cls, d: Mapping[str, Any]) -> MessageQueueRef:
        return cls(str(d["topic"]), str(d["brokerName"]), int(d["queueId"]))


@dataclass
class ProducerData:
    group_name: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"groupName": self.group_name}


@dataclass
class ConsumerData:
    """HeartbeatData's consumer entry; consumeType CONSUME_PASSIVELY (push), CONSUME_POP, …"""

    group_name: str
    subscriptions: list[SubscriptionData]
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    unit_mode: bool = False

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
            "subscriptionDataSet": [s.to_json_dict() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


# MixAll.IS_SUPPORT_HEART_BEAT_V2 / IS_SUB_CHANGE: the ext fields of a 5.x broker's HEART_BEAT answer.
IS_SUPPORT_HEART_BEAT_V2 = "IS_SUPPORT_HEART_BEAT_V2"
IS_SUB_CHANGE = "IS_SUB_CHANGE"


@dataclass(frozen=True)
class HeartbeatV2Result:
    """HeartbeatV2Result: whether the broker takes fingerprint-only heartbeats, and whether it
    wants the subscriptions again (its copy differs from the fingerprint sent)."""

    sub_change: bool
    support_v2: bool


def heartbeat_data(client_id: str, producers: Iterable[ProducerData], consumers: Iterable[ConsumerData], *,
                   fingerprint: int = 0, without_sub: bool = False) -> dict[str, Any]:
    """HeartbeatData's JSON; ``without_sub`` empties every consumer's subscriptionDataSet."""
    consumer_set = []
    for consumer in consumers:
        entry = consumer.to_json_dict()
        if without_sub:
            entry["subscriptionDataSet"] = []
        consumer_set.append(entry)
    data: dict[str, Any] = {"clientID": client_id, "producerDataSet": [p.to_json_dict() for p in producers],
                            "consumerDataSet": consumer_set}
    if fingerprint:
        data["heartbeatFingerprint"] = fingerprint
        data["withoutSub"] = without_sub
    return data


def heartbeat_fingerprint(producers: Iterable[ProducerData], consumers: Iterable[ConsumerData]) -> int:
    """HeartbeatData#computeHeartbeatFingerprint: the hash of the heartbeat with the client id
    blanked and every subVersion 0, so only a change of groups or subscriptions changes it. The
    broker only compares the values a client sends, so any stable hash would do; this is Java's
    String#hashCode over the JSON, as upstream's. Never 0 (0 means "a V1 heartbeat")."""
    data = heartbeat_data("", producers, consumers)
    for consumer in data["consumerDataSet"]:
        for sub in consumer["subscriptionDataSet"]:
            sub["subVersion"] = 0
    return java_string_hash(dump_json(data).decode("utf-8")) or 1


_PULL_STATUSES = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
_POP_STATUSES = {
    ResponseCode.SUCCESS: PopStatus.FOUND,
    ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
    ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
}


def _status_of(response: RemotingCommand, statuses: dict[int, Any], broker_addr: str) -> Any:
    """The pull/pop status a response code stands for; any other code is the broker's error."""
    status = statuses.get(response.code)
    if status is None:
        raise MQBrokerError(response.code, response.remark, broker_addr)
    return status


class MQClientAPI:
    """Async Remoting calls to NameServers and brokers; shares one RemotingClient."""

    def __init__(self, remoting: RemotingClient | None = None, *, timeout: float = 3.0) -> None:
        self.remoting = remoting or RemotingClient()
        self._owns_remoting = remoting is None
        self.timeout = timeout

    async def close(self) -> None:
        if self._owns_remoting:
            await self.remoting.close()

    # ---- plumbing ---------------------------------------------------------------------------

    async def invoke(self, addr: str, code: int, header: h.CommandCustomHeader | Mapping[str, str] | None = None,
                     body: bytes = b"", timeout: float | None = None) -> RemotingCommand:  # noqa: ASYNC109
        """Send one request and return the raw response, whatever its code."""
        if isinstance(header, h.CommandCustomHeader):
            fields = header.to_ext_fields()
        else:
            fields = {k: str(v) for k, v in (header or {}).items() if v is not None}
        request = RemotingCommand.request(code, fields, body)
        return await self.remoting.invoke(addr, request, self.timeout if timeout is None else timeout)

    async def call(self, addr: str, code: int, header: h.CommandCustomHeader | Mapping[str, str] | None = None,
                   body: bytes = b"", timeout: float | None = None,  # noqa: ASYNC109
                   ok: Iterable[int] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """Like invoke, but a response code outside ``ok`` raises MQBrokerError."""
        response = await self.invoke(addr, code, header, body, timeout)
        if response.code not in set(ok):
            raise MQBrokerError(response.code, response.remark, addr)
        return response

    # ---- NameServer -------------------------------------------------------------------------

    async def get_topic_route(self, namesrv_addr: str, topic: str, timeout: float | None = None) -> TopicRouteData:  # noqa: ASYNC109
        response = await self.invoke(namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                     h.GetRouteInfoRequestHeader(topic=topic), timeout=timeout)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            raise MQClientError(f"No topic route info in name server for the topic: {topic}",
                                ResponseCode.TOPIC_NOT_EXIST)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, namesrv_addr)
        return TopicRouteData.decode(response.body)

    async def get_cluster_info(self, namesrv_addr: str) -> ClusterInfo:
        response = await self.call(namesrv_addr, RequestCode.GET_BROKER_CLUSTER_INFO)
        return ClusterInfo.decode(response.body)

    async def get_all_topic_list(self, namesrv_addr: str) -> list[str]:
        response = await self.call(namesrv_addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(parse_json(response.body).get("topicList", []))

    async def delete_topic_in_namesrv(self, namesrv_addr: str, topic: str, cluster: str | None = None) -> None:
        await self.call(namesrv_addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})

    # ---- send -------------------------------------------------------------------------------

    def _send_header(self, msg: Message, producer_group: str, queue_id: int, sys_flag: int,
                     batch: bool, broker_name: str) -> h.SendMessageRequestHeaderV2:
        props = dict(msg.properties)
        reconsume = max_reconsume = None
        if msg.topic.startswith("%RETRY%"):
            reconsume = props.pop(MessageConst.RECONSUME_TIME, None)
            max_reconsume = props.pop(MessageConst.MAX_RECONSUME_TIMES, None)
        return h.SendMessageRequestHeaderV2(
            a=producer_group, b=msg.topic, c=AUTO_CREATE_TOPIC_KEY_TOPIC, d=4, e=queue_id, f=sys_flag,
            g=_now_ms(), h=msg.flag, i=properties_to_string(props),
            j=int(reconsume) if reconsume is not None else 0, k=False,
            l=int(max_reconsume) if max_reconsume is not None else None, m=batch, n=broker_name)

    def _send_result(self, response: RemotingCommand, addr: str, topic: str, broker_name: str,
                     uniq_id: str) -> SendResult:
        status = _SEND_OK_CODES.get(response.code)
        if status is None:
            raise MQBrokerError(response.code, response.remark, addr)
        fields = response.ext_fields
        try:
            # SendMessageResponseHeader's decoding of the fields a send needs, without the generic codec.
            offset_msg_id = fields["msgId"]
            if offset_msg_id is None:
                raise KeyError("msgId")
            queue_id = int(fields["queueId"].strip())
            queue_offset = int(fields["queueOffset"].strip())
            transaction_id = fields.get("transactionId")
            recall_handle = fields.get("recallHandle")
        except (TypeError, KeyError, ValueError, AttributeError):
            # Missing or malformed: the generic decoder raises the error naming the field.
            rh = h.SendMessageResponseHeader.from_command(response)
            offset_msg_id, queue_id, queue_offset = rh.msg_id, rh.queue_id, rh.queue_offset
            transaction_id, recall_handle = rh.transaction_id, rh.recall_handle
        return SendResult(status=status, msg_id=uniq_id, offset_msg_id=offset_msg_id, queue_id=queue_id,
                          queue_offset=queue_offset, broker_name=broker_name, topic=topic,
                          transaction_id=transaction_id, recall_handle=recall_handle)

    async def send_message(self, broker_addr: str, broker_name: str, msg: Message, producer_group: str,
                           queue_id: int, sys_flag: int = 0, timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """SEND_MESSAGE_V2 of one message; its UNIQ_KEY is the message id returned."""
        header = self._send_header(msg, producer_group, queue_id, sys_flag, False, broker_name)
        response = await self.invoke(broker_addr, RequestCode.SEND_MESSAGE_V2, header, msg.body, timeout)
        return self._send_result(response, broker_addr, msg.topic, broker_name, msg.uniq_key or "")

    async def send_message_oneway(self, broker_addr: str, broker_name: str, msg: Message, producer_group: str,
                                  queue_id: int, sys_flag: int = 0, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """send_message without waiting for the broker (CommunicationMode.ONEWAY)."""
        header = self._send_header(msg, producer_group, queue_id, sys_flag, False, broker_name)
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(), msg.body)
        await self.remoting.invoke_oneway(broker_addr, request, self.timeout if timeout is None else timeout)

    @staticmethod
    def _encoded_send_fields(producer_group: str, topic: str, queue_id: int, sys_flag: int, properties: str,
                             batch: bool, broker_name: str | None) -> dict[str, str]:
        """_send_header(...).to_ext_fields() of a flag-0 message to a non-retry topic, built directly.

        Same keys, order and values as the dataclass path (the header JSON follows this order).
        """
        fields = {"a": producer_group, "b": topic, "c": AUTO_CREATE_TOPIC_KEY_TOPIC, "d": "4",
                  "e": str(int(queue_id)), "f": str(int(sys_flag)), "g": str(_now_ms()), "h": "0",
                  "i": properties, "j": "0", "k": "false", "m": "true" if batch else "false"}
        if broker_name is not None:
            fields["n"] = broker_name
        return fields

    async def send_encoded(self, broker_addr: str, broker_name: str, topic: str, body: bytes, properties: str,
                           uniq_key: str, producer_group: str, queue_id: int, sys_flag: int = 0,
                           timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """send_message of a flag-0 message whose properties are already a properties string.

        The same SEND_MESSAGE_V2 request, without a Message or a properties dict. Retry topics
        carry RECONSUME_TIME in the header instead, so they must go through send_message.
        """
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MQClientError(f"send_encoded cannot send to the retry topic {topic}; use send_message")
        fields = self._encoded_send_fields(producer_group, topic, queue_id, sys_flag, properties, False, broker_name)
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, body)
        response = await self.remoting.invoke(broker_addr, request, self.timeout if timeout is None else timeout)
        return self._send_result(response, broker_addr, topic, broker_name, uniq_key)

    async def send_batch_encoded(self, broker_addr: str, broker_name: str, topic: str, bodies: list[bytes],
                                 properties: list[str], uniq_keys: list[str], producer_group: str, queue_id: int,
                                 sys_flag: int = 0, timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """send_batch of flag-0 messages given as bodies and properties strings (none WAIT_STORE_MSG_OK).

        The same SEND_BATCH_MESSAGE request send_batch writes for such messages.
        """
        if not bodies:
            raise MQClientError("batch is empty")
        fields = self._encoded_send_fields(producer_group, topic, queue_id, sys_flag, "", True, broker_name)
        request = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, fields, encode_batch(bodies, properties))
        response = await self.remoting.invoke(broker_addr, request, self.timeout if timeout is None else timeout)
        return self._send_result(response, broker_addr, topic, broker_name, ",".join(uniq_keys))

    async def send_batch(self, broker_addr: str, broker_name: str, messages: list[Message], producer_group: str,
                         queue_id: int, sys_flag: int = 0, timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """SEND_BATCH_MESSAGE: all messages go to one queue at consecutive offsets."""
        if not messages:
            raise MQClientError("batch is empty")
        first = messages[0]
        batch_props = Message(topic=first.topic, properties={
            k: v for k, v in first.properties.items()
            if k in (MessageConst.WAIT_STORE_MSG_OK,)})
        header = self._send_header(batch_props, producer_group, queue_id, sys_flag, True, broker_name)
        response = await self.invoke(broker_addr, RequestCode.SEND_BATCH_MESSAGE, header,
                                     encode_messages(messages), timeout)
        uniq = ",".join([m.properties.get(_UNIQ_KEY) or "" for m in messages])
        return self._send_result(response, broker_addr, first.topic, broker_name, uniq)

    async def send_reply_message(self, broker_addr: str, broker_name: str, msg: Message, producer_group: str,
                                 queue_id: int = -1, timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """SEND_REPLY_MESSAGE_V2 of a reply (orbitmq.client.request_reply.create_reply_message).

        SEND_OK once the broker pushed it to the requester; a requester it cannot reach raises
        MQBrokerError(SYSTEM_ERROR) with the broker's remark.
        """
        header = self._send_header(msg, producer_group, queue_id, 0, False, broker_name)
        response = await self.invoke(broker_addr, RequestCode.SEND_REPLY_MESSAGE_V2, header, msg.body, timeout)
        return self._send_result(response, broker_addr, msg.topic, broker_name, msg.uniq_key or "")

    async def recall_message(self, broker_addr: str, topic: str, recall_handle: str, producer_group: str | None = None,
                             timeout: float | None = None) -> str:  # noqa: ASYNC109
        """RECALL_MESSAGE (370) of a timer message's recall handle; the recalled message id.

        The broker refuses with MQBrokerError: NO_PERMISSION while recallMessageEnable is off,
        ILLEGAL_OPERATION for a handle that does not decode, names another topic or broker, or is
        no longer ahead of the broker's clock.
        """
        fields = {"topic": topic, "recallHandle": recall_handle, "producerGroup": producer_group}
        response = await self.call(broker_addr, RequestCode.RECALL_MESSAGE, fields, timeout=timeout)
        return str((response.ext_fields or {}).get("msgId") or "")

    async def consumer_send_msg_back(self, broker_addr: str, group: str, commit_log_offset: int, delay_level: int,
                                     origin_msg_id: str, origin_topic: str,
                                     max_reconsume_times: int | None = None) -> None:
        await self.call(broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, h.ConsumerSendMsgBackRequestHeader(
            offset=commit_log_offset, group=group, delay_level=delay_level, origin_msg_id=origin_msg_id,
            origin_topic=origin_topic, unit_mode=False, max_reconsume_times=max_reconsume_times))

    async def end_transaction(self, broker_addr: str, header: h.EndTransactionRequestHeader,
                              remark: str | None = None) -> None:
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        request.remark = remark
        await self.remoting.invoke_oneway(broker_addr, request, self.timeout)

    # ---- pull / pop -------------------------------------------------------------------------

    async def pull_message(self, broker_addr: str, header: h.PullMessageRequestHeader,
                           timeout: float | None = None) -> PullResult:  # noqa: ASYNC109
        response = await self.invoke(broker_addr, RequestCode.PULL_MESSAGE, header, timeout=timeout)
        status = _status_of(response, _PULL_STATUSES, broker_addr)
        rh = h.PullMessageResponseHeader.from_command(response)
        messages = decode_records(response.body) if status == PullStatus.FOUND and response.body else []
        return PullResult(status, rh.next_begin_offset, rh.min_offset, rh.max_offset, messages,
                          rh.suggest_which_broker_id)

    async def pop_message(self, broker_addr: str, broker_name: str, header: h.PopMessageRequestHeader,
                          timeout: float | None = None) -> PopResult:  # noqa: ASYNC109
        """POP_MESSAGE; each found message gets its POP_CK (receipt handle) as RocketMQ's client builds it."""
        response = await self.invoke(broker_addr, RequestCode.POP_MESSAGE, header, timeout=timeout)
        status = _status_of(response, _POP_STATUSES, broker_addr)
        rh = h.PopMessageResponseHeader.from_command(response)
        result = PopResult(status, [], rh.pop_time, rh.invisible_time, rh.rest_num)
        if status != PopStatus.FOUND:
            return result
        result.messages = decode_pop_records(response.body) if response.body else []
        _attach_pop_ck(result.messages, rh, header, broker_name)
        return result

    async def ack_message(self, broker_addr: str, header: h.AckMessageRequestHeader,
                          timeout: float | None = None) -> AckResult:  # noqa: ASYNC109
        response = await self.invoke(broker_addr, RequestCode.ACK_MESSAGE, header, timeout=timeout)
        if response.code == ResponseCode.SUCCESS:
            return AckResult(AckStatus.OK)
        if response.code in (ResponseCode.NO_MESSAGE,):
            return AckResult(AckStatus.NO_EXIST)
        raise MQBrokerError(response.code, response.remark, broker_addr)

    async def batch_ack(self, broker_addr: str, broker_name: str, group: str, topic: str,
                        extra_infos: list[str], timeout: float | None = None) -> AckResult:  # noqa: ASYNC109
        """BATCH_ACK_MESSAGE: ack many receipt handles of one broker in one request."""
        points: list[AckPoint] = []
        for info in extra_infos:
            try:
                ck = ei.parse_extra_info(info)
            except ei.ExtraInfoError as exc:
                raise MQClientError(f"bad extra info {info!r}: {exc}") from None
            if ck.msg_queue_offset is None:
                raise MQClientError(f"bad extra info {info!r}: no message queue offset")
            points.append((ck.retry, ck.queue_id, ck.ck_queue_offset, ck.pop_time, ck.revive_qid, ck.invisible_time,
                           ck.msg_queue_offset))
        return await self.batch_ack_points(broker_addr, broker_name, group, topic, points, timeout)

    async def batch_ack_points(self, broker_addr: str, broker_name: str, group: str, topic: str,
                               points: Iterable[AckPoint], timeout: float | None = None) -> AckResult:  # noqa: ASYNC109
        """batch_ack for handles already parsed (the proxy has decoded them to route the ack).

        Handles of one check point (same retry flag, queue, start offset and pop time) share a
        BatchAck entry whose bit set marks each message's offset from the start offset.
        """
        merged: dict[tuple[str, int, int, int], tuple[dict[str, Any], set[int]]] = {}
        for retry, queue_id, start_offset, pop_time, revive_qid, invisible_time, offset in points:
            key = (retry, queue_id, start_offset, pop_time)
            item = merged.get(key)
            if item is None:
                item = merged[key] = ({"c": group, "t": topic, "r": retry, "so": start_offset, "q": queue_id,
                                       "rq": revive_qid, "pt": pop_time, "it": invisible_time}, set())
            item[1].add(offset - start_offset)
        acks = []
        for entry, bits in merged.values():
            entry["b"] = _encode_bitset(sorted(bits))
            acks.append(entry)
        body = dump_json({"brokerName": broker_name, "acks": acks})
        response = await self.invoke(broker_addr, RequestCode.BATCH_ACK_MESSAGE, None, body, timeout)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, broker_addr)
        return AckResult(AckStatus.OK)

    async def ack_each(self, broker_addr: str, headers: list[h.AckMessageRequestHeader],
                       timeout: float | None = None) -> list[AckResult | BaseException]:  # noqa: ASYNC109
        """Ack several handles one request each; one result (or error) per handle, in order."""
        return list(await asyncio.gather(*(self.ack_message(broker_addr, hd, timeout) for hd in headers),
                                         return_exceptions=True))

    async def change_invisible_time(self, broker_addr: str, broker_name: str,
                                    header: h.ChangeInvisibleTimeRequestHeader,
                                    timeout: float | None = None) -> AckResult:  # noqa: ASYNC109
        """CHANGE_MESSAGE_INVISIBLETIME; the result's extra_info is the message's new handle.

        The new handle keeps the old one's retry flag: callers often name the original topic of a
        message redelivered from the pop retry topic, and a handle built from that name would send
        later acks to the wrong queue (the broker resolves the real topic the same way).
        """
        response = await self.invoke(broker_addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header, timeout=timeout)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, broker_addr)
        rh = h.ChangeInvisibleTimeResponseHeader.from_command(response)
        try:
            topic = ei.parse_extra_info(header.extra_info).real_topic(header.topic, header.consumer_group)
        except ei.ExtraInfoError as exc:
            raise MQClientError(f"bad extra info {header.extra_info!r}: {exc}") from None
        info = ei.build_extra_info(header.offset, rh.pop_time, rh.invisible_time, rh.revive_qid, topic,
                                   broker_name, header.queue_id) + ei.KEY_SEPARATOR + str(header.offset)
        return AckResult(AckStatus.OK, info, rh.pop_time)

    # ---- offsets ----------------------------------------------------------------------------

    async def query_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int,
                                    set_zero_if_not_found: bool | None = None) -> int:
        """The committed offset; MQBrokerError(QUERY_NOT_FOUND) when the group never committed
        (a broker answers 0 instead for a queue that still holds its first message, unless
        ``set_zero_if_not_found`` is False)."""
        response = await self.call(broker_addr, RequestCode.QUERY_CONSUMER_OFFSET, h.QueryConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, set_zero_if_not_found=set_zero_if_not_found))
        return h.QueryConsumerOffsetResponseHeader.from_command(response).offset

    async def update_consumer_offset(self, broker_addr: str, group: str, topic: str, queue_id: int,
                                     offset: int) -> None:
        await self.call(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, h.UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset))

    async def get_max_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        response = await self.call(broker_addr, RequestCode.GET_MAX_OFFSET,
                                   h.GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id))
        return h.GetMaxOffsetResponseHeader.from_command(response).offset

    async def get_min_offset(self, broker_addr: str, topic: str, queue_id: int) -> int:
        response = await self.call(broker_addr, RequestCode.GET_MIN_OFFSET,
                                   h.GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id))
        return h.GetMinOffsetResponseHeader.from_command(response).offset

    async def search_offset(self, broker_addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        response = await self.call(broker_addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, h.SearchOffsetRequestHeader(
            topic=topic, queue_id=queue_id, timestamp=timestamp))
        return h.SearchOffsetResponseHeader.from_command(response).offset

    async def get_earliest_msg_store_time(self, broker_addr: str, topic: str, queue_id: int) -> int:
        response = await self.call(broker_addr, RequestCode.GET_EARLIEST_MSG_STORETIME,
                                   h.GetEarliestMsgStoretimeRequestHeader(topic=topic, queue_id=queue_id))
        return h.GetEarliestMsgStoretimeResponseHeader.from_command(response).timestamp

    async def reset_offset(self, broker_addr: str, group: str, topic: str, timestamp: int,
                           force: bool = True, queue_id: int = -1, offset: int | None = None) -> dict[str, Any]:
        """INVOKE_BROKER_TO_RESET_OFFSET; returns the broker's ResetOffsetBody (ObjectKey-keyed table)."""
        response = await self.call(broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, h.ResetOffsetRequestHeader(
            group=group, topic=topic, queue_id=queue_id, offset=offset, timestamp=timestamp, is_force=force))
        return fastjson.loads(response.body) if response.body else {}

    # ---- clients ----------------------------------------------------------------------------

    async def heartbeat(self, broker_addr: str, client_id: str, producers: Iterable[ProducerData] = (),
                        consumers: Iterable[ConsumerData] = (),
                        client_properties: Mapping[str, str] | None = None, *,
                        fingerprint: int = 0, without_sub: bool = False) -> HeartbeatV2Result:
        """HEART_BEAT; a non-zero ``fingerprint`` makes it MQClientAPIImpl#sendHeartbeatV2's (with
        ``without_sub``, the consumers' subscriptions are left out: the broker keeps the last ones)."""
        data = heartbeat_data(client_id, producers, consumers, fingerprint=fingerprint, without_sub=without_sub)
        if client_properties:
            # OrbitMQ's brokers keep them for producerConnection/consumerConnection; others ignore it.
            data["clientProperties"] = dict(client_properties)
        response = await self.call(broker_addr, RequestCode.HEART_BEAT, None, dump_json(data))
        ext = response.ext_fields or {}
        return HeartbeatV2Result(sub_change=ext.get(IS_SUB_CHANGE) == "true",
                                 support_v2=ext.get(IS_SUPPORT_HEART_BEAT_V2) == "true")

    async def unregister_client(self, broker_addr: str, client_id: str, producer_group: str | None = None,
                                consumer_group: str | None = None) -> None:
        await self.call(broker_addr, RequestCode.UNREGISTER_CLIENT, h.UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group, consumer_group=consumer_group))

    async def get_consumer_list(self, broker_addr: str, group: str) -> list[str]:
        response = await self.call(broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                   h.GetConsumerListByGroupRequestHeader(consumer_group=group))
        return list(parse_json(response.body).get("consumerIdList", [])) if response.body else []

    async def lock_batch_mq(self, broker_addr: str, group: str, client_id: str,
                            queues: Iterable[MessageQueueRef]) -> set[MessageQueueRef]:
        body = dump_json({"consumerGroup": group, "clientId": client_id,
                          "mqSet": [q.to_json_dict() for q in queues]})
        response = await self.call(broker_addr, RequestCode.LOCK_BATCH_MQ, None, body)
        locked = parse_json(response.body).get("lockOKMQSet", []) if response.body else []
        return {MessageQueueRef.from_json_dict(d) for d in locked}

    async def unlock_batch_mq(self, broker_addr: str, group: str, client_id: str,
                              queues: Iterable[MessageQueueRef]) -> None:
        body = dump_json({"consumerGroup": group, "clientId": client_id,
                          "mqSet": [q.to_json_dict() for q in queues]})
        await self.call(broker_addr, RequestCode.UNLOCK_BATCH_MQ, None, body)

    # ---- queries ----------------------------------------------------------------------------

    async def view_message_by_id(self, msg_id: str) -> MessageExt:
        """Look a message up by its offset message id (which names the broker's address)."""
        host, port, commit_log_offset = decode_offset_message_id(msg_id)
        addr = f"{host}:{port}"
        response = await self.call(addr, RequestCode.VIEW_MESSAGE_BY_ID,
                                   h.ViewMessageRequestHeader(offset=commit_log_offset))
        return decode_records(response.body)[0]

    async def query_message(self, broker_addr: str, topic: str, key: str, max_num: int, begin: int,
                            end: int) -> list[MessageExt]:
        response = await self.call(broker_addr, RequestCode.QUERY_MESSAGE, h.QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end),
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if response.code != ResponseCode.SUCCESS or not response.body:
            return []
        return decode_records(response.body)

    async def get_topic_stats(self, broker_addr: str, topic: str) -> dict[str, Any]:
        """TopicStatsTable; its offsetTable is keyed by fastjson.ObjectKey (a MessageQueue)."""
        response = await self.call(broker_addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
        return fastjson.loads(response.body) if response.body else {}

    async def get_consume_stats(self, broker_addr: str, group: str, topic: str | None = None) -> dict[str, Any]:
        """ConsumeStats; its offsetTable is keyed by fastjson.ObjectKey (a MessageQueue)."""
        response = await self.call(broker_addr, RequestCode.GET_CONSUME_STATS,
                                   {"consumerGroup": group, "topic": topic})
        return fastjson.loads(response.body) if response.body else {}

    async def update_broker_config(self, broker_addr: str, values: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: "key=value" lines; the broker refuses keys it cannot change live."""
        body = "".join(f"{k}={v}\n" for k, v in values.items()).encode("utf-8")
        await self.call(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, None, body)

    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        response = await self.call(broker_addr, RequestCode.GET_BROKER_CONFIG)
        result: dict[str, str] = {}
        for line in (response.body or b"").decode("utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                result[key.strip()] = value.strip()
        return result

    async def get_broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        response = await self.call(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(parse_json(response.body).get("table", {})) if response.body else {}

    # ---- admin ------------------------------------------------------------------------------

    async def create_topic(self, broker_addr: str, config: TopicConfig) -> None:
        attrs = ",".join(f"+{k}={v}" for k, v in sorted(config.attributes.items())) or None
        await self.call(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, h.CreateTopicRequestHeader(
            topic=config.topic_name, default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            read_queue_nums=config.read_queue_nums, write_queue_nums=config.write_queue_nums, perm=config.perm,
            topic_filter_type=config.topic_filter_type, topic_sys_flag=config.topic_sys_flag, order=config.order,
            attributes=attrs))

    async def delete_topic_in_broker(self, broker_addr: str, topic: str) -> None:
        await self.call(broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER, h.DeleteTopicRequestHeader(topic=topic))

    async def create_subscription_group(self, broker_addr: str, config: SubscriptionGroupConfig) -> None:
        await self.call(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                        dump_json(config.to_json_dict()))

    async def delete_subscription_group(self, broker_addr: str, group: str, clean_offset: bool = False) -> None:
        await self.call(broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                        {"groupName": group, "cleanOffset": "true" if clean_offset else "false"})

    async def get_all_topic_config(self, broker_addr: str) -> dict[str, TopicConfig]:
        response = await self.call(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return dict(TopicConfigSerializeWrapper.decode(response.body).topic_config_table)

    async def get_all_subscription_group_config(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]:
        response = await self.call(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = parse_json(response.body).get("subscriptionGroupTable", {}) if response.body else {}
        return {name: SubscriptionGroupConfig.from_json_dict(d) for name, d in table.items()}

    async def get_topic_config(self, broker_addr: str, topic: str) -> TopicConfig | None:
        """GET_TOPIC_CONFIG (351), falling back to GET_ALL_TOPIC_CONFIG; None when unknown."""
        response = await self.invoke(broker_addr, RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
        if response.code == ResponseCode.SUCCESS and response.body:
            data = parse_json(response.body)
            return TopicConfig.from_json_dict(data.get("topicConfig", data))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise MQBrokerError(response.code, response.remark, broker_addr)
        return (await self.get_all_topic_config(broker_addr)).get(topic)

    async def get_subscription_group_config(self, broker_addr: str, group: str) -> SubscriptionGroupConfig | None:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352), falling back to the whole table; None when unknown."""
        response = await self.invoke(broker_addr, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group})
        if response.code == ResponseCode.SUCCESS and response.body:
            return SubscriptionGroupConfig.from_json_dict(parse_json(response.body))
        if response.code in (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,) or (
                response.code == ResponseCode.SUCCESS and not response.body):
            return None
        if response.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise MQBrokerError(response.code, response.remark, broker_addr)
        return (await self.get_all_subscription_group_config(broker_addr)).get(group)


def _encode_bitset(indexes: list[int]) -> str:
    """java.util.BitSet.toByteArray (little-endian bits), written by fastjson as base64."""
    if not indexes or indexes[0] < 0:
        raise MQClientError(f"bad ack offsets {indexes!r}")
    data = bytearray(max(indexes) // 8 + 1)
    for i in indexes:
        data[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(data)).decode("ascii")


def _attach_pop_ck(messages: list[MessageExt], rh: h.PopMessageResponseHeader,
                   header: h.PopMessageRequestHeader, broker_name: str) -> None:
    """MQClientAPIImpl.processPopResponse: give every message its POP_CK and first-pop time.

    Our brokers put POP_CK in every record, so the per-queue offset lists are only built when a
    message lacks one (the infos are still parsed up front: a malformed one is the same error).
    """
    start_info = ei.parse_start_offset_info(rh.start_offset_info)
    msg_info = ei.parse_msg_offset_info(rh.msg_offset_info)
    order_info = ei.parse_order_count_info(rh.order_count_info)
    sorted_offsets: dict[str, list[int]] = {}
    if start_info:
        for msg in messages:
            if _POP_CK not in msg.properties:
                for m in messages:
                    sorted_offsets.setdefault(ei.start_offset_info_key(m.topic, m.queue_id), []).append(m.queue_offset)
                break
    first_ck: dict[str, str] = {}
    pop_time = str(rh.pop_time)
    shown_topic = header.topic
    for msg in messages:
        props = msg.properties
        if not start_info:  # an older broker sent no offset infos
            key = msg.topic + str(msg.queue_id)
            if key not in first_ck:
                first_ck[key] = ei.build_extra_info(msg.queue_offset, rh.pop_time, rh.invisible_time, rh.revive_qid,
                                                    msg.topic, broker_name, msg.queue_id)
            props[_POP_CK] = first_ck[key] + ei.KEY_SEPARATOR + str(msg.queue_offset)
        elif _POP_CK not in props:
            qkey = ei.start_offset_info_key(msg.topic, msg.queue_id)
            offsets = msg_info.get(qkey)
            queue_offset = msg.queue_offset
            if offsets:
                index = sorted_offsets[qkey].index(msg.queue_offset)
                if index < len(offsets):
                    queue_offset = offsets[index]
            props[_POP_CK] = ei.build_extra_info(
                start_info.get(qkey, msg.queue_offset), rh.pop_time, rh.invisible_time, rh.revive_qid, msg.topic,
                broker_name, msg.queue_id, queue_offset)
            if header.order and order_info:
                count = order_info.get(ei.queue_offset_map_key(msg.topic, msg.queue_id, msg.queue_offset))
                if count is None:
                    count = order_info.get(qkey)
                if count:
                    msg.reconsume_times = count
        if _FIRST_POP_TIME not in props:
            props[_FIRST_POP_TIME] = pop_time
        msg.topic = shown_topic


_POP_CK = MessageConst.POP_CK
_FIRST_POP_TIME = MessageConst.FIRST_POP_TIME
