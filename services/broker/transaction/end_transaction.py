"""END_TRANSACTION (37): a producer's (or the proxy's) commit or rollback of a half message.

RocketMQ's EndTransactionProcessor checks, in order: slave, the resolution value, the half
record at commitLogOffset, the check-immunity deadline (604), then producer group, queue offset
and CommitLog offset. OrbitMQ adds: the record must be a half message whose transaction id
matches a given ``transactionId``, and a transaction that is no longer open (already committed,
rolled back or discarded) is refused with SYSTEM_ERROR instead of being stored again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors.base import Fields, RequestError
from orbitmq.broker.processors.store_results import map_put_result
from orbitmq.broker.store.config import SLAVE
from orbitmq.common.constants import RMQ_SYS_TRANS_HALF_TOPIC
from orbitmq.common.message import MessageConst
from orbitmq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import bridge

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

    from .service import TransactionalMessageService

log = logging.getLogger(__name__)


class EndTransactionProcessor:
    def __init__(self, broker: BrokerController, service: TransactionalMessageService) -> None:
        self.broker = broker
        self.service = service

    def register(self) -> None:
        self.broker.register_processor(RequestCode.END_TRANSACTION, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        broker = self.broker
        if broker.store_config.broker_role == SLAVE:
            return request.response_to(ResponseCode.SLAVE_NOT_AVAILABLE,
                                       "Message can't be end transaction in slave")
        f = Fields(request.ext_fields)
        group = f.str("producerGroup")
        table_offset = f.long("tranStateTableOffset")
        commit_log_offset = f.long("commitLogOffset")
        resolution = f.int("commitOrRollback")
        from_check = f.bool("fromTransactionCheck", False)
        msg_id = f.str("msgId")
        transaction_id = f.opt_str("transactionId")
        if resolution not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"the custom field <commitOrRollback> is illegal: {resolution}")
        if resolution == TRANSACTION_NOT_TYPE:
            log.debug("transaction %s of %s left unknown by the producer", msg_id, group)
            return None  # upstream answers nothing and does nothing
        half = self.service.half_at(commit_log_offset) if commit_log_offset >= 0 else None
        if half is None or half.topic != RMQ_SYS_TRANS_HALF_TOPIC:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        props = half.properties
        immunity = props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not from_check and immunity:
            try:
                immunity_ms = int(immunity) * 1000
            except ValueError:
                immunity_ms = 0
            limit = max(immunity_ms, broker.config.transaction_time_out)
            if broker.now_ms() - half.born_timestamp > limit:
                raise RequestError(ResponseCode.ILLEGAL_OPERATION,
                                   f"the transaction of message {msg_id} passed its check immunity; "
                                   "it is resolved by the transaction check")
        if props.get(MessageConst.PRODUCER_GROUP) != group:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != table_offset:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commit_log_offset != commit_log_offset:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        if transaction_id and transaction_id != bridge.transaction_id_of(half):
            raise RequestError(ResponseCode.SYSTEM_ERROR, "The transaction id wrong")
        commit = bridge.commit_message(broker, half) if resolution == TRANSACTION_COMMIT_TYPE else None
        async with self.service.lock:
            await self.service.ensure_loaded()
            open_, result = await self.service.resolve(half, table_offset, commit)
        if not open_:
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"the transaction {bridge.transaction_id_of(half)} is not open: "
                               "already committed, rolled back or discarded")
        if result is not None:
            code, remark, _ = map_put_result(result, commit.queue_id if commit else 0, batch=False)
            if code != ResponseCode.SUCCESS:
                return request.response_to(code, remark)
        metrics = getattr(broker, "metrics", None)
        if metrics is not None:
            topic = bridge.real_topic_of(half)
            if resolution == TRANSACTION_COMMIT_TYPE:
                metrics.on_commit(topic)
            else:
                metrics.on_rollback(topic)
            metrics.on_finish_latency(topic, max(broker.now_ms() - half.born_timestamp, 0) / 1000.0)
        log.debug("transaction %s of %s %s", msg_id, group,
                  "committed" if resolution == TRANSACTION_COMMIT_TYPE else "rolled back")
        return request.response_to(ResponseCode.SUCCESS, None)
