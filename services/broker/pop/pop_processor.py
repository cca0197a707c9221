"""POP_MESSAGE (200050): hand out messages of a topic to a consumer group without rebalancing.

A pop walks the topic's queues from a random one (or the one asked for), and, with
RocketMQ's probability, the group's pop retry topic first or last. For every queue it takes
the queue lock, reads from the group's pop offset, writes a checkpoint for what it read into
the revive log and only then moves the pop offset, so a crash never loses a handed-out message
(with enablePopBufferMerge the checkpoint waits in PopBufferMergeService, which moves the offset
once the batch is acked or written: buffer_merge.py).
An orderly pop writes no checkpoint: ConsumerOrderInfoManager blocks the queue until the batch
is acked or its invisible time passes, and the offset moves on ack. An empty pop parks in
PopLongPollingService until a message arrives or pollTime ends (POLLING_TIMEOUT); one woken
after its group's consumeMessageOrderly changed answers empty instead.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors import topic_support
from orbitmq.broker.processors.base import Fields, RequestError, ext
from orbitmq.broker.processors.filtering import build_filter
from orbitmq.broker.store.model import GetMessageStatus
from orbitmq.common import extra_info
from orbitmq.common.constants import is_readable, is_retry_topic
from orbitmq.common.extra_info import POP_ORDER_REVIVE_QUEUE, build_pop_retry_topic
from orbitmq.common.filter.message_filter import TagFilter
from orbitmq.common.message_codec import decode_record
from orbitmq.common.subscription_group import PRIORITY_FACTOR_DEFAULT
from orbitmq.common.topic_config import TopicMessageType
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from . import dead_letter
from .checkpoint import PopCheckPoint
from .constants import INIT_MODE_MIN, MAX_POP_MSG_NUMS, build_lock_key
from .message_rewrite import rewrite_popped_record

if TYPE_CHECKING:
    from .interfaces import PopProcessorPop, QueueOffsets

log = logging.getLogger(__name__)

# Far above any byte limit the store applies itself (maxTransferBytesOnMessageIn*).
MAX_TOTAL_SIZE = 32 * 4 * 1024 * 1024
# How long a waiter that saw messages left behind (a busy queue lock) waits before retrying.
BUSY_RETRY_SECONDS = 0.02
# Longest single wait while parked; the pop is retried after it even without a wake-up.
MAX_PARK_SLICE_SECONDS = 5.0
# Store reads are synchronous and a filtered read scans up to 16000 ConsumeQueue entries, so a
# pop over every queue of a wide topic can run long without an await that yields: give the
# loop back once a pass has used this much of it.
YIELD_AFTER_SECONDS = 0.002
# PopMessageRequestHeader.isTimeoutTooMuch.
TIMEOUT_TOO_MUCH_MS = 500


_REFUSAL_FIELDS = {"popTime": "0", "invisibleTime": "0", "reviveQid": "0", "restNum": "0"}


@dataclass(slots=True)
class PopHeader:
    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: int
    exp_type: str | None
    exp: str | None
    order: bool
    attempt_id: str | None


def parse_pop_header(request: RemotingCommand) -> PopHeader:
    f = Fields(request.ext_fields)
    header = PopHeader(
        consumer_group=f.str("consumerGroup"), topic=f.str("topic"), queue_id=f.int("queueId"),
        max_msg_nums=f.int("maxMsgNums"), invisible_time=f.long("invisibleTime"), poll_time=f.long("pollTime"),
        born_time=f.long("bornTime"), init_mode=f.int("initMode"), exp_type=f.opt_str("expType"),
        exp=f.opt_str("exp"), order=f.bool("order", False), attempt_id=f.opt_str("attemptId"))
    if not header.consumer_group or not header.topic:
        raise RequestError(ResponseCode.INVALID_PARAMETER, "consumerGroup and topic must not be empty")
    if header.max_msg_nums > MAX_POP_MSG_NUMS:
        raise RequestError(ResponseCode.INVALID_PARAMETER, "the broker pop message's num is greater than 32")
    if header.max_msg_nums <= 0:
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"maxMsgNums[{header.max_msg_nums}] must be positive")
    if header.invisible_time <= 0:
        raise RequestError(ResponseCode.INVALID_PARAMETER,
                           f"invisibleTime[{header.invisible_time}] must be positive")
    if header.poll_time < 0:
        raise RequestError(ResponseCode.INVALID_PARAMETER, f"pollTime[{header.poll_time}] must not be negative")
    return header


@dataclass
class PopBatch:
    """What one pop pass collected, across queues."""

    pop_time: int
    revive_qid: int
    records: list[bytes] = field(default_factory=list)
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)
    rest_num: int = 0


class PopMessageProcessor:
    def __init__(self, pop: PopProcessorPop) -> None:
        self.pop = pop
        self.broker = pop.broker
        self._ck_counter = itertools.count()
        self._random = random.Random()

    def register(self) -> None:
        self.broker.register_processor(RequestCode.POP_MESSAGE, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        header = parse_pop_header(request)
        now = self.broker.now_ms()
        if header.born_time > 0 and header.poll_time > 0 \
                and now - header.born_time - header.poll_time > TIMEOUT_TOO_MUCH_MS:
            return request.response_to(ResponseCode.POLLING_TIMEOUT,
                                       f"the broker[{self.broker.config.broker_ip1}] pop message is timeout too much")
        try:
            topic_config, message_filter, orderly = self._check(header, channel)
        except RequestError as exc:
            # PopMessageProcessor answers a refusal with its PopMessageResponseHeader still at its
            # primitive defaults: the four fields are on the wire, all 0.
            return request.response_to(exc.code, exc.remark, dict(_REFUSAL_FIELDS))
        deadline = now + header.poll_time
        client = self.broker.remote_addr(channel)
        while True:
            batch = await self.pop_once(header, topic_config, message_filter, client)
            if batch.records:
                if batch.rest_num > 0:
                    self.pop.long_polling.notify_message_arriving(header.topic, header.queue_id, header.consumer_group)
                return self._response(request, header, batch, ResponseCode.SUCCESS, "FOUND")
            remaining = deadline - self.broker.now_ms()
            if remaining <= 0 or self.pop.long_polling.stopped:
                return self._response(request, header, batch, ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
            parked = self.pop.long_polling.park(header.topic, header.consumer_group, header.queue_id, message_filter)
            if parked is None:
                return self._response(request, header, batch, ResponseCode.POLLING_FULL, "NO_MESSAGE_IN_QUEUE")
            wait = min(remaining / 1000.0, MAX_PARK_SLICE_SECONDS)
            if batch.rest_num > 0 or self.pop.has_message(header.topic, header.consumer_group, header.queue_id,
                                                          header.order, header.attempt_id):
                wait = min(wait, BUSY_RETRY_SECONDS)
            try:
                await asyncio.wait_for(asyncio.shield(parked.woken), wait)
            except TimeoutError:
                pass
            finally:
                self.pop.long_polling.unpark(parked)
            if not getattr(channel, "is_active", True):
                return self._response(request, header, batch, ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
            if self._group_mode_changed(header.consumer_group, orderly):
                # Parked under the group's former mode (updateSubGroup -o): its client is gone or
                # asks again with the new mode, so take nothing, and hand the wake-up on.
                self.pop.long_polling.notify_message_arriving(header.topic, header.queue_id, header.consumer_group)
                return self._response(request, header, batch, ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")

    def _group_mode_changed(self, group: str, orderly: bool) -> bool:
        """Whether the group's consumeMessageOrderly is no longer ``orderly`` (or the group is gone).

        A concurrent pop parked before a switch to orderly would otherwise take the first message
        sent after it, without order, and its gone client's nack would put it behind the later
        ones through the retry topic.
        """
        config = self.broker.subscription_group_manager.get(group)
        return config is None or config.consume_message_orderly != orderly

    def _check(self, header: PopHeader, channel: Any) -> tuple[Any, Any, bool]:
        """The topic's config, the message filter, and the group's consumeMessageOrderly now."""
        broker = self.broker
        if not is_readable(broker.config.broker_permission):
            raise RequestError(ResponseCode.NO_PERMISSION,
                               f"the broker[{broker.config.broker_ip1}] pop message is forbidden")
        topic_config = broker.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please! "
                               "http://rocketmq.apache.org/docs/faq/")
        if not is_readable(topic_config.perm):
            raise RequestError(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] peeking message is forbidden")
        if header.queue_id >= topic_config.read_queue_nums or header.queue_id < -1:
            raise RequestError(ResponseCode.INVALID_PARAMETER,
                               f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                               f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}] "
                               f"consumer:[{broker.remote_addr(channel)}]")
        group_config = topic_support.find_subscription_group_config(broker, header.consumer_group)
        if group_config is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                               f"subscription group [{header.consumer_group}] does not exist, "
                               "http://rocketmq.apache.org/docs/faq/")
        if not group_config.consume_enable:
            raise RequestError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}")
        message_filter = None
        if header.exp:
            message_filter = build_filter(header.exp_type or "TAG", header.exp, header.topic, header.consumer_group)
            if takes_everything(message_filter):
                # The store would decode every record's properties only to let it through.
                message_filter = None
        return topic_config, message_filter, group_config.consume_message_orderly

    def _response(self, request: RemotingCommand, header: PopHeader, batch: PopBatch, code: int,
                  remark: str) -> RemotingCommand:
        fields = ext(popTime=batch.pop_time, invisibleTime=header.invisible_time, reviveQid=batch.revive_qid,
                     restNum=batch.rest_num, startOffsetInfo=";".join(batch.start_offset_info),
                     msgOffsetInfo=";".join(batch.msg_offset_info))
        if header.order:
            fields["orderCountInfo"] = ";".join(batch.order_count_info)
        body = b"".join(batch.records) if code == ResponseCode.SUCCESS else b""
        return request.response_to(code, remark, fields, body)

    # ---- one pass over the queues ---------------------------------------------------------

    async def pop_once(self, header: PopHeader, topic_config: Any, message_filter: Any, client: str) -> PopBatch:
        pop_cfg = self.pop.config
        if header.order:
            revive_qid = POP_ORDER_REVIVE_QUEUE
        else:
            revive_qid = next(self._ck_counter) % self.pop.revive_queue_num()
        batch = PopBatch(pop_time=self.broker.now_ms(), revive_qid=revive_qid)
        random_q = self._random.randrange(100)
        # PopMessageProcessor (RIP-80): on a PRIORITY topic, priority.factor percent of the
        # concurrent pops walk the queues from the highest priority down, and read the retry topic
        # first only with popFromRetryProbabilityForPriority (retries are the lowest priority by default).
        priority_mode = (not header.order and topic_config.message_type == TopicMessageType.PRIORITY
                         and random_q < self._priority_factor(header.consumer_group))
        need_retry = random_q < (pop_cfg.pop_from_retry_probability_for_priority if priority_mode
                                 else pop_cfg.pop_from_retry_probability)
        if priority_mode:
            random_q = 0
        retry_topic = build_pop_retry_topic(header.topic, header.consumer_group)
        if need_retry and not header.order:
            await self._pop_from_topic(retry_topic, True, header, batch, message_filter, random_q, client,
                                       priority_mode=priority_mode)
        if header.queue_id < 0:
            await self._pop_from_topic(header.topic, False, header, batch, message_filter, random_q, client,
                                       topic_config, priority_mode=priority_mode)
        else:
            await self._pop_from_queue(header.topic, False, header.queue_id, header, batch, message_filter, client)
        # An orderly group reads its pop retry topic too (RocketMQ's does not): it only holds messages
        # popped while the group was concurrent, revived after a switch to orderly
        # (updateSubGroup -o true), and skipping it would strand them for good.
        if (header.order or not need_retry) and len(batch.records) < header.max_msg_nums:
            await self._pop_from_topic(retry_topic, True, header, batch, message_filter, random_q, client,
                                       priority_mode=priority_mode)
        return batch

    def _priority_factor(self, group: str) -> int:
        config = self.broker.subscription_group_manager.get(group)
        return PRIORITY_FACTOR_DEFAULT if config is None else config.priority_factor

    async def _pop_from_topic(self, topic: str, is_retry: bool, header: PopHeader, batch: PopBatch,
                              message_filter: Any, random_q: int, client: str, topic_config: Any = None,
                              priority_mode: bool = False) -> None:
        if topic_config is None:
            topic_config = self.broker.topic_config_manager.select_topic_config(topic)
            if topic_config is None:
                return
        queue_nums = topic_config.read_queue_nums
        turn_started = time.perf_counter()
        for i in range(queue_nums):
            queue_id = priority_walk(i, queue_nums, self.pop.config.priority_order_asc) if priority_mode \
                else (random_q + i) % queue_nums
            await self._pop_from_queue(topic, is_retry, queue_id, header, batch, message_filter, client)
            if time.perf_counter() - turn_started > YIELD_AFTER_SECONDS:
                await asyncio.sleep(0)
                turn_started = time.perf_counter()

    async def _pop_from_queue(self, topic: str, is_retry: bool, queue_id: int, header: PopHeader, batch: PopBatch,
                              message_filter: Any, client: str) -> None:
        pop = self.pop
        broker = self.broker
        group = header.consumer_group
        lock_key = build_lock_key(topic, group, queue_id)
        if not await pop.queue_locks.try_lock(lock_key):
            if not header.order:
                batch.rest_num += max(0, broker.message_store.get_max_offset_in_queue(topic, queue_id)
                                      - pop.peek_pop_offset(topic, group, queue_id))
            return
        try:
            offset = pop.get_pop_offset(topic, group, queue_id, header.init_mode, client)
            if header.order and pop.order_info.check_block(header.attempt_id, topic, group, queue_id):
                return
            want = header.max_msg_nums - len(batch.records)
            if want <= 0:
                batch.rest_num += max(0, broker.message_store.get_max_offset_in_queue(topic, queue_id) - offset)
                return
            result = await broker.get_message(group, topic, queue_id, offset, want, MAX_TOTAL_SIZE, message_filter)
            if result is None:
                return
            if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                                 GetMessageStatus.OFFSET_FOUND_NULL):
                log.warning("pop offset of %s is not correct, %d -> %d", lock_key, offset, result.next_begin_offset)
                offset = result.next_begin_offset
                broker.consumer_offset_manager.commit_offset(group, topic, queue_id, offset, client)
                result = await broker.get_message(group, topic, queue_id, offset, want, MAX_TOTAL_SIZE,
                                                  message_filter)
                if result is None:
                    return
            if result.message_count > 0:
                if not await self._hand_out(topic, is_retry, queue_id, offset, header, batch, result, client):
                    batch.rest_num += result.message_count
                    return
            elif result.status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.OFFSET_FOUND_NULL,
                                   GetMessageStatus.MESSAGE_WAS_REMOVING) and result.next_begin_offset > offset:
                # Nothing this consumer wants before next_begin_offset: skip it for good (behind
                # the buffered checkpoints while buffer merge is on: PopBufferMergeService#addCkMock).
                if not header.order and pop.buffer_merge.tracks(topic, group, queue_id):
                    pop.buffer_merge.add_ck_mock(group, topic, queue_id, offset, header.invisible_time,
                                                 batch.pop_time, batch.revive_qid, result.next_begin_offset,
                                                 broker.config.broker_name, client)
                else:
                    broker.consumer_offset_manager.commit_offset(group, topic, queue_id, result.next_begin_offset,
                                                                 client)
            batch.rest_num += max(0, result.max_offset - result.next_begin_offset)
        finally:
            pop.queue_locks.unlock(lock_key)

    async def _hand_out(self, topic: str, is_retry: bool, queue_id: int, offset: int, header: PopHeader,
                        batch: PopBatch, result: Any, client: str) -> bool:
        """Records the batch (checkpoint or order info), moves the offset, adds the messages."""
        pop = self.pop
        broker = self.broker
        group = header.consumer_group
        offsets = list(result.message_queue_offset)
        counts: dict[int, int] = {}
        records = [bytes(r) for r in result.message_buffer_list]
        if header.order:
            counts, order_count = pop.order_info.update(header.attempt_id, topic, group, queue_id, batch.pop_time,
                                                        header.invisible_time, offsets)
            batch.order_count_info.append(order_count)
            pop.order_info_changed()
            broker.consumer_offset_manager.commit_offset(group, topic, queue_id, offset, client)
            records, offsets = await self._dead_letter_orderly(topic, queue_id, group, batch.pop_time, records,
                                                               offsets, counts, client)
            if not offsets:
                return True
        else:
            ck = PopCheckPoint(start_offset=offset, pop_time=batch.pop_time, invisible_time=header.invisible_time,
                               num=len(offsets), queue_id=queue_id, topic=topic, cid=group,
                               broker_name=broker.config.broker_name,
                               queue_offset_diff=[o - offset for o in offsets])
            merge = pop.buffer_merge
            if merge.tracks(topic, group, queue_id):
                # PopMessageProcessor#appendCheckPoint: buffered, or written now; either way the
                # offset is committed by the buffer once nothing before it lives only in memory.
                if not merge.add_ck(ck, batch.revive_qid, result.next_begin_offset):
                    if not await pop.revive_log.append_checkpoint(ck, batch.revive_qid):
                        return False
                    merge.add_ck_just_offset(ck, batch.revive_qid, result.next_begin_offset, client)
            else:
                if not await pop.revive_log.append_checkpoint(ck, batch.revive_qid):
                    return False
                broker.consumer_offset_manager.commit_offset(group, topic, queue_id, result.next_begin_offset, client)
        batch.start_offset_info.append(extra_info.start_offset_item(topic, queue_id, offset))
        batch.msg_offset_info.append(extra_info.msg_offset_item(topic, queue_id, offsets))
        broker_name = broker.config.broker_name
        for record, queue_offset in zip(records, offsets, strict=True):
            info = extra_info.build_extra_info(offset, batch.pop_time, header.invisible_time, batch.revive_qid,
                                               topic, broker_name, queue_id, queue_offset)
            batch.records.append(rewrite_popped_record(
                record, extra_info=info, pop_time=batch.pop_time,
                shown_topic=header.topic if is_retry or is_retry_topic(topic) else None,
                reconsume_times=counts.get(queue_offset) if header.order else None))
        broker.stats.on_handed_out(group, topic, len(offsets))
        return True

    async def _dead_letter_orderly(self, topic: str, queue_id: int, group: str, pop_time: int, records: list[bytes],
                                   offsets: list[int], counts: dict[int, int],
                                   client: str) -> tuple[list[bytes], list[int]]:
        """Moves messages delivered more than retryMaxTimes to %DLQ%<group> and counts them acked,
        so a poison message cannot hold its FIFO queue forever; returns what is still to deliver."""
        max_times = dead_letter.retry_max_times(self.broker, group)
        if all(counts[o] <= max_times for o in offsets):
            return records, offsets
        keep_records: list[bytes] = []
        keep_offsets: list[int] = []
        order_info = self.pop.order_info
        for record, queue_offset in zip(records, offsets, strict=True):
            if counts[queue_offset] > max_times:
                msg = decode_record(record, 0, check_crc=False)
                inner = dead_letter.dlq_message(self.broker, topic, group, msg, counts[queue_offset])
                if await dead_letter.put(self.broker, inner, f"{topic}@{queue_id}:{queue_offset}"):
                    next_offset = order_info.commit_and_next(topic, group, queue_id, queue_offset, pop_time)
                    if next_offset >= 0:
                        self.broker.consumer_offset_manager.commit_offset(group, topic, queue_id, next_offset,
                                                                          client)
                    continue
            keep_records.append(record)
            keep_offsets.append(queue_offset)
        return keep_records, keep_offsets


def priority_walk(i: int, queue_nums: int, order_asc: bool) -> int:
    """The i-th queue a priority-order pop reads (PopMessageProcessor#popMsgFromTopic): the
    highest queue first when a higher id is a higher priority (priorityOrderAsc), else queue 0."""
    return queue_nums - 1 - i if order_asc else i


def takes_everything(message_filter: Any) -> bool:
    """Whether a filter lets every message through at both stages (e.g. TAG "*"), as no filter does."""
    if type(message_filter) is not TagFilter:
        return False
    sub = message_filter.subscription
    return sub.class_filter_mode or (sub.is_sub_all and not sub.tags_set)


def init_offset(store: QueueOffsets, topic: str, queue_id: int, init_mode: int, check_msg_in_mem: bool) -> int:
    """Where a group without an offset starts (PopMessageProcessor#getInitOffset).

    MIN, and any retry topic, start at the queue's first message. MAX starts at its last
    message, so a new group does not replay a backlog, except that a queue still holding its
    first message in memory (initPopOffsetByCheckMsgInMem, checkInMemByConsumeOffset) starts
    at 0: a young topic is consumed from its beginning.
    """
    if init_mode == INIT_MODE_MIN or is_retry_topic(topic):
        return store.get_min_offset_in_queue(topic, queue_id)
    if check_msg_in_mem and store.get_min_offset_in_queue(topic, queue_id) <= 0 \
            and store.check_in_mem_by_consume_offset(topic, queue_id, 0):
        return 0
    return max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
