"""PopService: wires POP into a BrokerController and owns its shared state.

Attach with ``PopService(broker).register()`` before ``broker.start()`` (processors join the
broker's table), then ``await start()`` once the broker's MessageStore is running, and
``await shutdown()`` before the broker persists its offsets and closes the store.
Each helper it builds takes only its own view of this service and of the broker, named in
interfaces.py, so it can be read and tested without the rest.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors.base import RequestError
from orbitmq.common.aio import cancel_and_wait
from orbitmq.common.constants import revive_topic
from orbitmq.common.extra_info import build_pop_retry_topic
from orbitmq.remoting.codes import ResponseCode

from .ack_processor import AckMessageProcessor
from .buffer_merge import PopBufferMergeService
from .change_invisible import ChangeInvisibleTimeProcessor
from .config import PopConfig
from .long_polling import PopLongPollingService
from .notification import NotificationProcessor
from .order_info import ConsumerOrderInfoManager
from .pop_processor import PopMessageProcessor, init_offset
from .queue_lock import QueueLockManager
from .recent_acks import RecentAcks
from .revive import PopReviveService
from .revive_log import ReviveLogWriter

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

DEFAULT_REVIVE_QUEUE_NUM = 8


class PopService:
    def __init__(self, broker: BrokerController, config: PopConfig | None = None) -> None:
        self.broker = broker
        self.config = config or PopConfig.from_broker_config(broker.config)
        self.revive_topic = revive_topic(broker.config.broker_cluster_name)
        self.queue_locks = QueueLockManager()
        self.order_info = ConsumerOrderInfoManager(broker.store_config.config_dir)
        self.long_polling = PopLongPollingService(self.config.max_pop_polling_size)
        self.revive_log = ReviveLogWriter(self)
        # acked handles a change of invisible time must not revive (recent_acks.py)
        self.recent_acks = RecentAcks()
        # checkpoints held in memory while enablePopBufferMerge (buffer_merge.py)
        self.buffer_merge = PopBufferMergeService(self)
        self.pop_processor = PopMessageProcessor(self)
        self.ack_processor = AckMessageProcessor(self)
        self.change_invisible_processor = ChangeInvisibleTimeProcessor(self)
        self.notification_processor = NotificationProcessor(self)
        self.revive_service = PopReviveService(self)
        self._persist_task: asyncio.Task[None] | None = None
        self._order_info_dirty = asyncio.Event()
        self._started = False

    def register(self) -> None:
        for processor in (self.pop_processor, self.ack_processor, self.change_invisible_processor,
                          self.notification_processor):
            processor.register()

    async def start(self) -> None:
        if self._started:
            return
        await asyncio.to_thread(self.order_info.load)
        self.long_polling.start()
        self.broker.message_store.add_arrival_listener(self.long_polling.arrival_listener)
        await self.revive_service.start()
        await self.buffer_merge.start()
        self._persist_task = asyncio.create_task(self._persist_loop(), name="ConsumerOrderInfoPersist")
        self._started = True

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        self.long_polling.shutdown()
        # Before the revive service stops: the buffer writes its open checkpoints and commits offsets.
        await self.buffer_merge.shutdown()
        await self.revive_service.shutdown()
        await cancel_and_wait(self._persist_task)
        self._persist_task = None
        try:
            await self.order_info.persist_async(force=True)
        except Exception:
            log.exception("persist %s failed", self.order_info.path)

    def order_info_changed(self) -> None:
        self._order_info_dirty.set()

    async def _persist_loop(self) -> None:
        interval = max(self.config.order_info_persist_interval, 100) / 1000.0
        while True:
            await self._order_info_dirty.wait()
            self._order_info_dirty.clear()
            try:
                await self.order_info.persist_async()
            except Exception:
                log.exception("persist %s failed", self.order_info.path)
            await asyncio.sleep(interval)

    # ---- shared helpers ---------------------------------------------------------------------

    def revive_queue_num(self) -> int:
        tc = self.broker.topic_config_manager.select_topic_config(self.revive_topic)
        if tc is None or tc.write_queue_nums <= 0:
            return DEFAULT_REVIVE_QUEUE_NUM
        return tc.write_queue_nums

    def peek_pop_offset(self, topic: str, group: str, queue_id: int) -> int:
        """The pop offset without initialising it (NotificationProcessor.getPopOffset), past the
        buffered checkpoints whose offsets are not committed yet."""
        offset = self.broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = self.broker.message_store.get_min_offset_in_queue(topic, queue_id)
        return max(offset, self.buffer_merge.latest_offset(topic, group, queue_id))

    def get_pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int, client: str) -> int:
        """The pop offset, initialised and committed for a new group; a server-side reset wins,
        else the offset after the buffered checkpoints (PopMessageProcessor#getPopOffset)."""
        com = self.broker.consumer_offset_manager
        offset = com.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = init_offset(self.broker.message_store, topic, queue_id, init_mode,
                                 self.config.init_pop_offset_by_check_msg_in_mem)
            com.commit_offset(group, topic, queue_id, offset, "getPopOffset")
        reset = com.query_then_erase_reset_offset(group, topic, queue_id)
        if reset is not None:
            self.order_info.clear_block(topic, group, queue_id)
            self.order_info_changed()
            self.buffer_merge.clear_offset_queue(topic, group, queue_id)
            com.commit_offset(group, topic, queue_id, reset, "ResetPopOffset")
            return reset
        return max(offset, self.buffer_merge.latest_offset(topic, group, queue_id))

    def has_message(self, topic: str, group: str, queue_id: int, order: bool, attempt_id: str | None) -> bool:
        """Is anything waiting for this group (NotificationProcessor.hasMsgFromQueue, all queues)?"""
        tcm = self.broker.topic_config_manager
        targets: list[tuple[str, list[int]]] = []
        tc = tcm.select_topic_config(topic)
        if tc is not None:
            targets.append((topic, [queue_id] if queue_id >= 0 else list(range(tc.read_queue_nums))))
        if not order:
            retry = build_pop_retry_topic(topic, group)
            rtc = tcm.select_topic_config(retry)
            if rtc is not None:
                targets.append((retry, list(range(rtc.read_queue_nums))))
        store = self.broker.message_store
        for name, queues in targets:
            for qid in queues:
                if order and self.order_info.check_block(attempt_id, name, group, qid):
                    continue
                if store.get_max_offset_in_queue(name, qid) > self.peek_pop_offset(name, group, qid):
                    return True
        return False

    def check_topic_queue(self, topic: str, queue_id: int, channel: Any) -> Any:
        """The topic's config, refusing unknown topics and bad queue ids as the ack paths do."""
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! "
                               "http://rocketmq.apache.org/docs/faq/")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL,
                               f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                               f"[{tc.read_queue_nums}] consumer:[{self.broker.remote_addr(channel)}]")
        return tc
