"""The put-path rewrite of delayed messages (CommitLog.putMessage's delay branch upstream).

A message with a DELAY level, stored as a normal or committed-transaction message, is parked in
SCHEDULE_TOPIC_XXXX queue ``level - 1``; its real topic and queue travel in REAL_TOPIC and
REAL_QID until ScheduleMessageService puts it back. Runs as a MessageStore put hook, so every
put path (send, send-back, transaction commit, POP revive) gets the same treatment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from orbitmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC
from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, get_transaction_value

from .delay_levels import DelayLevelTable, delay_level_to_queue_id

log = logging.getLogger(__name__)


def read_delay_level(msg: MessageExtBrokerInner) -> int | None:
    """The DELAY property as a level; None when it is not a number."""
    raw = msg.properties.get(MessageConst.DELAY_TIME_LEVEL)
    if raw is None or raw == "":
        return 0
    try:
        return int(raw.strip())
    except ValueError:
        return None


class DelayRedirect:
    # Returns None for every message whose DELAY is absent, empty or "0" (level 0): a put path
    # that guarantees that for a whole batch (MessageStore.put_messages(undelayed=True)) skips it.
    only_delayed = True

    def __init__(self, levels: DelayLevelTable, now_ms: Callable[[], int]) -> None:
        self.levels = levels
        self.now_ms = now_ms

    def __call__(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        if get_transaction_value(msg.sys_flag) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return None
        level = read_delay_level(msg)
        if level is None:
            log.warning("refusing a message to %s: DELAY property %r is not a number", msg.topic,
                        msg.properties.get(MessageConst.DELAY_TIME_LEVEL))
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if level <= 0 or msg.topic == RMQ_SYS_SCHEDULE_TOPIC:
            return None
        level = self.levels.cap(level)
        props = msg.properties
        props[MessageConst.DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties_string = properties_to_string(props)
        msg.topic = RMQ_SYS_SCHEDULE_TOPIC
        msg.queue_id = delay_level_to_queue_id(level)
        # Informational: the store derives the ConsumeQueue tag code (the delivery time) itself.
        msg.tags_code = self.levels.compute_deliver_timestamp(level, self.now_ms())
        return None
