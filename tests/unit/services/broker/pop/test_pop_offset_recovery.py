"""A promoted master raises its copied (older) pop offsets to the ends of the checkpoints in the
replicated revive log (services/broker/pop/offset_recovery.py), and nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orbitmq.broker.pop.checkpoint import PopCheckPoint
from orbitmq.broker.pop.constants import REVIVE_GROUP
from orbitmq.broker.pop.offset_recovery import CHUNK, COPY_MARGIN_MS, raise_pop_offsets
from orbitmq.common.extra_info import build_pop_retry_topic
from orbitmq.common.subscription_group import SubscriptionGroupConfig

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

TOPIC, GROUP = "RecoverTopic", "RecoverGroup"
RETRY = build_pop_retry_topic(TOPIC, GROUP)


async def _popped(env: PopEnv, topic: str, queue_id: int, offsets: list[int], revive_qid: int = 0,
                  group: str = GROUP) -> None:
    """The checkpoint PopMessageProcessor writes for a pop of ``offsets``."""
    start = offsets[0]
    ck = PopCheckPoint(start_offset=start, pop_time=env.broker.clock, invisible_time=60_000, num=len(offsets),
                       queue_id=queue_id, topic=topic, cid=group, broker_name=env.broker_name,
                       queue_offset_diff=[o - start for o in offsets])
    assert await env.pop.revive_log.append_checkpoint(ck, revive_qid)


def _fill(env: PopEnv, topic: str, queue_id: int, count: int) -> None:
    env.broker.add_topic(topic)
    for n in range(count):
        env.broker.send(topic, queue_id, b"m%d" % n)


def _offset(env: PopEnv, topic: str, queue_id: int, group: str = GROUP) -> int:
    return env.broker.consumer_offset_manager.query_offset(group, topic, queue_id)


async def test_copied_pop_offsets_rise_to_the_newest_checkpoints(pop_env: PopEnv) -> None:
    env, com = pop_env, pop_env.broker.consumer_offset_manager
    _fill(env, TOPIC, 0, 10)
    _fill(env, TOPIC, 1, 10)
    _fill(env, TOPIC, 2, 10)
    _fill(env, RETRY, 0, 3)
    for queue_id in (0, 1, 2):
        com.commit_offset(GROUP, TOPIC, queue_id, 2)  # what the last copy from the old master said
    com.commit_offset(GROUP, TOPIC, 2, 9)  # already past its checkpoint: never lowered
    await _popped(env, TOPIC, 0, [2, 3, 4], revive_qid=0)
    await _popped(env, TOPIC, 0, [5, 7], revive_qid=1)  # 6 filtered out: the batch ends after 7
    await _popped(env, TOPIC, 2, [2, 3], revive_qid=1)
    await _popped(env, RETRY, 0, [0, 1], revive_qid=0)  # a group with no copied offset at all

    assert await raise_pop_offsets(env.pop, None) == 2
    assert _offset(env, TOPIC, 0) == 8
    assert _offset(env, TOPIC, 1) == 2  # popped nothing since the copy
    assert _offset(env, TOPIC, 2) == 9
    assert _offset(env, RETRY, 0) == 2
    assert await raise_pop_offsets(env.pop, None) == 0  # idempotent


async def test_checkpoints_the_revive_service_settled_and_server_side_resets_are_left_alone(
        pop_env: PopEnv) -> None:
    env, com = pop_env, pop_env.broker.consumer_offset_manager
    _fill(env, TOPIC, 0, 10)
    _fill(env, TOPIC, 1, 10)
    await _popped(env, TOPIC, 0, [0, 1, 2, 3], revive_qid=0)
    await _popped(env, TOPIC, 1, [0, 1, 2, 3], revive_qid=0)
    # The revive offset is past the first record: that checkpoint is no evidence any more.
    com.commit_offset(REVIVE_GROUP, env.pop.revive_topic, 0, 1)
    com.reset_offsets(GROUP, TOPIC, {1: 0})  # an operator's reset waits for the next pop

    assert await raise_pop_offsets(env.pop, None) == 0
    assert _offset(env, TOPIC, 0) == -1
    assert _offset(env, TOPIC, 1) == 0


async def test_the_walk_back_stops_at_checkpoints_older_than_the_last_copy(pop_env: PopEnv) -> None:
    env = pop_env
    _fill(env, TOPIC, 0, 4)
    _fill(env, TOPIC, 1, 4)
    await _popped(env, TOPIC, 1, [0, 1, 2, 3])  # long before the copy, beyond the last chunk read
    await _popped(env, TOPIC, 0, [0])  # as old: the chunk holding it is the last one read
    env.broker.clock += 10 * COPY_MARGIN_MS
    copied_at = env.broker.clock
    for _ in range(CHUNK - 1):
        await _popped(env, TOPIC, 0, [0, 1])

    assert await raise_pop_offsets(env.pop, copied_at) == 1
    assert _offset(env, TOPIC, 0) == 2
    assert _offset(env, TOPIC, 1) == -1  # older than the copy: the copied offsets hold it

    assert await raise_pop_offsets(env.pop, None) == 1  # no copy known: the whole revive log counts
    assert _offset(env, TOPIC, 1) == 4


async def test_an_orderly_group_resumes_from_its_copied_offset(pop_env: PopEnv) -> None:
    env, com = pop_env, pop_env.broker.consumer_offset_manager
    orderly = SubscriptionGroupConfig("RecoverOrderly")
    orderly.consume_message_orderly = True
    env.broker.subscription_group_manager.put(orderly)
    _fill(env, TOPIC, 0, 10)
    com.commit_offset(orderly.group_name, TOPIC, 0, 2)
    await _popped(env, TOPIC, 0, [2, 3, 4], group=orderly.group_name)  # popped concurrently

    assert await raise_pop_offsets(env.pop, None) == 0
    assert _offset(env, TOPIC, 0, orderly.group_name) == 2
