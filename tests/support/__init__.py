"""Shared helpers for integration, interop and chaos tests (ports, subprocesses, broker configs)."""

from .net import async_wait_for_port, free_port, port_open, wait_for_port
from .process import ManagedProcess, ProcessFailed, ProcessRunner, running
from .services import (
    BROKER_BOOT_TEXT,
    NAMESRV_BOOT_TEXT,
    TEST_COMMITLOG_SIZE,
    BrokerCluster,
    aboot_broker,
    astart_broker,
    astart_namesrv,
    boot_broker,
    broker_conf,
    start_broker,
    start_namesrv,
    write_broker_conf,
    write_properties,
)

__all__ = [
    "BROKER_BOOT_TEXT",
    "NAMESRV_BOOT_TEXT",
    "TEST_COMMITLOG_SIZE",
    "BrokerCluster",
    "ManagedProcess",
    "ProcessFailed",
    "ProcessRunner",
    "aboot_broker",
    "astart_broker",
    "astart_namesrv",
    "async_wait_for_port",
    "boot_broker",
    "broker_conf",
    "free_port",
    "port_open",
    "running",
    "start_broker",
    "start_namesrv",
    "wait_for_port",
    "write_broker_conf",
    "write_properties",
]
