"""`orbitmq local` runs its broker in a child process: it must never outlive the parent."""

from __future__ import annotations

import os
import time

from tests.support import ProcessRunner, free_port


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_broker_child_stops_when_the_parent_is_killed(procs: ProcessRunner, tmp_path) -> None:
    ports = [free_port() for _ in range(3)]
    data = tmp_path / "data"
    proc = procs.start("local", ["--data-dir", str(data), "--namesrv-port", str(ports[0]),
                                 "--broker-port", str(ports[1]), "--proxy-port", str(ports[2]),
                                 "--log-level", "INFO"],
                       ready_text="Press Ctrl-C", ready_port=ports[2], timeout=30)
    children = _children(proc.pid)
    assert len(children) == 1, children
    broker = children[0]
    with open(f"/proc/{broker}/cmdline", "rb") as f:
        assert b"--broker-child" in f.read()

    proc.kill()  # SIGKILL: no chance to stop the child itself
    deadline = time.monotonic() + 20
    while _alive(broker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(broker), "the broker child outlived its parent"
    # It noticed the closed pipe and shut down cleanly: offsets and configs persisted.
    assert "shutdown OK" in proc.log_text()
    assert (data / "store" / "config" / "consumerOffset.json").is_file()


def test_one_process_mode_has_no_child(procs: ProcessRunner, tmp_path) -> None:
    ports = [free_port() for _ in range(3)]
    proc = procs.start("local", ["--data-dir", str(tmp_path / "data"), "--namesrv-port", str(ports[0]),
                                 "--broker-port", str(ports[1]), "--proxy-port", str(ports[2]), "--one-process"],
                       ready_text="Press Ctrl-C", ready_port=ports[2], timeout=30)
    assert _children(proc.pid) == []
    assert proc.stop() == 0
    assert "OrbitMQ stopped." in proc.log_text()
