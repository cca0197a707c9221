"""PopConfig: the BrokerConfig keys of POP, with RocketMQ's defaults.

``PopConfig.from_broker_config`` takes those BrokerConfig carries (``revive_interval``,
``pop_from_retry_probability``, ``max_pop_polling_size``, ``init_pop_offset_by_check_msg_in_mem``,
the PopBufferMergeService keys ``enable_pop_buffer_merge``, ``pop_ck_*``, ``enable_pop_batch_ack``, ``enable_pop_log``)
and keeps the defaults for the internal knobs broker.conf does not name. The mirrored keys take
their defaults from BrokerConfig, so each default is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from orbitmq.broker.config import BrokerConfig


@dataclass
class PopConfig:
    # PopReviveService scan period (reviveInterval).
    revive_interval: int = BrokerConfig.revive_interval
    # How long past a checkpoint's revive time the revive service waits for late acks
    # (PopAckConstants.ackTimeInterval).
    revive_ack_wait_ms: int = 1000
    # Percent of pops that read the retry topic first (popFromRetryProbability).
    pop_from_retry_probability: int = BrokerConfig.pop_from_retry_probability
    # The same for pops of a PRIORITY topic served in priority order (popFromRetryProbabilityForPriority).
    pop_from_retry_probability_for_priority: int = BrokerConfig.pop_from_retry_probability_for_priority
    # Queue n-1 is the highest priority when true, queue 0 when false (priorityOrderAsc).
    priority_order_asc: bool = BrokerConfig.priority_order_asc
    # Revived messages keep their queue id in a retry topic as wide as the topic (useSeparateRetryQueue).
    use_separate_retry_queue: bool = BrokerConfig.use_separate_retry_queue
    # Parked POP/NOTIFICATION requests allowed at once (maxPopPollingSize).
    max_pop_polling_size: int = BrokerConfig.max_pop_polling_size
    # A new group starts at a queue's first message only while it is in memory (initPopOffsetByCheckMsgInMem).
    init_pop_offset_by_check_msg_in_mem: bool = BrokerConfig.init_pop_offset_by_check_msg_in_mem
    # PopBufferMergeService (buffer_merge.py): enablePopBufferMerge and its limits.
    enable_pop_buffer_merge: bool = BrokerConfig.enable_pop_buffer_merge
    pop_ck_stay_buffer_time: int = BrokerConfig.pop_ck_stay_buffer_time
    pop_ck_stay_buffer_time_out: int = BrokerConfig.pop_ck_stay_buffer_time_out
    pop_ck_max_buffer_size: int = BrokerConfig.pop_ck_max_buffer_size
    pop_ck_offset_max_queue_size: int = BrokerConfig.pop_ck_offset_max_queue_size
    enable_pop_batch_ack: bool = BrokerConfig.enable_pop_batch_ack
    enable_pop_log: bool = BrokerConfig.enable_pop_log
    # Revive-log records read per batch.
    revive_batch_size: int = 32
    # consumerOrderInfo.json write period when it changed.
    order_info_persist_interval: int = 5000

    @classmethod
    def from_broker_config(cls, broker_config: Any) -> PopConfig:
        values = {f.name: getattr(broker_config, f.name) for f in fields(cls) if hasattr(broker_config, f.name)}
        return cls(**values)
