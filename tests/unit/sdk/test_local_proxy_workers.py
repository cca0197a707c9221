"""`orbitmq local --proxy-workers`: its default and the combinations it refuses."""

from __future__ import annotations

import os

import pytest

from orbitmq.local import LocalCluster, default_proxy_workers, main


def test_default_leaves_one_allowed_cpu_to_the_broker(monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert default_proxy_workers() == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert default_proxy_workers() == 1


def test_refused_combinations(tmp_path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LocalCluster(tmp_path, proxy_workers=0)
    with pytest.raises(ValueError, match="--pin-cpus"):
        LocalCluster(tmp_path, pin_cpus=True, proxy_workers=2)


def test_the_command_says_why(tmp_path, capsys) -> None:
    assert main(["--data-dir", str(tmp_path), "--pin-cpus", "--proxy-workers", "2"]) == 1
    assert "--pin-cpus pins the one proxy process" in capsys.readouterr().err
