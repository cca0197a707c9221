"""PopBufferMergeService (enablePopBufferMerge) over the fake broker, driven through the real POP
processors: checkpoints wait in memory, acks meet them there by bit, a fully acked checkpoint
never reaches the revive topic, one that stays too long (or finds the buffer full) is written
with its acks, and the pop offset is committed only past checkpoints nothing of which lives in
memory alone -- while consecutive pops still read on from the buffer's latest offset."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from orbitmq.broker.pop.ack_processor import AckMessageProcessor
from orbitmq.broker.pop.change_invisible import ChangeInvisibleTimeProcessor
from orbitmq.broker.pop.checkpoint import AckMsg, BatchAck, BatchAckMsg, PopCheckPoint, build_batch_ack_body
from orbitmq.broker.pop.pop_processor import PopMessageProcessor
from orbitmq.common import extra_info as ei
from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import decode_records
from orbitmq.remoting import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

TOPIC, GROUP = "MergeTopic", "MergeGroup"
INVISIBLE = 60_000


class _Channel:
    remote_address = "127.0.0.1:50000"
    is_active = True


@pytest.fixture
def env(pop_env: PopEnv) -> PopEnv:
    pop_env.pop.config.enable_pop_buffer_merge = True
    pop_env.broker.add_topic(TOPIC, queues=1)
    return pop_env


def _send(env: PopEnv, count: int) -> None:
    for _ in range(count):
        n = env.broker.message_store.get_max_offset_in_queue(TOPIC, 0)
        env.broker.send(TOPIC, 0, b"m%d" % n)


async def _pop(env: PopEnv, max_nums: int = 32, invisible: int = INVISIBLE) -> list:
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "maxMsgNums": str(max_nums),
        "invisibleTime": str(invisible), "pollTime": "0", "bornTime": "0", "initMode": "1", "expType": "TAG",
        "exp": "*"})
    response = await PopMessageProcessor(env.pop).process(request, _Channel())
    if response.code != ResponseCode.SUCCESS:
        return []
    return decode_records(response.body, check_crc=False)


def _info(msg) -> ei.ExtraInfo:
    return ei.parse_extra_info(msg.properties[MessageConst.POP_CK])


async def _ack(env: PopEnv, msg) -> None:
    request = RemotingCommand.request(RequestCode.ACK_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "offset": str(msg.queue_offset),
        "extraInfo": msg.properties[MessageConst.POP_CK]})
    response = await AckMessageProcessor(env.pop).process_ack(request, _Channel())
    assert response.code == ResponseCode.SUCCESS, response.remark


async def _batch_ack(env: PopEnv, msgs: list) -> None:
    info = _info(msgs[0])
    entry = BatchAck(GROUP, TOPIC, "0", info.ck_queue_offset, 0, info.revive_qid, info.pop_time, info.invisible_time,
                     [m.queue_offset - info.ck_queue_offset for m in msgs])
    request = RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {},
                                      build_batch_ack_body(env.broker_name, [entry]))
    response = await AckMessageProcessor(env.pop).process_batch_ack(request, _Channel())
    assert response.code == ResponseCode.SUCCESS, response.remark


def _revive_log(env: PopEnv) -> list[tuple[str | None, object]]:
    """Every revive-log record of every revive queue: (tag, parsed body)."""
    out: list[tuple[str | None, object]] = []
    for qid in range(env.pop.revive_queue_num()):
        for record in env.pop.revive_records(qid):
            parse = {"ck": PopCheckPoint.from_json, "ack": AckMsg.from_json, "bAck": BatchAckMsg.from_json}
            out.append((record.tags, parse[record.tags](record.body)))
    return out


def _committed(env: PopEnv) -> int:
    return env.broker.consumer_offset_manager.query_offset(GROUP, TOPIC, 0)


async def test_a_buffered_checkpoint_is_not_written_and_pops_read_on_past_it(env: PopEnv) -> None:
    _send(env, 3)
    first = await _pop(env, max_nums=2)
    assert [m.body for m in first] == [b"m0", b"m1"]
    assert _revive_log(env) == []
    assert _committed(env) == 0  # not at pop time: the checkpoint lives in memory only
    assert env.pop.buffer_merge.latest_offset(TOPIC, GROUP, 0) == 2
    assert [m.body for m in await _pop(env)] == [b"m2"]  # getPopOffset consults the buffer
    assert await _pop(env) == []  # nothing handed out twice
    await env.pop.buffer_merge.scan()
    assert _committed(env) == 0 and env.pop.buffer_merge.buffered_ck_size() == 2


async def test_a_fully_acked_checkpoint_is_dropped_without_touching_the_revive_topic(env: PopEnv) -> None:
    _send(env, 3)
    msgs = await _pop(env)
    for m in msgs:
        await _ack(env, m)
    merge = env.pop.buffer_merge
    assert merge.buffered_ck_size() == 0
    await merge.scan()
    assert _committed(env) == 3
    env.broker.clock += 120_000  # past the stay time and the invisible time
    await merge.scan()
    assert _revive_log(env) == []
    assert merge.offset_total_size() == 0


async def test_a_checkpoint_past_its_stay_time_is_written_with_its_buffered_acks(env: PopEnv) -> None:
    _send(env, 3)
    msgs = await _pop(env)
    await _ack(env, msgs[0])
    merge = env.pop.buffer_merge
    env.broker.clock += env.pop.config.pop_ck_stay_buffer_time - 1
    await merge.scan()
    assert _revive_log(env) == [] and _committed(env) == 0
    env.broker.clock += 2
    await merge.scan()
    log = _revive_log(env)
    assert [tag for tag, _ in log] == ["ck", "ack"]  # the ack after its checkpoint
    ck, ack = log[0][1], log[1][1]
    assert (ck.start_offset, ck.num, ck.pop_time) == (0, 3, _info(msgs[0]).pop_time)
    assert (ack.ack_offset, ack.start_offset, ack.pop_time) == (0, 0, ck.pop_time)
    assert merge.buffered_ck_size() == 0
    assert _committed(env) == 3  # written with every buffered ack: nothing lives in memory only
    await _ack(env, msgs[1])  # a later ack goes to the revive topic, behind the checkpoint
    assert [tag for tag, _ in _revive_log(env)] == ["ck", "ack", "ack"]


async def test_a_checkpoint_close_to_its_revive_time_is_written_early(env: PopEnv) -> None:
    _send(env, 1)
    invisible = env.pop.config.pop_ck_stay_buffer_time_out + 1500 + 1000  # buffered, 1 s to spare
    await _pop(env, invisible=invisible)
    assert _revive_log(env) == []
    env.broker.clock += 2499  # popCkStayBufferTimeOut before its revive time, long before the stay time
    await env.pop.buffer_merge.scan()
    assert _revive_log(env) == []
    env.broker.clock += 1
    await env.pop.buffer_merge.scan()
    assert [tag for tag, _ in _revive_log(env)] == ["ck"]


async def test_a_pop_too_close_to_its_revive_time_writes_its_checkpoint_at_once(env: PopEnv) -> None:
    _send(env, 2)
    await _pop(env, invisible=env.pop.config.pop_ck_stay_buffer_time_out + 1000)
    assert [tag for tag, _ in _revive_log(env)] == ["ck"]
    assert _committed(env) == 2  # nothing buffered before it: committed by the pop


async def test_past_the_max_buffer_size_a_checkpoint_is_written_at_once_and_its_offset_waits(env: PopEnv) -> None:
    env.pop.config.pop_ck_max_buffer_size = 1
    _send(env, 4)
    first = await _pop(env, max_nums=2)
    second = await _pop(env, max_nums=2)
    assert [m.body for m in second] == [b"m2", b"m3"]
    log = _revive_log(env)
    assert [(tag, body.start_offset) for tag, body in log] == [("ck", 2)]
    merge = env.pop.buffer_merge
    await merge.scan()
    assert _committed(env) == 0  # the buffered first batch is still in memory only
    await _ack(env, second[0])  # its checkpoint is written: the ack is too
    assert [tag for tag, _ in _revive_log(env)] == ["ck", "ack"]
    for m in first:
        await _ack(env, m)
    await merge.scan()
    assert _committed(env) == 4


async def test_offsets_are_committed_in_pop_order(env: PopEnv) -> None:
    _send(env, 6)
    first = await _pop(env, max_nums=2)
    second = await _pop(env, max_nums=2)
    third = await _pop(env, max_nums=2)
    merge = env.pop.buffer_merge
    for m in second + third:
        await _ack(env, m)
    await merge.scan()
    assert _committed(env) == 0  # the first batch holds the queue's offset back
    await _ack(env, first[0])
    await merge.scan()
    assert _committed(env) == 0
    await _ack(env, first[1])
    await merge.scan()
    assert _committed(env) == 6
    assert merge.offset_total_size() == 0 and _revive_log(env) == []


async def test_a_pop_holding_the_queue_lock_defers_the_commit(env: PopEnv) -> None:
    _send(env, 2)
    for m in await _pop(env):
        await _ack(env, m)
    locks = env.pop.queue_locks
    key = f"{TOPIC}@{GROUP}@0"
    assert await locks.try_lock(key)
    await env.pop.buffer_merge.scan()
    assert _committed(env) == 0
    locks.unlock(key)
    await env.pop.buffer_merge.scan()
    assert _committed(env) == 2


@pytest.mark.parametrize("batch_ack_record", [False, True])
async def test_batch_ack_bits_meet_the_buffered_checkpoint(env: PopEnv, batch_ack_record: bool) -> None:
    env.pop.config.enable_pop_batch_ack = batch_ack_record
    _send(env, 4)
    msgs = await _pop(env)
    await _batch_ack(env, msgs[:2])
    merge = env.pop.buffer_merge
    assert merge.buffered_ck_size() == 1 and _revive_log(env) == []
    env.broker.clock += env.pop.config.pop_ck_stay_buffer_time + 1
    await merge.scan()
    log = _revive_log(env)
    if batch_ack_record:  # enablePopBatchAck: the buffered acks as one BatchAckMsg
        assert [tag for tag, _ in log] == ["ck", "bAck"] and log[1][1].ack_offset_list == [0, 1]
    else:
        assert [(tag, body.ack_offset) for tag, body in log[1:]] == [("ack", 0), ("ack", 1)]
    assert _committed(env) == 4
    await _batch_ack(env, msgs[2:])  # the checkpoint is written: this batch ack goes there too
    assert _revive_log(env)[-1][0] == "bAck"


async def test_a_batch_ack_of_the_whole_batch_drops_it(env: PopEnv) -> None:
    _send(env, 3)
    await _batch_ack(env, await _pop(env))
    await env.pop.buffer_merge.scan()
    assert env.pop.buffer_merge.buffered_ck_size() == 0 and _revive_log(env) == [] and _committed(env) == 3


async def test_change_invisible_time_of_a_buffered_message(env: PopEnv) -> None:
    _send(env, 3)
    msgs = await _pop(env)
    request = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "offset": "1", "invisibleTime": "30000",
        "extraInfo": msgs[1].properties[MessageConst.POP_CK]})
    response = await ChangeInvisibleTimeProcessor(env.pop).process(request, _Channel())
    assert response.code == ResponseCode.SUCCESS, response.remark
    # The new one-message checkpoint is written at once; the old handle's ack is a bit in memory.
    assert [(tag, body.start_offset, body.num) for tag, body in _revive_log(env)] == [("ck", 1, 1)]
    await _ack(env, msgs[0])
    await _ack(env, msgs[2])
    merge = env.pop.buffer_merge
    assert merge.buffered_ck_size() == 0  # the original batch is done: never written
    await merge.scan()
    assert _committed(env) == 3  # message 1 is covered by its new, written checkpoint
    assert len(_revive_log(env)) == 1


async def test_a_mock_checkpoint_moves_the_offset_only_behind_the_buffered_ones(env: PopEnv) -> None:
    _send(env, 2)
    msgs = await _pop(env)
    merge = env.pop.buffer_merge
    info = _info(msgs[0])
    merge.add_ck_mock(GROUP, TOPIC, 0, 2, INVISIBLE, info.pop_time + 1, 0, 5, env.broker_name, "test")
    assert merge.latest_offset(TOPIC, GROUP, 0) == 5
    await merge.scan()
    assert _committed(env) == 0
    for m in msgs:
        await _ack(env, m)
    await merge.scan()
    assert _committed(env) == 5


async def test_a_pop_offset_reset_clears_the_offset_queue(env: PopEnv) -> None:
    _send(env, 4)
    await _pop(env, max_nums=2)
    com = env.broker.consumer_offset_manager
    com.reset_offset_table.setdefault(f"{TOPIC}@{GROUP}", {})[0] = 1
    assert [m.body for m in await _pop(env)] == [b"m1", b"m2", b"m3"]  # the reset wins
    assert env.pop.buffer_merge.latest_offset(TOPIC, GROUP, 0) == 4


async def test_shutdown_writes_what_is_buffered_and_commits_the_offsets(env: PopEnv) -> None:
    merge = env.pop.buffer_merge
    await merge.start()
    _send(env, 3)
    msgs = await _pop(env)
    await _ack(env, msgs[2])
    await merge.shutdown()
    assert [tag for tag, _ in _revive_log(env)] == ["ck", "ack"]
    assert _committed(env) == 3 and merge.buffered_ck_size() == 0 and merge.offset_total_size() == 0
    _send(env, 1)
    await _pop(env)  # no longer serving: written at once, committed by the pop
    assert [tag for tag, _ in _revive_log(env)] == ["ck", "ack", "ck"] and _committed(env) == 4


async def test_a_failed_checkpoint_write_is_retried_and_holds_the_offset(env: PopEnv) -> None:
    _send(env, 2)
    msgs = await _pop(env)
    await _ack(env, msgs[0])
    env.broker.refuse_puts.add(env.pop.revive_topic)
    env.broker.clock += env.pop.config.pop_ck_stay_buffer_time + 1
    merge = env.pop.buffer_merge
    await merge.scan()
    assert _committed(env) == 0 and merge.buffered_ck_size() == 1
    env.broker.refuse_puts.clear()
    await merge.scan()
    assert [tag for tag, _ in _revive_log(env)] == ["ck", "ack"] and _committed(env) == 2


async def test_buffer_merge_off_commits_at_pop_time(pop_env: PopEnv) -> None:
    pop_env.broker.add_topic(TOPIC, queues=1)
    _send(pop_env, 2)
    msgs = await _pop(pop_env)
    assert [tag for tag, _ in _revive_log(pop_env)] == ["ck"] and _committed(pop_env) == 2
    await _ack(pop_env, msgs[0])
    assert [tag for tag, _ in _revive_log(pop_env)] == ["ck", "ack"]
    assert pop_env.pop.buffer_merge.offset_total_size() == 0


async def test_an_ack_while_the_checkpoint_is_being_written_follows_it(env: PopEnv) -> None:
    _send(env, 2)
    msgs = await _pop(env)
    writer = env.pop.revive_log
    real_append = writer.append_checkpoint
    release = asyncio.Event()

    async def slow_append(ck: PopCheckPoint, revive_qid: int) -> bool:
        await release.wait()
        return await real_append(ck, revive_qid)

    writer.append_checkpoint = slow_append  # type: ignore[method-assign]
    env.broker.clock += env.pop.config.pop_ck_stay_buffer_time + 1
    scan = asyncio.create_task(env.pop.buffer_merge.scan())
    await asyncio.sleep(0)
    await _ack(env, msgs[1])  # merged in memory: written after the checkpoint, never before it
    assert _revive_log(env) == []
    release.set()
    await scan
    assert [(tag, getattr(body, "ack_offset", None)) for tag, body in _revive_log(env)] == [("ck", None), ("ack", 1)]
    assert _committed(env) == 2


async def test_switched_off_at_run_time_the_buffered_checkpoints_still_hold_the_offset(env: PopEnv) -> None:
    _send(env, 4)
    first = await _pop(env, max_nums=2)
    env.pop.config.enable_pop_buffer_merge = False  # updateBrokerConfig enablePopBufferMerge=false
    second = await _pop(env, max_nums=2)
    assert [m.body for m in second] == [b"m2", b"m3"]  # read on past the buffered batch
    assert [(tag, body.start_offset) for tag, body in _revive_log(env)] == [("ck", 2)]  # written at once
    merge = env.pop.buffer_merge
    await merge.scan()
    assert _committed(env) == 0  # behind the still buffered first batch
    for m in first:
        await _ack(env, m)  # merged: its checkpoint was never written
    assert merge.buffered_ck_size() == 0 and len(_revive_log(env)) == 1
    await merge.scan()
    assert _committed(env) == 4
    _send(env, 1)
    await _pop(env)
    assert _committed(env) == 5  # nothing waits here any more: committed by the pop, as with merge off


async def test_the_live_broker_config_is_read_when_it_has_the_keys(env: PopEnv) -> None:
    from types import SimpleNamespace

    from orbitmq.broker.pop.buffer_merge import PopBufferMergeService

    broker = env.broker
    broker.config = SimpleNamespace(**vars(broker.config), enable_pop_buffer_merge=False,
                                    **{k: getattr(env.pop.config, k) for k in (
                                        "pop_ck_stay_buffer_time", "pop_ck_stay_buffer_time_out",
                                        "pop_ck_max_buffer_size", "pop_ck_offset_max_queue_size",
                                        "enable_pop_batch_ack", "enable_pop_log")})
    merge = PopBufferMergeService(env.pop)
    assert merge.enabled is False  # BrokerConfig's value, not PopConfig's (True in this fixture)
    broker.config.enable_pop_buffer_merge = True
    assert merge.enabled is True
