"""ACK_MESSAGE (200051) and BATCH_ACK_MESSAGE (200151).

An ack of a normal handle is an AckMsg (BatchAckMsg for a batch) appended to the revive queue
the handle names; the revive service matches it with the checkpoint, so an acked message is
never revived, even across a restart. With enablePopBufferMerge an ack of a checkpoint still
held in memory only sets its bit there (buffer_merge.py). An ack of an orderly handle (reviveQid
999) goes to ConsumerOrderInfoManager instead and moves the group's offset once the whole batch
is acked.
As upstream, acking a handle whose message is already revived or acked is harmless (SUCCESS);
an offset outside the queue answers NO_MESSAGE.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors.base import Fields, RequestError
from orbitmq.common.extra_info import POP_ORDER_REVIVE_QUEUE, ExtraInfoError, parse_extra_info, real_topic
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .checkpoint import AckMsg, BatchAck, BatchAckMsg, RevivePayloadError, parse_batch_ack_body
from .constants import build_lock_key

if TYPE_CHECKING:
    from .interfaces import AckPop

log = logging.getLogger(__name__)


def bad_extra_info(exc: ExtraInfoError) -> RequestError:
    return RequestError(ResponseCode.INVALID_PARAMETER, f"illegal extraInfo: {exc}")


class AckMessageProcessor:
    def __init__(self, pop: AckPop) -> None:
        self.pop = pop
        self.broker = pop.broker

    def register(self) -> None:
        self.broker.register_processor(RequestCode.ACK_MESSAGE, self.process_ack)
        self.broker.register_processor(RequestCode.BATCH_ACK_MESSAGE, self.process_batch_ack)

    async def process_ack(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        group = f.str("consumerGroup")
        topic = f.str("topic")
        queue_id = f.int("queueId")
        offset = f.long("offset")
        try:
            info = parse_extra_info(f.str("extraInfo"))
        except ExtraInfoError as exc:
            raise bad_extra_info(exc) from None
        topic = info.real_topic(topic, group)
        self.pop.check_topic_queue(topic, queue_id, channel)
        store = self.broker.message_store
        min_offset = store.get_min_offset_in_queue(topic, queue_id)
        max_offset = store.get_max_offset_in_queue(topic, queue_id)
        if offset < min_offset or offset > max_offset:
            return request.response_to(ResponseCode.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, "
                                       f"commit:{offset}, store:{min_offset}~{max_offset}")
        if info.revive_qid == POP_ORDER_REVIVE_QUEUE:
            code, remark = await self.ack_orderly(topic, group, queue_id, offset, info.pop_time,
                                                  self.broker.remote_addr(channel))
            return request.response_to(code, remark)
        self._check_revive_qid(info.revive_qid)
        ack = AckMsg(ack_offset=offset, start_offset=info.ck_queue_offset, consumer_group=group, topic=topic,
                     queue_id=queue_id, pop_time=info.pop_time, broker_name=info.broker_name)
        # Matched with its buffered checkpoint in memory (PopBufferMergeService#addAk), else written.
        if not self.pop.buffer_merge.add_ack(info.revive_qid, ack) \
                and not await self.pop.revive_log.append_ack(ack, info.revive_qid, info.invisible_time):
            return request.response_to(ResponseCode.SYSTEM_ERROR, "append ack to the revive log failed")
        self.pop.recent_acks.add(((ack, info.invisible_time),), self.broker.now_ms())
        return request.response_to(ResponseCode.SUCCESS, None)

    async def process_batch_ack(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        try:
            broker_name, acks = parse_batch_ack_body(request.body)
        except RevivePayloadError as exc:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"illegal batch ack body: {exc}") from None
        if not acks:
            return request.response_to(ResponseCode.NO_MESSAGE, "no ack in the request body")
        # The acks' records are written together once the entries are checked (one store call),
        # and before anything else happens: an orderly entry, an error, the response.
        pending: list[tuple[AckMsg, int, int]] = []
        merged: list[tuple[AckMsg, int]] = []  # matched with buffered checkpoints, written by nobody
        try:
            response = await self._batch_ack(request, channel, broker_name, acks, pending, merged)
        except RequestError:
            if pending and not await self.pop.revive_log.append_acks(pending):
                return self._append_failed(request)
            raise
        if pending and not await self.pop.revive_log.append_acks(pending):
            return self._append_failed(request)
        recent = [(ack, invisible_time) for ack, _qid, invisible_time in pending]
        recent.extend(merged)
        self.pop.recent_acks.add(recent, self.broker.now_ms())
        return response

    @staticmethod
    def _append_failed(request: RemotingCommand) -> RemotingCommand:
        return request.response_to(ResponseCode.SYSTEM_ERROR, "append batch ack to the revive log failed")

    async def _batch_ack(self, request: RemotingCommand, channel: Any, broker_name: str | None,
                         acks: list[BatchAck], pending: list[tuple[AckMsg, int, int]],
                         merged: list[tuple[AckMsg, int]]) -> RemotingCommand:
        broker = self.broker
        client = broker.remote_addr(channel)
        select_topic_config = broker.topic_config_manager.select_topic_config
        default_broker_name = broker_name or broker.config.broker_name
        store = broker.message_store
        revive_queue_num = self.pop.revive_queue_num()
        merge = self.pop.buffer_merge
        for back in acks:
            try:
                topic = real_topic(back.topic, back.consumer_group, back.retry)
            except ExtraInfoError as exc:
                raise bad_extra_info(exc) from None
            if select_topic_config(topic) is None:
                continue
            min_offset = store.get_min_offset_in_queue(topic, back.queue_id)
            max_offset = store.get_max_offset_in_queue(topic, back.queue_id)
            start = back.start_offset
            offsets = [o for o in [start + i for i in back.bits] if min_offset <= o <= max_offset]
            if not offsets:
                continue
            if back.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                if pending:
                    ok = await self.pop.revive_log.append_acks(pending)
                    pending.clear()
                    if not ok:
                        return self._append_failed(request)
                for offset in offsets:
                    code, remark = await self.ack_orderly(topic, back.consumer_group, back.queue_id, offset,
                                                          back.pop_time, client)
                    if code != ResponseCode.SUCCESS:
                        return request.response_to(code, remark)
                continue
            if not 0 <= back.revive_queue_id < revive_queue_num:
                self._check_revive_qid(back.revive_queue_id)  # raises, naming the queue count
            msg = BatchAckMsg(-1, start, back.consumer_group, topic, back.queue_id, back.pop_time,
                              default_broker_name, offsets)
            if merge.add_ack(back.revive_queue_id, msg):
                merged.append((msg, back.invisible_time))
            else:
                pending.append((msg, back.revive_queue_id, back.invisible_time))
        return request.response_to(ResponseCode.SUCCESS, None)

    def _check_revive_qid(self, revive_qid: int) -> None:
        if not 0 <= revive_qid < self.pop.revive_queue_num():
            raise RequestError(ResponseCode.INVALID_PARAMETER,
                               f"reviveQid[{revive_qid}] is illegal, the revive topic has "
                               f"{self.pop.revive_queue_num()} queues")

    async def ack_orderly(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                          client: str) -> tuple[int, str | None]:
        """AckMessageProcessor.ackOrderly: commit through ConsumerOrderInfoManager."""
        pop = self.pop
        com = self.broker.consumer_offset_manager
        if offset < com.query_offset(group, topic, queue_id):
            return ResponseCode.SUCCESS, None  # already behind the committed offset
        lock_key = build_lock_key(topic, group, queue_id)
        async with pop.queue_locks.hold(lock_key):
            old = com.query_offset(group, topic, queue_id)
            if offset < old:
                return ResponseCode.SUCCESS, None
            next_offset = pop.order_info.commit_and_next(topic, group, queue_id, offset, pop_time)
            pop.order_info_changed()
            if next_offset == -1:
                return ResponseCode.MESSAGE_ILLEGAL, (f"offset is illegal, key:{lock_key}, old:{old}, "
                                                      f"commit:{offset}, next:{next_offset}, {client}")
            if next_offset >= 0:
                if not com.has_offset_reset(group, topic, queue_id):
                    com.commit_offset(group, topic, queue_id, next_offset, client)
                if not pop.order_info.check_block(None, topic, group, queue_id):
                    pop.long_polling.notify_message_arriving(topic, queue_id, group)
        return ResponseCode.SUCCESS, None
