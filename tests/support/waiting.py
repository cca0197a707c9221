"""Waiting for a condition on real processes, with what was last seen in the failure."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def wait_until(check: Callable[[], Awaitable[object]], what: str, timeout: float = 40.0,  # noqa: ASYNC109
                     seen: Callable[[], object] | None = None) -> None:
    """Poll ``check`` until it returns something true; an exception counts as "not yet". The
    AssertionError names ``what``, the last result or exception and ``seen()`` when given."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = await check()
            if last:
                return
        except Exception as exc:  # noqa: BLE001 -- not there yet
            last = exc
        if time.monotonic() > deadline:
            extra = f"; seen: {seen()!r}" if seen is not None else ""
            raise AssertionError(f"timed out waiting for {what} (last: {last!r}{extra})")
        await asyncio.sleep(0.3)
