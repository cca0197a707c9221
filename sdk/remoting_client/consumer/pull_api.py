"""PullAPIWrapper: one PULL_MESSAGE to the broker the last answer suggested (suggestWhichBrokerId),
then the client-side tag re-check the broker's hash-code filter needs (PullAPIWrapper), and bodies
inflated as the client's MessageDecoder#decode does."""

from __future__ import annotations

import logging
from typing import Any

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQClientError
from orbitmq.client.results import PullResult, PullStatus
from orbitmq.common import sysflag
from orbitmq.common.compression import CompressionError, decompress_by_sys_flag
from orbitmq.common.filter.subscription import ExpressionType, SubscriptionData
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.remoting import headers as h

log = logging.getLogger(__name__)
MASTER_ID = 0
def inflate_body(msg: MessageExt) -> None:
    """MessageDecoder#decode with deCompressBody: a COMPRESSED_FLAG body is inflated with the codec
    its sysFlag names (zlib, LZ4, ZSTD; orbitmq.common.compression) and the flag cleared. A body
    that does not decode is kept as stored, flag set, and a warning logged."""
    if not msg.sys_flag & sysflag.COMPRESSED_FLAG:
        return
    try:
        msg.body = decompress_by_sys_flag(msg.body, msg.sys_flag)
    except CompressionError as exc:
        log.warning("message %s of %s: body kept as stored (%s)", msg.uniq_id_or_msg_id, msg.topic, exc)
        return
    msg.sys_flag = sysflag.clear_compressed_flag(msg.sys_flag)


class PullAPIWrapper:
    def __init__(self, instance: Any, group: str) -> None:
        self.instance = instance
        self.group = group
        self.pull_from_which_node: dict[MessageQueueRef, int] = {}
        self.connect_broker_by_user = False
        self.default_broker_id = MASTER_ID

    def update_pull_from_which_node(self, mq: MessageQueueRef, broker_id: int) -> None:
        self.pull_from_which_node[mq] = broker_id

    def recalculate_pull_from_which_node(self, mq: MessageQueueRef) -> int:
        if self.connect_broker_by_user:
            return self.default_broker_id
        return self.pull_from_which_node.get(mq, MASTER_ID)

    async def pull_kernel(self, mq: MessageQueueRef, sub_expression: str | None, expression_type: str,
                          sub_version: int, offset: int, max_nums: int, max_size_bytes: int, sys_flag: int,
                          commit_offset: int, suspend_timeout_millis: int, timeout: float) -> PullResult:  # noqa: ASYNC109
        """PullAPIWrapper#pullKernelImpl: a slave is never asked to commit the offset."""
        broker_id = self.recalculate_pull_from_which_node(mq)
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            await self.instance.update_topic_route(mq.topic)
            found = self.instance.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        addr, _, slave = found
        flag = sysflag.clear_commit_offset_flag(sys_flag) if slave else sys_flag
        header = h.PullMessageRequestHeader(
            consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=flag, commit_offset=commit_offset,
            suspend_timeout_millis=suspend_timeout_millis, subscription=sub_expression, sub_version=sub_version,
            expression_type=expression_type, max_msg_bytes=max_size_bytes, broker_name=mq.broker_name)
        return await self.instance.api.pull_message(addr, header, timeout=timeout)

    def process_pull_result(self, mq: MessageQueueRef, result: PullResult, sub: SubscriptionData) -> PullResult:
        """PullAPIWrapper#processPullResult: remember the suggested broker, re-check tags, stamp
        the queue's min/max offsets on each message."""
        self.update_pull_from_which_node(mq, result.suggest_which_broker_id)
        if result.status != PullStatus.FOUND:
            return result
        msgs = result.messages
        if sub.tags_set and not sub.class_filter_mode and ExpressionType.is_tag_type(sub.expression_type):
            msgs = [m for m in msgs if m.tags is not None and m.tags in sub.tags_set]
        for msg in msgs:
            inflate_body(msg)
            if msg.properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
                uniq = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if uniq:
                    msg.properties[MessageConst.TRANSACTION_ID] = uniq
            msg.properties[MessageConst.MIN_OFFSET] = str(result.min_offset)
            msg.properties[MessageConst.MAX_OFFSET] = str(result.max_offset)
        result.messages = msgs
        return result
