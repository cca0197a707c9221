"""Start-up objects are moved out of the collector's reach once a server is up."""

from __future__ import annotations

import gc

from orbitmq.common.runtime import freeze_startup_objects


def test_freeze_startup_objects_moves_live_objects_to_the_permanent_generation() -> None:
    keep = [object() for _ in range(1000)]  # noqa: F841 -- live objects to freeze
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() >= 1000
        assert gc.isenabled()  # the collector still runs for what comes later
    finally:
        gc.unfreeze()
