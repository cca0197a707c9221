"""Start OrbitMQ services as subprocesses with test-friendly settings (loopback, free port, tmp dirs)."""

from __future__ import annotations

from pathlib import Path

from .net import free_port
from .process import ManagedProcess, ProcessRunner

NAMESRV_BOOT_TEXT = "The Name Server boot success. serializeType=JSON"


def _namesrv_args(runner: ProcessRunner, port: int, overrides: tuple[str, ...], kv_path: Path | None) -> list[str]:
    kv = kv_path or runner.workdir / f"namesrv-{port}" / "kvConfig.json"
    return [f"listenPort={port}", "bindAddress=127.0.0.1", f"kvConfigPath={kv}", *overrides]


def start_namesrv(runner: ProcessRunner, *overrides: str, kv_path: Path | None = None,
                  name: str | None = None) -> tuple[ManagedProcess, str]:
    """``orbitmq namesrv`` on a free loopback port; returns the process and its "host:port"."""
    port = free_port()
    proc = runner.start("namesrv", _namesrv_args(runner, port, overrides, kv_path), ready_port=port,
                        ready_text=NAMESRV_BOOT_TEXT, name=name)
    return proc, f"127.0.0.1:{port}"


async def astart_namesrv(runner: ProcessRunner, *overrides: str, kv_path: Path | None = None,
                         name: str | None = None) -> tuple[ManagedProcess, str]:
    """``start_namesrv`` for async tests."""
    port = free_port()
    proc = await runner.astart("namesrv", _namesrv_args(runner, port, overrides, kv_path), ready_port=port,
                               ready_text=NAMESRV_BOOT_TEXT, name=name)
    return proc, f"127.0.0.1:{port}"


def start_broker(runner: ProcessRunner, workdir: Path, namesrv: str, name: str = "broker",
                 **extra: object) -> tuple[ManagedProcess, str]:
    """One broker (DefaultCluster/broker-a, 4 MiB CommitLog segments) registered with ``namesrv``
    on a free loopback port, its store and broker.conf under ``workdir``; ``extra``: more keys.
    Returns the process and its "host:port"."""
    port = free_port()
    conf = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerIP1": "127.0.0.1",
            "listenPort": port, "storePathRootDir": str(workdir / "store"), "namesrvAddr": namesrv,
            "mappedFileSizeCommitLog": 4 * 1024 * 1024, **extra}
    conf_path = workdir / f"{name}.conf"
    conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()), encoding="utf-8")
    proc = runner.start("broker", ["-c", str(conf_path)], ready_port=port, ready_text="boot success", name=name,
                        timeout=30)
    return proc, f"127.0.0.1:{port}"
