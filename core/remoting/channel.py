"""Channel: one multiplexed Remoting connection, usable in both directions.

Either side may send requests on it; responses are matched to waiting callers by opaque, and
incoming requests run as concurrent tasks (bounded) through a ProcessorTable. A malformed frame
closes only this channel.

The channel is the connection's asyncio Protocol: frames are cut out of the bytes handed to
``data_received`` and dispatched right there, so a frame costs no StreamReader buffering, no
``readexactly`` coroutines and no wake-up of a reader task. Response timeouts share one timer per
channel (a heap of deadlines) instead of a Timeout context and TimerHandle per request.

Outgoing frames written during one pass of the event loop leave together at the end of it: one
``send()`` for the requests (or responses) the pass produced instead of one each. On loopback
the kernel's TCP work for a ``send()`` (delivering to the peer and waking it) is a large part of
what a frame costs its sender; under load a pass produces several frames, and fewer, larger
writes wake the peer less often (docs/benchmarks.md, round 7: the end-to-end tail).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

from orbitmq.remoting.closing import CloseNotifying
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import (
    RemotingCommandError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from orbitmq.remoting.framing import DEFAULT_MAX_FRAME_SIZE
from orbitmq.remoting.processor import ProcessorTable, failed, not_supported
from orbitmq.remoting.protocol import RemotingCommand, decode_command, next_opaque

# MQVersion.Version.V5_3_1.ordinal(): newer clients retry a GO_AWAY answer on a new connection.
GO_AWAY_MIN_VERSION = 473

log = logging.getLogger("orbitmq.remoting")

# Requests of one connection processed at once; beyond it new requests are refused with SYSTEM_BUSY
# (like a full RocketMQ executor queue) instead of stalling the read loop, which must keep reading
# responses that running processors may be waiting for.
DEFAULT_MAX_CONCURRENT_REQUESTS = 10000
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"

_current_task = asyncio.current_task
_LENGTH = struct.Struct(">i")
_unpack_length = _LENGTH.unpack_from
# The loop may run a timer up to its clock resolution early (BaseEventLoop._run_once).
_CLOCK_SLACK = time.get_clock_info("monotonic").resolution
# Deadline entries kept for answered requests before the heap is compacted.
_COMPACT_AT = 1024
# A frame this large is written at once when nothing waits: joining it would copy it for no
# saved system call. Pending frames are joined up to this much per write.
_COALESCE_BYTES = 64 * 1024
# Abusive peers (issue 16): a frame must arrive whole within this long of its first byte, so a
# frame trickled byte by byte (which defeats the idle timeout) is dropped.
DEFAULT_FRAME_READ_TIMEOUT_SECONDS = 30.0
# A peer that stops reading: once the transport holds this much unsent data the connection is
# dropped (a server channel also stops reading requests while over the high-water mark).
DEFAULT_MAX_WRITE_BUFFER = 64 * 1024 * 1024


def _format_addr(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)


class Channel(CloseNotifying, asyncio.Protocol):
    """Create it through ``loop.create_connection``/``create_server`` with a factory."""

    def __init__(self, processors: ProcessorTable, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
                 max_idle_seconds: float | None = None,
                 on_connected: Callable[[Channel], Any] | None = None,
                 frame_read_timeout_seconds: float | None = None,
                 write_buffer_high_water_mark: int = 0, write_buffer_low_water_mark: int = 0,
                 pause_reading_on_backlog: bool = False,
                 max_write_buffer: int = DEFAULT_MAX_WRITE_BUFFER) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._max_idle_seconds = max_idle_seconds
        self._processors = processors
        self._max_frame_size = max_frame_size
        self._max_concurrent_requests = max_concurrent_requests
        self._on_connected = on_connected
        self._response_table: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._init_closing()
        self._lost = self._loop.create_future()
        # read side: bytes of an incomplete frame
        self._buffer = bytearray()
        self._last_read = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        # partial-frame deadline (None: no limit); armed only while a frame is incomplete
        self._frame_timeout = frame_read_timeout_seconds
        self._frame_started = 0.0
        self._frame_timer: asyncio.TimerHandle | None = None
        # write side: high/low water marks (0 = asyncio's defaults), and whether a backlog of
        # unsent data stops reading (servers: a peer that does not read gets no more answers)
        self._high_water = write_buffer_high_water_mark
        self._low_water = write_buffer_low_water_mark
        self._pause_reading_on_backlog = pause_reading_on_backlog
        self._max_write_buffer = max_write_buffer
        self._read_paused = False
        # write side: set while the transport's buffer is over its high-water mark
        self._write_paused = False
        # frames written during this loop pass, sent by _flush at its end
        self._pending: list[bytes] | None = None
        self._drain_waiters: list[asyncio.Future[None]] = []
        # response timeouts: (deadline, seq, future) heap and the one timer armed for its head
        self._deadlines: list[tuple[float, int, asyncio.Future[RemotingCommand]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.remote_address = "?"
        self.local_address = "?"

    def __repr__(self) -> str:
        return f"Channel({self.local_address} -> {self.remote_address})"

    async def serve(self) -> None:
        """Returns when the connection ends (peer closed, error, or bad frame)."""
        await self._closed_event.wait()

    # ---- protocol callbacks -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Duck-typed: uvloop's transports (ORBITMQ_EVENT_LOOP=uvloop) are no asyncio.Transport subclasses.
        assert hasattr(transport, "write") and hasattr(transport, "set_write_buffer_limits")
        self._transport = transport  # type: ignore[assignment]
        self.remote_address = _format_addr(transport.get_extra_info("peername"))
        self.local_address = _format_addr(transport.get_extra_info("sockname"))
        if self._high_water > 0:
            transport.set_write_buffer_limits(self._high_water, self._low_water or None)
        if self._max_idle_seconds is not None:
            self._last_read = self._loop.time()
            self._idle_timer = self._loop.call_at(self._last_read + self._max_idle_seconds, self._check_idle)
        if self._on_connected is not None:
            self._on_connected(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            log.debug("%s connection error: %s", self.remote_address, exc)
        if self._buffer:
            log.debug("%s closed mid-frame", self.remote_address)
        self._begin_close()
        if not self._lost.done():
            self._lost.set_result(None)
        self._wake_writers(exc or ConnectionResetError("connection lost"))

    def eof_received(self) -> bool:
        return False  # close our side as well: Remoting has no half-open connections

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._pause_reading_on_backlog and self._transport is not None and not self._read_paused:
            self._read_paused = True
            self._transport.pause_reading()  # no new requests until the peer reads its answers

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._read_paused and self._transport is not None and not self._closed:
            self._read_paused = False
            self._transport.resume_reading()
        self._wake_writers(None)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        if self._idle_timer is not None:
            self._last_read = self._loop.time()
        buffer = self._buffer
        try:
            if buffer:
                buffer += data
                if len(buffer) < 4:
                    return
                length = _unpack_length(buffer, 0)[0]
                self._check_length(length)
                if len(buffer) < 4 + length:
                    return  # still inside the frame; nothing else to parse
                data = bytes(buffer)
                buffer.clear()
            end = len(data)
            pos = 0
            while end - pos >= 4:
                length = _unpack_length(data, pos)[0]
                if length < 4 or length > self._max_frame_size:
                    self._check_length(length)
                stop = pos + 4 + length
                if stop > end:
                    break
                command = decode_command(data, pos + 4, stop)
                pos = stop
                if command.flag & 1:  # RPC_TYPE_RESPONSE
                    self._complete(command)
                else:
                    self._on_request(command)
                if self._closed:
                    return
            if pos < end:
                buffer += data[pos:] if pos else data
                if self._frame_timeout is not None and (pos or len(buffer) == end):
                    self._start_frame_clock()
        except RemotingCommandError as exc:
            log.warning("closing %s: bad frame: %s", self.remote_address, exc)
            self._begin_close()
        except Exception:  # never let one connection's surprise reach the server
            log.exception("closing %s: unexpected error reading a frame", self.remote_address)
            self._begin_close()

    def _check_length(self, length: int) -> None:
        if length < 4:
            raise RemotingCommandError(f"bad frame length {length}")
        if length > self._max_frame_size:
            raise RemotingCommandError(f"frame length {length} exceeds the maximum {self._max_frame_size}")

    def _start_frame_clock(self) -> None:
        """A new frame began and is incomplete: it must be whole within the frame read timeout."""
        self._frame_started = self._loop.time()
        if self._frame_timer is None:
            assert self._frame_timeout is not None
            self._frame_timer = self._loop.call_at(self._frame_started + self._frame_timeout,
                                                   self._check_frame)

    def _check_frame(self) -> None:
        self._frame_timer = None
        if self._closed or not self._buffer or self._frame_timeout is None:
            return
        due = self._frame_started + self._frame_timeout
        if self._loop.time() + _CLOCK_SLACK >= due:
            log.warning("closing %s: a frame was not complete %ss after its first byte",
                        self.remote_address, self._frame_timeout)
            self._begin_close()
        else:
            self._frame_timer = self._loop.call_at(due, self._check_frame)

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self._closed or self._max_idle_seconds is None:
            return
        due = self._last_read + self._max_idle_seconds
        if self._loop.time() + _CLOCK_SLACK >= due:
            log.info("closing %s: idle for %ss", self.remote_address, self._max_idle_seconds)
            self._begin_close()
        else:
            self._idle_timer = self._loop.call_at(due, self._check_idle)

    # ---- outgoing ---------------------------------------------------------------------------

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:  # noqa: ASYNC109
        """Send a request and wait for the response with the same opaque."""
        if self._closed:
            raise RemotingSendRequestError(self.remote_address, "channel is closed")
        table = self._response_table
        opaque = request.opaque
        if opaque in table:
            request.opaque = opaque = next_opaque()  # a re-sent command must not steal another's response
        loop = self._loop
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        table[opaque] = future
        try:
            self._write(request.encode())
            if self._write_paused:
                await self._drain()
            self._watch(loop.time() + timeout, future)
            return await future
        except TimeoutError:
            raise RemotingTimeoutError(self.remote_address, timeout, opaque) from None
        finally:
            table.pop(opaque, None)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        request.mark_oneway()
        await self._send_frame(request.encode())

    async def _send_frame(self, frame: bytes) -> None:
        self._write(frame)
        if self._write_paused:
            await self._drain()

    def _write(self, frame: bytes) -> None:
        if self._closed or self._transport is None:
            raise RemotingSendRequestError(self.remote_address, "channel is closed")
        if self._write_paused and self._transport.get_write_buffer_size() > self._max_write_buffer:
            log.warning("closing %s: it does not read (%d bytes unsent)", self.remote_address,
                        self._transport.get_write_buffer_size())
            self._begin_close()
            raise RemotingSendRequestError(self.remote_address, "peer does not read its socket")
        pending = self._pending
        if pending is not None:
            pending.append(frame)
        elif len(frame) >= _COALESCE_BYTES:
            try:
                self._transport.write(frame)
            except (ConnectionError, OSError, RuntimeError) as exc:
                self._begin_close()
                raise RemotingSendRequestError(self.remote_address, exc) from exc
        else:
            self._pending = [frame]
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Sends the frames of the loop pass that just ran (in order; a failure closes the channel,
        failing the requests that wait for a response)."""
        frames = self._pending
        self._pending = None
        transport = self._transport
        if not frames or transport is None or transport.is_closing():
            return
        try:
            if len(frames) == 1:
                transport.write(frames[0])
                return
            chunk: list[bytes] = []
            size = 0
            for frame in frames:
                if chunk and size + len(frame) > _COALESCE_BYTES:
                    transport.write(b"".join(chunk))
                    chunk.clear()
                    size = 0
                chunk.append(frame)
                size += len(frame)
            transport.write(chunk[0] if len(chunk) == 1 else b"".join(chunk))
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.debug("write to %s failed: %s", self.remote_address, exc)
            self._begin_close()

    async def _drain(self) -> None:
        """Wait until the transport's write buffer drops below its low-water mark."""
        while self._write_paused:
            if self._closed:
                raise RemotingSendRequestError(self.remote_address, "channel is closed")
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._drain_waiters.append(waiter)
            try:
                await waiter
            except (ConnectionError, OSError) as exc:
                raise RemotingSendRequestError(self.remote_address, exc) from exc

    def _wake_writers(self, exc: Exception | None) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(exc)

    # ---- response timeouts ------------------------------------------------------------------

    def _watch(self, deadline: float, future: asyncio.Future[RemotingCommand]) -> None:
        heap = self._deadlines
        if len(heap) >= _COMPACT_AT and len(heap) > 4 * len(self._response_table):
            # answered requests stay in the heap until their deadline; drop them in bulk
            heap[:] = [entry for entry in heap if not entry[2].done()]
            heapq.heapify(heap)
        heapq.heappush(heap, (deadline, next(self._seq), future))
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._expire)

    def _expire(self) -> None:
        self._timer = None
        heap = self._deadlines
        now = self._loop.time() + _CLOCK_SLACK
        while heap:
            deadline, _, future = heap[0]
            if future.done():
                heapq.heappop(heap)
            elif deadline <= now:
                heapq.heappop(heap)
                future.set_exception(TimeoutError())
            else:
                self._arm(deadline)
                break

    # ---- incoming ---------------------------------------------------------------------------

    def _complete(self, response: RemotingCommand) -> None:
        future = self._response_table.get(response.opaque)
        if future is None:
            log.debug("response for unknown opaque %s from %s (timed out?)", response.opaque,
                      self.remote_address)
        elif not future.done():
            future.set_result(response)

    def _on_request(self, request: RemotingCommand) -> None:
        if self._processors.go_away and request.version > GO_AWAY_MIN_VERSION and not request.flag & 2:
            self._answer_go_away(request)
            return
        tasks = self._tasks
        if len(tasks) >= self._max_concurrent_requests:
            self._reject_overload(request)
            return
        # the task leaves the set itself when it ends (_handle_request): no done callback, and so no
        # extra loop callback, per request
        tasks.add(self._loop.create_task(self._handle_request(request)))

    def _answer_go_away(self, request: RemotingCommand) -> None:
        """NettyRemotingAbstract#processRequestCommand while the server shuts down gracefully: the
        request is not run, and the client retries it on a new connection (NettyRemotingClient's
        enableReconnectForGoAway), which a load balancer sends to another server. Clients of
        5.3.1 and older do not know GO_AWAY and are served until the server closes. Unlike
        upstream, a oneway request is served too: it has no answer to carry GO_AWAY, and
        dropping it would lose it silently."""
        log.info("shutting down, write response GO_AWAY. channel=%s, requestCode=%s, opaque=%s",
                 self.remote_address, request.code, request.opaque)
        if self._transport is not None and not self._closed:
            self._write(request.response_to(ResponseCode.GO_AWAY, "please go away").encode())

    def _reject_overload(self, request: RemotingCommand) -> None:
        log.warning("too many requests in flight on %s, refusing code=%s", self.remote_address, request.code)
        if not request.is_oneway and self._transport is not None:
            self._transport.write(request.response_to(ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK).encode())

    async def _handle_request(self, request: RemotingCommand) -> None:
        try:
            entry = self._processors.lookup(request.code)
            if entry is None:
                response = not_supported(request)
            else:
                try:
                    response = await entry[0](request, self)
                except Exception as exc:  # a processor bug must not kill the connection
                    response = failed(request, exc, entry[1], self)
            if request.flag & 2 or response is None or self._closed:  # RPC_ONEWAY
                return
            response.opaque = request.opaque
            response.flag |= 1  # RPC_TYPE_RESPONSE
            response.serialize_type = request.serialize_type
            try:
                frame = response.encode()
            except RemotingCommandError as exc:
                log.warning("cannot encode response to code=%s: %s", request.code, exc)
                frame = request.response_to(ResponseCode.SYSTEM_ERROR, str(exc)).encode()
            try:
                self._write(frame)
                if self._write_paused:
                    await self._drain()
            except RemotingSendRequestError as exc:
                log.debug("response to %s lost: %s", self.remote_address, exc)
        except asyncio.CancelledError:
            pass  # the connection closed while the processor ran
        finally:
            self._tasks.discard(_current_task(self._loop))

    # ---- closing ----------------------------------------------------------------------------

    def _begin_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._transport is not None:
            # What this pass wrote still goes out: transport.close() sends its buffer first.
            self._flush()
            self._transport.close()
        for timer in (self._timer, self._idle_timer, self._frame_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._idle_timer = self._frame_timer = None
        self._deadlines.clear()
        self._buffer.clear()
        for opaque, future in list(self._response_table.items()):
            if not future.done():
                future.set_exception(RemotingSendRequestError(
                    self.remote_address, f"connection closed before response (opaque={opaque})"))
        for task in list(self._tasks):
            task.cancel()
        self._wake_writers(ConnectionResetError("channel closed"))
        self._notify_closed()

    async def close(self) -> None:
        self._begin_close()
        if self._transport is not None:
            try:
                await self._lost
            except (ConnectionError, OSError):
                pass


