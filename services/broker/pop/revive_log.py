"""Writes checkpoints and acks into the revive topic rmq_sys_REVIVE_LOG_<cluster>.

The revive log is an ordinary CommitLog topic, so checkpoints and acks are as durable as
messages: after a restart the revive service re-reads them from its committed revive offset
and still knows which popped messages are in flight and which were acked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orbitmq.broker.store.model import MessageExtBrokerInner
from orbitmq.common.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    properties_to_string,
)

from .checkpoint import AckMsg, PopCheckPoint
from .constants import CK_TAG

if TYPE_CHECKING:
    from .interfaces import ReviveLogPop

log = logging.getLogger(__name__)

# The delivery time a revive-log record is meant for, kept beside the JSON body so tools can
# see it; the revive service itself takes the time from the checkpoint.
PROPERTY_REVIVE_TIME = "POP_REVIVE_TIME"


_TAGS_ITEM = MessageConst.TAGS + NAME_VALUE_SEPARATOR
_UNIQ_ITEM = PROPERTY_SEPARATOR + MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR
_REVIVE_TIME_ITEM = PROPERTY_SEPARATOR + PROPERTY_REVIVE_TIME + NAME_VALUE_SEPARATOR


class ReviveLogWriter:
    def __init__(self, pop: ReviveLogPop) -> None:
        self.pop = pop
        self._host: tuple[str, int] | None = None

    def _message(self, queue_id: int, body: bytes, tag: str, uniq_key: str, deliver_ms: int) -> MessageExtBrokerInner:
        broker = self.pop.broker
        host = (broker.config.broker_ip1, broker.config.listen_port)
        if host != self._host:
            self._host = host
        host = self._host  # one tuple for every record, so the store's host cache hits by identity
        properties = {MessageConst.TAGS: tag, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key,
                      PROPERTY_REVIVE_TIME: str(deliver_ms)}
        if (NAME_VALUE_SEPARATOR not in uniq_key and PROPERTY_SEPARATOR not in uniq_key
                and NAME_VALUE_SEPARATOR not in tag and PROPERTY_SEPARATOR not in tag):
            # properties_to_string(properties), and the store may take the parse from here.
            props_s = f"{_TAGS_ITEM}{tag}{_UNIQ_ITEM}{uniq_key}{_REVIVE_TIME_ITEM}{deliver_ms}{PROPERTY_SEPARATOR}"
            parsed: tuple[str, dict[str, str]] | None = (props_s, dict(properties))
        else:
            props_s, parsed = properties_to_string(properties), None
        return MessageExtBrokerInner(topic=self.pop.revive_topic, queue_id=queue_id, body=body,
                                     properties=properties, properties_string=props_s,
                                     born_timestamp=broker.now_ms(), born_host=host, store_host=host,
                                     parsed_properties=parsed)

    async def append_checkpoint(self, ck: PopCheckPoint, revive_qid: int) -> bool:
        key = ck.unique_id()
        msg = self._message(revive_qid, ck.to_json(), CK_TAG, key, ck.revive_time)
        ok, status = await self._put(msg, "checkpoint", key)
        self._count(ck.cid, ck.topic, "CK", status, 1)
        return ok

    async def append_ack(self, ack: AckMsg, revive_qid: int, invisible_time: int) -> bool:
        key = ack.unique_id()
        msg = self._message(revive_qid, ack.to_json(), ack.tag, key, ack.pop_time + invisible_time)
        ok, status = await self._put(msg, "ack", key)
        self._count(ack.consumer_group, ack.topic, "ACK", status, 1)
        return ok

    def _count(self, group: str, topic: str, record_type: str, status: str, nums: int) -> None:
        """rocketmq_pop_revive_in_message_total (metrics off: a None check)."""
        metrics = self.pop.broker.metrics
        if metrics is not None:
            metrics.on_revive_in(group, topic, record_type, status, nums)

    async def append_acks(self, acks: list[tuple[AckMsg, int, int]]) -> bool:
        """append_ack for each (ack, revive_qid, invisible_time), the acks of one revive queue in
        one store call (the same records, in order; per revive queue, all of them or none; their
        born time is the first one's, read once)."""
        if len(acks) == 1:
            return await self.append_ack(*acks[0])
        by_queue: dict[int, list[MessageExtBrokerInner]] = {}
        acks_by_queue: dict[int, list[AckMsg]] = {}
        keys: list[str] = []
        born = None
        for ack, revive_qid, invisible_time in acks:
            key = ack.unique_id()
            keys.append(key)
            msg = self._message(revive_qid, ack.to_json(), ack.tag, key, ack.pop_time + invisible_time)
            # One born time object for the lot lets the store lay the batch out once.
            if born is None:
                born = msg.born_timestamp
            else:
                msg.born_timestamp = born
            by_queue.setdefault(revive_qid, []).append(msg)
            acks_by_queue.setdefault(revive_qid, []).append(ack)
        for revive_qid, msgs in by_queue.items():
            ok, status = await self._put_many(msgs, ",".join(keys))
            for ack in acks_by_queue[revive_qid]:
                self._count(ack.consumer_group, ack.topic, "ACK", status, 1)
            if not ok:
                return False
        return True

    async def _put_many(self, msgs: list[MessageExtBrokerInner], keys: str) -> tuple[bool, str]:
        escape = getattr(self.pop.broker, "escape_bridge", None)
        if len(msgs) == 1 or (escape is not None and escape.is_remote()):
            status = "PUT_OK"
            for msg in msgs:
                ok, status = await self._put(msg, "ack", keys)
                if not ok:
                    return False, status
            return True, status
        try:
            result = await self.pop.broker.put_messages(msgs)
        except Exception:
            log.exception("append acks %s to the revive log failed", keys)
            return False, "UNKNOWN_ERROR"
        status = getattr(getattr(result, "status", None), "name", "UNKNOWN_ERROR")
        if result is None or not result.is_ok():
            log.error("append acks %s to the revive log failed: %s", keys, status)
            return False, status
        return True, status

    async def _put(self, msg: MessageExtBrokerInner, what: str, key: str) -> tuple[bool, str]:
        """The put and its PutMessageStatus name (the put_status label of the POP metrics)."""
        broker = self.pop.broker
        escape = getattr(broker, "escape_bridge", None)
        try:
            if escape is not None and escape.is_remote():
                # A slave acting as master (services/broker/failover): PopMessageProcessor and
                # AckMessageProcessor write through EscapeBridge#putMessageToSpecificQueue, to
                # another broker set's revive log, whose revive service reads the message back here.
                result = await escape.put_message_to_specific_queue(msg)
            else:
                result = await broker.put_message(msg)
        except Exception:
            log.exception("append %s %s to the revive log failed", what, key)
            return False, "UNKNOWN_ERROR"
        status = getattr(getattr(result, "status", None), "name", "UNKNOWN_ERROR")
        if result is None or not result.is_ok():
            log.error("append %s %s to the revive log failed: %s", what, key, status)
            return False, status
        return True, status
