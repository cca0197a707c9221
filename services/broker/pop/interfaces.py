"""What each POP helper needs of the broker and of PopService, as typing.Protocol classes.

PopService (service.py) wires the helpers to a BrokerController. Each helper is typed with
the narrow view below, naming exactly the attributes and methods it uses, so it can be read
without the broker in mind and unit-tested with a small fake (tests/unit/services/broker/pop).
The MessageStore and the metadata managers are named directly, as upstream's processors go
through ``brokerController.getMessageStore()`` / ``getConsumerOffsetManager()``; the broker's own
methods named here do work of their own (get/put count the broker's stats and metrics).

The POP state objects (ConsumerOrderInfoManager, QueueLockManager, RecentAcks,
PopLongPollingService, ReviveLogWriter, PopBufferMergeService) are in-memory classes of this
package: the views name those classes, and a test builds the real ones. The views are
runtime-checkable only so that test_pop_interfaces.py can hold the real objects and the fakes to
them; no helper checks them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from orbitmq.broker.store.model import GetMessageResult, MessageExtBrokerInner, PutMessageResult
    from orbitmq.common.subscription_group import SubscriptionGroupConfig
    from orbitmq.common.topic_config import TopicConfig

    from .buffer_merge import PopBufferMergeService
    from .config import PopConfig
    from .long_polling import PopLongPollingService
    from .order_info import ConsumerOrderInfoManager
    from .queue_lock import QueueLockManager
    from .recent_acks import RecentAcks
    from .revive_log import ReviveLogWriter


# ---- the broker's parts ---------------------------------------------------------------------

@runtime_checkable
class QueueOffsets(Protocol):
    """A ConsumeQueue's bounds (DefaultMessageStore#getMinOffsetInQueue / #getMaxOffsetInQueue), and
    whether a message is still in memory (#checkInMemByConsumeOffset, a new group's first offset)."""

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool: ...


@runtime_checkable
class OffsetTable(Protocol):
    """ConsumerOffsetManager as POP uses it: pop offsets, the revive offsets, server-side resets."""

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, client_host: str = "") -> None: ...

    def has_offset_reset(self, group: str, topic: str, queue_id: int) -> bool: ...

    def query_then_erase_reset_offset(self, group: str, topic: str, queue_id: int) -> int | None: ...


@runtime_checkable
class TopicConfigs(Protocol):
    """TopicConfigManager: lookups, and the retry/DLQ topics a re-put creates."""

    def select_topic_config(self, topic: str) -> TopicConfig | None: ...

    def create_topic_in_send_message_back_method(self, topic: str, client_default_topic_queue_nums: int, perm: int,
                                                 topic_sys_flag: int = 0) -> tuple[TopicConfig, bool]: ...

    def put(self, tc: TopicConfig) -> TopicConfig | None: ...


@runtime_checkable
class GroupConfigs(Protocol):
    """SubscriptionGroupManager: retryMaxTimes, and the group check of POP and NOTIFICATION."""

    def get(self, group: str) -> SubscriptionGroupConfig | None: ...

    def find_subscription_group_config(self, group: str) -> tuple[SubscriptionGroupConfig | None, bool]: ...


@runtime_checkable
class BrokerIdentity(Protocol):
    """The BrokerConfig fields POP reads."""

    broker_name: str
    broker_ip1: str
    listen_port: int
    broker_permission: int


@runtime_checkable
class PopMetrics(Protocol):
    """BrokerMetricsManager's POP counters (rocketmq_pop_revive_*)."""

    def on_revive_in(self, group: str, topic: str, record_type: str, put_status: str, nums: int = 1) -> None: ...

    def on_revive_out(self, group: str, topic: str, revive_queue_id: int, record_type: str) -> None: ...

    def on_revive_retry(self, group: str, topic: str, put_status: str) -> None: ...


@runtime_checkable
class Putter(Protocol):
    """BrokerController#put_message: the store's put, counted in the broker's stats."""

    config: BrokerIdentity

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult: ...


@runtime_checkable
class ReviveLogBroker(Putter, Protocol):
    """ReviveLogWriter (revive_log.py): checkpoints and acks put into the revive topic."""

    metrics: PopMetrics | None

    def now_ms(self) -> int: ...

    async def put_messages(self, msgs: list[MessageExtBrokerInner]) -> PutMessageResult: ...


@runtime_checkable
class DeadLetterBroker(Putter, Protocol):
    """dead_letter.py: a re-put into the pop retry topic or %DLQ%<group>, creating it first
    (topic_support.create_topic_in_send_message_back_method)."""

    topic_config_manager: TopicConfigs
    subscription_group_manager: GroupConfigs

    def on_metadata_changed(self, *, topics: bool = False, groups: bool = False) -> None: ...


