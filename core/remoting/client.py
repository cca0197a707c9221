"""RemotingClient: pooled, multiplexed connections to many "host:port" addresses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
from collections.abc import Callable

from orbitmq.remoting.channel import DEFAULT_MAX_CONCURRENT_REQUESTS, Channel
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import (
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from orbitmq.remoting.framing import DEFAULT_MAX_FRAME_SIZE
from orbitmq.remoting.processor import Processor, ProcessorTable
from orbitmq.remoting.protocol import RemotingCommand

log = logging.getLogger("orbitmq.remoting")

# A connection left after GO_AWAY is closed by its server when its graceful wait ends, else after this.
GO_AWAY_DRAIN_SECONDS = 60.0


def split_address(addr: str) -> tuple[str, int]:
    """"host:port" or "[v6]:port" -> (host, port)."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RemotingConnectError(addr, ValueError("address must be host:port"))
    return host.strip("[]"), int(port)


class RemotingClient:
    """Lazily connects per address; every connection carries many requests at once.

    A connection that breaks fails its in-flight requests and is dropped from the pool, so the
    next call reconnects (NettyRemotingClient.channelTables).
    """

    def __init__(self, *, connect_timeout: float = 3.0, connections_per_address: int = 1,
                 max_in_flight: int = 65535, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.connect_timeout = connect_timeout
        self._per_address = max(1, connections_per_address)
        self._max_frame_size = max_frame_size
        self._in_flight = asyncio.Semaphore(max_in_flight)
        self._processors = ProcessorTable()
        self._pool: dict[str, list[Channel]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        # RPCHook.doBeforeRequest (e.g. ACL signing, orbitmq.auth.client); None costs one check.
        self.rpc_hook: Callable[[RemotingCommand], None] | None = None
        # tls.enable: connections made from now on use TLS (orbitmq.remoting.tls.client_ssl_context)
        self.ssl_context: ssl.SSLContext | None = None
        # NettyClientConfig#enableReconnectForGoAway: a GO_AWAY answer (the server is shutting
        # down gracefully) is retried once on a new connection to the same address.
        self.reconnect_for_go_away = True
        self._retiring: set[asyncio.Task[None]] = set()

    def register_processor(self, code: int, processor: Processor) -> None:
        """Handle server->client requests (e.g. CHECK_TRANSACTION_STATE) with this code."""
        self._processors.register(code, processor)

    def register_default_processor(self, processor: Processor) -> None:
        self._processors.register_default(processor)

    async def get_channel(self, addr: str) -> Channel:
        pooled = self._pool.get(addr)
        if self._per_address == 1 and pooled and pooled[0].is_active:
            return pooled[0]  # the common case, without building the list of live channels
        live = [c for c in self._pool.get(addr, ()) if c.is_active]
        if len(live) >= self._per_address:
            return random.choice(live)
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            live = [c for c in self._pool.get(addr, ()) if c.is_active]
            if len(live) >= self._per_address:
                return random.choice(live)
            channel = await self._connect(addr)
            self._pool.setdefault(addr, []).append(channel)
            return channel

    async def _connect(self, addr: str) -> Channel:
        if self._closed:
            raise RemotingConnectError(addr, RuntimeError("client is closed"))
        host, port = split_address(addr)
        loop = asyncio.get_running_loop()

        def factory() -> Channel:
            return Channel(self._processors, max_frame_size=self._max_frame_size,
                           max_concurrent_requests=DEFAULT_MAX_CONCURRENT_REQUESTS)

        try:
            _, channel = await asyncio.wait_for(loop.create_connection(factory, host, port, ssl=self.ssl_context),
                                                self.connect_timeout)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise RemotingConnectError(addr, exc) from exc
        channel.on_close(lambda ch: self._forget(addr, ch))
        return channel

    def _forget(self, addr: str, channel: Channel) -> None:
        channels = self._pool.get(addr)
        if channels and channel in channels:
            channels.remove(channel)
            if not channels:
                self._pool.pop(addr, None)

    async def _acquire_slot(self, addr: str, timeout: float) -> None:  # noqa: ASYNC109
        if not self._in_flight.locked():
            # A free slot is taken without suspending: awaiting acquire() directly skips the
            # Task that wait_for would create for every request.
            await self._in_flight.acquire()
            return
        try:
            await asyncio.wait_for(self._in_flight.acquire(), timeout)
        except TimeoutError:
            raise RemotingTooMuchRequestError(
                f"invoke to {addr}: too many requests in flight, waited {timeout * 1000:.0f}ms") from None

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:  # noqa: ASYNC109
        """Send ``request`` and return the response (RemotingTimeoutError / RemotingConnectError)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        slots = self._in_flight
        if slots._value > 0 and not slots._waiters:
            # What Semaphore.acquire() does with a free slot and nobody queued, without its coroutine
            # and the waiter scan of locked(); anything else takes the full path.
            slots._value -= 1
        else:
            await self._acquire_slot(addr, timeout)
        try:
            pooled = self._pool.get(addr)
            if self._per_address == 1 and pooled and pooled[0].is_active:
                channel = pooled[0]  # the common case, without the get_channel coroutine
            else:
                channel = await self.get_channel(addr)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RemotingTimeoutError(addr, timeout, request.opaque)
            response = await channel.invoke(request, remaining)
            if response.code == ResponseCode.GO_AWAY:
                return await self._after_go_away(addr, channel, request, deadline, timeout)
            return response
        finally:
            slots.release()

    async def _after_go_away(self, addr: str, channel: Channel, request: RemotingCommand, deadline: float,
                             timeout: float) -> RemotingCommand:  # noqa: ASYNC109
        """NettyRemotingClient#invokeImpl on GO_AWAY: leave the old connection (it closes once its
        other requests are answered), retry on a new one within the same deadline; a second GO_AWAY
        fails the call as upstream's "Receive GO_AWAY twice"."""
        if not self.reconnect_for_go_away:
            raise RemotingSendRequestError(addr, f"Receive GO_AWAY from {channel.remote_address}")
        log.info("Receive go away from %s (%s), reconnecting", addr, channel.remote_address)
        self._retire(addr, channel)
        new_channel = await self.get_channel(addr)
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise RemotingTimeoutError(addr, timeout, request.opaque)
        response = await new_channel.invoke(request, remaining)
        if response.code == ResponseCode.GO_AWAY:
            self._retire(addr, new_channel)
            raise RemotingSendRequestError(addr, f"Receive GO_AWAY twice from {new_channel.remote_address}")
        return response

    def _retire(self, addr: str, channel: Channel) -> None:
        pooled = self._pool.get(addr)
        if pooled is None or channel not in pooled:
            return  # another request on it saw GO_AWAY first
        pooled.remove(channel)
        if not pooled:
            del self._pool[addr]
        task = asyncio.ensure_future(self._close_when_answered(channel))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    @staticmethod
    async def _close_when_answered(channel: Channel, max_wait: float = GO_AWAY_DRAIN_SECONDS) -> None:  # noqa: ASYNC109
        """The server closes the connection when its graceful wait ends; requests still on it get
        their answers (GO_AWAY ones retry themselves) until then, or until ``max_wait``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(channel.wait_closed(), max_wait)
        await channel.close()

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> None:  # noqa: ASYNC109
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        await self._acquire_slot(addr, timeout)
        try:
            channel = await self.get_channel(addr)
            await channel.invoke_oneway(request)
        finally:
            self._in_flight.release()

    async def close_channel(self, addr: str) -> None:
        for channel in list(self._pool.pop(addr, ())):
            await channel.close()

    async def close(self) -> None:
        self._closed = True
        for addr in list(self._pool):
            await self.close_channel(addr)
        for task in list(self._retiring):
            task.cancel()
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
