"""The store's maintenance and inspection requests (AdminBrokerProcessor's share upstream):
CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316) and QUERY_CONSUME_QUEUE (321), behind
mqadmin's cleanExpiredCQ, cleanUnusedTopic and queryCq."""

from __future__ import annotations

import base64
import json
import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.filter.expression_filter import ExpressionMessageFilter
from orbitmq.common.filter.message_filter import TagFilter
from orbitmq.common.filter.subscription import ExpressionType, SubscriptionData
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .base import Fields, RequestError

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

# QUERY_CONSUME_QUEUE answers at most this many entries (upstream reads `count` from the request
# without a bound; a huge count would build one huge body).
MAX_QUERY_ENTRIES = 10_000


class StoreAdminProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self) -> None:
        b = self.broker
        b.register_processor(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_expired_consume_queue)
        b.register_processor(RequestCode.CLEAN_UNUSED_TOPIC, self.clean_unused_topic)
        b.register_processor(RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue)

    async def clean_expired_consume_queue(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        count = await self.broker.message_store.clean_expired_consume_queues()
        log.info("cleanExpiredConsumeQueue from %s: %d queues", self.broker.remote_addr(channel), count)
        return request.response_to(ResponseCode.SUCCESS)

    async def clean_unused_topic(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        topics = self.broker.topic_config_manager
        unused = self.broker.message_store.unused_topics(topics.topic_names(), topics.is_system_topic)
        await self.broker.delete_topics(set(unused))  # as deleteTopic: queues and per-topic stats
        log.warning("cleanUnusedTopic from %s: ConsumeQueues of %d topics without a topic config dropped: %s",
                    self.broker.remote_addr(channel), len(unused), ", ".join(unused))
        return request.response_to(ResponseCode.SUCCESS)

    async def query_consume_queue(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """QueryConsumeQueueResponseBody: the queue's bounds and ``count`` entries from ``index``
        (physicOffset, physicSize, tagsCode; with the ConsumeQueue extension also the unit as
        extendDataJson, its bit map, and whether the group's filter passes it, ``eval``), with
        the group's subscription and ConsumerFilterData when one is named
        (AdminBrokerProcessor#queryConsumeQueue)."""
        f = Fields(request.ext_fields)
        topic, queue_id = f.str("topic"), f.int("queueId")
        index, count = f.long("index"), f.int("count")
        group = f.opt_str("consumerGroup")
        cq = self.broker.message_store.get_consume_queue(topic, queue_id)
        if cq is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body: dict[str, Any] = {"maxQueueIndex": cq.get_max_offset_in_queue(),
                                "minQueueIndex": cq.get_min_offset_in_queue()}
        message_filter = None
        if group is not None:
            sub = self.broker.consumer_manager.find_subscription_data(group, topic)
            body["subscriptionData"] = sub
            if sub is None:
                body["filterData"] = f"{group}@{topic} is not online!"
            else:
                body["filterData"], message_filter = self._filter_of(group, topic, sub)
        if cq.get_raw_entry(index) is None:
            response = request.response_to(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
            response.body = json.dumps(body).encode("utf-8")
            return response
        entries = []
        for i in range(index, min(index + max(count, 0), index + MAX_QUERY_ENTRIES)):
            entry = cq.get_raw_entry(i)
            if entry is None:
                break
            physic_offset, physic_size, raw_tags = entry
            tags_code, unit = cq.resolve_tags_code(raw_tags)
            one: dict[str, Any] = {"physicOffset": physic_offset, "physicSize": physic_size,
                                   "tagsCode": raw_tags if tags_code is None else tags_code, "eval": False}
            if unit is not None:
                ext: dict[str, Any] = {"msgStoreTime": unit.msg_store_time, "size": unit.size,
                                       "tagsCode": unit.tags_code}
                if unit.filter_bit_map:
                    ext["filterBitMap"] = base64.b64encode(unit.filter_bit_map).decode("ascii")
                    one["bitMap"] = _bits_array_string(unit.filter_bit_map)
                one["extendDataJson"] = json.dumps(dict(sorted(ext.items())))
                if message_filter is not None:
                    by_ext = getattr(message_filter, "is_matched_by_consume_queue_ext", None)
                    one["eval"] = (by_ext(unit.tags_code, unit) if by_ext is not None
                                   else message_filter.is_matched_by_consume_queue(unit.tags_code))
            elif tags_code is None:
                one["msg"] = f"Cq extend not exist!addr: {raw_tags}"
            entries.append(one)
        body["queueData"] = entries
        return request.response_to(ResponseCode.SUCCESS, None, None, json.dumps(body).encode("utf-8"))

    def _filter_of(self, group: str, topic: str, sub: dict[str, Any]) -> tuple[str, Any]:
        """The group's ConsumerFilterData as JSON (null for tags) and the filter ``eval`` uses."""
        manager = getattr(self.broker, "consumer_filter_manager", None)
        data = manager.get(topic, group) if manager is not None else None
        try:
            subscription = SubscriptionData.from_json_dict(sub)
        except (ValueError, TypeError):
            return json.dumps(_filter_data(group, topic, sub)), None
        if ExpressionType.is_tag_type(subscription.expression_type):
            return "null", TagFilter(subscription)
        if data is None:
            return json.dumps(_filter_data(group, topic, sub)), None
        return json.dumps(data.to_json_dict()), ExpressionMessageFilter(subscription, data, manager)


def _bits_array_string(bits: bytes) -> str:
    """BitsArray#toString: the bits from the last byte's highest down, a newline after each
    byte whose index is a multiple of 8."""
    out = []
    for i in range(len(bits) - 1, -1, -1):
        out.extend("1" if bits[i] & (1 << j) else "0" for j in range(7, -1, -1))
        if i % 8 == 0:
            out.append("\n")
    return "".join(out)


def _filter_data(group: str, topic: str, sub: dict[str, Any]) -> dict[str, Any] | None:
    """ConsumerFilterData of an SQL92 subscription (null for tags, as upstream keeps none)."""
    if str(sub.get("expressionType", "TAG")).upper() != "SQL92":
        return None
    return {"consumerGroup": group, "topic": topic, "expression": sub.get("subString"),
            "expressionType": "SQL92", "clientVersion": sub.get("subVersion"), "deadTime": 0}
