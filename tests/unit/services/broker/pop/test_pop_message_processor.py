"""POP_MESSAGE alone, over a fake broker and PopService view (PopProcessorPop): a pop hands out
what is past the group's pop offset with its receipt-handle ExtraInfo, writes the checkpoint
before it moves the offset, and an orderly pop blocks its queue instead of writing one."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from orbitmq.broker.pop.checkpoint import PopCheckPoint
from orbitmq.broker.pop.pop_processor import PopMessageProcessor
from orbitmq.common import extra_info as ei
from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import decode_records
from orbitmq.remoting import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

TOPIC, GROUP = "PopTopic", "PopGroup"
INVISIBLE = 60_000


class _Channel:
    remote_address = "127.0.0.1:50000"
    is_active = True


async def _pop(env: PopEnv, *, order: bool = False, max_nums: int = 32) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": str(max_nums),
        "invisibleTime": str(INVISIBLE), "pollTime": "0", "bornTime": "0", "initMode": "1", "expType": "TAG",
        "exp": "*", "order": str(order).lower()})
    return await PopMessageProcessor(env.pop).process(request, _Channel())


def _topic(env: PopEnv, count: int) -> None:
    env.broker.add_topic(TOPIC, queues=1)
    for n in range(count):
        env.broker.send(TOPIC, 0, b"m%d" % n)


async def test_a_pop_hands_out_messages_and_writes_their_checkpoint_before_moving_the_offset(
        pop_env: PopEnv) -> None:
    _topic(pop_env, 3)
    response = await _pop(pop_env, max_nums=2)
    assert response.code == ResponseCode.SUCCESS, response.remark
    messages = decode_records(response.body, check_crc=False)
    assert [m.body for m in messages] == [b"m0", b"m1"]
    infos = [ei.parse_extra_info(m.properties[MessageConst.POP_CK]) for m in messages]
    revive_qid = infos[0].revive_qid
    assert [(i.ck_queue_offset, i.msg_queue_offset, i.invisible_time) for i in infos] == [(0, 0, INVISIBLE),
                                                                                          (0, 1, INVISIBLE)]
    assert response.ext_fields["restNum"] == "1"

    [record] = pop_env.pop.revive_records(revive_qid)
    ck = PopCheckPoint.from_json(record.body)
    assert (record.tags, ck.start_offset, ck.num, ck.queue_offset_diff, ck.cid, ck.pop_time) == (
        "ck", 0, 2, [0, 1], GROUP, pop_env.start_ms)
    assert pop_env.broker.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 2

    response = await _pop(pop_env)
    assert [m.body for m in decode_records(response.body, check_crc=False)] == [b"m2"]
    assert pop_env.broker.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 3
    assert pop_env.broker.stats.handed_out == {(GROUP, TOPIC): 3}  # consumeTps / msgGetTotal* counts


async def test_a_pop_whose_checkpoint_cannot_be_written_hands_out_nothing(pop_env: PopEnv) -> None:
    _topic(pop_env, 2)
    pop_env.broker.refuse_puts.add(pop_env.pop.revive_topic)
    response = await _pop(pop_env)
    assert response.code == ResponseCode.POLLING_TIMEOUT
    assert pop_env.broker.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 0  # handed out again later
    assert pop_env.broker.stats.handed_out == {}


async def test_an_orderly_pop_blocks_its_queue_until_the_batch_is_acked(pop_env: PopEnv) -> None:
    _topic(pop_env, 2)
    pop_env.broker.clock = int(time.time() * 1000)  # ConsumerOrderInfoManager blocks by the wall clock
    response = await _pop(pop_env, order=True)
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert [m.body for m in decode_records(response.body, check_crc=False)] == [b"m0", b"m1"]
    assert all(pop_env.pop.revive_records(q) == [] for q in range(pop_env.pop.revive_queue_num()))
    assert pop_env.pop.order_info.check_block(None, TOPIC, GROUP, 0)
    assert pop_env.broker.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 0  # moves on ack

    assert (await _pop(pop_env, order=True)).code == ResponseCode.POLLING_TIMEOUT  # blocked: nothing twice
