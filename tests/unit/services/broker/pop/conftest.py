"""Small fakes satisfying the POP helpers' Protocols (services/broker/pop/interfaces.py).

``FakeBroker`` keeps each queue as a list of encoded CommitLog records (its index is the queue
offset) and the real metadata managers in a temporary directory; ``FakePop`` holds POP's real
in-memory state objects, so a test drives one helper and reads back what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from orbitmq.broker.pop.buffer_merge import PopBufferMergeService
from orbitmq.broker.pop.config import PopConfig
from orbitmq.broker.pop.long_polling import PopLongPollingService
from orbitmq.broker.pop.order_info import ConsumerOrderInfoManager
from orbitmq.broker.pop.queue_lock import QueueLockManager
from orbitmq.broker.pop.recent_acks import RecentAcks
from orbitmq.broker.pop.revive_log import ReviveLogWriter
from orbitmq.broker.pop.service import PopService
from orbitmq.broker.processors.base import RequestError
from orbitmq.broker.store.metadata.consumer_offset_manager import ConsumerOffsetManager
from orbitmq.broker.store.metadata.subscription_group_manager import SubscriptionGroupManager
from orbitmq.broker.store.metadata.topic_config_manager import TopicConfigManager
from orbitmq.broker.store.model import (
    GetMessageResult,
    GetMessageStatus,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    put_ok_result,
)
from orbitmq.common.constants import revive_topic
from orbitmq.common.message import MessageExt
from orbitmq.common.message_codec import decode_record, encode_record
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import ResponseCode

CLUSTER = "FakeCluster"
BROKER_NAME = "broker-fake"
REVIVE_QUEUES = 2
NOW = 1_700_000_000_000


class FakeMessageStore:
    """QueueOffsets over in-memory queues; ``min_offsets`` lets a test pretend old entries are gone,
    ``in_memory_from`` that a queue's entries before an offset have left memory."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, int], list[bytes]] = {}
        self.min_offsets: dict[tuple[str, int], int] = {}
        self.in_memory_from: dict[tuple[str, int], int] = {}

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        key = (topic, queue_id)
        return self.in_memory_from.get(key, 0) <= consume_offset < len(self.queues.get(key, ()))

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.min_offsets.get((topic, queue_id), 0)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return len(self.queues.get((topic, queue_id), ()))

    def append(self, msg: MessageExtBrokerInner, store_timestamp: int) -> int:
        queue = self.queues.setdefault((msg.topic, msg.queue_id), [])
        queue.append(encode_record(
            topic=msg.topic, queue_id=msg.queue_id, body=msg.body, flag=msg.flag, queue_offset=len(queue),
            sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
            store_timestamp=store_timestamp, reconsume_times=msg.reconsume_times,
            properties=msg.properties_string or msg.properties))
        return len(queue) - 1

    def messages(self, topic: str, queue_id: int) -> list[MessageExt]:
        return [decode_record(r, 0, check_crc=False) for r in self.queues.get((topic, queue_id), ())]


class FakeStats:
    """BrokerStatsManager's handed-out count, kept per (group, topic)."""

    def __init__(self) -> None:
        self.handed_out: dict[tuple[str, str | None], int] = {}

    def on_handed_out(self, group: str, topic: str | None, nums: int) -> None:
        self.handed_out[(group, topic)] = self.handed_out.get((group, topic), 0) + nums


