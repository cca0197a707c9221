"""A POP parked under a group's former mode takes nothing once the group turns orderly
(updateSubGroup -o true): a concurrent pop of a consumer stopped before the switch would hand the
first new message out without order, and its gone client's nack would revive it behind the later
ones. The wake-up goes on to a pop made under the new mode."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from orbitmq.broker.pop.pop_processor import PopMessageProcessor
from orbitmq.common.message_codec import decode_records
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.remoting import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

TOPIC, GROUP = "SwitchTopic", "SwitchGroup"


class _Channel:
    remote_address = "127.0.0.1:50000"
    is_active = True


def _pop(env: PopEnv, order: bool) -> asyncio.Task[RemotingCommand]:
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
        "pollTime": "60000", "bornTime": "0", "initMode": "1", "order": str(order).lower()})
    return asyncio.create_task(PopMessageProcessor(env.pop).process(request, _Channel()))


async def _parked(env: PopEnv, count: int) -> None:
    for _ in range(10_000):
        if env.pop.long_polling.parked_count() >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError("the pop did not park")


def _orderly(env: PopEnv, orderly: bool) -> None:
    env.broker.subscription_group_manager.put(SubscriptionGroupConfig(GROUP, consume_message_orderly=orderly))


def _arrive(env: PopEnv, body: bytes) -> None:
    env.broker.send(TOPIC, 0, body)
    env.pop.long_polling.notify_message_arriving(TOPIC, 0)


def _bodies(response: RemotingCommand) -> list[bytes]:
    return [m.body for m in decode_records(response.body, check_crc=False)] if response.body else []


async def test_a_concurrent_pop_parked_before_the_switch_leaves_the_new_message_to_the_orderly_one(
        pop_env: PopEnv) -> None:
    pop_env.pop.long_polling.start()
    pop_env.broker.add_topic(TOPIC, queues=1)
    _orderly(pop_env, False)
    stale = _pop(pop_env, order=False)
    await _parked(pop_env, 1)
    _orderly(pop_env, True)  # updateSubGroup -o true while the concurrent pop waits
    fresh = _pop(pop_env, order=True)
    await _parked(pop_env, 2)
    _arrive(pop_env, b"m0")
    answered = await stale
    assert (answered.code, _bodies(answered)) == (ResponseCode.POLLING_TIMEOUT, [])
    assert all(pop_env.pop.revive_records(q) == [] for q in range(pop_env.pop.revive_queue_num()))  # no checkpoint
    delivered = await fresh
    assert (delivered.code, _bodies(delivered)) == (ResponseCode.SUCCESS, [b"m0"])
    assert pop_env.pop.order_info.get(TOPIC, GROUP, 0).offsets == [0]  # handed out orderly


async def test_a_pop_parked_under_the_current_mode_is_served_whatever_it_asks(pop_env: PopEnv) -> None:
    """As upstream, the broker serves a non-orderly pop of an orderly group (a Remoting client
    chooses by its listener); only a mode change while it waited ends it."""
    pop_env.pop.long_polling.start()
    pop_env.broker.add_topic(TOPIC, queues=1)
    _orderly(pop_env, True)
    waiting = _pop(pop_env, order=False)
    await _parked(pop_env, 1)
    _arrive(pop_env, b"m0")
    answered = await waiting
    assert (answered.code, _bodies(answered)) == (ResponseCode.SUCCESS, [b"m0"])
