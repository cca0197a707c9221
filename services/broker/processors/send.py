"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Checks run in RocketMQ's order (AbstractSendMessageProcessor.msgCheck, then the store's
pre-checks), each refusal answered with upstream's response code and remark. Accepted messages
wait in the explicit send queue (flow control) and are stored through
``broker.put_message``, where the before-put hooks (delay-level redirect) run.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orbitmq.broker.recall.send_hook import recall_handle_of
from orbitmq.broker.transaction.bridge import half_message_refusal, is_half_send, rewrite_half_message
from orbitmq.common import validators
from orbitmq.common.constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    is_writeable,
)
from orbitmq.common.message import MessageConst, parse_properties_exact
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.sysflag import MULTI_TAGS_FLAG, TRANSACTION_PREPARED_TYPE, get_transaction_value
from orbitmq.common.topic_config import MULTI_TAG, priority_queue_id
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import topic_support
from .base import Fields, RequestError
from .batch_codec import BatchDecodeError, decode_batch
from .store_results import map_put_result

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1
_DELAY_LEVEL = MessageConst.DELAY_TIME_LEVEL
_TIMER_DELIVER_MS = MessageConst.TIMER_DELIVER_MS
_TIMER_DELAY_SEC = MessageConst.TIMER_DELAY_SEC
_TIMER_DELAY_MS = MessageConst.TIMER_DELAY_MS
_TRANSACTION_PREPARED = MessageConst.TRANSACTION_PREPARED
_MSG_REGION = MessageConst.MSG_REGION
_TRACE_SWITCH = MessageConst.TRACE_SWITCH
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_TIMER_OUT_MS = MessageConst.TIMER_OUT_MS
_PRIORITY = MessageConst.PRIORITY
_REPLY_TO_CLIENT = MessageConst.MESSAGE_REPLY_TO_CLIENT
_CLUSTER = MessageConst.CLUSTER
# SendMessageRequestHeaderV2's one-letter names -> SendMessageRequestHeader's names.
V2_FIELD_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
    "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
    "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}


@dataclass(slots=True)
class SendHeader:
    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str
    reconsume_times: int
    unit_mode: bool
    max_reconsume_times: int | None
    batch: bool


_LONG_FIELD_NAMES = frozenset(V2_FIELD_NAMES.values())
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_SEND_MESSAGE_V2 = int(RequestCode.SEND_MESSAGE_V2)


def _parse_v2_fast(raw: dict[str, Any]) -> SendHeader | None:
    """parse_send_header of a well-formed SEND_MESSAGE_V2 header, read by its one-letter names.

    None for anything else (a field missing, not a string, not a number, out of range, an
    unusual boolean, a long name among the keys): the general path then gives the same header
    or raises the same error, in the same order of fields.
    """
    if not _LONG_FIELD_NAMES.isdisjoint(raw):
        return None
    a = raw.get("a")
    b = raw.get("b")
    c = raw.get("c")
    if a.__class__ is not str or b.__class__ is not str or c.__class__ is not str:
        return None
    properties = raw.get("i")
    if properties is None:
        properties = ""
    elif properties.__class__ is not str:
        return None
    k = raw.get("k")
    if k is None or k == "" or k == "false":
        unit_mode = False
    elif k == "true":
        unit_mode = True
    else:
        return None
    m = raw.get("m")
    if m is None or m == "" or m == "false":
        batch = False
    elif m == "true":
        batch = True
    else:
        return None
    try:
        l_ = raw.get("l")
        max_reconsume = None if l_ is None else int(l_.strip(), 10)
        d = int(raw["d"].strip(), 10)
        e = int(raw["e"].strip(), 10)
        f = int(raw["f"].strip(), 10)
        g = int(raw["g"].strip(), 10)
        h = int(raw["h"].strip(), 10)
        j = raw.get("j")
        j = 0 if j is None or j == "" else int(j.strip(), 10)
    except (KeyError, AttributeError, TypeError, ValueError):
        return None
    if (not _INT_MIN <= d <= _INT_MAX or not _INT_MIN <= e <= _INT_MAX or not _INT_MIN <= f <= _INT_MAX
            or not _LONG_MIN <= g <= _LONG_MAX or not _INT_MIN <= h <= _INT_MAX or not _INT_MIN <= j <= _INT_MAX
            or (max_reconsume is not None and not _INT_MIN <= max_reconsume <= _INT_MAX)):
        return None
    return SendHeader(a, b, c, d, e, f, g, h, properties, j, unit_mode, max_reconsume, batch)


