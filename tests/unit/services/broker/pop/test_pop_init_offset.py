"""Where a POP group without an offset starts (PopMessageProcessor#getInitOffset): a new group
with initMode MAX replays a queue from its first message only while that message is still in
memory (initPopOffsetByCheckMsgInMem, DefaultMessageStore#checkInMemByConsumeOffset), and
otherwise starts at the last message; MIN and retry topics start at the minimum."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from orbitmq.broker.pop.constants import INIT_MODE_MAX, INIT_MODE_MIN
from orbitmq.broker.pop.pop_processor import PopMessageProcessor, init_offset
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.message_store import MessageStore
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.extra_info import build_pop_retry_topic
from orbitmq.common.message_codec import decode_records
from orbitmq.remoting import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.unit.services.broker.store.test_store_engine import settle

if TYPE_CHECKING:
    from conftest import PopEnv  # the fixture's fakes (this folder's conftest.py)

TOPIC, GROUP = "InitTopic", "InitGroup"


class _Channel:
    remote_address = "127.0.0.1:50000"
    is_active = True


async def _pop(env: PopEnv, init_mode: int, topic: str = TOPIC) -> list[bytes]:
    request = RemotingCommand.request(RequestCode.POP_MESSAGE, {
        "consumerGroup": GROUP, "topic": topic, "queueId": "0", "maxMsgNums": "32", "invisibleTime": "60000",
        "pollTime": "0", "bornTime": "0", "initMode": str(init_mode), "order": "false"})
    response = await PopMessageProcessor(env.pop).process(request, _Channel())
    if response.code != ResponseCode.SUCCESS:
        return []
    return [m.body for m in decode_records(response.body, check_crc=False)]


def _backlog(env: PopEnv, count: int, topic: str = TOPIC) -> None:
    env.broker.add_topic(topic, queues=1)
    for n in range(count):
        env.broker.send(topic, 0, b"m%d" % n)


async def test_a_new_group_reads_a_backlog_still_in_memory_from_its_first_message(pop_env: PopEnv) -> None:
    _backlog(pop_env, 5)
    assert await _pop(pop_env, INIT_MODE_MAX) == [b"m0", b"m1", b"m2", b"m3", b"m4"]


async def test_a_new_group_skips_a_backlog_no_longer_in_memory(pop_env: PopEnv) -> None:
    _backlog(pop_env, 5)
    pop_env.broker.message_store.in_memory_from[(TOPIC, 0)] = 3  # m0..m2 have left memory
    assert await _pop(pop_env, INIT_MODE_MAX) == [b"m4"]  # the last one, as upstream pops
    assert pop_env.broker.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 5
    pop_env.broker.send(TOPIC, 0, b"m5")
    assert await _pop(pop_env, INIT_MODE_MAX) == [b"m5"]


async def test_init_mode_min_reads_the_whole_backlog_wherever_it_is(pop_env: PopEnv) -> None:
    _backlog(pop_env, 5)
    pop_env.broker.message_store.in_memory_from[(TOPIC, 0)] = 5
    assert await _pop(pop_env, INIT_MODE_MIN) == [b"m0", b"m1", b"m2", b"m3", b"m4"]


async def test_without_the_memory_check_a_new_group_starts_at_the_last_message(pop_env: PopEnv) -> None:
    _backlog(pop_env, 3)
    pop_env.pop.config.init_pop_offset_by_check_msg_in_mem = False
    assert await _pop(pop_env, INIT_MODE_MAX) == [b"m2"]


def test_retry_topics_and_trimmed_queues_start_at_the_minimum(pop_env: PopEnv) -> None:
    store = pop_env.broker.message_store
    retry = build_pop_retry_topic(TOPIC, GROUP)
    _backlog(pop_env, 4, retry)
    store.in_memory_from[(retry, 0)] = 4
    assert init_offset(store, retry, 0, INIT_MODE_MAX, True) == 0
    _backlog(pop_env, 4)
    store.min_offsets[(TOPIC, 0)] = 2  # the queue's head was deleted: not "its first message"
    assert init_offset(store, TOPIC, 0, INIT_MODE_MAX, True) == 3
    assert init_offset(store, TOPIC, 0, INIT_MODE_MIN, True) == 2
    assert init_offset(store, "Empty", 0, INIT_MODE_MAX, True) == 0


@pytest.fixture
async def store(tmp_path):
    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=64 * 1024,
                             mapped_file_size_consume_queue=20 * 100, message_index_enable=False)
    s = MessageStore(cfg)
    await s.start()
    try:
        yield s
    finally:
        await s.shutdown()


async def test_the_store_decides_in_memory_as_its_read_path_does(store: MessageStore) -> None:
    """checkInMemByConsumeOffset: within accessMessageInMemoryMaxRatio % of physical memory of the
    CommitLog's end, the estimate getMessage uses for its in-memory transfer limits."""
    for n in range(10):
        msg = MessageExtBrokerInner(topic=TOPIC, queue_id=0, body=b"x" * 1000, born_timestamp=n,
                                    born_host=("127.0.0.1", 4000), properties={"UNIQ_KEY": f"U{n}"})
        assert (await store.put_message(msg)).status is PutMessageStatus.PUT_OK
    await settle(store)
    assert store.check_in_mem_by_consume_offset(TOPIC, 0, 0)
    assert not store.check_in_mem_by_consume_offset(TOPIC, 0, 10)  # no such message
    assert not store.check_in_mem_by_consume_offset("Missing", 0, 0)
    first, last = (store.get_commit_log_offset_in_queue(TOPIC, 0, q) for q in (0, 9))
    ratio = store.config.access_message_in_memory_max_ratio / 100.0
    # A machine whose memory window ends between the 1st and the 10th message's CommitLog offsets.
    store.total_physical_memory = int((store.get_max_phy_offset() - (first + last) // 2) / ratio)
    assert not store.check_in_mem_by_consume_offset(TOPIC, 0, 0)
    assert store.check_in_mem_by_consume_offset(TOPIC, 0, 9)
    assert init_offset(store, TOPIC, 0, INIT_MODE_MAX, True) == 9
    store.total_physical_memory = 8 * 1024**3
    assert init_offset(store, TOPIC, 0, INIT_MODE_MAX, True) == 0
