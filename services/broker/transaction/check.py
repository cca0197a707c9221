"""The transaction check scan (TransactionalMessageCheckService) and CHECK_TRANSACTION_STATE (39).

Every ``transactionCheckInterval`` ms, on a master only, the scan walks the half queue from
CID_RMQ_SYS_TRANS's offset. A half message still open and older than ``transactionTimeOut``
(or than its CHECK_IMMUNITY_TIME_IN_SECONDS) is copied to the end of the half queue with
TRANSACTION_CHECK_TIMES + 1, and the producer group is asked about the copy; one checked
``transactionCheckMax`` times (or older than ``fileReservedTime``) goes to
TRANS_CHECK_MAX_TIME_TOPIC instead. Whether a half message is finished comes from the open
index (service.py) rather than from pulling ops 32 at a time as upstream does; the outcome
per message is the same.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from orbitmq.common.aio import cancel_and_wait, periodic
from orbitmq.common.constants import (
    PERM_READ,
    PERM_WRITE,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import encode_record
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting.protocol import RemotingCommand

from . import bridge
from .service import StoredHalf

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

    from .service import TransactionalMessageService

log = logging.getLogger(__name__)

MAX_SCAN_SECONDS = 60  # upstream's MAX_PROCESS_TIME_LIMIT per half queue
_CHANNEL_TRIES = 3


class _Step(enum.Enum):
    NEXT = 1
    STOP = 2


class TransactionalMessageCheckService:
    def __init__(self, broker: BrokerController, service: TransactionalMessageService) -> None:
        self.broker = broker
        self.service = service
        self._task: asyncio.Task[None] | None = None
        self._counter = itertools.count()
        self._sends: set[asyncio.Task[None]] = set()

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start scanning (master only); the open index is rebuilt first."""
        if self._task is not None:
            return
        self.service.reset()
        self._task = asyncio.create_task(
            periodic(lambda: max(self.broker.config.transaction_check_interval, 100) / 1000.0, self.check,
                     what="transaction check"), name="TransactionalMessageCheckService")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task, *self._sends)
        self._sends.clear()

    @property
    def running(self) -> bool:
        return self._task is not None

    # ---- the scan -------------------------------------------------------------------------

    async def check(self) -> None:
        """One pass over the half queue (TransactionalMessageServiceImpl.check)."""
        svc = self.service
        scan_start = self.broker.now_ms()
        deadline = time.monotonic() + MAX_SCAN_SECONDS
        offset = svc.consume_offset(RMQ_SYS_TRANS_HALF_TOPIC)
        stopped = False
        while not stopped and time.monotonic() < deadline:
            async with svc.lock:
                await svc.ensure_loaded()
                halves, next_offset = svc.read(RMQ_SYS_TRANS_HALF_TOPIC, offset)
                if not halves:
                    offset = max(offset, next_offset)  # e.g. behind the queue's min offset
                    break
                for half in halves:
                    if await self._visit(half, scan_start) is _Step.STOP:
                        stopped = True
                        break
                    offset = half.queue_offset + 1
        svc.commit_offset(RMQ_SYS_TRANS_HALF_TOPIC, offset)
        op_offset = svc.prune(offset, svc.consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC))
        svc.commit_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, op_offset)

    async def _visit(self, half: StoredHalf, scan_start: int) -> _Step:
        svc = self.service
        cfg = self.broker.config
        msg = half.message
        svc.note_read(half)
        if not svc.is_open_offset(half.queue_offset):
            return _Step.NEXT  # finished by an op, checked before, or discarded
        if msg.store_timestamp >= scan_start:
            return _Step.STOP
        props = msg.properties
        now = self.broker.now_ms()
        age = now - msg.born_timestamp
        times = _int_or_none(props.get(MessageConst.TRANSACTION_CHECK_TIMES))
        reserved_ms = self.broker.store_config.file_reserved_time * 3_600_000
        if (times is not None and times >= cfg.transaction_check_max) or age > reserved_ms:
            await self._discard(half)
            return _Step.NEXT
        immunity = _int_or_none(props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS))
        if immunity is not None:
            if age <= immunity * 1000:
                # Still immune: move it to the end of the queue, remembering where it was first.
                original = props.get(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET) or str(half.queue_offset)
                copied = await self._copy(half, {MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET: original})
                return _Step.NEXT if copied is not None else _Step.STOP
        elif 0 <= age <= cfg.transaction_time_out:
            return _Step.STOP  # too new; so is everything after it
        copied = await self._copy(half, {MessageConst.TRANSACTION_CHECK_TIMES: str(1 if times is None else times + 1)})
        if copied is None:
            return _Step.STOP
        if copied[1] is not None:  # None: escaped to another broker set, which checks it
            self._send_check(*copied)
        return _Step.NEXT

    async def _copy(self, half: StoredHalf, updates: dict[str, str]) -> tuple[Any, Any] | None:
        """Append a fresh copy of ``half`` to the half queue and move its place in the index."""
        inner = bridge.half_copy(self.broker, half.message, updates)
        escape = self.broker.escape_bridge
        result = await escape.put_message(inner)
        if not result.is_ok():
            log.warning("copying half message at offset %d failed: %s", half.queue_offset, result.status)
            return None
        svc = self.service
        if result.remote:
            # A slave acting as master (services/broker/failover): the copy became a half message
            # of another broker set, which checks it back itself; nothing is left to check here.
            svc.close_offset(half.queue_offset)
            return inner, None
        svc.close_offset(half.queue_offset)
        svc.register(result.append_message_result.logics_offset, bridge.transaction_id_of(half.message),
                     bridge.real_topic_of(half.message))
        return inner, result.append_message_result

    async def _discard(self, half: StoredHalf) -> None:
        """resolveDiscardMsg: keep the message in TRANS_CHECK_MAX_TIME_TOPIC queue 0."""
        from orbitmq.broker.processors import topic_support

        topic_support.create_topic_in_send_message_back_method(
            self.broker, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE, 0)
        result = await self.broker.escape_bridge.put_message(bridge.discard_message(self.broker, half.message))
        if not result.is_ok():
            log.warning("discarding half message at offset %d failed: %s", half.queue_offset, result.status)
            return
        self.service.close_offset(half.queue_offset)
        log.info("half message %s (offset %d) discarded to %s after %s checks", half.message.uniq_id_or_msg_id,
                 half.queue_offset, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
                 half.message.properties.get(MessageConst.TRANSACTION_CHECK_TIMES))

    # ---- CHECK_TRANSACTION_STATE ----------------------------------------------------------

    def _send_check(self, copy: Any, appended: Any) -> None:
        props = copy.properties
        group = props.get(MessageConst.PRODUCER_GROUP, "")
        channel = self.available_channel(group)
        if channel is None:
            log.info("no producer of group %s online to check transaction %s", group,
                     props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
            return
        request = self.check_request(copy, appended)
        task = asyncio.create_task(self._oneway(channel, request))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    def check_request(self, copy: Any, appended: Any) -> RemotingCommand:
        """CHECK_TRANSACTION_STATE for a check copy: the copy's offsets, the message as a record
        under its real topic and queue."""
        props = copy.properties
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or appended.msg_id
        header = {
            "topic": RMQ_SYS_TRANS_HALF_TOPIC,
            "tranStateTableOffset": str(appended.logics_offset),
            "commitLogOffset": str(appended.wrote_offset),
            "msgId": uniq,
            "transactionId": props.get(MessageConst.TRANSACTION_ID) or uniq,
            "offsetMsgId": appended.msg_id,
            "bname": self.broker.config.broker_name,
        }
        try:
            real_qid = int(props.get(MessageConst.REAL_QUEUE_ID, "0"))
        except ValueError:
            real_qid = 0
        cfg = self.broker.config
        body = encode_record(
            topic=props.get(MessageConst.REAL_TOPIC, copy.topic), queue_id=real_qid, body=copy.body, flag=copy.flag,
            queue_offset=appended.logics_offset, physical_offset=appended.wrote_offset, sys_flag=copy.sys_flag,
            born_timestamp=copy.born_timestamp, born_host=copy.born_host,
            store_timestamp=appended.store_timestamp, store_host=(cfg.broker_ip1, cfg.listen_port),
            reconsume_times=copy.reconsume_times, properties=copy.encoded_properties())
        return RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header, body)

    def available_channel(self, group: str) -> Any | None:
        """ProducerManager.getAvailableChannel: round robin, up to 3 tries for an active channel
        (this transport has no separate writability to prefer)."""
        channels = list(self.broker.producer_manager.group_channel_table.get(group, {}))
        if not channels:
            return None
        start = next(self._counter)
        for i in range(min(_CHANNEL_TRIES, len(channels))):
            channel = channels[(start + i) % len(channels)]
            if getattr(channel, "is_active", True):
                return channel
        return None

    @staticmethod
    async def _oneway(channel: Any, request: RemotingCommand) -> None:
        try:
            await asyncio.wait_for(channel.invoke_oneway(request), 3.0)
        except Exception as exc:  # the check counts anyway; the next scan asks again
            log.info("CHECK_TRANSACTION_STATE to %s failed: %s", getattr(channel, "remote_address", channel), exc)


def _int_or_none(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None

