"""SendMessage (SendMessageActivity + ProducerProcessor): gRPC messages into SEND_MESSAGE_V2 or
SEND_BATCH_MESSAGE on the broker that owns the selected queue."""

from __future__ import annotations

from orbitmq.client import MQBrokerError
from orbitmq.common.message import Message, MessageConst
from orbitmq.common.topic_config import TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter, errors, validation
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError

Code = pb.Code

_TOPIC_TYPE_OF_MESSAGE = {
    pb.MessageType.NORMAL: TopicMessageType.NORMAL,
    pb.MessageType.FIFO: TopicMessageType.FIFO,
    pb.MessageType.DELAY: TopicMessageType.DELAY,
    pb.MessageType.TRANSACTION: TopicMessageType.TRANSACTION,
}
OK = Code.OK
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_SEND_STATUS_CODES = {
    "SEND_OK": Code.OK,
    "FLUSH_DISK_TIMEOUT": Code.MASTER_PERSISTENCE_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": Code.SLAVE_PERSISTENCE_TIMEOUT,
    "SLAVE_NOT_AVAILABLE": Code.HA_NOT_AVAILABLE,
}


def check_message_type(topic: str, topic_type: TopicMessageType, message_type: int) -> None:
    """DefaultTopicMessageTypeValidator: a MIXED topic takes all, others only their own type."""
    actual = _TOPIC_TYPE_OF_MESSAGE.get(message_type, TopicMessageType.UNSPECIFIED)
    if actual == TopicMessageType.UNSPECIFIED or (actual != topic_type and topic_type != TopicMessageType.MIXED):
        raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         f"TopicMessageType validate failed, the expected type is {topic_type.value}, "
                         f"but actual type is {actual.value} (topic {topic})")


class ProducerActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster

    async def send_message(self, ctx: ProxyContext, request: spb.SendMessageRequest) -> spb.SendMessageResponse:
        if not request.messages:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        config = self.config
        first = request.messages[0]
        topic = first.topic.name
        namespace = first.topic.resource_namespace
        validation.validate_topic(topic)
        type_check = config.enable_topic_message_type_check
        if type_check:
            topic_type = await self.cluster.topic_message_type(topic)
        remote_address = ctx.remote_address
        validate_body = converter.validate_body
        build_properties = converter.build_message_properties
        type_of = converter.message_type_of_request
        messages: list[Message] = []
        append = messages.append
        for proto in request.messages:
            resource = proto.topic
            if resource.name != topic or resource.resource_namespace != namespace:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            body = proto.body
            validate_body(body, config)
            props = build_properties(proto, topic, remote_address, config)
            if type_check:
                check_message_type(topic, topic_type, type_of(proto))
            append(Message(topic, body, 0, props))
        group = first.system_properties.message_group if len(messages) == 1 else None
        queue = await self.cluster.select_write_queue(topic, group)
        sys_flag = converter.build_sys_flag(first)
        try:
            if len(messages) == 1:
                result = await self.cluster.api.send_message(queue.broker_addr, queue.broker_name, messages[0],
                                                             topic, queue.queue_id, sys_flag)
            else:
                result = await self.cluster.api.send_batch(queue.broker_addr, queue.broker_name, messages, topic,
                                                           queue.queue_id, sys_flag)
        except (MQBrokerError, RemotingError) as exc:
            # A deleted topic or a vanished broker: look the route up afresh for the client's retry.
            if not isinstance(exc, MQBrokerError) or exc.code == ResponseCode.TOPIC_NOT_EXIST:
                self.cluster.routes.invalidate(topic)
            raise
        code = _SEND_STATUS_CODES.get(result.status.value, Code.INTERNAL_SERVER_ERROR)
        response = spb.SendMessageResponse(
            status=errors.OK_STATUS if code == OK else errors.status(code, Code.Name(code)))
        add = response.entries.add
        if code == OK:
            # entries.add copies the shared OK status; one call per entry, no intermediate objects.
            ok_status = errors.OK_STATUS
            offset = result.queue_offset
            transaction_id = result.transaction_id or ""
            recall_handle = result.recall_handle or ""
            for msg in messages:
                add(status=ok_status, message_id=msg.properties.get(_UNIQ_KEY) or "", offset=offset,
                    transaction_id=transaction_id, recall_handle=recall_handle)
                offset += 1
        else:
            failed = errors.status(code, f"send message failed, sendStatus={result.status.value}")
            for _ in messages:
                add(status=failed)
        return response
