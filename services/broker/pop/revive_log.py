"""Writes checkpoints and acks into the revive topic rmq_sys_REVIVE_LOG_<cluster>.

The revive log is an ordinary CommitLog topic, so checkpoints and acks are as durable as
messages: after a restart the revive service re-reads them from its committed revive offset
and still knows which popped messages are in flight and which were acked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orbitmq.broker.store.model import MessageExtBrokerInner
from orbitmq.common.message import MessageConst, properties_to_string

from .checkpoint import AckMsg, PopCheckPoint
from .constants import CK_TAG

if TYPE_CHECKING:
    from .service import PopService

log = logging.getLogger(__name__)

# The delivery time a revive-log record is meant for, kept beside the JSON body so tools can
# see it; the revive service itself takes the time from the checkpoint.
PROPERTY_REVIVE_TIME = "POP_REVIVE_TIME"


class ReviveLogWriter:
    def __init__(self, pop: PopService) -> None:
        self.pop = pop

    def _message(self, queue_id: int, body: bytes, tag: str, uniq_key: str, deliver_ms: int) -> MessageExtBrokerInner:
        broker = self.pop.broker
        host = (broker.config.broker_ip1, broker.config.listen_port)
        properties = {MessageConst.TAGS: tag, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key,
                      PROPERTY_REVIVE_TIME: str(deliver_ms)}
        return MessageExtBrokerInner(topic=self.pop.revive_topic, queue_id=queue_id, body=body,
                                     properties=properties, properties_string=properties_to_string(properties),
                                     born_timestamp=broker.now_ms(), born_host=host, store_host=host)

    async def append_checkpoint(self, ck: PopCheckPoint, revive_qid: int) -> bool:
        msg = self._message(revive_qid, ck.to_json(), CK_TAG, ck.unique_id(), ck.revive_time)
        return await self._put(msg, "checkpoint", ck.unique_id())

    async def append_ack(self, ack: AckMsg, revive_qid: int, invisible_time: int) -> bool:
        msg = self._message(revive_qid, ack.to_json(), ack.tag, ack.unique_id(), ack.pop_time + invisible_time)
        return await self._put(msg, "ack", ack.unique_id())

    async def _put(self, msg: MessageExtBrokerInner, what: str, key: str) -> bool:
        try:
            result = await self.pop.broker.put_message(msg)
        except Exception:
            log.exception("append %s %s to the revive log failed", what, key)
            return False
        if result is None or not result.is_ok():
            log.error("append %s %s to the revive log failed: %s", what, key,
                      getattr(result, "status", None))
            return False
        return True