@runtime_checkable
class Reader(Protocol):
    """BrokerController#get_message: the store's read, counted in the broker's stats."""

    message_store: QueueOffsets

    async def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                          max_total_size: int | None, message_filter: Any) -> GetMessageResult | None: ...


@runtime_checkable
class ReviveBroker(Reader, DeadLetterBroker, Protocol):
    """PopReviveService (revive.py): reads the revive queues, re-puts what is due."""

    consumer_offset_manager: OffsetTable
    metrics: PopMetrics | None

    def now_ms(self) -> int: ...


@runtime_checkable
class ProcessorBroker(Protocol):
    """What the ACK, CHANGE_INVISIBLETIME and NOTIFICATION processors use of the broker."""

    config: BrokerIdentity
    message_store: QueueOffsets
    topic_config_manager: TopicConfigs
    consumer_offset_manager: OffsetTable

    def register_processor(self, code: int, processor: Callable[[Any, Any], Awaitable[Any]]) -> None: ...

    def now_ms(self) -> int: ...

    def remote_addr(self, channel: Any) -> str: ...


@runtime_checkable
class NotificationBroker(ProcessorBroker, Protocol):
    """NotificationProcessor: also the group check (topic_support.find_subscription_group_config)."""

    subscription_group_manager: GroupConfigs

    def on_metadata_changed(self, *, topics: bool = False, groups: bool = False) -> None: ...


@runtime_checkable
class HandedOutStats(Protocol):
    """BrokerStatsManager's count of messages answered to consumers (consumeTps, msgGetTotal*)."""

    def on_handed_out(self, group: str, topic: str | None, nums: int) -> None: ...


@runtime_checkable
class PopBroker(Reader, ProcessorBroker, DeadLetterBroker, Protocol):
    """PopMessageProcessor and PopService's pop offsets: the reads, the group check, orderly DLQ."""

    stats: HandedOutStats


# ---- PopService's parts, as each helper sees it -----------------------------------------------

@runtime_checkable
class RevivePop(Protocol):
    """PopReviveService's view of PopService."""

    broker: ReviveBroker
    config: PopConfig
    revive_topic: str

    def revive_queue_num(self) -> int: ...


@runtime_checkable
class ReviveLogPop(Protocol):
    """ReviveLogWriter's view of PopService."""

    broker: ReviveLogBroker
    revive_topic: str


@runtime_checkable
class BufferMergeBroker(ReviveLogBroker, Protocol):
    """PopBufferMergeService (buffer_merge.py): commits pop offsets, drops deleted topics' queues."""

    consumer_offset_manager: OffsetTable
    topic_config_manager: TopicConfigs


@runtime_checkable
class BufferMergePop(Protocol):
    """PopBufferMergeService's view of PopService."""

    broker: BufferMergeBroker
    config: PopConfig
    queue_locks: QueueLockManager
    revive_log: ReviveLogWriter


@runtime_checkable
class AckPathsPop(Protocol):
    """What the ACK and CHANGE_INVISIBLETIME processors both use of PopService."""

    queue_locks: QueueLockManager
    order_info: ConsumerOrderInfoManager
    revive_log: ReviveLogWriter
    recent_acks: RecentAcks
    buffer_merge: PopBufferMergeService

    def revive_queue_num(self) -> int: ...

    def check_topic_queue(self, topic: str, queue_id: int, channel: Any) -> TopicConfig: ...

    def order_info_changed(self) -> None: ...


@runtime_checkable
class AckPop(AckPathsPop, Protocol):
    """AckMessageProcessor's view of PopService (an orderly ack wakes its queue's waiters)."""

    broker: ProcessorBroker
    long_polling: PopLongPollingService


@runtime_checkable
class ChangeInvisiblePop(AckPathsPop, Protocol):
    """ChangeInvisibleTimeProcessor's view of PopService."""

    broker: ProcessorBroker


@runtime_checkable
class NotificationPop(Protocol):
    """NotificationProcessor's view of PopService."""

    broker: NotificationBroker
    long_polling: PopLongPollingService

    def has_message(self, topic: str, group: str, queue_id: int, order: bool, attempt_id: str | None) -> bool: ...


@runtime_checkable
class PopProcessorPop(Protocol):
    """PopMessageProcessor's view of PopService."""

    broker: PopBroker
    config: PopConfig
    queue_locks: QueueLockManager
    order_info: ConsumerOrderInfoManager
    revive_log: ReviveLogWriter
    long_polling: PopLongPollingService
    buffer_merge: PopBufferMergeService

    def revive_queue_num(self) -> int: ...

    def peek_pop_offset(self, topic: str, group: str, queue_id: int) -> int: ...

    def get_pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int, client: str) -> int: ...

    def has_message(self, topic: str, group: str, queue_id: int, order: bool, attempt_id: str | None) -> bool: ...

    def order_info_changed(self) -> None: ...
