"""HA flow control (``haFlowControlEnable``, ``maxHaTransferByteInSecond``): a per-connection byte
budget for each one-second window, as upstream's FlowMonitor.

Upstream resets the count on a timer thread and, once the budget is spent, sends empty frames
until the reset. Here the window rolls over lazily on the next look, and a connection that has
spent its budget sleeps until the window ends instead of spinning.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from orbitmq.broker.store.config import MessageStoreConfig

log = logging.getLogger("orbitmq.broker.ha")

_WINDOW_S = 1.0
_UNLIMITED = 2**31 - 1  # Integer.MAX_VALUE: what upstream answers without flow control


class FlowMonitor:
    def __init__(self, config: MessageStoreConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._window_start = clock()
        self._in_window = 0
        self._last_warning = -_WINDOW_S

    def _roll(self) -> None:
        now = self._clock()
        if now - self._window_start >= _WINDOW_S:
            self._window_start = now
            self._in_window = 0

    def can_transfer_max_bytes(self) -> int:
        """Bytes this connection may still send in the current second."""
        if not self.config.ha_flow_control_enable:
            return _UNLIMITED
        self._roll()
        return max(self.config.max_ha_transfer_byte_in_second - self._in_window, 0)

    def add_transferred(self, count: int) -> None:
        if not self.config.ha_flow_control_enable:
            return  # nothing to budget: the transfer loop pays no clock read per batch
        self._roll()
        self._in_window += count

    def seconds_to_next_window(self) -> float:
        return max(self._window_start + _WINDOW_S - self._clock(), 0.0)

    async def allowance(self, size: int, peer: str) -> int:
        """How many of ``size`` bytes may be sent now; 0 after waiting out a spent window (look
        again: the data may have moved on meanwhile)."""
        budget = self.can_transfer_max_bytes()
        if budget > 0:
            return min(size, budget)
        self.warn_throttled(peer)
        await asyncio.sleep(self.seconds_to_next_window())
        return 0

    def warn_throttled(self, peer: str) -> None:
        """Upstream's "Trigger HA flow control" line, at most once a second."""
        now = self._clock()
        if now - self._last_warning >= _WINDOW_S:
            self._last_warning = now
            log.warning("Trigger HA flow control to %s, max transfer speed %.2fKB/s", peer,
                        self.config.max_ha_transfer_byte_in_second / 1024.0)
