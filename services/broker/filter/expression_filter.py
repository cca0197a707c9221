"""ExpressionMessageFilter, ExpressionForRetryMessageFilter and CommitLogDispatcherCalcBitMap.

The SQL92 filter of a pull decides twice, like upstream's: first on the ConsumeQueue entry
(is_matched_by_consume_queue_ext, given the entry's extension unit): a message stored after the
consumer's filter was registered, whose unit carries a bit map of the bloom filter's size,
matches only when every bloom position of the filter is set in it; then, for the entries that
pass, on the message's properties (is_matched_by_commit_log). Without a unit, a bit map or
bloom data the first stage lets the entry through, so the answer is always the expression's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from orbitmq.broker.filter.consumer_filter_manager import ConsumerFilterData, ConsumerFilterManager
from orbitmq.broker.store.consume_queue_ext import CqExtUnit
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.common.constants import RETRY_GROUP_TOPIC_PREFIX
from orbitmq.common.filter.message_filter import MessageFilter
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.common.message import MessageConst

log = logging.getLogger(__name__)


class ExpressionMessageFilter(MessageFilter):
    """ExpressionMessageFilter for a non-TAG (SQL92) subscription."""

    __slots__ = ("subscription", "consumer_filter_data", "manager", "bloom_data_valid", "_masks", "_bit_bytes")

    def __init__(self, subscription: SubscriptionData | None, consumer_filter_data: ConsumerFilterData | None,
                 manager: ConsumerFilterManager) -> None:
        self.subscription = subscription
        self.consumer_filter_data = consumer_filter_data
        self.manager = manager
        data = consumer_filter_data
        self.bloom_data_valid = data is not None and manager.bloom_filter.is_valid(data.bloom_filter_data)
        self._masks = data.masks if self.bloom_data_valid else ()
        self._bit_bytes = data.bloom_filter_data.bit_num // 8 if self.bloom_data_valid else -1

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return self.is_matched_by_consume_queue_ext(tags_code, None)

    def is_matched_by_consume_queue_ext(self, tags_code: int | None, unit: CqExtUnit | None) -> bool:
        """ExpressionMessageFilter#isMatchedByConsumeQueue, non-TAG branch: the bloom check."""
        data = self.consumer_filter_data
        if (self.subscription is None or self.subscription.class_filter_mode or data is None
                or data.compiled_expression is None or data.bloom_filter_data is None):
            return True
        # message is before consumer
        if unit is None or not data.is_msg_in_live(unit.msg_store_time):
            return True
        bits = unit.filter_bit_map
        if bits is None or not self.bloom_data_valid or len(bits) != self._bit_bytes:
            return True
        for index, mask in self._masks:
            if not bits[index] & mask:
                return False
        return True

    def _evaluate(self, data: ConsumerFilterData | None, properties: Mapping[str, str] | None) -> bool:
        if data is None or not data.expression or data.compiled_expression is None:
            return True  # no expression
        return data.compiled_expression.evaluate(properties)

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        """ExpressionMessageFilter#isMatchedByCommitLog."""
        if self.subscription is None or self.subscription.class_filter_mode:
            return True
        return self._evaluate(self.consumer_filter_data, properties)

    def __repr__(self) -> str:
        data = self.consumer_filter_data
        return f"{type(self).__name__}({data.expression if data else None!r}, bloom={self.bloom_data_valid})"


def parse_group(retry_topic: str) -> str:
    """KeyBuilder#parseGroup of a retry topic (%RETRY%group, or POP's %RETRY%group+topic)."""
    rest = retry_topic[len(RETRY_GROUP_TOPIC_PREFIX):]
    return rest.split("+", 1)[0] if "+" in rest else rest


class ExpressionForRetryMessageFilter(ExpressionMessageFilter):
    """filterSupportRetry: a retry topic's message is judged by the expression its group
    registered for the message's real topic (the RETRY_TOPIC property)."""

    __slots__ = ()

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        sub = self.subscription
        if sub is None or sub.class_filter_mode:
            return True
        data = self.consumer_filter_data
        if sub.topic and sub.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # retry topic, use original filter data
            real_topic = properties.get(MessageConst.RETRY_TOPIC) if properties is not None else None
            data = self.manager.get(real_topic, parse_group(sub.topic))
        return self._evaluate(data, properties)


class CommitLogDispatcherCalcBitMap:
    """CommitLogDispatcherCalcBitMap: the bit map of a dispatched message, with the bloom
    positions of every filter of its topic its properties match (dead filters included: their
    bits stay meaningful until the filter is cleaned). Runs before the ConsumeQueue dispatcher."""

    __slots__ = ("enabled", "manager")

    def __init__(self, manager: ConsumerFilterManager, enabled=lambda: True) -> None:
        self.manager = manager
        self.enabled = enabled

    def __call__(self, request: DispatchRequest) -> None:
        groups = self.manager.filter_data_by_topic.get(request.topic)
        if not groups or not self.enabled():
            return
        try:
            bits = bytearray(self.manager.bloom_filter.byte_length)
            start = time.monotonic()
            properties = request.properties
            for data in list(groups.values()):
                compiled = data.compiled_expression
                if compiled is None or data.bloom_filter_data is None:
                    log.error("[BUG] Consumer in filter manager has no compiled expression or bloom data! %s", data)
                    continue
                if compiled.evaluate(properties):
                    for index, mask in data.masks:
                        bits[index] |= mask
            request.bit_map = bytes(bits)
            elapsed = time.monotonic() - start
            if elapsed >= 0.001:
                log.warning("Spend %d ms to calc bit map, consumerNum=%d, topic=%s", int(elapsed * 1000),
                            len(groups), request.topic)
        except Exception:
            log.exception("Calc bit map error! topic=%s, offset=%d, queueId=%d", request.topic,
                          request.commit_log_offset, request.queue_id)
