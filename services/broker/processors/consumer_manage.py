"""Consumer offsets: QUERY_CONSUMER_OFFSET 14 and UPDATE_CONSUMER_OFFSET 15 (ConsumerManageProcessor)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import topic_support
from .base import Fields, RequestError, ext

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController


class ConsumerManageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self) -> None:
        self.broker.register_processor(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        self.broker.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)

    async def query_consumer_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        group, topic, queue_id = f.str("consumerGroup"), f.str("topic"), f.int("queueId")
        set_zero_if_not_found = f.bool("setZeroIfNotFound", True)
        offset = self.broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return request.response_to(ResponseCode.SUCCESS, None, ext(offset=offset))
        # Nothing committed: a queue that still holds its very first message, in memory, starts
        # at 0 (ConsumerManageProcessor#queryConsumerOffset, checkInMemByConsumeOffset); otherwise
        # the client must fall back to its consumeFromWhere policy.
        store = self.broker.message_store
        if not set_zero_if_not_found:
            return request.response_to(ResponseCode.QUERY_NOT_FOUND,
                                       "Not found, do not set to zero, maybe this group boot first")
        if store.get_min_offset_in_queue(topic, queue_id) <= 0 and store.check_in_mem_by_consume_offset(topic, queue_id, 0):
            return request.response_to(ResponseCode.SUCCESS, None, ext(offset=0))
        return request.response_to(ResponseCode.QUERY_NOT_FOUND,
                                   "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    async def update_consumer_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        group, topic = f.str("consumerGroup"), f.str("topic")
        queue_id, offset = f.int("queueId"), f.long("commitOffset")
        # The group first, then the topic (ConsumerManageProcessor#updateConsumerOffset).
        if topic_support.find_subscription_group_config(self.broker, group) is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} not exist!")
        if self.broker.topic_config_manager.select_topic_config(topic) is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        if queue_id < 0:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal")
        self.broker.consumer_offset_manager.commit_offset(group, topic, queue_id, offset,
                                                          self.broker.remote_addr(channel))
        return request.response_to(ResponseCode.SUCCESS)
