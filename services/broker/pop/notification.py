"""NOTIFICATION (200054): long-poll until a group has something to pop from a topic.

Answers SUCCESS with hasMsg=true as soon as the topic (or its pop retry topic) holds messages
past the group's pop offset in a queue not blocked by an orderly batch; hasMsg=false at
pollTime, and pollingFull=true when the polling table is full. Nothing is handed out.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors import topic_support
from orbitmq.broker.processors.base import Fields, RequestError, ext
from orbitmq.common.constants import is_readable
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .pop_processor import MAX_PARK_SLICE_SECONDS

if TYPE_CHECKING:
    from .interfaces import NotificationPop


class NotificationProcessor:
    def __init__(self, pop: NotificationPop) -> None:
        self.pop = pop
        self.broker = pop.broker

    def register(self) -> None:
        self.broker.register_processor(RequestCode.NOTIFICATION, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        try:
            return await self._process(request, channel)
        except RequestError as exc:
            if exc.remark.startswith("the custom field"):
                raise  # a header that does not decode: no NotificationResponseHeader upstream either
            # NotificationResponseHeader's two primitives are on the wire, false, with a refusal too.
            return request.response_to(exc.code, exc.remark, ext(hasMsg=False, pollingFull=False))

    async def _process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        group = f.str("consumerGroup")
        topic = f.str("topic")
        queue_id = f.int("queueId")
        poll_time = f.long("pollTime")
        f.long("bornTime")
        order = f.bool("order", False)
        attempt_id = f.opt_str("attemptId")
        broker = self.broker
        if poll_time < 0:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"pollTime[{poll_time}] must not be negative")
        if not is_readable(broker.config.broker_permission):
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the broker[{broker.config.broker_ip1}] peeking message is forbidden")
        tc = broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! "
                               "http://rocketmq.apache.org/docs/faq/")
        if not is_readable(tc.perm):
            raise RequestError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.read_queue_nums or queue_id < -1:
            raise RequestError(ResponseCode.INVALID_PARAMETER,
                               f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                               f"[{tc.read_queue_nums}] consumer:[{broker.remote_addr(channel)}]")
        group_config = topic_support.find_subscription_group_config(broker, group)
        if group_config is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                               f"subscription group [{group}] does not exist, http://rocketmq.apache.org/docs/faq/")
        if not group_config.consume_enable:
            raise RequestError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        deadline = broker.now_ms() + poll_time
        while True:
            if self.pop.has_message(topic, group, queue_id, order, attempt_id):
                return request.response_to(ResponseCode.SUCCESS, None, ext(hasMsg=True, pollingFull=False))
            remaining = deadline - broker.now_ms()
            if remaining <= 0 or self.pop.long_polling.stopped or not getattr(channel, "is_active", True):
                return request.response_to(ResponseCode.SUCCESS, None, ext(hasMsg=False, pollingFull=False))
            parked = self.pop.long_polling.park(topic, group, queue_id, None, notification=True)
            if parked is None:
                return request.response_to(ResponseCode.SUCCESS, None, ext(hasMsg=False, pollingFull=True))
            try:
                await asyncio.wait_for(asyncio.shield(parked.woken), min(remaining / 1000.0, MAX_PARK_SLICE_SECONDS))
            except TimeoutError:
                pass
            finally:
                self.pop.long_polling.unpark(parked)
