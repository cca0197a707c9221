"""A message redelivered through the pop retry topic keeps its retry flag across
MQClientAPI.change_invisible_time, so the new handle still acks it for good, even when the caller
names the original topic (as the proxy and the official clients do)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from orbitmq.client.api import MQClientAPI
from orbitmq.client.results import AckStatus
from orbitmq.common import extra_info as ei
from orbitmq.common.message import MessageConst
from orbitmq.remoting import RemotingClient
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode
from tests.integration.test_pop import BROKER, create_topic, pop, pop_until, send, start_broker

TOPIC = "PopRetryChange"
GROUP = "GRetryChange"


async def test_retried_message_can_change_invisible_time_and_then_be_acked(procs, tmp_path: Path) -> None:
    api = MQClientAPI(timeout=5.0)
    try:
        async with RemotingClient() as client:
            addr = await start_broker(procs, tmp_path)
            await create_topic(client, addr, TOPIC)
            uniq = await send(client, addr, TOPIC, b"retried")
            response, first = await pop(client, addr, GROUP, TOPIC, invisible_ms=1000)
            assert response.code == ResponseCode.SUCCESS and [m.uniq_key for m in first] == [uniq]
            # Not acked: the broker revives it into %RETRY%GROUP_TOPIC and pops it from there.
            again = await pop_until(client, addr, GROUP, TOPIC, 1, within=15, invisible_ms=60_000)
            assert [m.uniq_key for m in again] == [uniq]
            retried = again[0]
            handle = retried.properties[MessageConst.POP_CK]
            old = ei.parse_extra_info(handle)
            assert retried.topic == TOPIC and old.retry == ei.RETRY_TOPIC and retried.reconsume_times == 1

            # The caller names the original topic, as a proxy holding only the handle does.
            result = await api.change_invisible_time(addr, BROKER, h.ChangeInvisibleTimeRequestHeader(
                consumer_group=GROUP, topic=TOPIC, queue_id=old.queue_id, extra_info=handle,
                offset=old.msg_queue_offset, invisible_time=1000))
            assert result.status == AckStatus.OK and result.extra_info
            new = ei.parse_extra_info(result.extra_info)
            assert new.retry == ei.RETRY_TOPIC, result.extra_info
            assert new.real_topic(TOPIC, GROUP) == ei.build_pop_retry_topic(TOPIC, GROUP)
            assert (new.queue_id, new.msg_queue_offset, new.ck_queue_offset) == (
                old.queue_id, old.msg_queue_offset, old.msg_queue_offset)
            assert new.pop_time == result.pop_time and new.invisible_time == 1000

            ack = await api.ack_message(addr, h.AckMessageRequestHeader(
                consumer_group=GROUP, topic=TOPIC, queue_id=new.queue_id, extra_info=result.extra_info,
                offset=new.msg_queue_offset))
            assert ack.status == AckStatus.OK
            # Had the ack pointed at the original topic's queue, the changed check point (1 s)
            # would revive the message again by now.
            await asyncio.sleep(3)
            response, late = await pop(client, addr, GROUP, TOPIC)
            assert response.code == ResponseCode.POLLING_TIMEOUT and late == [], [m.uniq_key for m in late]
    finally:
        await api.close()
