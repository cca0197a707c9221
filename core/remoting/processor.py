"""Processor table: routes incoming requests by code, turning failures into RocketMQ responses."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.remoting.channel import Channel

log = logging.getLogger("orbitmq.remoting")

Processor = Callable[[RemotingCommand, "Channel"], Awaitable[RemotingCommand | None]]
# Answers a request whose processor raised; what a guard wrapper would have returned.
ErrorHandler = Callable[[RemotingCommand, Exception], RemotingCommand | None]

# A guard wrapper (a processor that only turns exceptions into responses) may expose the processor
# it wraps and its exception mapping under these attributes; the table then calls the inner one
# directly and maps its exceptions itself, saving a coroutine per request.
WRAPPED_ATTR = "__remoting_wrapped__"
ON_ERROR_ATTR = "__remoting_on_error__"


class ProcessorTable:
    """requestCode -> processor, with an optional default (NettyRemotingAbstract.processorTable)."""

    def __init__(self) -> None:
        self._table: dict[int, tuple[Processor, ErrorHandler | None]] = {}
        self._default: tuple[Processor, ErrorHandler | None] | None = None
        # Wraps every processor, present and future (ACL checks); None costs nothing per request.
        self._guard: Callable[[Processor], Processor] | None = None
        # Set by RemotingServer's graceful shutdown (enableShutdownGracefully): new requests from
        # clients that understand it are answered GO_AWAY (see Channel._on_request).
        self.go_away = False

    def _entry(self, processor: Processor) -> tuple[Processor, ErrorHandler | None]:
        inner = getattr(processor, WRAPPED_ATTR, None)
        on_error = getattr(processor, ON_ERROR_ATTR, None)
        if inner is not None and on_error is not None:
            entry: tuple[Processor, ErrorHandler | None] = (inner, on_error)
        else:
            entry = (processor, None)
        return entry if self._guard is None else (self._guard(entry[0]), entry[1])

    def set_guard(self, guard: Callable[[Processor], Processor]) -> None:
        """Run ``guard(processor)`` in place of every processor (authentication/authorization)."""
        self._guard = guard
        self._table = {code: (guard(p), on_error) for code, (p, on_error) in self._table.items()}
        if self._default is not None:
            self._default = (guard(self._default[0]), self._default[1])

    def register(self, code: int, processor: Processor) -> None:
        self._table[int(code)] = self._entry(processor)

    def register_default(self, processor: Processor) -> None:
        self._default = self._entry(processor)

    def lookup(self, code: int) -> tuple[Processor, ErrorHandler | None] | None:
        return self._table.get(code, self._default)

    async def dispatch(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """Run the processor; unknown codes and exceptions become error responses, never raise."""
        entry = self._table.get(request.code, self._default)
        if entry is None:
            return not_supported(request)
        processor, on_error = entry
        try:
            return await processor(request, channel)
        except Exception as exc:  # a processor bug must not kill the connection
            return failed(request, exc, on_error, channel)


def not_supported(request: RemotingCommand) -> RemotingCommand:
    return request.response_to(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                               f" request type {request.code} not supported")


def failed(request: RemotingCommand, exc: Exception, on_error: ErrorHandler | None,
           channel: Channel) -> RemotingCommand | None:
    """The response to a request whose processor raised ``exc``."""
    if on_error is not None:
        try:
            return on_error(request, exc)
        except Exception as handler_exc:
            exc = handler_exc
    log.error("process request code=%s from %s failed", request.code, channel.remote_address,
              exc_info=exc)
    return request.response_to(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
