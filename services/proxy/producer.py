"""SendMessage (SendMessageActivity + ProducerProcessor): gRPC messages into SEND_MESSAGE_V2 or
SEND_BATCH_MESSAGE on the broker that owns the selected queue."""

from __future__ import annotations

import asyncio
import logging
import time

from orbitmq.client import MQBrokerError
from orbitmq.client.results import SendResult, SendStatus
from orbitmq.common import speedups
from orbitmq.common.constants import is_retry_topic
from orbitmq.common.message import Message
from orbitmq.common.protowire import varint as _varint
from orbitmq.common.sysflag import TRANSACTION_PREPARED_TYPE
from orbitmq.common.topic_config import TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter, errors, validation
from orbitmq.proxy.cluster import (
    FAILOVER_BACKOFF_INITIAL_S,
    FAILOVER_BACKOFF_MAX_S,
    AddressableQueue,
    ClusterService,
)
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.trace import ProxyTracer
from orbitmq.proxy.transaction import transaction_id_of_send
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)

log = logging.getLogger("orbitmq.proxy.failover")
Code = pb.Code
# How a failed send to a master ended, for failover (failure_kind).
NOT_SENT = "not-sent"  # no connection, or the broker refused it unstored (fenced, a slave)
UNKNOWN_OUTCOME = "unknown"  # the connection broke or timed out after the request left: maybe stored


def failure_kind(exc: BaseException) -> str | None:
    """NOT_SENT / UNKNOWN_OUTCOME for failures a new master (or another set) may fix; None otherwise.

    SERVICE_NOT_AVAILABLE is what a fenced master (not yet RUNNING) or a demoted one answers.
    """
    if isinstance(exc, RemotingConnectError):
        return NOT_SENT
    if isinstance(exc, (RemotingSendRequestError, RemotingTimeoutError)):
        return UNKNOWN_OUTCOME
    if isinstance(exc, MQBrokerError) and exc.code == ResponseCode.SERVICE_NOT_AVAILABLE:
        return NOT_SENT
    return None


_TOPIC_TYPE_OF_MESSAGE = {
    pb.MessageType.NORMAL: TopicMessageType.NORMAL,
    pb.MessageType.FIFO: TopicMessageType.FIFO,
    pb.MessageType.DELAY: TopicMessageType.DELAY,
    pb.MessageType.TRANSACTION: TopicMessageType.TRANSACTION,
    pb.MessageType.PRIORITY: TopicMessageType.PRIORITY,
}
OK = Code.OK
_INTERNAL_SERVER_ERROR = Code.INTERNAL_SERVER_ERROR
_SEND_OK = SendStatus.SEND_OK
_SEND_STATUS_CODES = {
    "SEND_OK": Code.OK,
    "FLUSH_DISK_TIMEOUT": Code.MASTER_PERSISTENCE_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": Code.SLAVE_PERSISTENCE_TIMEOUT,
    "SLAVE_NOT_AVAILABLE": Code.HA_NOT_AVAILABLE,
}


# The gRPC message types each topic type takes (check_message_type's rule as a lookup table).
_ACCEPTED_TYPES: dict[TopicMessageType, frozenset[int]] = {
    topic_type: frozenset(m for m, t in _TOPIC_TYPE_OF_MESSAGE.items()
                          if t == topic_type or topic_type == TopicMessageType.MIXED)
    for topic_type in TopicMessageType
}


def check_message_type(topic: str, topic_type: TopicMessageType, message_type: int) -> None:
    """DefaultTopicMessageTypeValidator: a MIXED topic takes all, others only their own type."""
    actual = _TOPIC_TYPE_OF_MESSAGE.get(message_type, TopicMessageType.UNSPECIFIED)
    if actual == TopicMessageType.UNSPECIFIED or (actual != topic_type and topic_type != TopicMessageType.MIXED):
        raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         f"TopicMessageType validate failed, the expected type is {topic_type.value}, "
                         f"but actual type is {actual.value} (topic {topic})")


