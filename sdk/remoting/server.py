"""RemotingServer: asyncio TCP server speaking Remoting (NettyRemotingServer's role)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from orbitmq.remoting.channel import DEFAULT_MAX_CONCURRENT_REQUESTS, Channel
from orbitmq.remoting.framing import DEFAULT_MAX_FRAME_SIZE
from orbitmq.remoting.processor import Processor, ProcessorTable

log = logging.getLogger("orbitmq.remoting")


class RemotingServer:
    """Accepts connections and routes their requests to registered processors by request code.

    Each accepted connection becomes a Channel the processors receive, so they can call the client
    back (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) or watch for its closing.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
                 channel_max_idle_seconds: float | None = 120.0) -> None:
        self.host = host
        # serverChannelMaxIdleTimeSeconds: a peer silent this long is presumed dead and dropped
        self._max_idle_seconds = channel_max_idle_seconds
        self._requested_port = port
        self._max_frame_size = max_frame_size
        self._max_concurrent_requests = max_concurrent_requests
        self._processors = ProcessorTable()
        self._server: asyncio.base_events.Server | None = None
        self._channels: set[Channel] = set()
        self._connect_listeners: list[Callable[[Channel], object]] = []
        self.port = port

    def register(self, code: int, processor: Processor) -> None:
        self._processors.register(code, processor)

    def register_default(self, processor: Processor) -> None:
        self._processors.register_default(processor)

    def on_connect(self, listener: Callable[[Channel], object]) -> None:
        """Call ``listener(channel)`` for every accepted connection (e.g. to add on_close hooks)."""
        self._connect_listeners.append(listener)

    @property
    def channels(self) -> frozenset[Channel]:
        return frozenset(self._channels)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_channel, self.host, self._requested_port,
                                                backlog=1024, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("remoting server listening on %s:%s", self.host, self.port)

    def _new_channel(self) -> Channel:
        return Channel(self._processors, max_frame_size=self._max_frame_size,
                       max_concurrent_requests=self._max_concurrent_requests,
                       max_idle_seconds=self._max_idle_seconds, on_connected=self._accept)

    def _accept(self, channel: Channel) -> None:
        self._channels.add(channel)
        channel.on_close(self._channels.discard)
        for listener in self._connect_listeners:
            try:
                listener(channel)
            except Exception:
                log.exception("connect listener failed for %s", channel.remote_address)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for channel in list(self._channels):
            await channel.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
