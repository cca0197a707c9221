"""free_port's draw range: pytest-xdist workers draw from disjoint slices below the ephemeral range."""

from __future__ import annotations

import pytest

from orbitmq.common import net


@pytest.mark.parametrize(("worker", "count"), [("", ""), ("gw0", "1"), ("master", "2"), ("gw5", "2")])
def test_outside_several_workers_the_whole_range(monkeypatch: pytest.MonkeyPatch, worker: str, count: str) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", count)
    assert net._draw_range(32768) == (net.LOW_PORT_FLOOR, 32768)


def test_workers_draw_from_disjoint_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    slices = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(net._draw_range(net._ephemeral_range()[0]))
        start, stop = slices[-1]
        assert all(start <= net.free_port() < stop for _ in range(20))
    (a0, a1), (b0, b1) = slices
    assert a0 == net.LOW_PORT_FLOOR and a1 == b0 and b1 <= net._ephemeral_range()[0] and a1 - a0 >= 1000
