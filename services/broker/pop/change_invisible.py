"""CHANGE_MESSAGE_INVISIBLETIME (200053): push a popped message's next delivery later or sooner.

For a normal handle a new one-message checkpoint (pop time = now, the new invisible time) is
appended first, then the old handle is acked, so the message is covered by a checkpoint at every
moment; the response's popTime/invisibleTime/reviveQid make the new receipt handle, whose
checkpoint offset is the message's own offset. An orderly handle only records the offset's new
visibility time in ConsumerOrderInfoManager.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors.base import Fields, RequestError, ext
from orbitmq.common.constants import POP_HANDLE_ACKED_REMARK
from orbitmq.common.extra_info import ExtraInfoError, parse_extra_info
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .ack_processor import bad_extra_info
from .checkpoint import AckMsg, PopCheckPoint
from .constants import build_lock_key

if TYPE_CHECKING:
    from .interfaces import ChangeInvisiblePop

log = logging.getLogger(__name__)


class ChangeInvisibleTimeProcessor:
    def __init__(self, pop: ChangeInvisiblePop) -> None:
        self.pop = pop
        self.broker = pop.broker

    def register(self) -> None:
        self.broker.register_processor(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        group = f.str("consumerGroup")
        topic = f.str("topic")
        queue_id = f.int("queueId")
        offset = f.long("offset")
        invisible_time = f.long("invisibleTime")
        if invisible_time < 0:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"invisibleTime[{invisible_time}] must not be negative")
        try:
            info = parse_extra_info(f.str("extraInfo"))
        except ExtraInfoError as exc:
            raise bad_extra_info(exc) from None
        topic = info.real_topic(topic, group)
        self.pop.check_topic_queue(topic, queue_id, channel)
        store = self.broker.message_store
        min_offset = store.get_min_offset_in_queue(topic, queue_id)
        max_offset = store.get_max_offset_in_queue(topic, queue_id)
        if offset < min_offset or offset >= max_offset:
            return request.response_to(ResponseCode.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, "
                                       f"offset:{offset}, store:{min_offset}~{max_offset}")
        if info.is_order:
            return await self._change_orderly(request, topic, group, queue_id, offset, invisible_time, info)
        if not 0 <= info.revive_qid < self.pop.revive_queue_num():
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"reviveQid[{info.revive_qid}] is illegal")
        now = self.broker.now_ms()
        if now == info.pop_time:
            # A pop nacked within its own millisecond (a proxy whose client went away): the new
            # checkpoint would share the old one's merge key (start offset, pop time), and the
            # revive service would take the old handle's ack for the new checkpoint's and drop
            # the message. Upstream's ChangeInvisibleTimeProcessor has this race; one ms later
            # the keys differ.
            now += 1
        if self.pop.recent_acks.acked(group, topic, queue_id, offset, info.pop_time, now):
            # A new checkpoint would bring an acked message back: refused, the handle is spent.
            return request.response_to(ResponseCode.NO_MESSAGE, POP_HANDLE_ACKED_REMARK)
        ck = PopCheckPoint(start_offset=offset, pop_time=now, invisible_time=invisible_time, num=1,
                           queue_id=queue_id, topic=topic, cid=group, broker_name=info.broker_name,
                           queue_offset_diff=[0])
        if not await self.pop.revive_log.append_checkpoint(ck, info.revive_qid):
            return request.response_to(ResponseCode.SYSTEM_ERROR, "append checkpoint to the revive log failed")
        ack = AckMsg(ack_offset=offset, start_offset=info.ck_queue_offset, consumer_group=group, topic=topic,
                     queue_id=queue_id, pop_time=info.pop_time, broker_name=info.broker_name)
        # The old handle's ack meets its buffered checkpoint in memory when it is there (#addAk).
        if not self.pop.buffer_merge.add_ack(info.revive_qid, ack) \
                and not await self.pop.revive_log.append_ack(ack, info.revive_qid, info.invisible_time):
            log.warning("ack of the old handle failed after changing invisible time, %s", ack.unique_id())
        return request.response_to(ResponseCode.SUCCESS, None,
                                   ext(popTime=now, invisibleTime=invisible_time, reviveQid=info.revive_qid))

    async def _change_orderly(self, request: RemotingCommand, topic: str, group: str, queue_id: int, offset: int,
                              invisible_time: int, info: Any) -> RemotingCommand:
        com = self.broker.consumer_offset_manager
        fields = ext(popTime=info.pop_time, invisibleTime=info.invisible_time, reviveQid=info.revive_qid)
        if offset < com.query_offset(group, topic, queue_id):
            return request.response_to(ResponseCode.SUCCESS, None, fields)
        async with self.pop.queue_locks.hold(build_lock_key(topic, group, queue_id)):
            if offset < com.query_offset(group, topic, queue_id):
                return request.response_to(ResponseCode.SUCCESS, None, fields)
            next_visible = self.broker.now_ms() + invisible_time
            self.pop.order_info.update_next_visible_time(topic, group, queue_id, offset, info.pop_time, next_visible)
            self.pop.order_info_changed()
        return request.response_to(ResponseCode.SUCCESS, None,
                                   ext(popTime=info.pop_time, invisibleTime=next_visible - info.pop_time,
                                       reviveQid=info.revive_qid))
