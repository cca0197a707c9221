"""TransactionMQProducer: half messages, the local transaction, END_TRANSACTION and check-backs.

sendMessageInTransaction sends the message as a half (TRAN_MSG=true, PGROUP, sysFlag
TRANSACTION_PREPARED_TYPE), runs the listener's local transaction when the half was stored,
and ends it with END_TRANSACTION (oneway: commit, rollback, or "unknown" that leaves it to the
broker's check). The broker asks again with CHECK_TRANSACTION_STATE; the instance hands that to
``check_transaction_state``, which asks the listener and answers with END_TRANSACTION marked
fromTransactionCheck on the connection the check came on.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from orbitmq.client.errors import MQClientError
from orbitmq.client.results import SendResult, SendStatus
from orbitmq.clientcore import loop as bg
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from orbitmq.remoting import headers as h
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.producer.producer import (
    DEFAULT_PRODUCER_GROUP,
    AsyncDefaultMQProducer,
    DefaultMQProducer,
)

log = logging.getLogger("orbitmq.remoting_client")


class LocalTransactionState(enum.StrEnum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # upstream's spelling


_END_TYPES = {LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
              LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
              LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE}


class TransactionListener(Protocol):
    """Both methods may be plain functions (run on a worker thread, so they may block) or coroutines."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any: ...
    def check_local_transaction(self, msg: MessageExt) -> Any: ...


@dataclass
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _call(fn: Any, *args: Any) -> LocalTransactionState:
    if inspect.iscoroutinefunction(fn):
        state = await fn(*args)
    else:
        state = await asyncio.to_thread(fn, *args)
        if inspect.isawaitable(state):
            state = await state
    if state is None:
        return LocalTransactionState.UNKNOW
    return LocalTransactionState(state)


class AsyncTransactionMQProducer(AsyncDefaultMQProducer):
    def __init__(self, producer_group: str = DEFAULT_PRODUCER_GROUP, config: RemotingClientConfig | None = None, *,
                 transaction_listener: TransactionListener | None = None, **options: Any) -> None:
        super().__init__(producer_group, config, **options)
        self.transaction_listener = transaction_listener

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """DefaultMQProducerImpl#sendMessageInTransaction."""
        listener = self.transaction_listener
        if listener is None:
            raise MQClientError("tranExecutor is null")
        if msg.delay_time_level:  # ignore DelayTimeLevel parameter, as upstream
            msg.delay_time_level = 0
        self.check_message(msg)
        msg.put_property(MessageConst.TRANSACTION_PREPARED, "true")
        msg.put_property(MessageConst.PRODUCER_GROUP, self.group_name)
        try:
            result = await self.send(msg)
        except MQClientError as exc:
            raise MQClientError(f"send message Exception: {exc}", exc.code) from exc
        state = LocalTransactionState.UNKNOW
        local_error: BaseException | None = None
        if result.status == SendStatus.SEND_OK:
            if result.transaction_id is not None:
                msg.put_property(MessageConst.TRANSACTION_ID, result.transaction_id)
            uniq = msg.uniq_key
            try:
                state = await _call(listener.execute_local_transaction, msg, arg)
            except Exception as exc:  # the broker's check decides; the remark tells why
                log.info("executeLocalTransactionBranch exception of %s: %r", uniq, exc)
                local_error = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self.end_transaction(msg, result, state, local_error)
        except Exception as exc:  # the half stays; the broker's check will end it
            log.warning("local transaction %s execute %s, but end broker transaction failed: %s",
                        result.msg_id, state, exc)
        return TransactionSendResult(**{f: getattr(result, f) for f in SendResult.__dataclass_fields__},
                                     local_transaction_state=state)

    async def end_transaction(self, msg: Message, result: SendResult, state: LocalTransactionState,
                              local_error: BaseException | None) -> None:
        """DefaultMQProducerImpl#endTransaction: END_TRANSACTION (oneway) to the half's broker."""
        instance = self._make_sure_state_ok()
        _, _, commit_log_offset = decode_offset_message_id(result.offset_msg_id or result.msg_id)
        addr = instance.find_broker_address_in_publish(result.broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{result.broker_name}] not exist")
        header = h.EndTransactionRequestHeader(
            producer_group=self.group_name, tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=_END_TYPES[state], msg_id=result.msg_id,
            from_transaction_check=False, transaction_id=result.transaction_id)
        remark = f"executeLocalTransactionBranch exception: {local_error!r}" if local_error is not None else None
        await instance.api.end_transaction(addr, header, remark)
        if self.trace_dispatcher is not None:
            self.trace_dispatcher.end_transaction(msg, result, state.value, False, addr)

    async def check_transaction_state(self, addr: str, msg: MessageExt,
                                      header: h.CheckTransactionStateRequestHeader) -> None:
        """The check-back (DefaultMQProducerImpl#checkTransactionState): ask the listener, answer the broker."""
        listener = self.transaction_listener
        if listener is None:
            log.warning("CHECK_TRANSACTION_STATE for group %s, but no transaction listener", self.producer_group)
            return
        instance = self._make_sure_state_ok()
        error: BaseException | None = None
        try:
            state = await _call(listener.check_local_transaction, msg)
        except Exception as exc:
            log.warning("checkLocalTransactionState of %s failed: %r", msg.uniq_key, exc)
            state, error = LocalTransactionState.UNKNOW, exc
        uniq = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or header.msg_id or ""
        end = h.EndTransactionRequestHeader(
            producer_group=self.group_name, tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=_END_TYPES[state], msg_id=uniq,
            from_transaction_check=True, transaction_id=header.transaction_id)
        remark = f"checkLocalTransactionState Exception: {error!r}" if error is not None else None
        try:
            await instance.api.end_transaction(addr, end, remark)
        except Exception as exc:  # the broker checks again later
            log.warning("endTransactionOneway of check %s to %s failed: %s", uniq, addr, exc)


class TransactionMQProducer(DefaultMQProducer):
    """TransactionMQProducer for threads."""

    def __init__(self, producer_group: str = DEFAULT_PRODUCER_GROUP, config: RemotingClientConfig | None = None,
                 **options: Any) -> None:
        async def make() -> AsyncTransactionMQProducer:
            return AsyncTransactionMQProducer(producer_group, config, **options)
        self._impl = bg.run(make())

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        impl = self._impl
        assert isinstance(impl, AsyncTransactionMQProducer)
        return bg.run(impl.send_message_in_transaction(msg, arg))