def parse_send_header(request: RemotingCommand) -> SendHeader:
    fields = request.ext_fields
    if request.code == _SEND_MESSAGE_V2 and fields.__class__ is dict:
        header = _parse_v2_fast(fields)
        if header is not None:
            return header
    raw = dict(fields or {})
    if request.code == RequestCode.SEND_MESSAGE_V2 or "b" in raw:
        raw = {V2_FIELD_NAMES.get(k, k): v for k, v in raw.items()}
    f = Fields(raw)
    max_reconsume = f.int("maxReconsumeTimes") if f.has("maxReconsumeTimes") else None
    return SendHeader(
        producer_group=f.str("producerGroup"),
        topic=f.str("topic"),
        default_topic=f.str("defaultTopic"),
        default_topic_queue_nums=f.int("defaultTopicQueueNums"),
        queue_id=f.int("queueId"),
        sys_flag=f.int("sysFlag"),
        born_timestamp=f.long("bornTimestamp"),
        flag=f.int("flag"),
        properties=f.str("properties", required=False),
        reconsume_times=f.int("reconsumeTimes", 0),
        unit_mode=f.bool("unitMode", False),
        max_reconsume_times=max_reconsume,
        batch=f.bool("batch", False) or request.code == RequestCode.SEND_BATCH_MESSAGE,
    )


def _size_remark(max_size: int) -> str:
    """The remark of MESSAGE_ILLEGAL for a body over maxMessageSize, in upstream's words
    (SendMessageProcessor#handlePutMessageResult): clients show it as the error's text."""
    return (f"the message is illegal, maybe msg body or properties length not matched. "
            f"msg body length limit {max_size}B, msg properties length limit 32KB.")


# Topics that passed check_topic and are not in NOT_ALLOWED_SEND_TOPIC_SET (both depend on the
# name alone); bounded so that a client inventing names cannot grow it without end.
_SENDABLE_TOPICS_MAX = 10_000


class SendMessageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._sendable_topics: set[str] = set()

    def register(self) -> None:
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            self.broker.register_processor(code, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        store = self.broker.message_store
        if store is not None and store.is_transient_store_pool_deficient():
            # SendMessageProcessor#rejectRequest, answered as NettyRemotingAbstract does.
            return request.response_to(ResponseCode.SYSTEM_BUSY,
                                       "[REJECTREQUEST]system busy, start flow control for a while")
        header = parse_send_header(request)
        cfg = self.broker.config
        region = {_MSG_REGION: cfg.region_id, _TRACE_SWITCH: "true" if cfg.trace_on else "false"}
        try:
            if header.batch:
                fields = await self._send_batch(request, channel, header)
            else:
                fields = await self._send_one(request, channel, header)
        except RequestError as exc:
            return request.response_to(exc.code, exc.remark, region)
        code, remark, extra = fields
        if extra:
            region.update(extra)
        return request.response_to(code, remark, region)

    # ---- checks --------------------------------------------------------------------------

    def _msg_check(self, header: SendHeader, channel: Any) -> Any:
        broker = self.broker
        cfg = broker.config
        if broker.now_ms() < cfg.start_accept_send_request_time_stamp:
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"broker unable to service, until {cfg.start_accept_send_request_time_stamp}")
        if not is_writeable(cfg.broker_permission):
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the broker[{cfg.broker_ip1}] sending message is forbidden")
        if header.topic not in self._sendable_topics:
            try:
                validators.check_topic(header.topic)
            except validators.ValidationError as exc:  # AbstractSendMessageProcessor#msgCheck
                raise RequestError(ResponseCode.INVALID_PARAMETER, str(exc)) from None
            if validators.is_not_allowed_send_topic(header.topic):
                raise RequestError(ResponseCode.NO_PERMISSION,
                                   f"Sending message to topic[{header.topic}] is forbidden.")
            if len(self._sendable_topics) < _SENDABLE_TOPICS_MAX:
                self._sendable_topics.add(header.topic)
        topic_config = broker.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            sys_flag = 0
            if header.unit_mode:
                sys_flag = 1 if not header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else 2
            topic_config = topic_support.create_topic_in_send_message_method(
                broker, header.topic, header.default_topic, header.default_topic_queue_nums, sys_flag,
                broker.remote_addr(channel))
            if topic_config is None and header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                topic_config = topic_support.create_topic_in_send_message_back_method(
                    broker, header.topic, 1, PERM_WRITE | PERM_READ, sys_flag)
            if topic_config is None:
                raise RequestError(ResponseCode.TOPIC_NOT_EXIST,
                                   f"topic[{header.topic}] not exist, apply first please! "
                                   "http://rocketmq.apache.org/docs/faq/")
        if not is_writeable(topic_config.perm):
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the topic[{header.topic}] sending message is forbidden")
        valid = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if header.queue_id >= valid:  # INVALID_PARAMETER since 5.0 (4.x answered SYSTEM_ERROR)
            raise RequestError(ResponseCode.INVALID_PARAMETER,
                               f"request queueId[{header.queue_id}] is illegal, {topic_config} "
                               f"Producer: {broker.remote_addr(channel)}")
        return topic_config

    def _check_body_and_properties(self, body: bytes, properties: str) -> None:
        max_size = self.broker.store_config.max_message_size
        if len(body) > max_size:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL,
                               _size_remark(max_size))
        try:
            validators.check_properties_size(properties)
        except validators.ValidationError as exc:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None

    def _pick_queue(self, header: SendHeader, topic_config: Any) -> int:
        if header.queue_id < 0:
            return abs(random.randrange(-(2**31), 2**31) % 99999999) % max(1, topic_config.write_queue_nums)
        return header.queue_id

    def _retry_topic_group(self, topic: str) -> str:
        """The group a retry topic belongs to: KeyBuilder#parseGroup ("%RETRY%group+topic" is
        split at the "+"), and for "%RETRY%group_topic", whose name alone does not say where the
        group ends, the split naming an existing group and topic (what `orbitmq admin
        resendMsgById` writes for POP consumers), where upstream would take "group_topic" for the
        group and create it or answer SUBSCRIPTION_GROUP_NOT_EXIST."""
        name = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        if "+" in name:
            parts = name.split("+")
            return parts[0] if len(parts) == 2 else name
        groups = self.broker.subscription_group_manager
        if "_" not in name or groups.get(name) is not None:
            return name
        topics = self.broker.topic_config_manager
        for i, char in enumerate(name):
            if char == "_" and groups.get(name[:i]) is not None and topics.select_topic_config(name[i + 1:]):
                return name[:i]
        return name

    def _handle_retry_and_dlq(self, header: SendHeader, props: dict[str, str]) -> tuple[str, int | None]:
        """For a send to %RETRY%<group>: the DLQ topic and queue once retries are exhausted."""
        if not header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return header.topic, None
        group = self._retry_topic_group(header.topic)
        group_config = topic_support.find_subscription_group_config(self.broker, group)
        if group_config is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                               f"subscription group not exist, {group} http://rocketmq.apache.org/docs/faq/")
        max_reconsume = group_config.retry_max_times
        # Clients since V3_4_9 send their own maxReconsumeTimes, which then wins.
        if header.max_reconsume_times is not None:
            max_reconsume = header.max_reconsume_times
        if header.reconsume_times < max_reconsume:
            return header.topic, None
        topic = dlq_topic(group)
        topic_support.create_topic_in_send_message_back_method(self.broker, topic, DLQ_NUMS_PER_GROUP,
                                                               PERM_WRITE, 0)
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        return topic, random.randrange(DLQ_NUMS_PER_GROUP)

    def _check_transaction(self, props: dict[str, str]) -> None:
        if props.get(_TRANSACTION_PREPARED) == "true" and self.broker.config.reject_transaction_message:
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the broker[{self.broker.config.broker_ip1}] sending transaction message is forbidden")

    # ---- single message -------------------------------------------------------------------

    async def _send_one(self, request: RemotingCommand, channel: Any,
                        header: SendHeader) -> tuple[int, str | None, dict[str, str]]:
        topic_config = self._msg_check(header, channel)
        body = bytes(request.body or b"")
        self._check_body_and_properties(body, header.properties)
        queue_id = self._pick_queue(header, topic_config)
        props, exact = parse_properties_exact(header.properties)
        topic, dlq_queue = self._handle_retry_and_dlq(header, props)
        if dlq_queue is not None:
            queue_id = dlq_queue
            exact = False  # DELAY may have been dropped: encode the dict
        self._check_transaction(props)
        properties_string = header.properties
        if _PRIORITY in props and dlq_queue is None:
            # SendMessageProcessor: the properties (not the topic's type) decide; a PRIORITY
            # message goes to the queue of its priority, any other loses the property.
            priority_queue = priority_queue_id(props, topic_config.write_queue_nums)
            if priority_queue is None:
                del props[_PRIORITY]
                exact = False
            else:
                queue_id = priority_queue
        if _MSG_REGION not in props:
            # AbstractSendMessageProcessor#buildMsgContext (5.x) stamps every message with the
            # broker's region and trace switch: 5.x consumers skip trace records without a region.
            cfg = self.broker.config
            trace_on = "true" if cfg.trace_on else "false"
            exact = exact and _TRACE_SWITCH not in props  # appending must not repeat a key
            props[_MSG_REGION], props[_TRACE_SWITCH] = cfg.region_id, trace_on
            properties_string += f"{_MSG_REGION}\x01{cfg.region_id}\x02{_TRACE_SWITCH}\x01{trace_on}\x02"
        uniq = props.get(_UNIQ_KEY)
        if not uniq:
            # SendMessageProcessor#sendMessage (5.5.0) gives a message without a client id one, so
            # every stored message has a message id to be found and traced by.
            uniq = props[_UNIQ_KEY] = create_uniq_id()
            if _UNIQ_KEY in (header.properties or "") or not exact:
                exact = False
            else:
                properties_string += f"{_UNIQ_KEY}\x01{uniq}\x02"
        if _REPLY_TO_CLIENT in props:
            # A request (request/reply): the responder addresses its reply to <CLUSTER>_REPLY_TOPIC.
            # Upstream stamps CLUSTER on every message; only requests need it.
            props[_CLUSTER] = self.broker.config.broker_cluster_name
            exact = False
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        inner = self.broker.new_inner_message(
            topic=topic, queue_id=queue_id, body=body, flag=header.flag, properties=props,
            sys_flag=sys_flag, born_timestamp=header.born_timestamp,
            born_host=self.broker.remote_addr(channel), reconsume_times=header.reconsume_times,
            properties_string=properties_string if exact else None)
        if is_half_send(props, header.reconsume_times):
            # A prepared (half) message: stored in RMQ_SYS_TRANS_HALF_TOPIC (services/broker/transaction).
            refusal = half_message_refusal(props)
            if refusal is not None:
                raise RequestError(ResponseCode.MESSAGE_ILLEGAL, refusal)
            rewrite_half_message(inner)
            result = await self.broker.send_queue.submit(lambda: self.broker.put_message(inner))
            code, remark, extra = map_put_result(result, queue_id, batch=False)
            if extra:
                extra["transactionId"] = inner.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
            return code, remark, extra
        result = await self.broker.send_queue.submit(lambda: self.broker.put_message(inner))
        code, remark, extra = map_put_result(result, queue_id, batch=False)
        if extra:  # SendMessageResponseHeader#transactionId: the message id, on every send
            extra["transactionId"] = uniq
        if extra and _TIMER_OUT_MS in inner.properties:
            # A timer message parked in the wheel: the handle that recalls it (services/broker/recall).
            handle = recall_handle_of(inner, self.broker.config.broker_name)
            if handle:
                extra["recallHandle"] = handle
        return code, remark, extra

    # ---- batch ----------------------------------------------------------------------------

    async def _send_batch(self, request: RemotingCommand, channel: Any,
                          header: SendHeader) -> tuple[int, str | None, dict[str, str]]:
        topic_config = self._msg_check(header, channel)
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"Batch request does not support retry group {header.topic}")
        if header.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"Batch request does not support DLQ topic {header.topic}")
        body = bytes(request.body or b"")
        max_size = self.broker.store_config.max_message_size
        if len(body) > max_size:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL,
                               _size_remark(max_size))
        try:
            items = decode_batch(body)
        except BatchDecodeError as exc:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"the batch message is illegal: {exc}") from None
        queue_id = self._pick_queue(header, topic_config)
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        born_host = self.broker.remote_addr(channel)
        # Per message, the same checks in the same order as for a single send; what does not
        # depend on the message is looked up once per batch. The properties size check cannot
        # fail here: decode_batch read each length from a non-negative 2-byte field, so it is
        # at most PROPERTIES_MAX_LENGTH bytes, and the string is not encoded again to count it.
        # _check_transaction refuses only while rejectTransactionMessage is on: skip the call otherwise.
        check_transaction = self._check_transaction if self.broker.config.reject_transaction_message else None
        transactional = get_transaction_value(sys_flag) == TRANSACTION_PREPARED_TYPE
        accepted = []
        append = accepted.append
        for flag, item_body, properties in items:
            if len(item_body) > max_size:
                raise RequestError(ResponseCode.MESSAGE_ILLEGAL,
                                   _size_remark(max_size))
            # Parsed once: the dict for the checks and dispatch; a canonical string is stored
            # as it came, as RocketMQ's encodeBatch copies the properties bytes.
            props, exact = parse_properties_exact(properties)
            if check_transaction is not None:
                check_transaction(props)
            if transactional:
                raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support transaction")
            if props.get(_DELAY_LEVEL, "0") not in ("", "0"):
                # The delay redirect rewrites one message at a time; upstream refuses delayed batches.
                raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support delay message")
            if _TIMER_DELIVER_MS in props or _TIMER_DELAY_SEC in props or _TIMER_DELAY_MS in props:
                # Upstream files a batch's items past the timer conversion (they would be delivered
                # at once); refused here instead, like delay levels, so no delay is silently lost.
                raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support timer message")
            append((flag, item_body, props, properties if exact and props else None))
        # Stored once every message passed its checks (nothing is observable in between). No
        # message is delayed (refused above), so the delay redirect has nothing to do: the
        # store appends the tuples without a MessageExtBrokerInner each when it can.
        def put() -> Any:
            return self.broker.put_batch(
                topic=header.topic, queue_id=queue_id, sys_flag=sys_flag, born_timestamp=header.born_timestamp,
                born_host=born_host, reconsume_times=header.reconsume_times, items=accepted)

        result = await self.broker.send_queue.submit(put)
        return map_put_result(result, queue_id, batch=True)
