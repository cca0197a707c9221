"""The put-time conversion of timer messages (upstream HookUtils.handleScheduleMessage).

A message with TIMER_DELIVER_MS, TIMER_DELAY_SEC or TIMER_DELAY_MS, stored as a normal or
committed-transaction message, is parked in ``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS
(the slot time), REAL_TOPIC and REAL_QID; the timer store files it into the wheel and puts it
back when due. A DELAY level wins over the timer properties (they are dropped), a delivery time
not in the future goes straight to the real topic, and TIMER_OUT_MS marks a message that already
went through the wheel so it is never converted twice. Runs as a MessageStore put hook, so every
put path (send, transaction commit, POP revive) gets it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, get_transaction_value

from .wheel_math import TIMER_TOPIC, is_reject, round_deliver_ms

log = logging.getLogger(__name__)

_DELIVER_MS = MessageConst.TIMER_DELIVER_MS
_DELAY_SEC = MessageConst.TIMER_DELAY_SEC
_DELAY_MS = MessageConst.TIMER_DELAY_MS
_TIMER_KEYS = (_DELIVER_MS, _DELAY_MS, _DELAY_SEC)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(slots=True)
class TimerRefusal(PutMessageResult):
    """A refused put with upstream's remark (the Remoting response shows it)."""

    remark: str = ""


def _java_long(text: str) -> int:
    """Long.parseLong: an optional sign and decimal digits, in range; ValueError otherwise."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(text)
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(text)
    return value


def _delay_level(props: dict[str, str]) -> int:
    raw = props.get(MessageConst.DELAY_TIME_LEVEL)
    if not raw:
        return 0
    try:
        return int(raw.strip())
    except ValueError:
        return 0  # not a number: the delay-level redirect refuses it


def is_timer_message(msg: MessageExtBrokerInner) -> bool:
    """checkIfTimerMessage (its delay-level branch is applied by the hook itself)."""
    props = msg.properties
    if msg.topic == TIMER_TOPIC or MessageConst.TIMER_OUT_MS in props:
        return False
    return any(key in props for key in _TIMER_KEYS)


class TimerPutHook:
    # Returns None for messages without DELAY and TIMER_* properties, so a batch put the send
    # processor checked for both (MessageStore.put_messages(undelayed=True)) may skip it.
    only_delayed = True

    def __init__(self, config: MessageStoreConfig, now_ms: Callable[[], int],
                 slot_num: Callable[[int], int] | None = None) -> None:
        self.config = config
        self.now_ms = now_ms
        # The wheel's count for a slot time (flow control); None while the wheel is not running.
        self.slot_num = slot_num

    def __call__(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        props = msg.properties  # the common case first: no timer property at all
        if (not props or (_DELIVER_MS not in props and _DELAY_SEC not in props and _DELAY_MS not in props)
                or msg.topic == TIMER_TOPIC):
            return None
        if get_transaction_value(msg.sys_flag) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return None
        if _delay_level(props) > 0:
            # The delay level wins: the timer properties go, the delay-level redirect takes it.
            for key in _TIMER_KEYS:
                props.pop(key, None)
            msg.properties_string = properties_to_string(props)
            return None
        if not is_timer_message(msg):
            return None
        cfg = self.config
        if not cfg.timer_wheel_enable:
            return TimerRefusal(PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, None,
                                "accurate timer message is not enabled, timerWheelEnable is false")
        return self.transform(msg)

    def _illegal(self) -> TimerRefusal:
        max_ms = self.config.timer_max_delay_sec * 1000
        return TimerRefusal(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL, None,
                            f"timer message illegal, the delay time should not be bigger than the max delay "
                            f"{max_ms}ms; or if set del msg, the delay time should be bigger than the current time")

    def transform(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        """transformTimerMessage: rewrite to the timer topic, or refuse with upstream's status."""
        props = msg.properties
        cfg = self.config
        now = self.now_ms()
        try:
            if MessageConst.TIMER_DELAY_SEC in props:
                deliver_ms = now + _java_long(props[MessageConst.TIMER_DELAY_SEC]) * 1000
            elif MessageConst.TIMER_DELAY_MS in props:
                deliver_ms = now + _java_long(props[MessageConst.TIMER_DELAY_MS])
            else:
                deliver_ms = _java_long(props[MessageConst.TIMER_DELIVER_MS])
        except ValueError:
            log.warning("refusing a timer message to %s: unreadable timer property", msg.topic)
            return self._illegal()
        if deliver_ms <= now:
            # Already due: stored under its real topic at once, but a delete marker must be ahead.
            if MessageConst.TIMER_DEL_UNIQKEY in props:
                return self._illegal()
            return None
        if deliver_ms - now > cfg.timer_max_delay_sec * 1000:
            return self._illegal()
        precision = cfg.timer_precision_ms
        slot_ms = round_deliver_ms(deliver_ms, precision)
        congest = cfg.timer_congest_num_each_slot
        if self.slot_num is not None and is_reject(self.slot_num(slot_ms), congest):
            return TimerRefusal(PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL, None,
                                f"timer message is under flow control, max num limit is {congest} or the current "
                                f"value is greater than {congest} and less than {congest * 2}, "
                                "trigger random flow control")
        props[MessageConst.TIMER_OUT_MS] = str(slot_ms)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties_string = properties_to_string(props)
        msg.topic = TIMER_TOPIC
        msg.queue_id = 0
        return None