_INT64_MAX = 2**63 - 1
_BYTE = [bytes((i,)) for i in range(128)]
_CONTINUED = [bytes((i | 0x80,)) for i in range(128)]
_OK_STATUS_BYTES = errors.OK_STATUS.SerializeToString()
# Field 1 (status) of SendMessageResponse and of SendResultEntry: the OK Status.
_OK_STATUS_FIELD = b"\x0a" + _varint(len(_OK_STATUS_BYTES)) + _OK_STATUS_BYTES
_ENTRY_TAG = b"\x12"  # SendMessageResponse.entries = 2, length-delimited
_MESSAGE_ID_TAG = b"\x12"  # SendResultEntry.message_id = 2, length-delimited
_OFFSET_TAG = b"\x20"  # SendResultEntry.offset = 4, varint


# Compiled twin: _speedups_producer.ok_response (same response).
def ok_response(message_ids: list[str], first_offset: int) -> spb.SendMessageResponse:
    """SendMessageResponse{OK, one OK entry per id at consecutive offsets from first_offset >= 0}.

    Equal to adding the entries one by one (entries.add(status=OK_STATUS, message_id=..., offset=...)),
    at a fraction of the cost: the entries are written in protobuf wire format and parsed in one
    C call. Consecutive offsets share all but their lowest varint byte, encoded once per 128.
    """
    parts = [_OK_STATUS_FIELD]
    offset = first_offset
    high = -1
    high_bytes = b""
    status_size = len(_OK_STATUS_FIELD) + 2  # + the message id and offset tags
    for message_id in message_ids:
        raw = message_id.encode("utf-8")
        size = len(raw)
        if offset < 128:
            offset_bytes = _BYTE[offset]
        else:
            if offset >> 7 != high:
                high = offset >> 7
                high_bytes = _varint(high)
            offset_bytes = _CONTINUED[offset & 0x7F] + high_bytes
        entry_size = status_size + size + len(offset_bytes) + (1 if size < 128 else len(_varint(size)))
        parts += (_ENTRY_TAG, _BYTE[entry_size] if entry_size < 128 else _varint(entry_size), _OK_STATUS_FIELD,
                  _MESSAGE_ID_TAG, _BYTE[size] if size < 128 else _varint(size), raw, _OFFSET_TAG, offset_bytes)
        offset += 1
    return spb.SendMessageResponse.FromString(b"".join(parts))


_py_ok_response = ok_response


# Compiled twin: _speedups_producer.encode_messages (same lists, same errors).
def encode_messages(request: spb.SendMessageRequest, topic: str, namespace: str, remote_address: str,
                    config: ProxyConfig, accepted: frozenset[int] | None, topic_type: TopicMessageType | None,
                    producer_group: str | None = None) -> tuple[list[bytes], list[str], list[str]]:
    """(bodies, properties strings, message ids) of a SendMessage request, checked message by message.

    Per message: same topic (``topic`` and ``namespace`` as the client named them), body size,
    properties (encode_message_properties) and the topic's message type, in that order; the first
    refusal raises. Producer group: ``producer_group``, the topic the brokers know (by default
    ``topic``), as SendMessageActivity#buildMessage names it for the transaction checker.
    """
    if producer_group is None:
        producer_group = topic
    empty_check = config.enable_message_body_empty_check
    limit = config.max_message_size
    encode = converter.encode_message_properties
    bodies: list[bytes] = []
    properties: list[str] = []
    ids: list[str] = []
    for proto in request.messages:
        resource = proto.topic
        if resource.name != topic or resource.resource_namespace != namespace:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
        body = proto.body
        if (empty_check and not body) or 0 < limit < len(body):
            converter.validate_body(body, config)
        props, message_id, message_type = encode(proto, producer_group, remote_address, config)
        if accepted is not None and message_type not in accepted:
            check_message_type(producer_group, topic_type, message_type)
        bodies.append(body)
        properties.append(props)
        ids.append(message_id)
    return bodies, properties, ids


_py_encode_messages = encode_messages


def _encode_one(proto: pb.Message, topic: str, namespace: str, remote_address: str, config: ProxyConfig,
                accepted: frozenset[int] | None, topic_type: TopicMessageType | None,
                producer_group: str | None = None) -> tuple[bytes, str, str]:
    """One message of encode_messages (the compiled one hands it the messages it does not write)."""
    if producer_group is None:
        producer_group = topic
    resource = proto.topic
    if resource.name != topic or resource.resource_namespace != namespace:
        raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
    body = proto.body
    if (config.enable_message_body_empty_check and not body) or 0 < config.max_message_size < len(body):
        converter.validate_body(body, config)
    props, message_id, message_type = converter.encode_message_properties(proto, producer_group, remote_address,
                                                                          config)
    if accepted is not None and message_type not in accepted:
        check_message_type(producer_group, topic_type, message_type)
    return body, props, message_id


class ProducerActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster
        # Message trace for gRPC clients (services/proxy/trace.py), set by the server with traceEnable.
        self.tracer: ProxyTracer | None = None

    async def send_message(self, ctx: ProxyContext, request: spb.SendMessageRequest) -> spb.SendMessageResponse:
        """Checks and converts every message, then sends them in one Remoting request.

        Per message only a body and a properties string are made (no Message, no properties
        dict); cached routes and topic types are read without awaiting. The checks, their order
        and the bytes sent are those of the Message-based path.
        """
        protos = request.messages
        tracer = self.tracer
        started = time.monotonic() if tracer is not None else 0.0
        if not protos:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        config = self.config
        cluster = self.cluster
        first = protos[0]
        resource = first.topic
        # The topic the brokers know: "{namespace}%{name}" (GrpcConverter#wrapResourceWithNamespace).
        topic = validation.topic_of(resource)
        accepted: frozenset[int] | None = None
        if config.enable_topic_message_type_check:
            topic_type = cluster.cached_topic_message_type(topic)
            if topic_type is None:
                topic_type = await cluster.topic_message_type(topic)
            accepted = _ACCEPTED_TYPES[topic_type]
        else:
            topic_type = None
        remote_address = ctx.remote_address
        bodies, properties, ids = encode_messages(request, resource.name, resource.resource_namespace, remote_address,
                                                  config, accepted, topic_type, topic)
        single = len(bodies) == 1
        sys_flag = converter.build_sys_flag(first)
        if not single:
            # One sysFlag goes with the whole batch: a mixed one would be misfiled, so it is refused.
            converter.check_batch_transactions(properties, sys_flag)
        # A batch goes to its first message's group queue too (the SDK batches one message group per
        # request), so batched FIFO messages keep their group's order.
        group = first.system_properties.message_group or None
        queue = cluster.cached_write_queue(topic, group)
        if queue is None:
            queue = await cluster.select_write_queue(topic, group)
        api = cluster.api
        try:
            if not single:
                result = await api.send_batch_encoded(queue.broker_addr, queue.broker_name, topic, bodies, properties,
                                                      ids, topic, queue.queue_id, sys_flag)
            elif is_retry_topic(topic):
                # A retry topic's RECONSUME_TIME travels in the header: the Message path writes that.
                props_dict = converter.build_message_properties(first, topic, remote_address, config)
                result = await api.send_message(queue.broker_addr, queue.broker_name,
                                                Message(topic, bodies[0], 0, props_dict), topic, queue.queue_id,
                                                sys_flag)
            else:
                result = await api.send_encoded(queue.broker_addr, queue.broker_name, topic, bodies[0], properties[0],
                                                ids[0], topic, queue.queue_id, sys_flag)
        except (MQBrokerError, RemotingError) as exc:
            if failure_kind(exc) is None:
                # A deleted topic or a broken broker: look the route up afresh for the client's retry.
                if not isinstance(exc, MQBrokerError) or exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    cluster.routes.invalidate(topic)
                raise
            result = await self._resend(ctx, exc, queue, group, topic, bodies, properties, ids, first, sys_flag)
        send_status = result.status
        if tracer is not None:  # Pub records: formatted and queued, never awaited
            tracer.on_send_request(topic, protos, ids, result, queue.broker_addr, started, ctx.remote_address)
        # SEND_OK by identity: an Enum's .value and a protobuf enum's attribute are Python-level calls.
        code = OK if send_status is _SEND_OK else _SEND_STATUS_CODES.get(send_status.value, _INTERNAL_SERVER_ERROR)
        if code == OK:
            offset = result.queue_offset
            transaction_id = result.transaction_id or ""
            if transaction_id and sys_flag & TRANSACTION_PREPARED_TYPE:
                # A half message: an id any proxy can end it with (services/proxy/transaction.py).
                transaction_id = transaction_id_of_send(result)
            recall_handle = result.recall_handle or ""
            if not transaction_id and not recall_handle and 0 <= offset <= _INT64_MAX - len(ids):
                return ok_response(ids, offset)
            response = spb.SendMessageResponse(status=errors.OK_STATUS)
            add = response.entries.add
            ok_status = errors.OK_STATUS
            for message_id in ids:
                add(status=ok_status, message_id=message_id, offset=offset, transaction_id=transaction_id,
                    recall_handle=recall_handle)
                offset += 1
            return response
        response = spb.SendMessageResponse(status=errors.status(code, Code.Name(code)))
        add = response.entries.add
        failed = errors.status(code, f"send message failed, sendStatus={result.status.value}")
        for _ in ids:
            add(status=failed)
        return response


    async def _send_once(self, queue: AddressableQueue, topic: str, bodies: list[bytes], properties: list[str],
                         ids: list[str], first: pb.Message, remote_address: str, sys_flag: int) -> SendResult:
        """One attempt of send_message's Remoting call (the same three shapes)."""
        api = self.cluster.api
        if len(bodies) > 1:
            return await api.send_batch_encoded(queue.broker_addr, queue.broker_name, topic, bodies, properties, ids,
                                                topic, queue.queue_id, sys_flag)
        if is_retry_topic(topic):
            props_dict = converter.build_message_properties(first, topic, remote_address, self.config)
            return await api.send_message(queue.broker_addr, queue.broker_name,
                                          Message(topic, bodies[0], 0, props_dict), topic, queue.queue_id, sys_flag)
        return await api.send_encoded(queue.broker_addr, queue.broker_name, topic, bodies[0], properties[0], ids[0],
                                      topic, queue.queue_id, sys_flag)

    async def _resend(self, ctx: ProxyContext, exc: Exception, queue: AddressableQueue, group: str | None,
                      topic: str, bodies: list[bytes], properties: list[str], ids: list[str], first: pb.Message,
                      sys_flag: int) -> SendResult:
        """Send again after ``exc`` (failure_kind not None) on ``queue``: drop the dead master's routes,
        re-resolve (waiting for a new master while the set has none) and retry on the new master or
        another set's queue; a message group stays on its queue. Gives up with the last error once
        retryTimesWhenSendFailed resends are used or brokerFailoverWaitMillis (or the client's
        deadline) has passed. Resends after an unknown outcome are counted as possible duplicates.
        """
        cluster = self.cluster
        stats = cluster.failover
        deadline = cluster.failover_deadline(ctx.time_remaining)
        resends_left = self.config.retry_times_when_send_failed
        refusal_backoff = FAILOVER_BACKOFF_INITIAL_S
        while True:
            kind = failure_kind(exc)
            if kind is None:
                raise exc
            if kind is not NOT_SENT:
                if resends_left <= 0:
                    raise exc
                resends_left -= 1
            cluster.broker_unreachable(queue.broker_name, queue.broker_addr, exc)
            refused = isinstance(exc, MQBrokerError)  # alive but not serving yet (fenced) or demoted
            if refused:
                await asyncio.sleep(min(refusal_backoff, max(deadline - time.monotonic(), 0.0)))
                refusal_backoff = min(refusal_backoff * 2, FAILOVER_BACKOFF_MAX_S)
            if time.monotonic() >= deadline:
                raise exc
            failed = queue
            queue = await cluster.failover_write_queue(topic, group, failed, deadline, exclude_failed=not refused)
            stats.send_retries += 1
            if kind is UNKNOWN_OUTCOME:
                stats.possible_duplicates += len(ids)
                log.warning("resending %d message(s) of topic %s to %s/%s after an unknown outcome on %s (%s): "
                            "possible duplicates, %d so far", len(ids), topic, queue.broker_name, queue.broker_addr,
                            failed.broker_addr, exc, stats.possible_duplicates)
            else:
                log.info("resending %d message(s) of topic %s to %s/%s after %s", len(ids), topic,
                         queue.broker_name, queue.broker_addr, exc)
            try:
                return await self._send_once(queue, topic, bodies, properties, ids, first, ctx.remote_address,
                                             sys_flag)
            except (MQBrokerError, RemotingError) as again:
                exc = again

_fast = speedups.load("orbitmq.proxy._speedups_producer")  # None: the code above runs
if _fast is not None:
    encode_messages = _fast.encode_messages
    ok_response = _fast.ok_response
