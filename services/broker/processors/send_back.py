"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume.

The stored original (looked up by its CommitLog offset) is re-put to ``%RETRY%<group>`` with
delay level ``3 + reconsumeTimes`` unless the consumer chose one, so it comes back after a
growing delay through SCHEDULE_TOPIC_XXXX; once ``reconsumeTimes`` reaches the group's
retryMaxTimes (or the consumer's maxReconsumeTimes), or the level is negative, it goes to the
write-only ``%DLQ%<group>`` instead. The original record is never modified.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from orbitmq.common.constants import PERM_READ, PERM_WRITE, dlq_topic, is_writeable, retry_topic
from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import RecordError, decode_record
from orbitmq.common.sysflag import MULTI_TAGS_FLAG
from orbitmq.common.topic_config import MULTI_TAG
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import topic_support
from .base import Fields, RequestError
from .store_results import status_name

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1
FIRST_RETRY_DELAY_LEVEL = 3
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"


def _random_queue_id(queue_nums: int) -> int:
    """abs(random.nextInt() % 99999999) % queueNums, as upstream picks retry/DLQ queues."""
    return abs(random.randrange(-(2**31), 2**31) % 99999999) % max(1, queue_nums)


class SendBackProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self) -> None:
        self.broker.register_processor(RequestCode.CONSUMER_SEND_MSG_BACK, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        store = self.broker.message_store
        if store is not None and store.is_transient_store_pool_deficient():
            # Upstream's SendMessageProcessor serves this code too: its rejectRequest applies.
            return request.response_to(ResponseCode.SYSTEM_BUSY,
                                       "[REJECTREQUEST]system busy, start flow control for a while")
        f = Fields(request.ext_fields)
        offset = f.long("offset")
        group = f.str("group")
        delay_level = f.int("delayLevel")
        unit_mode = f.bool("unitMode", False)
        header_max_reconsume = f.int("maxReconsumeTimes") if f.has("maxReconsumeTimes") else None
        broker = self.broker
        if not is_writeable(broker.config.broker_permission):
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the broker[{broker.config.broker_ip1}] sending message is forbidden")
        group_config = topic_support.find_subscription_group_config(broker, group)
        if group_config is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                               f"subscription group not exist, {group} {FAQ_URL}")
        if group_config.retry_queue_nums <= 0:
            return request.response_to(ResponseCode.SUCCESS)  # the group does not retry: dropped

        new_topic = retry_topic(group)
        queue_id = _random_queue_id(group_config.retry_queue_nums)
        topic_sys_flag = 2 if unit_mode else 0  # TopicSysFlag.buildSysFlag(false, true)
        topic_config = topic_support.create_topic_in_send_message_back_method(
            broker, new_topic, group_config.retry_queue_nums, PERM_WRITE | PERM_READ, topic_sys_flag)
        if topic_config is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
        if not is_writeable(topic_config.perm):
            raise RequestError(ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")

        record = broker.message_store.select_one_message_by_offset(offset) if offset >= 0 else None
        try:
            msg = decode_record(record, 0, check_crc=False) if record else None
        except RecordError:
            msg = None
        if msg is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")

        props = dict(msg.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"

        max_reconsume = group_config.retry_max_times
        if header_max_reconsume is not None:  # clients since V3_4_9 send their own limit
            max_reconsume = header_max_reconsume
        if msg.reconsume_times >= max_reconsume or delay_level < 0:
            new_topic = dlq_topic(group)
            queue_id = _random_queue_id(DLQ_NUMS_PER_GROUP)
            topic_config = topic_support.create_topic_in_send_message_back_method(
                broker, new_topic, DLQ_NUMS_PER_GROUP, PERM_WRITE, 0)
            if topic_config is None:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
            props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        else:
            if delay_level == 0:
                delay_level = FIRST_RETRY_DELAY_LEVEL + msg.reconsume_times
            props[MessageConst.DELAY_TIME_LEVEL] = str(delay_level)

        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = msg.msg_id
        sys_flag = msg.sys_flag
        if topic_config.topic_filter_type == MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        inner = broker.new_inner_message(
            topic=new_topic, queue_id=queue_id, body=msg.body, flag=msg.flag, properties=props,
            sys_flag=sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            reconsume_times=msg.reconsume_times + 1)
        result = await broker.send_queue.submit(lambda: broker.put_message(inner))
        if result is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR, "putMessageResult is null")
        if status_name(result.status) == "PUT_OK":
            log.debug("send back %s of group %s to %s (reconsumeTimes %d)", msg.msg_id, group, new_topic,
                      msg.reconsume_times + 1)
            return request.response_to(ResponseCode.SUCCESS)
        return request.response_to(ResponseCode.SYSTEM_ERROR, status_name(result.status))
