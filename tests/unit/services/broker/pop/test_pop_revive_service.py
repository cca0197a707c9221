"""PopReviveService alone, over a fake broker (RevivePop / ReviveBroker): checkpoints and acks
written by the real ReviveLogWriter are read back, the un-acked messages of a due checkpoint are
re-put into the pop retry topic (or %DLQ%<group>), and the revive offset only moves past what
is settled."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orbitmq.broker.pop.checkpoint import AckMsg, BatchAckMsg, PopCheckPoint
from orbitmq.broker.pop.constants import REVIVE_GROUP
from orbitmq.broker.pop.revive import PopReviveService
from orbitmq.common.constants import dlq_topic
from orbitmq.common.extra_info import build_pop_retry_topic
from orbitmq.common.message import MessageConst
from orbitmq.common.subscription_group import SubscriptionGroupConfig

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

TOPIC, GROUP, QUEUE = "ReviveTopic", "ReviveGroup", 1
INVISIBLE = 60_000
RETRY = build_pop_retry_topic(TOPIC, GROUP)


async def _popped(env: PopEnv, offsets: list[int], revive_qid: int = 0) -> PopCheckPoint:
    """The checkpoint a pop of ``offsets`` writes (PopMessageProcessor), in revive queue ``revive_qid``."""
    start = offsets[0]
    ck = PopCheckPoint(start_offset=start, pop_time=env.broker.clock, invisible_time=INVISIBLE, num=len(offsets),
                       queue_id=QUEUE, topic=TOPIC, cid=GROUP, broker_name=env.broker_name,
                       queue_offset_diff=[o - start for o in offsets])
    assert await env.pop.revive_log.append_checkpoint(ck, revive_qid)
    return ck


async def _acked(env: PopEnv, ck: PopCheckPoint, offset: int, revive_qid: int = 0) -> None:
    ack = AckMsg(ack_offset=offset, start_offset=ck.start_offset, consumer_group=GROUP, topic=TOPIC,
                 queue_id=QUEUE, pop_time=ck.pop_time, broker_name=env.broker_name)
    assert await env.pop.revive_log.append_ack(ack, revive_qid, INVISIBLE)


def _revive_offset(env: PopEnv, revive_qid: int = 0) -> int:
    return env.broker.consumer_offset_manager.query_offset(REVIVE_GROUP, env.pop.revive_topic, revive_qid)


def _send(env: PopEnv, count: int, reconsume_times: int = 0) -> None:
    env.broker.add_topic(TOPIC)
    for n in range(count):
        env.broker.send(TOPIC, QUEUE, b"m%d" % n, reconsume_times)


def _due(env: PopEnv) -> None:
    env.broker.clock = env.start_ms + INVISIBLE + env.pop.config.revive_ack_wait_ms


async def test_a_due_checkpoint_revives_its_unacked_messages_into_the_retry_topic(pop_env: PopEnv) -> None:
    _send(pop_env, 3)
    ck = await _popped(pop_env, [0, 1, 2])
    await _acked(pop_env, ck, 1)
    service = PopReviveService(pop_env.pop)

    assert await service.revive_once() == 0  # not due yet: held, and the revive offset waits at it
    assert service.pending_count() == 1
    assert _revive_offset(pop_env) == 0

    _due(pop_env)
    assert await service.revive_once() == 2
    retried = pop_env.broker.message_store.messages(RETRY, 0)
    assert [m.body for m in retried] == [b"m0", b"m2"]
    assert all(m.reconsume_times == 1 for m in retried)
    assert [m.properties["UNIQ_KEY"] for m in retried] == [f"U-{TOPIC}-{QUEUE}-{b.hex()}" for b in (b"m0", b"m2")]
    assert all(m.properties[MessageConst.FIRST_POP_TIME] == str(pop_env.start_ms) for m in retried)
    assert pop_env.broker.topic_config_manager.select_topic_config(RETRY) is not None
    assert {"topics": True, "groups": False} in pop_env.broker.metadata_changes
    assert service.pending_count() == 0
    assert _revive_offset(pop_env) == 2  # past the checkpoint and its ack

    assert await service.revive_once() == 0  # nothing is revived twice
    assert len(pop_env.broker.message_store.messages(RETRY, 0)) == 2


async def test_a_batch_ack_of_every_message_leaves_nothing_to_revive(pop_env: PopEnv) -> None:
    _send(pop_env, 3)
    ck = await _popped(pop_env, [0, 2], revive_qid=1)
    batch = BatchAckMsg(-1, ck.start_offset, GROUP, TOPIC, QUEUE, ck.pop_time, pop_env.broker_name, [0, 2])
    assert await pop_env.pop.revive_log.append_acks([(batch, 1, INVISIBLE)])
    service = PopReviveService(pop_env.pop)
    _due(pop_env)

    assert await service.revive_once() == 0
    assert service.pending_count() == 0
    assert pop_env.broker.message_store.messages(RETRY, 0) == []
    assert _revive_offset(pop_env, 1) == 2


async def test_a_message_at_retry_max_times_goes_to_the_dlq(pop_env: PopEnv) -> None:
    pop_env.broker.subscription_group_manager.put(SubscriptionGroupConfig(GROUP, retry_max_times=2))
    _send(pop_env, 1, reconsume_times=2)
    await _popped(pop_env, [0])
    service = PopReviveService(pop_env.pop)
    _due(pop_env)

    assert await service.revive_once() == 1
    assert pop_env.broker.message_store.messages(RETRY, 0) == []
    [dead] = pop_env.broker.message_store.messages(dlq_topic(GROUP), 0)
    assert dead.body == b"m0" and dead.reconsume_times == 3
    assert dead.properties[MessageConst.DLQ_ORIGIN_TOPIC] == TOPIC
    assert dead.properties[MessageConst.RETRY_TOPIC] == TOPIC
    assert dead.properties[MessageConst.DLQ_ORIGIN_MESSAGE_ID] == f"U-{TOPIC}-{QUEUE}-{b'm0'.hex()}"


async def test_a_refused_re_put_keeps_the_checkpoint_for_the_next_pass(pop_env: PopEnv) -> None:
    _send(pop_env, 2)
    await _popped(pop_env, [0, 1])
    service = PopReviveService(pop_env.pop)
    _due(pop_env)
    pop_env.broker.refuse_puts.add(RETRY)

    assert await service.revive_once() == 0
    assert service.pending_count() == 1
    assert _revive_offset(pop_env) == 0  # a crash now reads the checkpoint again

    pop_env.broker.refuse_puts.clear()
    assert await service.revive_once() == 2
    assert [m.body for m in pop_env.broker.message_store.messages(RETRY, 0)] == [b"m0", b"m1"]
    assert _revive_offset(pop_env) == 1


async def test_a_new_service_resumes_from_the_committed_revive_offset(pop_env: PopEnv) -> None:
    """A restart re-reads checkpoints and acks from the committed offset: nothing forgotten."""
    _send(pop_env, 3)
    ck = await _popped(pop_env, [0, 1, 2])
    await _acked(pop_env, ck, 0)
    first = PopReviveService(pop_env.pop)
    assert await first.revive_once() == 0
    await first.shutdown()  # commits where it stands: the checkpoint's own offset

    _due(pop_env)
    again = PopReviveService(pop_env.pop)
    assert await again.revive_once() == 2
    assert [m.body for m in pop_env.broker.message_store.messages(RETRY, 0)] == [b"m1", b"m2"]
    assert again.revive_progress() == {0: (0, 0), 1: (0, 0)}
