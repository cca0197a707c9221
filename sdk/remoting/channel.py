"""Channel: one multiplexed Remoting connection, usable in both directions.

Either side may send requests on it; responses are matched to waiting callers by opaque, and
incoming requests run as concurrent tasks (bounded) through a ProcessorTable. A malformed frame
closes only this channel.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import (
    RemotingCommandError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from orbitmq.remoting.framing import DEFAULT_MAX_FRAME_SIZE, read_frame, write_command
from orbitmq.remoting.processor import ProcessorTable
from orbitmq.remoting.protocol import RemotingCommand, next_opaque

log = logging.getLogger("orbitmq.remoting")

# Requests of one connection processed at once; beyond it new requests are refused with SYSTEM_BUSY
# (like a full RocketMQ executor queue) instead of stalling the read loop, which must keep reading
# responses that running processors may be waiting for.
DEFAULT_MAX_CONCURRENT_REQUESTS = 10000
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"

CloseListener = Callable[["Channel"], Any]


def _format_addr(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)


class Channel:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 processors: ProcessorTable, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
                 max_idle_seconds: float | None = None) -> None:
        self._reader = reader
        self._max_idle_seconds = max_idle_seconds
        self._writer = writer
        self._processors = processors
        self._max_frame_size = max_frame_size
        self._max_concurrent_requests = max_concurrent_requests
        self._response_table: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._close_listeners: list[CloseListener] = []
        self._closed = False
        self._closed_event = asyncio.Event()
        self.remote_address = _format_addr(writer.get_extra_info("peername"))
        self.local_address = _format_addr(writer.get_extra_info("sockname"))

    def __repr__(self) -> str:
        return f"Channel({self.local_address} -> {self.remote_address})"

    @property
    def is_active(self) -> bool:
        return not self._closed

    def on_close(self, listener: CloseListener) -> None:
        """Call ``listener(channel)`` (sync or async) once when the connection goes away."""
        if self._closed:
            self._run_listener(listener)
        else:
            self._close_listeners.append(listener)

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    # ---- outgoing ---------------------------------------------------------------------------

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:  # noqa: ASYNC109
        """Send a request and wait for the response with the same opaque."""
        if self._closed:
            raise RemotingSendRequestError(self.remote_address, "channel is closed")
        if request.opaque in self._response_table:
            request.opaque = next_opaque()  # a re-sent command must not steal another's response
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._response_table[request.opaque] = future
        try:
            await self._send(request)
            # asyncio.timeout instead of wait_for: no extra waiter future per request.
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise RemotingTimeoutError(self.remote_address, timeout, request.opaque) from None
        finally:
            self._response_table.pop(request.opaque, None)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        request.mark_oneway()
        await self._send(request)

    async def _send(self, command: RemotingCommand) -> None:
        await self._send_frame(command.encode())

    async def _send_frame(self, frame: bytes) -> None:
        if self._closed:
            raise RemotingSendRequestError(self.remote_address, "channel is closed")
        try:
            self._writer.write(frame)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._begin_close()
            raise RemotingSendRequestError(self.remote_address, exc) from exc

    # ---- incoming ---------------------------------------------------------------------------

    async def serve(self) -> None:
        """Read loop; returns when the connection ends (peer closed, error, or bad frame)."""
        try:
            while not self._closed:
                async with asyncio.timeout(self._max_idle_seconds):
                    frame = await read_frame(self._reader, self._max_frame_size)
                if frame is None:
                    break
                command = RemotingCommand.decode(frame)
                if command.is_response:
                    self._complete(command)
                elif len(self._tasks) >= self._max_concurrent_requests:
                    self._reject_overload(command)
                else:
                    task = asyncio.create_task(self._handle_request(command))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        except RemotingCommandError as exc:
            log.warning("closing %s: bad frame: %s", self.remote_address, exc)
        except TimeoutError:
            log.info("closing %s: idle for %ss", self.remote_address, self._max_idle_seconds)
        except asyncio.IncompleteReadError:
            log.debug("%s closed mid-frame", self.remote_address)
        except (ConnectionError, OSError) as exc:
            log.debug("%s connection error: %s", self.remote_address, exc)
        except Exception:  # never let one connection's surprise reach the server
            log.exception("closing %s: unexpected error reading a frame", self.remote_address)
        finally:
            self._begin_close()

    def _complete(self, response: RemotingCommand) -> None:
        future = self._response_table.get(response.opaque)
        if future is None:
            log.debug("response for unknown opaque %s from %s (timed out?)", response.opaque,
                      self.remote_address)
        elif not future.done():
            future.set_result(response)

    def _reject_overload(self, request: RemotingCommand) -> None:
        log.warning("too many requests in flight on %s, refusing code=%s", self.remote_address, request.code)
        if not request.is_oneway:
            write_command(self._writer, request.response_to(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK))

    async def _handle_request(self, request: RemotingCommand) -> None:
        try:
            response = await self._processors.dispatch(request, self)
            if request.is_oneway or response is None or self._closed:
                return
            response.opaque = request.opaque
            response.mark_response()
            response.serialize_type = request.serialize_type
            try:
                frame = response.encode()
            except RemotingCommandError as exc:
                log.warning("cannot encode response to code=%s: %s", request.code, exc)
                frame = request.response_to(ResponseCode.SYSTEM_ERROR, str(exc)).encode()
            try:
                await self._send_frame(frame)
            except RemotingSendRequestError as exc:
                log.debug("response to %s lost: %s", self.remote_address, exc)
        except asyncio.CancelledError:
            pass  # the connection closed while the processor ran

    # ---- closing ----------------------------------------------------------------------------

    def _begin_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        for opaque, future in list(self._response_table.items()):
            if not future.done():
                future.set_exception(RemotingSendRequestError(
                    self.remote_address, f"connection closed before response (opaque={opaque})"))
        for task in list(self._tasks):
            task.cancel()
        listeners, self._close_listeners = self._close_listeners, []
        for listener in listeners:
            self._run_listener(listener)
        self._closed_event.set()

    def _run_listener(self, listener: CloseListener) -> None:
        try:
            result = listener(self)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                task.add_done_callback(_log_listener_failure)
        except Exception:
            log.exception("close listener failed for %s", self.remote_address)

    async def close(self) -> None:
        self._begin_close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


def _log_listener_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("close listener failed", exc_info=task.exception())
