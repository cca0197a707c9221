"""tests/compat runs in `make test`'s two-worker pass: each module stays on one worker.

Its modules start Apache RocketMQ's JVMs (module-scoped clusters, 1-3 GiB each); `--dist loadgroup`
with one xdist_group per module starts each cluster once, on one worker, while the other worker
runs other tests. None of them asserts anything about time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path)).resolve()
        if _HERE in path.parents and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(f"compat-{path.stem}"))
