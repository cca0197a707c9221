"""Client registry requests: HEART_BEAT 34, UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38,
LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42 and CHECK_CLIENT_CONFIG 46 (ClientManageProcessor,
ConsumerManageProcessor's list, AdminBrokerProcessor's locks upstream)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.client.channel_info import ClientChannelInfo
from orbitmq.common.constants import PERM_READ, PERM_WRITE, retry_topic
from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.message_filter import build_message_filter
from orbitmq.common.filter.subscription import ExpressionType, SubscriptionData
from orbitmq.common.route import RouteDataError, parse_json
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import topic_support
from .base import Fields, RequestError, encode_json_body, require_dict

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

# TopicSysFlag.buildSysFlag(false, true): the unit-sub flag of a unit-mode consumer's retry topic.
FLAG_UNIT_SUB = 0x1 << 1
IS_SUPPORT_HEART_BEAT_V2 = "IS_SUPPORT_HEART_BEAT_V2"
IS_SUB_CHANGE = "IS_SUB_CHANGE"


def decode_body(request: RemotingCommand, what: str) -> dict[str, Any]:
    if not request.body:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} body is empty")
    try:
        return require_dict(parse_json(bytes(request.body)), what)
    except RecursionError:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} body is nested too deeply") from None
    except RouteDataError as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} body is not valid JSON: {exc}") from None


def _str_field(d: dict[str, Any], name: str, what: str, required: bool = True) -> str:
    value = d.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what}.{name} must be a non-empty string")
    return value


def _list_field(d: dict[str, Any], name: str, what: str) -> list[Any]:
    value = d.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what}.{name} must be a JSON array")
    return value


def decode_message_queue(raw: Any, what: str) -> tuple[str, str, int]:
    """MessageQueue JSON {topic, brokerName, queueId} -> (topic, brokerName, queueId)."""
    if not isinstance(raw, dict):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what} entries must be MessageQueue objects")
    topic, broker_name, queue_id = raw.get("topic"), raw.get("brokerName"), raw.get("queueId")
    if not isinstance(topic, str) or not isinstance(broker_name, str) or not isinstance(queue_id, int) \
            or isinstance(queue_id, bool) or not -(2**31) <= queue_id < 2**31:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{what}: bad MessageQueue {str(raw)[:120]}")
    return topic, broker_name, queue_id


def encode_message_queue(mq: tuple[str, str, int]) -> dict[str, Any]:
    return {"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}


class ClientManageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # consumerGroupHeartbeatTable: group -> the heartbeatFingerprint its last heartbeat carried
        # (0 for a heartbeat V1), so a V2 heartbeat with another one reports the subscription changed.
        self.group_fingerprints: dict[str, int] = {}

    def register(self) -> None:
        b = self.broker
        b.register_processor(RequestCode.HEART_BEAT, self.heart_beat)
        b.register_processor(RequestCode.UNREGISTER_CLIENT, self.unregister_client)
        b.register_processor(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list_by_group)
        b.register_processor(RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq)
        b.register_processor(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq)
        b.register_processor(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config)

    async def heart_beat(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        data = decode_body(request, "HeartbeatData")
        client_id = _str_field(data, "clientID", "HeartbeatData")
        consumers = []
        for raw in _list_field(data, "consumerDataSet", "HeartbeatData"):
            if not isinstance(raw, dict):
                raise RequestError(ResponseCode.SYSTEM_ERROR, "HeartbeatData.consumerDataSet entries must be objects")
            group = _str_field(raw, "groupName", "ConsumerData")
            subs = []
            for sub in _list_field(raw, "subscriptionDataSet", "ConsumerData"):
                try:
                    parsed = SubscriptionData.from_json_dict(sub)
                except (ValueError, TypeError) as exc:
                    raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad subscription of group {group}: {exc}") from None
                if not parsed.topic:
                    raise RequestError(ResponseCode.SYSTEM_ERROR, f"subscription of group {group} has no topic")
                subs.append(parsed.to_json_dict())
            consumers.append((group, raw, subs))
        producers = []
        for raw in _list_field(data, "producerDataSet", "HeartbeatData"):
            if not isinstance(raw, dict):
                raise RequestError(ResponseCode.SYSTEM_ERROR, "HeartbeatData.producerDataSet entries must be objects")
            producers.append(_str_field(raw, "groupName", "ProducerData"))

        props = data.get("clientProperties") or {}
        if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "HeartbeatData.clientProperties must map strings to strings")
        fingerprint = data.get("heartbeatFingerprint") or 0
        if isinstance(fingerprint, bool) or not isinstance(fingerprint, int):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "HeartbeatData.heartbeatFingerprint must be an integer")
        # fastjson writes isWithoutSub as "withoutSub" (its getter); either name is read.
        without_sub = fingerprint != 0 and (data.get("withoutSub") is True or data.get("isWithoutSub") is True)
        sub_changed = fingerprint == 0  # ClientManageProcessor#heartBeat: a V1 heartbeat always "changes"
        language = getattr(request.language, "name", str(request.language))
        for group, raw, subs in consumers:
            previous = self.group_fingerprints.get(group)
            if fingerprint != 0 and previous is not None and previous != fingerprint:
                sub_changed = True  # heartBeatV2: the client must send its subscription again
            elif without_sub and previous is None:
                # Better than heartBeatV2 (which answers "unchanged" here): a broker that never had
                # this group's subscription (it restarted) asks for it instead of keeping none.
                sub_changed = True
            self.group_fingerprints[group] = fingerprint
            info = ClientChannelInfo(channel, client_id, language, int(request.version), properties=dict(props))
            group_config = topic_support.find_subscription_group_config(self.broker, group)
            notify = True
            if group_config is not None:
                notify = group_config.notify_consumer_ids_changed_enable
                sys_flag = FLAG_UNIT_SUB if raw.get("unitMode") is True else 0
                topic_support.create_topic_in_send_message_back_method(
                    self.broker, retry_topic(group), group_config.retry_queue_nums, PERM_WRITE | PERM_READ, sys_flag)
            consume_type = str(raw.get("consumeType") or "CONSUME_PASSIVELY")
            model = str(raw.get("messageModel") or "CLUSTERING")
            from_where = str(raw.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET")
            if without_sub:
                changed = self.broker.consumer_manager.register_consumer_without_sub(
                    group, info, consume_type, model, from_where, notify)
            else:
                changed = self.broker.consumer_manager.register_consumer(
                    group, info, consume_type, model, from_where, subs, notify)
            if changed:
                log.info("registerConsumer info changed, group %s client %s", group, client_id)
        for group in producers:
            self.broker.producer_manager.register_producer(
                group, ClientChannelInfo(channel, client_id, language, int(request.version), properties=dict(props)))
        # MixAll.IS_SUPPORT_HEART_BEAT_V2 / IS_SUB_CHANGE: 5.x clients then send their fingerprint,
        # and the subscription only when it changed or when asked to.
        return request.response_to(ResponseCode.SUCCESS, None, {
            IS_SUPPORT_HEART_BEAT_V2: "true", IS_SUB_CHANGE: "true" if sub_changed else "false"})

    async def check_client_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """ClientManageProcessor#checkClientConfig: a push consumer with a SQL92 subscription asks
        at start whether this broker can filter by it (enablePropertyFilter) and the expression compiles."""
        data = decode_body(request, "CheckClientRequestBody")
        raw = data.get("subscriptionData")
        if not isinstance(raw, dict):
            return request.response_to(ResponseCode.SUCCESS)
        try:
            sub = SubscriptionData.from_json_dict(raw)
        except (ValueError, TypeError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad subscriptionData: {exc}") from None
        if ExpressionType.is_tag_type(sub.expression_type):
            return request.response_to(ResponseCode.SUCCESS)
        if not self.broker.config.enable_property_filter:
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"The broker does not support consumer to filter message by {sub.expression_type}")
        try:
            build_message_filter(sub.expression_type, sub.sub_string)
        except FilterExpressionError as exc:
            log.warning("Client %s@%s filter message, but failed to compile expression! sub=%s, error=%s",
                        data.get("clientId"), data.get("group"), sub.sub_string, exc)
            raise RequestError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc)) from None
        return request.response_to(ResponseCode.SUCCESS)

    async def unregister_client(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        f.str("clientID")
        producer_group = f.opt_str("producerGroup")
        consumer_group = f.opt_str("consumerGroup")
        if producer_group:
            self.broker.producer_manager.unregister_producer(producer_group, channel)
        if consumer_group:
            group_config = self.broker.subscription_group_manager.get(consumer_group)
            notify = group_config.notify_consumer_ids_changed_enable if group_config is not None else True
            self.broker.consumer_manager.unregister_consumer(consumer_group, channel, notify)
        return request.response_to(ResponseCode.SUCCESS)

    async def get_consumer_list_by_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        group = Fields(request.ext_fields).str("consumerGroup")
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        if info is None:
            log.warning("getConsumerGroupInfo failed, %s %s", group, self.broker.remote_addr(channel))
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        ids = info.client_ids()
        if not ids:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body({"consumerIdList": ids}))

    def _lock_body(self, request: RemotingCommand, what: str) -> tuple[str, str, list[tuple[str, str, int]]]:
        body = decode_body(request, what)
        group = _str_field(body, "consumerGroup", what)
        client_id = _str_field(body, "clientId", what)
        mqs = [decode_message_queue(mq, f"{what}.mqSet") for mq in _list_field(body, "mqSet", what)]
        return group, client_id, mqs

    async def lock_batch_mq(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        group, client_id, mqs = self._lock_body(request, "LockBatchRequestBody")
        locked = self.broker.rebalance_lock_manager.try_lock_batch(group, mqs, client_id)
        body = {"lockOKMQSet": [encode_message_queue(mq) for mq in locked]}
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(body))

    async def unlock_batch_mq(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        group, client_id, mqs = self._lock_body(request, "UnlockBatchRequestBody")
        self.broker.rebalance_lock_manager.unlock_batch(group, mqs, client_id)
        return request.response_to(ResponseCode.SUCCESS)
