"""The broker's table of Remoting processors, each wrapped in the malformed-request guard.

Other broker modules (retry/DLQ send-back, POP, transactions) add their codes through
``ProcessorRegistry.register`` and get the same guarantee: a refused or malformed request is
answered with a response code and remark, and no exception ever reaches the connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.processor import ON_ERROR_ATTR, WRAPPED_ATTR
from orbitmq.remoting.protocol import RemotingCommand

from .base import RequestError

log = logging.getLogger(__name__)

Processor = Callable[[RemotingCommand, Any], Awaitable[RemotingCommand | None]]


def guard(code: int, processor: Processor) -> Processor:
    def on_error(request: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, RequestError):
            return request.response_to(exc.code, exc.remark)
        # the guard's whole purpose: never let a request kill the server
        log.error("processor for request code %s failed", code, exc_info=exc)
        return request.response_to(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"[:512])

    async def guarded(request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        try:
            return await processor(request, channel)
        except Exception as exc:
            return on_error(request, exc)

    guarded.__name__ = getattr(processor, "__name__", "processor")
    # A Remoting ProcessorTable calls ``processor`` itself and answers its exceptions with
    # ``on_error``: the same responses without a wrapper coroutine per request.
    setattr(guarded, WRAPPED_ATTR, processor)
    setattr(guarded, ON_ERROR_ATTR, on_error)
    return guarded


class ProcessorRegistry:
    def __init__(self) -> None:
        self.table: dict[int, Processor] = {}

    def register(self, code: int, processor: Processor) -> None:
        self.table[int(code)] = guard(int(code), processor)

    def codes(self) -> list[int]:
        return sorted(self.table)
