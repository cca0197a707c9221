"""Start OrbitMQ services as subprocesses with test-friendly settings (loopback, free port, tmp dirs).

A test broker's config comes from :func:`broker_conf` (the keys every test broker shares, the
test's own on top), written by :func:`write_broker_conf`; :func:`boot_broker` starts a broker
from a written conf, :func:`start_broker` / :func:`astart_broker` do both under a work dir.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .net import free_port, free_port_pair
from .process import ManagedProcess, ProcessRunner

NAMESRV_BOOT_TEXT = "The Name Server boot success. serializeType=JSON"
# BrokerStartup's "The broker[...] boot success": the port alone could be answered before the
# broker registered, or by another process.
BROKER_BOOT_TEXT = "boot success"
BROKER_READY_TIMEOUT = 30.0
# A test writes little: 4 MiB CommitLog segments instead of 1 GiB ones fallocated per store.
TEST_COMMITLOG_SIZE = 4 * 1024 * 1024


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
                         name: str | None = None, env: dict[str, str] | None = None) -> tuple[ManagedProcess, str]:
    """``start_namesrv`` for async tests; ``env`` adds to this one process's environment."""
    port = free_port()
    proc = await runner.astart("namesrv", _namesrv_args(runner, port, overrides, kv_path), ready_port=port,
                               ready_text=NAMESRV_BOOT_TEXT, name=name, env=env)
    return proc, f"127.0.0.1:{port}"


# ---- brokers ------------------------------------------------------------------------------------

def broker_conf(port: int | str, store: Path | str, **keys: object) -> dict[str, str]:
    """broker.conf's keys for one test broker: DefaultCluster/broker-a on 127.0.0.1:``port``, its
    store under ``store``, no NameServer, 4 MiB CommitLog segments. ``keys`` are RocketMQ's
    (``brokerName=...``, ``namesrvAddr=...``) and win; a key given None is left out, so the
    broker's default applies. Values come back as strings (``BrokerConfig.from_mapping`` takes
    them so)."""
    values: dict[str, object] = {
        "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerIP1": "127.0.0.1",
        "listenPort": port, "storePathRootDir": store, "namesrvAddr": "",
        "mappedFileSizeCommitLog": TEST_COMMITLOG_SIZE, **keys}
    return {k: str(v) for k, v in values.items() if v is not None}


def write_properties(path: Path, values: Mapping[str, object]) -> Path:
    """``key=value`` lines, the format of broker.conf and controller.conf (``-c``); returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
    return path


def write_broker_conf(path: Path, port: int | str, store: Path | str, **keys: object) -> Path:
    """:func:`broker_conf` written to ``path``; returns ``path``."""
    return write_properties(path, broker_conf(port, store, **keys))


def _broker_argv(conf: Path, args: Sequence[str]) -> list[str]:
    return ["-c", str(conf), *args]


def boot_broker(runner: ProcessRunner, conf: Path, port: int, *args: str, name: str | None = None,
                timeout: float = BROKER_READY_TIMEOUT) -> ManagedProcess:
    """``orbitmq broker -c conf args...``, returned once it listens on ``port`` and logged its boot."""
    return runner.start("broker", _broker_argv(conf, args), ready_port=port, ready_text=BROKER_BOOT_TEXT,
                        name=name, timeout=timeout)


async def aboot_broker(runner: ProcessRunner, conf: Path, port: int, *args: str, name: str | None = None,
                       timeout: float = BROKER_READY_TIMEOUT,  # noqa: ASYNC109
                       host: str = "127.0.0.1", prefix: Sequence[str] = ()) -> ManagedProcess:
    """``boot_broker`` for async tests; ``host``/``prefix`` for a broker in a network namespace."""
    return await runner.astart("broker", _broker_argv(conf, args), ready_port=(host, port),
                               ready_text=BROKER_BOOT_TEXT, name=name, timeout=timeout, prefix=prefix)


def _conf_in(workdir: Path, name: str, namesrv: str, port: int | None, store: Path | None,
             keys: dict[str, object]) -> tuple[Path, int]:
    port = port or free_port_pair()  # listenPort - 2 and + 1: the fast server, the HA port
    conf = write_broker_conf(workdir / f"{name}.conf", port, store or workdir / "store", namesrvAddr=namesrv,
                             **keys)
    return conf, port


def start_broker(runner: ProcessRunner, workdir: Path, namesrv: str = "", name: str = "broker", *,
                 port: int | None = None, store: Path | None = None, **keys: object) -> tuple[ManagedProcess, str]:
    """One broker (:func:`broker_conf` plus ``keys``) registered with ``namesrv``, on ``port``
    (default: a free one), its conf ``workdir/<name>.conf`` and its store ``store`` (default
    ``workdir/store``); ``name`` names the process and its log. Returns the process and its
    "host:port"."""
    conf, port = _conf_in(workdir, name, namesrv, port, store, keys)
    return boot_broker(runner, conf, port, name=name), f"127.0.0.1:{port}"


async def astart_broker(runner: ProcessRunner, workdir: Path, namesrv: str = "", name: str = "broker", *,
                        port: int | None = None, store: Path | None = None,
                        **keys: object) -> tuple[ManagedProcess, str]:
    """``start_broker`` for async tests."""
    conf, port = _conf_in(workdir, name, namesrv, port, store, keys)
    return await aboot_broker(runner, conf, port, name=name), f"127.0.0.1:{port}"


class BrokerCluster:
    """One broker registered with the NameServer ``namesrv``, its conf (``workdir/broker.conf``,
    store ``workdir/store``) written once, so the broker can be stopped or killed and started again
    on its store and port; what ``broker_cluster`` of tests/integration/conftest.py starts."""

    def __init__(self, runner: ProcessRunner, workdir: Path, namesrv: str, **keys: object) -> None:
        self.runner = runner
        self.namesrv = namesrv
        self.port = free_port_pair()
        self.addr = f"127.0.0.1:{self.port}"
        self.conf = write_broker_conf(workdir / "broker.conf", self.port, workdir / "store", namesrvAddr=namesrv,
                                      **keys)
        self.broker: ManagedProcess | None = None

    async def start_broker(self) -> ManagedProcess:
        self.broker = await aboot_broker(self.runner, self.conf, self.port)
        return self.broker

    async def stop_broker(self) -> None:
        """A clean shutdown (SIGTERM), which must exit 0."""
        assert self.broker is not None
        assert await self.broker.async_stop() == 0, self.broker.log_tail()
