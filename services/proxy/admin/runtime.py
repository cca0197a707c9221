"""ChangeLogLevel, GetProxyRuntimeStats and the proxy's own stacks (PrintThreadStackTrace without
a client id): what this proxy process itself has, not the brokers."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

from orbitmq import __version__
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proxy import errors
from orbitmq.proxy.admin.common import AdminParts

log = logging.getLogger("orbitmq.proxy.admin")

# The process's logger: setup_logging attaches the handlers here, so its level decides.
PROCESS_LOGGER = "orbitmq"
TRACE = 5  # below DEBUG: Python's logging has no TRACE, RocketMQ's logback has
logging.addLevelName(TRACE, "TRACE")
_LEVELS = {apb.ChangeLogLevelRequest.TRACE: TRACE, apb.ChangeLogLevelRequest.DEBUG: logging.DEBUG,
           apb.ChangeLogLevelRequest.INFO: logging.INFO, apb.ChangeLogLevelRequest.WARN: logging.WARNING,
           apb.ChangeLogLevelRequest.ERROR: logging.ERROR}


def change_log_level(request: apb.ChangeLogLevelRequest) -> apb.ChangeLogLevelResponse:
    """The process logger's level at run time (upstream's proxy sets its root logger); the
    response has no Status, so an unknown level is said in the remark and nothing changes."""
    level = _LEVELS.get(request.level)
    logger = logging.getLogger(PROCESS_LOGGER)
    if level is None:
        return apb.ChangeLogLevelResponse(remark=f"unknown log level {request.level}: level unchanged "
                                                 f"({logging.getLevelName(logger.getEffectiveLevel())})")
    before = logging.getLevelName(logger.getEffectiveLevel())
    logger.setLevel(level)
    after = logging.getLevelName(level)
    log.warning("log level changed from %s to %s by an Admin ChangeLogLevel call", before, after)
    return apb.ChangeLogLevelResponse(remark=f"log level of {PROCESS_LOGGER} changed from {before} to {after}")


def proxy_stacks() -> str:
    """Every thread's stack, then every asyncio task's (a jstack of this process)."""
    frames = sys._current_frames()
    out = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        out.append(f'"{thread.name}" daemon={thread.daemon} ident={thread.ident}')
        if frame is not None:
            out.append("".join(traceback.format_stack(frame)).rstrip())
        out.append("")
    try:
        tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    except RuntimeError:  # no running loop (not reached from the servicer)
        tasks = []
    for task in tasks:
        out.append(f'task "{task.get_name()}" {"done" if task.done() else "pending"}')
        stack = task.get_stack(limit=32)
        out.append("".join(traceback.format_list(traceback.extract_stack(stack[-1]) if stack else [])).rstrip()
                   or f"  {task.get_coro()!r}")
        out.append("")
    return "\n".join(out)


class RuntimeStats:
    """GetProxyRuntimeStats: rates between two calls (since start for the first), counts now."""

    def __init__(self, parts: AdminParts) -> None:
        self.parts = parts
        self._last: tuple[float, int, int] = (parts.started_at, 0, 0)

    def _totals(self) -> tuple[int, int]:
        """(messages sent, messages delivered) through this proxy, from its metrics' counters."""
        metrics = self.parts.metrics
        if metrics is None:
            return 0, 0
        sent = sum(slot[0] for slot in list(metrics._sent.values()))
        received = sum(slot[0] for slot in list(metrics._received.values()))
        return sent, received

    def answer(self) -> apb.GetProxyRuntimeStatsResponse:
        parts = self.parts
        now = time.monotonic()
        sent, received = self._totals()
        then, sent_before, received_before = self._last
        self._last = (now, sent, received)
        elapsed = max(now - then, 1e-3)
        producers = consumers = 0
        for client in list(parts.clients.clients.values()):
            if client.settings is None:
                continue
            if client.is_producer:
                producers += 1
            elif client.group is not None:
                consumers += 1
        remoting = parts.remoting()
        remoting_connections = len(remoting._server.channels) if remoting is not None else 0
        connections = parts.clients.telemetry_streams + remoting_connections
        messaging = parts.messaging
        in_flight = sum(messaging.in_flight)
        held = messaging.held_receives
        status = errors.status(errors.Code.OK, f"OK inFlightCalls={in_flight} heldLongPolls={held} "
                                               f"telemetryStreams={parts.clients.telemetry_streams} "
                                               f"remotingConnections={remoting_connections} "
                                               f"grpcClients={len(parts.clients.clients)}")
        return apb.GetProxyRuntimeStatsResponse(
            status=status, proxy_name=parts.config.proxy_name, version=f"OrbitMQ {__version__}",
            in_tps=round((sent - sent_before) / elapsed, 2), out_tps=round((received - received_before) / elapsed, 2),
            connections=connections, producers=producers, consumers=consumers)
