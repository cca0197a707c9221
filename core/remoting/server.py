"""RemotingServer: asyncio TCP server speaking Remoting (NettyRemotingServer's role)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from orbitmq.common.file_watch import FileWatchService, reload_on_change
from orbitmq.remoting import tls as remoting_tls
from orbitmq.remoting.channel import (
    DEFAULT_FRAME_READ_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_MAX_WRITE_BUFFER,
    Channel,
)
from orbitmq.remoting.framing import DEFAULT_MAX_FRAME_SIZE
from orbitmq.remoting.processor import Processor, ProcessorTable

log = logging.getLogger("orbitmq.remoting")

# Connections one server accepts at once (not an upstream key: Netty accepts without bound);
# beyond it a new connection is closed at once, so idle sockets cannot exhaust descriptors.
DEFAULT_MAX_CONNECTIONS = 10000


def server_limits(config: object) -> dict[str, Any]:
    """RemotingServer keyword arguments from a config carrying the NettyServerConfig limit keys."""
    idle = getattr(config, "server_channel_max_idle_time_seconds", 120)
    frame_ms = getattr(config, "remoting_frame_read_timeout_millis", 30_000)
    return {
        "channel_max_idle_seconds": float(idle) if idle > 0 else None,
        "max_connections": getattr(config, "server_max_connections", DEFAULT_MAX_CONNECTIONS),
        "frame_read_timeout_seconds": frame_ms / 1000.0 if frame_ms > 0 else None,
        "write_buffer_high_water_mark": getattr(config, "write_buffer_high_water_mark", 0),
        "write_buffer_low_water_mark": getattr(config, "write_buffer_low_water_mark", 0),
        "tls_config": config,  # tls.server.mode and its certificate keys (orbitmq.remoting.tls)
        # NettyServerConfig: enableShutdownGracefully answers GO_AWAY for shutdownWaitTimeSeconds
        "shutdown_wait_seconds": (float(getattr(config, "shutdown_wait_time_seconds", 30))
                                  if getattr(config, "enable_shutdown_gracefully", False) else None),
    }


class RemotingServer:
    """Accepts connections and routes their requests to registered processors by request code.

    Each accepted connection becomes a Channel the processors receive, so they can call the client
    back (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) or watch for its closing.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
                 channel_max_idle_seconds: float | None = 120.0,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 frame_read_timeout_seconds: float | None = DEFAULT_FRAME_READ_TIMEOUT_SECONDS,
                 write_buffer_high_water_mark: int = 0, write_buffer_low_water_mark: int = 0,
                 max_write_buffer: int = DEFAULT_MAX_WRITE_BUFFER, tls_config: Any = None,
                 reuse_port: bool = False, shutdown_wait_seconds: float | None = None) -> None:
        self.host = host
        # enableShutdownGracefully: close() first answers GO_AWAY this long (None: closes at once)
        self.shutdown_wait_seconds = shutdown_wait_seconds
        # SO_REUSEPORT: processes sharing one port (the proxy's `--workers N`)
        self._reuse_port = reuse_port
        self._tls_config = tls_config  # None or disabled: plaintext only
        # abusive clients (issue 16): connection count, trickled frames, peers that do not read
        self._max_connections = max_connections
        self._frame_read_timeout = frame_read_timeout_seconds
        self._high_water = write_buffer_high_water_mark  # writeBufferHighWaterMark (0: default)
        self._low_water = write_buffer_low_water_mark  # writeBufferLowWaterMark
        self._max_write_buffer = max_write_buffer
        self.rejected_connections = 0
        # serverChannelMaxIdleTimeSeconds: a peer silent this long is presumed dead and dropped
        self._max_idle_seconds = channel_max_idle_seconds
        self._requested_port = port
        self._max_frame_size = max_frame_size
        self._max_concurrent_requests = max_concurrent_requests
        self._processors = ProcessorTable()
        self._server: asyncio.base_events.Server | None = None
        self._tls: remoting_tls.ReloadableServerContext | None = None
        self._cert_watch: FileWatchService | None = None
        self._channels: set[Channel] = set()
        self._connect_listeners: list[Callable[[Channel], object]] = []
        self.port = port

    def register(self, code: int, processor: Processor) -> None:
        self._processors.register(code, processor)

    def register_default(self, processor: Processor) -> None:
        self._processors.register_default(processor)

    def set_guard(self, guard: Callable[[Processor], Processor]) -> None:
        """Wrap every processor, present and future, e.g. with an ACL check (orbitmq.auth)."""
        self._processors.set_guard(guard)

    def on_connect(self, listener: Callable[[Channel], object]) -> None:
        """Call ``listener(channel)`` for every accepted connection (e.g. to add on_close hooks)."""
        self._connect_listeners.append(listener)

    @property
    def channels(self) -> frozenset[Channel]:
        return frozenset(self._channels)

    @property
    def processors(self) -> ProcessorTable:
        """The table requests of this server's connections run through (guard included): an
        in-process caller (the proxy's local mode, services/proxy/local.py) dispatches to it."""
        return self._processors

    def _adopt(self, channel: Any) -> None:
        """Count the channel as open until it closes, and run the connect listeners for it."""
        self._channels.add(channel)
        channel.on_close(self._channels.discard)
        for listener in self._connect_listeners:
            try:
                listener(channel)
            except Exception:
                log.exception("connect listener failed for %s", channel.remote_address)

    def attach(self, channel: Any) -> None:
        """Adopt an in-process channel as if accepted: the connect listeners run for it (the broker
        then forgets its producers and consumers when it closes) and close() closes it."""
        self._adopt(channel)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ctx = None
        if self._tls_config is not None:  # the context may write a self-signed pair: off the loop
            self._tls = await asyncio.to_thread(remoting_tls.ReloadableServerContext, self._tls_config)
            ctx = self._tls.context
            paths = self._tls.watched_paths()
            if paths:  # a new certificate (and key, or trust) is served without a restart
                self._cert_watch = FileWatchService(paths, remoting_tls.CERT_WATCH_INTERVAL_S,
                                                    reload_on_change(self._tls.reload, log), "remoting-tls-watch")
                await self._cert_watch.start()
        if ctx is not None and remoting_tls.server_tls_mode(self._tls_config) == remoting_tls.PERMISSIVE:
            listener = remoting_tls.PermissiveListener(self.host, self._requested_port, self._new_channel, ctx,
                                                       reuse_port=self._reuse_port)
            listener.start()
            self._server = listener  # type: ignore[assignment]
        else:  # plaintext, or TLS only (enforcing)
            self._server = await loop.create_server(self._new_channel, self.host, self._requested_port,
                                                    backlog=1024, reuse_address=True, ssl=ctx,
                                                    reuse_port=self._reuse_port or None)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("remoting server listening on %s:%s", self.host, self.port)

    def _new_channel(self) -> Channel:
        return Channel(self._processors, max_frame_size=self._max_frame_size,
                       max_concurrent_requests=self._max_concurrent_requests,
                       max_idle_seconds=self._max_idle_seconds, on_connected=self._accept,
                       frame_read_timeout_seconds=self._frame_read_timeout,
                       write_buffer_high_water_mark=self._high_water,
                       write_buffer_low_water_mark=self._low_water,
                       pause_reading_on_backlog=True, max_write_buffer=self._max_write_buffer)

    def _accept(self, channel: Channel) -> None:
        if len(self._channels) >= self._max_connections:
            self.rejected_connections += 1
            if self.rejected_connections % 1000 == 1:
                log.warning("refusing %s: %d connections open (max %d)", channel.remote_address,
                            len(self._channels), self._max_connections)
            channel._begin_close()
            return
        self._adopt(channel)

    async def begin_go_away(self) -> None:
        """NettyRemotingServer#shutdown with enableShutdownGracefully: for shutdownWaitTimeSeconds,
        requests of clients newer than 5.3.1 are answered GO_AWAY (they reconnect, through a load
        balancer to another server), older clients are still served, then the server closes. Set
        on every connection at once, also ones accepted during the wait."""
        if self.shutdown_wait_seconds is None or self._processors.go_away or self._server is None:
            return
        self._processors.go_away = True
        log.info("remoting server on %s:%s shutting down gracefully: GO_AWAY for %.0f s", self.host, self.port,
                 self.shutdown_wait_seconds)
        await asyncio.sleep(self.shutdown_wait_seconds)

    async def close(self) -> None:
        await self.begin_go_away()
        if self._cert_watch is not None:
            await self._cert_watch.stop()
            self._cert_watch = None
        if self._server is not None:
            self._server.close()
        for channel in list(self._channels):
            await channel.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
