"""Shared helpers for integration, interop and chaos tests (ports, subprocesses)."""

from .net import async_wait_for_port, free_port, port_open, wait_for_port
from .process import ManagedProcess, ProcessFailed, ProcessRunner
from .services import NAMESRV_BOOT_TEXT, astart_namesrv, start_broker, start_namesrv

__all__ = [
    "NAMESRV_BOOT_TEXT",
    "ManagedProcess",
    "ProcessFailed",
    "ProcessRunner",
    "astart_namesrv",
    "async_wait_for_port",
    "free_port",
    "port_open",
    "start_broker",
    "start_namesrv",
    "wait_for_port",
]
