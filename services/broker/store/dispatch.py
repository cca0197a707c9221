"""What the reput service hands to every CommitLog dispatcher (ConsumeQueue, IndexFile, waiters).

One DispatchRequest describes one stored record, decoded once from the CommitLog so that each
consumer of the record stream does not decode it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str = ""
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    # False for the blank end-of-segment record and for a torn/corrupt record during recovery.
    success: bool = True
    # DispatchRequest#bitMap: the SQL92 filter bit map CommitLogDispatcherCalcBitMap computed
    # (enableCalcFilterBitMap), written to the ConsumeQueue extension; None: none.
    bit_map: bytes | None = None
