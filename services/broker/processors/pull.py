"""PULL_MESSAGE (11) with long polling (PullMessageProcessor + PullRequestHoldService).

A pull that finds nothing and carries FLAG_SUSPEND is parked in the hold service; this
coroutine then awaits its release (a matching arrival, or the hold timeout) and re-runs the
pull once without permission to suspend, answering with messages or PULL_NOT_FOUND. The
committed offset piggy-backed on the pull (FLAG_COMMIT_OFFSET) is stored on the first pass only.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orbitmq.broker.filter.consumer_filter_manager import build as consumer_filter_build
from orbitmq.broker.filter.expression_filter import ExpressionForRetryMessageFilter, ExpressionMessageFilter
from orbitmq.broker.longpolling.pull_request_hold import PullRequest
from orbitmq.common import fastjson
from orbitmq.common.constants import MASTER_ID, RMQ_SYS_OFFSET_MOVED_EVENT, is_readable
from orbitmq.common.filter.message_filter import build_message_filter_for
from orbitmq.common.filter.subscription import (
    FilterExpressionError,
    SubscriptionData,
    build_subscription_data,
)
from orbitmq.common.message import MessageConst
from orbitmq.common.sysflag import has_commit_offset_flag, has_subscription_flag, has_suspend_flag
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import topic_support
from .base import Fields, RequestError, ext
from .filtering import filter_from_subscription
from .store_results import status_name

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

SLAVE_ROLE = "SLAVE"
# How much longer than its hold time a parked pull may wait for its release before the
# processor gives up waiting on the hold service (a safety net; the service releases on time).
RELEASE_GRACE_SECONDS = 2.0
# Upper bound of a hold (~24.8 days): keeps timer arithmetic sane for absurd client values.
MAX_HOLD_MILLIS = 2**31 - 1


# RequestSource (PullMessageRequestHeader#requestSource): who pulls.
REQUEST_SOURCE_SDK = -1
REQUEST_SOURCE_PROXY_FOR_BROADCAST = 1
REQUEST_SOURCE_PROXY_FOR_STREAM = 2

@dataclass(slots=True)
class PullHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None
    sub_version: int
    expression_type: str
    max_msg_bytes: int | None
    request_source: int = REQUEST_SOURCE_SDK


def parse_pull_header(request: RemotingCommand) -> PullHeader:
    f = Fields(request.ext_fields)
    header = PullHeader(
        consumer_group=f.str("consumerGroup"),
        topic=f.str("topic"),
        queue_id=f.int("queueId"),
        queue_offset=f.long("queueOffset"),
        max_msg_nums=f.int("maxMsgNums"),
        sys_flag=f.int("sysFlag"),
        commit_offset=f.long("commitOffset"),
        suspend_timeout_millis=f.long("suspendTimeoutMillis"),
        subscription=f.opt_str("subscription"),
        sub_version=f.long("subVersion"),
        expression_type=f.str("expressionType", "TAG") or "TAG",
        max_msg_bytes=f.int("maxMsgBytes") if f.has("maxMsgBytes") else None,
        request_source=f.int("requestSource") if f.has("requestSource") else REQUEST_SOURCE_SDK,
    )
    if header.max_msg_nums <= 0:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"maxMsgNums[{header.max_msg_nums}] must be positive")
    if header.suspend_timeout_millis < 0:
        raise RequestError(ResponseCode.SYSTEM_ERROR,
                           f"suspendTimeoutMillis[{header.suspend_timeout_millis}] must not be negative")
    return header


class PullMessageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self) -> None:
        self.broker.register_processor(RequestCode.PULL_MESSAGE, self.process)
        # DefaultLitePullConsumer's pulls (PullSysFlag's lite pull flag): served alike
        self.broker.register_processor(RequestCode.LITE_PULL_MESSAGE, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        header = parse_pull_header(request)
        response, parked = await self._process(request, channel, header, allow_suspend=True)
        if parked is None:
            return response
        wait = parked.timeout_millis / 1000.0 + RELEASE_GRACE_SECONDS
        try:
            await asyncio.wait_for(asyncio.shield(parked.woken), wait)
        except TimeoutError:
            log.warning("parked pull %s@%d was not released by the hold service in time",
                        header.topic, header.queue_id)
        finally:
            # Released by the hold service: already out of its table. Otherwise (hold-service
            # timeout, or this task cancelled because the client's connection closed) it must
            # leave the table now rather than sit there until its hold time is up.
            if parked.woken is None or not parked.woken.done():
                self.broker.pull_request_hold_service.remove(parked)
        if not getattr(channel, "is_active", True):
            return None  # nobody to answer
        response, _ = await self._process(request, channel, header, allow_suspend=False)
        return response

    async def _process(self, request: RemotingCommand, channel: Any, header: PullHeader,
                       allow_suspend: bool) -> tuple[RemotingCommand | None, PullRequest | None]:
        broker = self.broker
        cfg = broker.config
        if not is_readable(cfg.broker_permission):
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the broker[{cfg.broker_ip1}] pulling message is forbidden")
        if request.code == RequestCode.LITE_PULL_MESSAGE and not cfg.lite_pull_message_enable:
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the broker[{cfg.broker_ip1}] for lite pull consumer is forbidden")
        group_config = topic_support.find_subscription_group_config(broker, header.consumer_group)
        if group_config is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                               f"subscription group [{header.consumer_group}] does not exist, "
                               "http://rocketmq.apache.org/docs/faq/")
        if not group_config.consume_enable:
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"subscription group no permission, {header.consumer_group}")
        suspend = has_suspend_flag(header.sys_flag)
        commit = has_commit_offset_flag(header.sys_flag)
        topic_config = broker.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST,
                               f"topic[{header.topic}] not exist, apply first please! "
                               "http://rocketmq.apache.org/docs/faq/")
        if not is_readable(topic_config.perm):
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the topic[{header.topic}] pulling message is forbidden")
        if header.queue_id < 0 or header.queue_id >= topic_config.read_queue_nums:  # INVALID_PARAMETER since 5.0
            raise RequestError(ResponseCode.INVALID_PARAMETER,
                               f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                               f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}] "
                               f"consumer:[{broker.remote_addr(channel)}]")
        # PullMessageProcessor: every pull keeps what the group is (consumers without a heartbeat).
        if header.request_source == REQUEST_SOURCE_PROXY_FOR_BROADCAST:
            broker.consumer_manager.compensate_basic_consumer_info(header.consumer_group, "CONSUME_PASSIVELY",
                                                                   "BROADCASTING")
        elif header.request_source == REQUEST_SOURCE_PROXY_FOR_STREAM:
            broker.consumer_manager.compensate_basic_consumer_info(header.consumer_group, "CONSUME_ACTIVELY",
                                                                   "CLUSTERING")
        else:
            broker.consumer_manager.compensate_basic_consumer_info(header.consumer_group, "CONSUME_PASSIVELY",
                                                                   "CLUSTERING")
        message_filter = self._message_filter(header, group_config)

        max_bytes = header.max_msg_bytes if header.max_msg_bytes and header.max_msg_bytes > 0 else None
        result = await broker.get_message(header.consumer_group, header.topic, header.queue_id,
                                          header.queue_offset, header.max_msg_nums, max_bytes, message_filter)
        parked: PullRequest | None = None
        if result is None:
            response = request.response_to(ResponseCode.SYSTEM_ERROR, "store getMessage return null")
        else:
            response, not_found = self._build_response(request, header, result, group_config, topic_config)
            if response.code == ResponseCode.PULL_OFFSET_MOVED:
                await self._offset_moved(response, header, result, group_config)
            if not_found and allow_suspend and suspend:
                polling = header.suspend_timeout_millis if cfg.long_polling_enable else cfg.short_polling_time_mills
                polling = min(polling, MAX_HOLD_MILLIS)
                parked = PullRequest(header.topic, header.queue_id, header.queue_offset, polling, message_filter,
                                     client_channel=channel)
                broker.pull_request_hold_service.suspend_pull_request(parked)
                response = None
        if allow_suspend and commit and broker.store_config.broker_role != SLAVE_ROLE:
            broker.consumer_offset_manager.commit_offset(header.consumer_group, header.topic, header.queue_id,
                                                         header.commit_offset, broker.remote_addr(channel))
        return response, parked

    async def _offset_moved(self, response: RemotingCommand, header: PullHeader, result: Any,
                            group_config: Any) -> None:
        """DefaultPullMessageResultHandler's PULL_OFFSET_MOVED: a master (or a slave with
        offsetCheckInSlave) corrects the offset and records an OffsetMovedEvent in
        OFFSET_MOVED_EVENT; any other slave, which may only lag behind, sends the consumer to the
        group's brokerId with PULL_RETRY_IMMEDIATELY instead of moving its offset."""
        broker = self.broker
        if broker.store_config.broker_role == SLAVE_ROLE and not broker.store_config.offset_check_in_slave:
            response.code = ResponseCode.PULL_RETRY_IMMEDIATELY
            response.ext_fields["suggestWhichBrokerId"] = str(group_config.broker_id)
            log.warning("PULL_OFFSET_MOVED:none correction. topic=%s, groupId=%s, requestOffset=%d, "
                        "suggestBrokerId=%d", header.topic, header.consumer_group, header.queue_offset,
                        group_config.broker_id)
            return
        log.warning("PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, requestOffset=%d, newOffset=%d",
                    header.topic, header.consumer_group, header.queue_offset, result.next_begin_offset)
        await self._generate_offset_moved_event(header, result.next_begin_offset)

    async def _generate_offset_moved_event(self, header: PullHeader, offset_new: int) -> None:
        """generateOffsetMovedEvent: the OffsetMovedEvent JSON, tagged and keyed by the group, in
        queue 0 of OFFSET_MOVED_EVENT. A failed put is logged, never the pull's answer."""
        broker = self.broker
        event = {"consumerGroup": header.consumer_group,
                 "messageQueue": {"brokerName": broker.config.broker_name, "queueId": header.queue_id,
                                  "topic": header.topic},
                 "offsetNew": offset_new, "offsetRequest": header.queue_offset}
        group = header.consumer_group
        inner = broker.new_inner_message(
            topic=RMQ_SYS_OFFSET_MOVED_EVENT, queue_id=0, body=fastjson.dumps(event).encode("utf-8"), flag=0,
            properties={MessageConst.TAGS: group, MessageConst.KEYS: group}, sys_flag=0,
            born_timestamp=broker.now_ms(), born_host=broker.config.broker_addr, reconsume_times=0)
        try:
            result = await broker.put_message(inner)
        except Exception:
            log.exception("generateOffsetMovedEvent failed, %s", event)
            return
        if not result.is_ok():
            log.warning("generateOffsetMovedEvent put failed: %s, %s", status_name(result.status), event)

    def _message_filter(self, header: PullHeader, group_config: Any) -> Any:
        broker = self.broker
        if has_subscription_flag(header.sys_flag):
            try:  # FilterAPI.build, then ConsumerManager#compensateSubscribeData, as upstream
                subscription = build_subscription_data(header.topic, header.subscription or "*",
                                                       header.expression_type)
            except (FilterExpressionError, ValueError, TypeError) as exc:
                raise RequestError(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                   f"parse the consumer's subscription[{header.subscription}] failed, "
                                   f"group: {header.consumer_group}: {exc}") from None
            broker.consumer_manager.compensate_subscribe_data(header.consumer_group, header.topic,
                                                              subscription.to_json_dict())
            if header.expression_type.upper() != "TAG" and not broker.config.enable_property_filter:
                raise RequestError(ResponseCode.SYSTEM_ERROR,
                                   f"The broker does not support consumer to filter message by "
                                   f"{header.expression_type}")
            manager = getattr(broker, "consumer_filter_manager", None)
            if manager is not None and broker.config.filter_support_retry and header.expression_type.upper() != "TAG":
                # ConsumerFilterManager#build: the pull's own expression, no bloom data
                data = consumer_filter_build(header.topic, header.consumer_group, header.subscription,
                                             header.expression_type, header.sub_version)
                if data is None:
                    raise RequestError(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                       f"parse the consumer's subscription[{header.subscription}] failed, "
                                       f"group: {header.consumer_group}")
                return ExpressionForRetryMessageFilter(subscription, data, manager)
            try:  # the SubscriptionData parsed above, not the expression a second time
                return build_message_filter_for(subscription)
            except (FilterExpressionError, ValueError, TypeError) as exc:
                raise RequestError(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                   f"parse the consumer's subscription[{header.subscription}] failed, "
                                   f"group: {header.consumer_group}: {exc}") from None
        group_info = broker.consumer_manager.get_consumer_group_info(header.consumer_group)
        if group_info is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist "
                               "http://rocketmq.apache.org/docs/faq/")
        if not group_config.consume_broadcast_enable and group_info.message_model == "BROADCASTING":
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the consumer group[{header.consumer_group}] can not consume by broadcast way")
        sub = group_info.subscription_table.get(header.topic)
        if sub is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist "
                               "http://rocketmq.apache.org/docs/faq/")
        try:
            sub_version = int(sub.get("subVersion", 0))
        except (TypeError, ValueError):
            sub_version = 0
        if sub_version < header.sub_version:
            raise RequestError(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        expression_type = str(sub.get("expressionType") or "TAG")
        manager = getattr(broker, "consumer_filter_manager", None)
        if manager is not None and expression_type.upper() != "TAG":
            # PullMessageProcessor: the filter the group's heartbeat registered, with its bloom data
            data = manager.get(header.topic, header.consumer_group)
            if data is None:
                raise RequestError(ResponseCode.FILTER_DATA_NOT_EXIST,
                                   "The broker's consumer filter data is not exist!Your expression may be wrong!")
            if data.client_version < header.sub_version:
                raise RequestError(ResponseCode.FILTER_DATA_NOT_LATEST,
                                   "the consumer's consumer filter data not latest")
        if expression_type.upper() != "TAG" and not broker.config.enable_property_filter:
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"The broker does not support consumer to filter message by {expression_type}")
        if manager is not None and expression_type.upper() != "TAG":
            subscription = SubscriptionData.from_json_dict(sub)
            cls = ExpressionForRetryMessageFilter if broker.config.filter_support_retry else ExpressionMessageFilter
            return cls(subscription, data, manager)
        return filter_from_subscription(sub, header.topic, header.consumer_group)

    def _build_response(self, request: RemotingCommand, header: PullHeader, result: Any,
                        group_config: Any, topic_config: Any) -> tuple[RemotingCommand, bool]:
        broker = self.broker
        status = status_name(result.status)
        suggest = MASTER_ID
        if getattr(result, "suggest_pulling_from_slave", False) and broker.config.slave_read_enable:
            suggest = group_config.which_broker_when_consume_slowly
        # PullMessageProcessor#composeResponseHeader: the topic's and the group's sys flags on every answer.
        fields = ext(suggestWhichBrokerId=suggest, nextBeginOffset=result.next_begin_offset,
                     minOffset=result.min_offset, maxOffset=result.max_offset,
                     topicSysFlag=topic_config.topic_sys_flag, groupSysFlag=group_config.group_sys_flag)
        body = b""
        not_found = False
        if broker.store_config.broker_role == SLAVE_ROLE and not broker.config.slave_read_enable:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            fields["suggestWhichBrokerId"] = str(MASTER_ID)
        elif (broker.config.broker_id != MASTER_ID and broker.acting_master.min_broker_id_in_group == MASTER_ID
              and not getattr(result, "suggest_pulling_from_slave", False) and status != "FOUND"):
            # PullMessageProcessor: a slave whose set has its master ("slave redirect pullRequest to
            # master") sends the consumer there instead of holding the pull; an acting slave (its
            # minBrokerIdInGroup is its own id) serves it.
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            fields["suggestWhichBrokerId"] = str(MASTER_ID)
        elif status == "FOUND":
            code = ResponseCode.SUCCESS
            body = b"".join(bytes(b) for b in result.message_buffer_list)  # as readGetMessageResult
            broker.stats.on_handed_out(header.consumer_group, header.topic, result.message_count)
        elif status in ("MESSAGE_WAS_REMOVING", "NO_MATCHED_MESSAGE"):
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        elif status in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"):
            if header.queue_offset != 0:
                code = ResponseCode.PULL_OFFSET_MOVED
                log.info("the broker stores no queue data, fix the request offset %d to %d, topic %s "
                         "queue %d group %s", header.queue_offset, result.next_begin_offset, header.topic,
                         header.queue_id, header.consumer_group)
            else:
                code = ResponseCode.PULL_NOT_FOUND
                not_found = True
        elif status in ("OFFSET_FOUND_NULL", "OFFSET_OVERFLOW_ONE"):
            code = ResponseCode.PULL_NOT_FOUND
            not_found = True
        elif status in ("OFFSET_OVERFLOW_BADLY", "OFFSET_TOO_SMALL"):
            code = ResponseCode.PULL_OFFSET_MOVED
            log.info("pull offset moved: %s, topic %s queue %d offset %d group %s", status, header.topic,
                     header.queue_id, header.queue_offset, header.consumer_group)
        else:
            code = ResponseCode.SYSTEM_ERROR
            status = f"unknown get message status {status}"
        return request.response_to(code, status, fields, body), not_found
