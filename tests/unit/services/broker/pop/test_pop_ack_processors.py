"""ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME alone, over a fake broker and
PopService view (AckPop / ChangeInvisiblePop): what each writes to the revive log, which offset
an orderly ack commits, and which handles a change of invisible time refuses."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from orbitmq.broker.pop.ack_processor import AckMessageProcessor
from orbitmq.broker.pop.change_invisible import ChangeInvisibleTimeProcessor
from orbitmq.broker.pop.checkpoint import AckMsg, BatchAck, BatchAckMsg, PopCheckPoint, build_batch_ack_body
from orbitmq.broker.pop.revive import ReviveQueue
from orbitmq.broker.processors.base import RequestError
from orbitmq.common.constants import POP_HANDLE_ACKED_REMARK
from orbitmq.common.extra_info import POP_ORDER_REVIVE_QUEUE, build_extra_info
from orbitmq.remoting import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

TOPIC, GROUP, QUEUE = "AckTopic", "AckGroup", 2
INVISIBLE = 60_000


class _Channel:
    remote_address = "127.0.0.1:50000"
    is_active = True


def _topic(env: PopEnv, count: int = 3) -> None:
    env.broker.add_topic(TOPIC)
    for n in range(count):
        env.broker.send(TOPIC, QUEUE, b"m%d" % n)


def _handle(env: PopEnv, offset: int, *, ck_offset: int = 0, revive_qid: int = 0, pop_time: int | None = None,
            invisible: int = INVISIBLE) -> str:
    pop_time = env.start_ms - 100 if pop_time is None else pop_time
    return build_extra_info(ck_offset, pop_time, invisible, revive_qid, TOPIC, env.broker_name, QUEUE, offset)


async def _ack(env: PopEnv, offset: int, extra_info: str) -> RemotingCommand:
    processor = AckMessageProcessor(env.pop)
    request = RemotingCommand.request(RequestCode.ACK_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(QUEUE), "offset": str(offset), "extraInfo": extra_info})
    return await processor.process_ack(request, _Channel())


async def _change(env: PopEnv, offset: int, extra_info: str, invisible: int) -> RemotingCommand:
    processor = ChangeInvisibleTimeProcessor(env.pop)
    request = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": str(QUEUE), "offset": str(offset),
        "invisibleTime": str(invisible), "extraInfo": extra_info})
    return await processor.process(request, _Channel())


def _written(env: PopEnv, revive_qid: int) -> list[tuple[str | None, bytes]]:
    return [(m.tags, m.body) for m in env.pop.revive_records(revive_qid)]


async def test_an_ack_appends_its_ack_to_the_handles_revive_queue(pop_env: PopEnv) -> None:
    _topic(pop_env)
    pop_time = pop_env.start_ms - 100
    response = await _ack(pop_env, 1, _handle(pop_env, 1, revive_qid=1))
    assert response.code == ResponseCode.SUCCESS, response.remark
    expected = AckMsg(ack_offset=1, start_offset=0, consumer_group=GROUP, topic=TOPIC, queue_id=QUEUE,
                      pop_time=pop_time, broker_name=pop_env.broker_name)
    assert _written(pop_env, 1) == [("ack", expected.to_json())]
    assert _written(pop_env, 0) == []
    [record] = pop_env.pop.revive_records(1)
    assert record.properties["UNIQ_KEY"] == expected.unique_id()
    assert pop_env.pop.recent_acks.acked(GROUP, TOPIC, QUEUE, 1, pop_time, pop_env.broker.now_ms())


async def test_an_ack_outside_the_queue_answers_no_message_and_writes_nothing(pop_env: PopEnv) -> None:
    _topic(pop_env)
    pop_env.broker.message_store.min_offsets[(TOPIC, QUEUE)] = 1
    for offset in (0, 4):
        response = await _ack(pop_env, offset, _handle(pop_env, offset))
        assert response.code == ResponseCode.NO_MESSAGE
    assert _written(pop_env, 0) == []
    assert pop_env.broker.put_calls == 0


async def test_an_ack_naming_a_revive_queue_that_does_not_exist_is_refused(pop_env: PopEnv) -> None:
    _topic(pop_env)
    with pytest.raises(RequestError) as raised:
        await _ack(pop_env, 1, _handle(pop_env, 1, revive_qid=5))
    assert raised.value.code == ResponseCode.INVALID_PARAMETER
    assert pop_env.broker.put_calls == 0


async def test_orderly_acks_move_the_group_offset_once_the_batch_is_acked(pop_env: PopEnv) -> None:
    _topic(pop_env)
    pop, com = pop_env.pop, pop_env.broker.consumer_offset_manager
    pop_time = int(time.time() * 1000)  # ConsumerOrderInfoManager tells blocking by the wall clock
    pop.order_info.update(None, TOPIC, GROUP, QUEUE, pop_time, INVISIBLE, [0, 1])
    com.commit_offset(GROUP, TOPIC, QUEUE, 0)  # what the orderly pop commits
    pop.long_polling.start()
    waiter = pop.long_polling.park(TOPIC, GROUP, QUEUE, None)
    assert waiter is not None
    orderly = {"revive_qid": POP_ORDER_REVIVE_QUEUE, "pop_time": pop_time}

    assert (await _ack(pop_env, 0, _handle(pop_env, 0, **orderly))).code == ResponseCode.SUCCESS
    assert com.query_offset(GROUP, TOPIC, QUEUE) == 1
    assert not waiter.woken.done()  # offset 1 is still in flight: the queue stays blocked

    assert (await _ack(pop_env, 1, _handle(pop_env, 1, **orderly))).code == ResponseCode.SUCCESS
    assert com.query_offset(GROUP, TOPIC, QUEUE) == 2
    assert waiter.woken.done() and waiter.woken.result() is True
    assert pop.order_info_changes == 2
    assert _written(pop_env, 0) == [] and _written(pop_env, 1) == []  # no revive log for orderly handles

    stale = await _ack(pop_env, 1, _handle(pop_env, 1, revive_qid=POP_ORDER_REVIVE_QUEUE, pop_time=pop_time - 1))
    assert stale.code == ResponseCode.SUCCESS  # behind the committed offset: harmless
    assert com.query_offset(GROUP, TOPIC, QUEUE) == 2


async def test_a_batch_ack_writes_one_batch_ack_per_entry_into_its_revive_queue(pop_env: PopEnv) -> None:
    _topic(pop_env, 4)
    pop_time = pop_env.start_ms - 100
    entries = [BatchAck(GROUP, TOPIC, "0", 0, QUEUE, 0, pop_time, INVISIBLE, [0, 2]),
               BatchAck(GROUP, TOPIC, "0", 3, QUEUE, 1, pop_time, INVISIBLE, [0, 5])]  # offset 8 is past the queue
    processor = AckMessageProcessor(pop_env.pop)
    request = RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, None,
                                      build_batch_ack_body(pop_env.broker_name, entries))
    response = await processor.process_batch_ack(request, _Channel())
    assert response.code == ResponseCode.SUCCESS, response.remark
    first = BatchAckMsg(-1, 0, GROUP, TOPIC, QUEUE, pop_time, pop_env.broker_name, [0, 2])
    second = BatchAckMsg(-1, 3, GROUP, TOPIC, QUEUE, pop_time, pop_env.broker_name, [3])
    assert _written(pop_env, 0) == [("bAck", first.to_json())]
    assert _written(pop_env, 1) == [("bAck", second.to_json())]
    recent = pop_env.pop.recent_acks
    now = pop_env.broker.now_ms()
    assert [recent.acked(GROUP, TOPIC, QUEUE, o, pop_time, now) for o in range(5)] == [True, False, True, True,
                                                                                         False]


async def test_changing_invisible_time_writes_a_new_checkpoint_then_acks_the_old_handle(pop_env: PopEnv) -> None:
    _topic(pop_env)
    old_pop_time = pop_env.start_ms - 100
    response = await _change(pop_env, 2, _handle(pop_env, 2), 5_000)
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert response.ext_fields == {"popTime": str(pop_env.start_ms), "invisibleTime": "5000", "reviveQid": "0"}
    ck = PopCheckPoint(start_offset=2, pop_time=pop_env.start_ms, invisible_time=5_000, num=1, queue_id=QUEUE,
                       topic=TOPIC, cid=GROUP, broker_name=pop_env.broker_name, queue_offset_diff=[0])
    ack = AckMsg(ack_offset=2, start_offset=0, consumer_group=GROUP, topic=TOPIC, queue_id=QUEUE,
                 pop_time=old_pop_time, broker_name=pop_env.broker_name)
    assert _written(pop_env, 0) == [("ck", ck.to_json()), ("ack", ack.to_json())]  # covered at every moment


async def test_changing_invisible_time_of_an_acked_handle_is_refused(pop_env: PopEnv) -> None:
    _topic(pop_env)
    handle = _handle(pop_env, 1)
    assert (await _ack(pop_env, 1, handle)).code == ResponseCode.SUCCESS
    response = await _change(pop_env, 1, handle, 5_000)
    assert (response.code, response.remark) == (ResponseCode.NO_MESSAGE, POP_HANDLE_ACKED_REMARK)
    assert [tag for tag, _ in _written(pop_env, 0)] == ["ack"]  # no checkpoint to bring it back


async def test_changing_invisible_time_of_an_orderly_handle_records_its_next_visible_time(pop_env: PopEnv) -> None:
    _topic(pop_env)
    pop_time = pop_env.start_ms - 100
    pop_env.pop.order_info.update(None, TOPIC, GROUP, QUEUE, pop_time, INVISIBLE, [0, 1])
    handle = _handle(pop_env, 1, revive_qid=POP_ORDER_REVIVE_QUEUE, pop_time=pop_time)
    response = await _change(pop_env, 1, handle, 10_000)
    assert response.code == ResponseCode.SUCCESS, response.remark
    next_visible = pop_env.start_ms + 10_000
    assert response.ext_fields["invisibleTime"] == str(next_visible - pop_time)
    info = pop_env.pop.order_info.get(TOPIC, GROUP, QUEUE)
    assert info is not None and info.next_visible_time == {1: next_visible}
    assert pop_env.pop.order_info_changes == 1
    assert pop_env.broker.put_calls == 0


async def test_a_nack_in_the_pops_own_millisecond_leaves_the_message_to_revive(pop_env: PopEnv) -> None:
    """A handle changed in the millisecond it was popped, for the first message of its batch: the
    new checkpoint must not share the old one's merge key, or the revive service would match the
    old handle's ack to it and forget the message."""
    _topic(pop_env)
    response = await _change(pop_env, 1, _handle(pop_env, 1, ck_offset=1, pop_time=pop_env.start_ms), 1_000)
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert int(response.ext_fields["popTime"]) != pop_env.start_ms
    queue = ReviveQueue(0, 0)
    queue.apply_checkpoint(PopCheckPoint(start_offset=1, pop_time=pop_env.start_ms, invisible_time=INVISIBLE, num=1,
                                         queue_id=QUEUE, topic=TOPIC, cid=GROUP, broker_name=pop_env.broker_name,
                                         queue_offset_diff=[0]), 0)  # the pop's own checkpoint
    for revive_offset, (tag, body) in enumerate(_written(pop_env, 0), start=1):
        if tag == "ck":
            queue.apply_checkpoint(PopCheckPoint.from_json(body), revive_offset)
        else:
            queue.apply_ack(AckMsg.from_json(body))
    assert [(e.ck.start_offset, e.ck.invisible_time, e.acked) for e in queue.pending.values()] == [(1, 1_000, 0)]
