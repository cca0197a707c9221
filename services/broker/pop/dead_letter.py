"""Re-puts a popped message into its group's pop retry topic or %DLQ%<group>.

Shared by the revive service (un-acked messages whose invisible time passed) and orderly pops
(a message delivered more than the group's retryMaxTimes is moved aside instead of blocking its
queue forever). The copy keeps body, flag, properties and the message id (UNIQ_KEY) and
carries reconsumeTimes + 1, as RocketMQ's revive does.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from orbitmq.broker.processors import topic_support
from orbitmq.broker.store.model import MessageExtBrokerInner
from orbitmq.common.constants import PERM_READ, PERM_WRITE, dlq_topic, is_retry_topic
from orbitmq.common.extra_info import build_pop_retry_topic, parse_normal_topic
from orbitmq.common.message import MessageConst, MessageExt, properties_to_string

from .constants import RETRY_QUEUE_NUM

if TYPE_CHECKING:
    from .interfaces import DeadLetterBroker, Putter

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1
DEFAULT_RETRY_MAX_TIMES = 16


def retry_max_times(broker: DeadLetterBroker, group: str) -> int:
    config = broker.subscription_group_manager.get(group)
    return config.retry_max_times if config is not None else DEFAULT_RETRY_MAX_TIMES


def _inner(broker: Putter, topic: str, msg: MessageExt, properties: dict[str, str],
           reconsume_times: int) -> MessageExtBrokerInner:
    host = (broker.config.broker_ip1, broker.config.listen_port)
    return MessageExtBrokerInner(
        topic=topic, queue_id=0, body=msg.body, flag=msg.flag, properties=properties,
        properties_string=properties_to_string(properties), born_timestamp=msg.born_timestamp,
        born_host=host, store_host=host, reconsume_times=reconsume_times, sys_flag=msg.sys_flag)


def retry_message(broker: DeadLetterBroker, topic: str, group: str, msg: MessageExt,
                  pop_time: int, separate_queue: bool = False) -> MessageExtBrokerInner:
    """The retry of a revived message: queue 0 of its POP retry topic, or, with
    ``separate_queue`` (useSeparateRetryQueue), the queue it was popped from."""
    retry_topic = topic if is_retry_topic(topic) else build_pop_retry_topic(topic, group)
    properties = dict(msg.properties)
    properties.pop(MessageConst.POP_CK, None)
    if msg.reconsume_times == 0 or MessageConst.FIRST_POP_TIME not in properties:
        properties[MessageConst.FIRST_POP_TIME] = str(pop_time)
    queue_nums = RETRY_QUEUE_NUM
    if separate_queue and not is_retry_topic(topic):
        origin = broker.topic_config_manager.select_topic_config(topic)
        queue_nums = max(RETRY_QUEUE_NUM, origin.write_queue_nums if origin is not None else 0)
    config = topic_support.create_topic_in_send_message_back_method(broker, retry_topic, queue_nums,
                                                                    PERM_READ | PERM_WRITE, 0)
    if separate_queue and config.write_queue_nums < queue_nums:
        # PopConsumerService#createRetryTopicIfNeeded: the retry topic grows with its topic.
        config = replace(config, read_queue_nums=queue_nums, write_queue_nums=queue_nums)
        broker.topic_config_manager.put(config)
        broker.on_metadata_changed(topics=True)
    inner = _inner(broker, retry_topic, msg, properties, msg.reconsume_times + 1)
    if separate_queue:
        # PopReviveService#getRetryQueueId: the original queue, 0 when the retry topic has fewer.
        inner.queue_id = msg.queue_id if 0 <= msg.queue_id < config.write_queue_nums else 0
    return inner


def dlq_message(broker: DeadLetterBroker, topic: str, group: str, msg: MessageExt,
                reconsume_times: int) -> MessageExtBrokerInner:
    properties = dict(msg.properties)
    properties.pop(MessageConst.POP_CK, None)
    origin_topic = parse_normal_topic(topic, group)
    properties.setdefault(MessageConst.RETRY_TOPIC, origin_topic)
    properties.setdefault(MessageConst.DLQ_ORIGIN_TOPIC, origin_topic)
    properties.setdefault(MessageConst.DLQ_ORIGIN_MESSAGE_ID, msg.uniq_id_or_msg_id)
    target = dlq_topic(group)
    topic_support.create_topic_in_send_message_back_method(broker, target, DLQ_NUMS_PER_GROUP,
                                                           PERM_READ | PERM_WRITE, 0)
    log.info("%s@%d:%d of group %s reached retryMaxTimes, move it to %s", topic, msg.queue_id, msg.queue_offset,
             group, target)
    return _inner(broker, target, msg, properties, reconsume_times)


async def put(broker: Putter, inner: MessageExtBrokerInner, what: str) -> bool:
    return (await put_with_status(broker, inner, what))[0]


async def put_with_status(broker: Putter, inner: MessageExtBrokerInner, what: str) -> tuple[bool, str]:
    """The re-put and its PutMessageStatus name (the put_status label of the POP metrics)."""
    try:
        result = await broker.put_message(inner)
    except Exception:
        log.exception("re-put of %s into %s failed", what, inner.topic)
        return False, "UNKNOWN_ERROR"
    status = getattr(getattr(result, "status", None), "name", "UNKNOWN_ERROR")
    if result is None or not result.is_ok():
        log.error("re-put of %s into %s failed: %s", what, inner.topic, status)
        return False, status
    return True, status
