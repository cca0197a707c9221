"""RESUME_CHECK_HALF_MESSAGE (323): put a half message back under the transaction check.

A half message checked ``transactionCheckMax`` times without an answer is discarded to
TRANS_CHECK_MAX_TIME_TOPIC; an operator who has fixed the producer resumes it by its offset msgId
(RocketMQ's ``MQAdminExt.resumeCheckHalfMessage``, the dashboard's "resume" button). The record is
copied back to RMQ_SYS_TRANS_HALF_TOPIC queue 0 with ``TRANSACTION_CHECK_TIMES=0``, so the check
asks its producer again and END_TRANSACTION accepts the answer.

Upstream copies whatever record the msgId points at. OrbitMQ takes only a transaction's own
records: a discarded one not resumed before (or whose transaction is open again), or a half record
whose transaction is still open (which restarts its check count). Any other record would become a
"half message" no producer ever prepared, or reopen a transaction that was already committed and
so store it twice; those get SYSTEM_ERROR. "Resumed before" is looked up in the message index (a
half record of the same UNIQ_KEY stored after the discarded one).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors.base import LONG_MAX, Fields, RequestError
from orbitmq.broker.store.config import SLAVE
from orbitmq.common.constants import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import RecordError, decode_record
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import bridge

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

    from .service import TransactionalMessageService

log = logging.getLogger(__name__)

# Half records of one transaction: the send, its check copies (at most transactionCheckMax) and resumes.
_INDEX_QUERY_MAX = 64
_PUT_BACK_FAILED = f"Put message back to {RMQ_SYS_TRANS_HALF_TOPIC} failed."


class ResumeCheckHalfMessageProcessor:
    def __init__(self, broker: BrokerController, service: TransactionalMessageService) -> None:
        self.broker = broker
        self.service = service

    def register(self) -> None:
        self.broker.register_processor(RequestCode.RESUME_CHECK_HALF_MESSAGE, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        if self.broker.store_config.broker_role == SLAVE:
            raise RequestError(ResponseCode.SLAVE_NOT_AVAILABLE, "a half message can't be resumed on a slave")
        msg_id = Fields(request.ext_fields).opt_str("msgId")
        if not msg_id:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "the custom field <msgId> is null")
        try:
            _, _, commit_log_offset = decode_offset_message_id(msg_id)
        except (ValueError, TypeError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"msgId {msg_id!r} is not an offset message id: {exc}") from None
        record = self.service.half_at(commit_log_offset) if commit_log_offset >= 0 else None
        if record is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"no message at CommitLog offset {commit_log_offset}")
        if MessageConst.REAL_TOPIC not in record.properties or record.topic not in (
                RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC):
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"message {msg_id} in {record.topic} is not a half message: only a discarded "
                               f"({RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC}) or open half message can be resumed")
        transaction_id = bridge.transaction_id_of(record)
        copy = bridge.half_copy(self.broker, record, {MessageConst.TRANSACTION_CHECK_TIMES: "0"})
        async with self.service.lock:  # no check copy or resolution of this transaction meanwhile
            await self.service.ensure_loaded()
            if not self.service.is_open(transaction_id):
                if record.topic == RMQ_SYS_TRANS_HALF_TOPIC:
                    raise RequestError(ResponseCode.SYSTEM_ERROR,
                                       f"the transaction {transaction_id} is not open: already committed, rolled "
                                       f"back or discarded (resume its record in {RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC})")
                later = await self._later_half_record(record, transaction_id)
                if later is not None:
                    raise RequestError(ResponseCode.SYSTEM_ERROR,
                                       f"the transaction {transaction_id} was resumed before (half record at "
                                       f"CommitLog offset {later}) and is not open any more: already committed, "
                                       "rolled back or discarded again")
            result = await self.broker.put_message(copy)
            if not result.is_ok():
                log.error("%s transaction %s: %s", _PUT_BACK_FAILED, transaction_id, result.status)
                return request.response_to(ResponseCode.SYSTEM_ERROR, _PUT_BACK_FAILED)
            self.service.register(result.append_message_result.logics_offset, transaction_id,
                                  bridge.real_topic_of(record))
        log.info("Put message back to %s. real topic=%s, transaction %s", RMQ_SYS_TRANS_HALF_TOPIC,
                 bridge.real_topic_of(record), transaction_id)
        return request.response_to(ResponseCode.SUCCESS, None)

    async def _later_half_record(self, discarded: MessageExt, transaction_id: str) -> int | None:
        """The CommitLog offset of a half record of the same transaction stored after the discarded
        one (an earlier resume), found through the message index by UNIQ_KEY; None when there is none
        (or the index is off: messageIndexEnable=false, then every resume is taken)."""
        key = discarded.uniq_key
        if not key:
            return None
        records, _, _ = await self.broker.query_message(RMQ_SYS_TRANS_HALF_TOPIC, key, _INDEX_QUERY_MAX, 0, LONG_MAX)
        for raw in records:
            try:
                half = decode_record(bytes(raw), 0, check_crc=False)
            except RecordError:
                continue
            if (half.commit_log_offset > discarded.commit_log_offset
                    and bridge.transaction_id_of(half) == transaction_id):
                return half.commit_log_offset
        return None
