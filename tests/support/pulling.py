"""Reading a queue straight from a broker of either kind, as the compat tests check what it holds."""

from __future__ import annotations

from orbitmq.client import MQClientAPI
from orbitmq.client.results import PullStatus
from orbitmq.common.message import MessageExt
from orbitmq.remoting import headers as h

# PullSysFlag.FLAG_SUBSCRIPTION: the subscription travels with the pull, so no consumer of the
# group needs to be online (no heartbeat, no registered subscription).
FLAG_SUBSCRIPTION = 0x4


async def pull_queue(api: MQClientAPI, addr: str, group: str, topic: str, queue: int, *,
                     offset: int = 0, tags: str = "*") -> list[MessageExt]:
    """Every message of the queue from ``offset`` on that ``tags`` selects (the broker filters by
    the ConsumeQueue's tagsCode, which the writing broker computed); ends at the queue's end."""
    messages: list[MessageExt] = []
    while True:
        result = await api.pull_message(addr, h.PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue, queue_offset=offset, max_msg_nums=32,
            sys_flag=FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription=tags,
            sub_version=0, expression_type="TAG"))
        messages.extend(result.messages)
        if result.status == PullStatus.NO_NEW_MSG or result.next_begin_offset <= offset:
            return messages
        offset = result.next_begin_offset
