"""SendMessage (SendMessageActivity + ProducerProcessor): gRPC messages into SEND_MESSAGE_V2 or
SEND_BATCH_MESSAGE on the broker that owns the selected queue."""

from __future__ import annotations

from orbitmq.client import MQBrokerError
from orbitmq.common.message import Message
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
        first = request.messages[0]
        topic = first.topic.name
        validation.validate_topic(topic)
        if self.config.enable_topic_message_type_check:
            topic_type = await self.cluster.topic_message_type(topic)
        messages: list[Message] = []
        for proto in request.messages:
            if proto.topic.name != topic or proto.topic.resource_namespace != first.topic.resource_namespace:
                raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            converter.validate_body(proto.body, self.config)
            props = converter.build_message_properties(proto, topic, ctx.remote_address, self.config)
            if self.config.enable_topic_message_type_check:
                check_message_type(topic, topic_type, converter.message_type_of_request(proto))
            messages.append(Message(topic=topic, body=proto.body, properties=props))
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
        entries = []
        for index, msg in enumerate(messages):
            if code == OK:
                entries.append(spb.SendResultEntry(
                    status=errors.ok(), message_id=msg.uniq_key or "", offset=result.queue_offset + index,
                    transaction_id=result.transaction_id or "", recall_handle=result.recall_handle or ""))
            else:
                entries.append(spb.SendResultEntry(status=errors.status(
                    code, f"send message failed, sendStatus={result.status.value}")))
        return spb.SendMessageResponse(status=errors.status(code, Code.Name(code)), entries=entries)
