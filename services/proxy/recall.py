"""RecallMessage (RecallMessageActivity + ProducerProcessor.recallMessage): a timer message's
recall handle -> RECALL_MESSAGE (370) on the broker the handle names.

As upstream: the topic is validated and must take DELAY messages (when the topic type check is
on); the handle is decoded here only to find its broker, a handle that does not decode is
answered INTERNAL_SERVER_ERROR (upstream's ProxyException code); the broker is given 2 s; its
refusals map like every broker answer (services/proxy/errors.py: NO_PERMISSION -> FORBIDDEN,
TOPIC_NOT_EXIST -> TOPIC_NOT_FOUND, ILLEGAL_OPERATION and the rest -> INTERNAL_SERVER_ERROR).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orbitmq.client.errors import MQBrokerError
from orbitmq.common.recall_handle import RecallHandleError, decode_recall_handle
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import errors, validation
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.producer import check_message_type
from orbitmq.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from orbitmq.proxy.cluster import ClusterService
    from orbitmq.proxy.config import ProxyConfig
    from orbitmq.proxy.context import ProxyContext

Code = pb.Code
RECALL_TIMEOUT_S = 2.0


class RecallActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService) -> None:
        self.config = config
        self.cluster = cluster

    async def recall_message(self, ctx: ProxyContext, request: spb.RecallMessageRequest) -> spb.RecallMessageResponse:
        topic = validation.topic_of(request.topic)  # "{namespace}%{name}"
        if self.config.enable_topic_message_type_check:
            check_message_type(topic, await self.cluster.topic_message_type(topic), pb.MessageType.DELAY)
        try:
            handle = decode_recall_handle(request.recall_handle)
        except RecallHandleError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        addr = await self.cluster.master_of(handle.broker_name, topic, ProxyError(
            Code.INTERNAL_SERVER_ERROR, f"recall handle names broker {handle.broker_name}, which has no master now"))
        # RecallMessageRequestHeader; producerGroup is the topic, as for every gRPC producer here.
        fields = {"producerGroup": topic, "topic": topic, "recallHandle": request.recall_handle,
                  "bname": handle.broker_name}
        response = await self.cluster.api.invoke(addr, RequestCode.RECALL_MESSAGE, fields, timeout=RECALL_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, addr)
        message_id = (response.ext_fields or {}).get("msgId") or handle.message_id
        return spb.RecallMessageResponse(status=errors.ok(), message_id=message_id)
