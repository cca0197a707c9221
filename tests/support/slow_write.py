"""A blocking writer whose first call parks on its worker thread until the test releases it.

Tests of the newest-snapshot-wins writes use it to make an older write finish after a newer one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class SlowFirstCall:
    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            self.release.wait(5)
        return self.real(*args)
