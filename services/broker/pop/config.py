"""PopConfig: the BrokerConfig keys of POP, with RocketMQ's defaults.

``PopConfig.from_broker_config`` takes those BrokerConfig carries (``revive_interval``,
``pop_from_retry_probability``, ``max_pop_polling_size``) and keeps the defaults for the
internal knobs broker.conf does not name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class PopConfig:
    # PopReviveService scan period (reviveInterval).
    revive_interval: int = 1000
    # How long past a checkpoint's revive time the revive service waits for late acks
    # (PopAckConstants.ackTimeInterval).
    revive_ack_wait_ms: int = 1000
    # Percent of pops that read the retry topic first (popFromRetryProbability).
    pop_from_retry_probability: int = 20
    # Parked POP/NOTIFICATION requests allowed at once (maxPopPollingSize).
    max_pop_polling_size: int = 100_000
    # Revive-log records read per batch.
    revive_batch_size: int = 32
    # consumerOrderInfo.json write period when it changed.
    order_info_persist_interval: int = 5000

    @classmethod
    def from_broker_config(cls, broker_config: Any) -> PopConfig:
        values = {f.name: getattr(broker_config, f.name) for f in fields(cls) if hasattr(broker_config, f.name)}
        return cls(**values)