class FakeBroker:
    """The broker parts the POP helpers name: clock, config, store, managers, get and put."""

    def __init__(self, config_dir: Path) -> None:
        self.clock = NOW
        self.config = SimpleNamespace(broker_name=BROKER_NAME, broker_ip1="127.0.0.1", listen_port=10911,
                                      broker_permission=6)
        self.message_store = FakeMessageStore()
        self.escape_bridge = self  # a master: the EscapeBridge writes locally (services/broker/failover)
        self.topic_config_manager = TopicConfigManager(str(config_dir), broker_cluster_name=CLUSTER,
                                                       broker_name=BROKER_NAME, revive_queue_num=REVIVE_QUEUES)
        self.subscription_group_manager = SubscriptionGroupManager(str(config_dir))
        self.consumer_offset_manager = ConsumerOffsetManager(str(config_dir))
        self.metrics = None
        self.stats = FakeStats()
        self.processors: dict[int, Any] = {}
        self.metadata_changes: list[dict[str, bool]] = []
        self.put_calls = 0
        self.refuse_puts: set[str] = set()  # topics whose puts fail

    def now_ms(self) -> int:
        return self.clock

    @staticmethod
    def remote_addr(channel: Any) -> str:
        return "127.0.0.1:50000"

    def register_processor(self, code: int, processor: Any) -> None:
        self.processors[int(code)] = processor

    def on_metadata_changed(self, *, topics: bool = False, groups: bool = False) -> None:
        self.metadata_changes.append({"topics": topics, "groups": groups})

    def add_topic(self, topic: str, queues: int = 4) -> None:
        self.topic_config_manager.put(TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues))

    def send(self, topic: str, queue_id: int, body: bytes, reconsume_times: int = 0,
             properties: dict[str, str] | None = None) -> int:
        """A message as a producer's send stores it; its queue offset."""
        props = {"UNIQ_KEY": f"U-{topic}-{queue_id}-{body.hex()}", **(properties or {})}
        return self.message_store.append(MessageExtBrokerInner(
            topic=topic, queue_id=queue_id, body=body, properties=props, born_timestamp=NOW - 1,
            reconsume_times=reconsume_times), NOW)

    def is_remote(self) -> bool:
        """EscapeBridge#is_remote: a master's writes stay local."""
        return False

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        self.put_calls += 1
        if msg.topic in self.refuse_puts:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        offset = self.message_store.append(msg, self.clock)
        return put_ok_result(0, 1, self.clock, offset, "")

    async def put_messages(self, msgs: list[MessageExtBrokerInner]) -> PutMessageResult:
        self.put_calls += 1
        if any(m.topic in self.refuse_puts for m in msgs):
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        offset = -1
        for msg in msgs:
            offset = self.message_store.append(msg, self.clock)
        return put_ok_result(0, 1, self.clock, offset, "")

    async def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                          max_total_size: int | None, message_filter: Any) -> GetMessageResult:
        queue = self.message_store.queues.get((topic, queue_id), [])
        if offset >= len(queue):
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, next_begin_offset=offset,
                                    max_offset=len(queue))
        result = GetMessageResult(GetMessageStatus.FOUND, max_offset=len(queue))
        for index in range(offset, min(len(queue), offset + max_msg_nums)):
            result.add_message(queue[index], index)
        result.next_begin_offset = offset + result.message_count
        return result


class FakePop:
    """PopService's parts as the helpers see them, over POP's real state objects."""

    # PopService's pop offsets and message check, run over this fake's broker and order info.
    peek_pop_offset = PopService.peek_pop_offset
    get_pop_offset = PopService.get_pop_offset
    has_message = PopService.has_message

    def __init__(self, broker: FakeBroker, config_dir: Path) -> None:
        self.broker = broker
        self.config = PopConfig()
        self.revive_topic = revive_topic(CLUSTER)
        self.queue_locks = QueueLockManager()
        self.order_info = ConsumerOrderInfoManager(str(config_dir))
        self.long_polling = PopLongPollingService()
        self.revive_log = ReviveLogWriter(self)
        self.recent_acks = RecentAcks()
        self.buffer_merge = PopBufferMergeService(self)  # off unless a test sets enable_pop_buffer_merge
        self.order_info_changes = 0

    def revive_queue_num(self) -> int:
        return REVIVE_QUEUES

    def check_topic_queue(self, topic: str, queue_id: int, channel: Any) -> TopicConfig:
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None or not 0 <= queue_id < tc.read_queue_nums:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"no {topic}@{queue_id}")
        return tc

    def order_info_changed(self) -> None:
        self.order_info_changes += 1

    def revive_records(self, revive_qid: int) -> list[MessageExt]:
        return self.broker.message_store.messages(self.revive_topic, revive_qid)


@dataclass
class PopEnv:
    broker: FakeBroker
    pop: FakePop
    start_ms: int = NOW  # the broker's clock at the start of a test
    broker_name: str = BROKER_NAME


@pytest.fixture
def pop_env(tmp_path: Path) -> PopEnv:
    broker = FakeBroker(tmp_path)
    return PopEnv(broker, FakePop(broker, tmp_path))
