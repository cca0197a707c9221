"""The recall handle a send of a timer message answers (SendMessageProcessor.attachRecallHandle)."""

from __future__ import annotations

from orbitmq.broker.store.model import MessageExtBrokerInner
from orbitmq.broker.timer.wheel_math import TIMER_TOPIC
from orbitmq.common.constants import is_retry_topic
from orbitmq.common.message import MessageConst
from orbitmq.common.recall_handle import encode_recall_handle


def recall_handle_of(inner: MessageExtBrokerInner, broker_name: str) -> str | None:
    """The handle of a message the timer hook parked (TIMER_OUT_MS, REAL_TOPIC), else None.

    Its time is TIMER_OUT_MS + 1, which undoes the put hook's rounding: the marker written with
    it floors back to the same slot. Retry topics get none (their delays are redeliveries).
    """
    if inner.topic != TIMER_TOPIC:
        return None  # delivered at once (due already), or TIMER_OUT_MS set by the sender
    props = inner.properties
    slot = props.get(MessageConst.TIMER_OUT_MS)
    real_topic = props.get(MessageConst.REAL_TOPIC)
    message_id = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if not slot or not real_topic or not message_id or is_retry_topic(real_topic):
        return None
    try:
        timestamp = int(slot) + 1
    except ValueError:
        return None
    return encode_recall_handle(real_topic, broker_name, timestamp, message_id)
