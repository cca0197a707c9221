"""GroupTransferService: SYNC_MASTER sends waiting for their replicas (GroupTransferService#doWaitTransfer).

A put that must be replicated registers the CommitLog offset its records end at; every slave
ack (and every SyncStateSet change) re-checks the waiters, and the HA service decides what
"enough replicas" means (all SyncStateSet members, or ``inSyncReplicas`` acks). A waiter that
is not satisfied within ``slaveTimeout`` answers FLUSH_SLAVE_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# needAckNums meaning "every member of the SyncStateSet" (MixAll.ALL_ACK_IN_SYNC_STATE_SET).
ALL_ACK_IN_SYNC_STATE_SET = -1


def acked_by(acks: list[int], needed: int) -> int:
    """The highest offset at least ``needed`` of ``acks`` reached (-1 when too few acks)."""
    if needed <= 0:
        return NO_LIMIT
    if len(acks) < needed:
        return -1
    return sorted(acks, reverse=True)[needed - 1]


NO_LIMIT = (1 << 63) - 1


class GroupTransferService:
    def __init__(self, acked_offset: Callable[[int], int]) -> None:
        """``acked_offset(need_ack_nums)``: the highest CommitLog offset that enough replicas
        (master included) hold now; one call answers every waiter with that need."""
        self._acked_offset = acked_offset
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []

    async def wait(self, next_offset: int, need_ack_nums: int, timeout_ms: int) -> bool:
        """True once enough replicas acked ``next_offset``; False after ``timeout_ms``."""
        if next_offset <= self._acked_offset(need_ack_nums):
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry = (next_offset, need_ack_nums, fut)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(fut, max(0, timeout_ms) / 1000)
        except TimeoutError:
            log.warning("transfer message to slave timeout, offset: %d, request acks: %d", next_offset, need_ack_nums)
            return False
        finally:
            try:
                self._waiters.remove(entry)
            except ValueError:
                pass

    def notify(self) -> None:
        """Re-check the waiters (an ack arrived, or the SyncStateSet changed)."""
        if not self._waiters:
            return
        reached: dict[int, int] = {}
        for next_offset, need, fut in list(self._waiters):
            if fut.done():
                continue
            limit = reached.get(need)
            if limit is None:
                limit = reached[need] = self._acked_offset(need)
            if next_offset <= limit:
                fut.set_result(True)

    def pending(self) -> int:
        return len(self._waiters)
