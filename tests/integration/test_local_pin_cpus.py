"""`orbitmq local --pin-cpus`: the proxy process and the broker child each on a CPU of their own."""

from __future__ import annotations

import os

import pytest

from orbitmq.local import pin_to_cpu
from tests.integration.test_local_broker_process import _children
from tests.support import ProcessRunner, free_port

needs_two_cpus = pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                                    reason="CPU pinning needs Linux and two allowed CPUs")


def _thread_masks(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(int(tid))) for tid in os.listdir(f"/proc/{pid}/task")}


@needs_two_cpus
def test_pin_cpus_puts_proxy_and_broker_on_separate_cpus(procs: ProcessRunner, tmp_path) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    ports = [free_port() for _ in range(3)]
    proc = procs.start("local", ["--data-dir", str(tmp_path / "data"), "--namesrv-port", str(ports[0]),
                                 "--broker-port", str(ports[1]), "--proxy-port", str(ports[2]), "--pin-cpus"],
                       ready_text="Press Ctrl-C", ready_port=ports[2], timeout=30)
    (broker,) = _children(proc.pid)
    # Every thread, grpc's own included, follows its process's pin.
    assert _thread_masks(proc.pid) == {frozenset({allowed[0]})}
    assert _thread_masks(broker) == {frozenset({allowed[1]})}
    assert proc.stop() == 0
    assert "OrbitMQ stopped." in proc.log_text()


def test_without_pin_cpus_affinity_is_left_alone(procs: ProcessRunner, tmp_path) -> None:
    allowed = frozenset(os.sched_getaffinity(0))
    ports = [free_port() for _ in range(3)]
    proc = procs.start("local", ["--data-dir", str(tmp_path / "data"), "--namesrv-port", str(ports[0]),
                                 "--broker-port", str(ports[1]), "--proxy-port", str(ports[2])],
                       ready_text="Press Ctrl-C", ready_port=ports[2], timeout=30)
    (broker,) = _children(proc.pid)
    assert _thread_masks(proc.pid) == {allowed}
    assert _thread_masks(broker) == {allowed}
    assert proc.stop() == 0


def test_pin_to_a_missing_cpu_is_refused_and_changes_nothing() -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    assert pin_to_cpu(10_000) is False
    if before is not None:
        assert os.sched_getaffinity(0) == before
