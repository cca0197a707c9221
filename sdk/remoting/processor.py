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


class ProcessorTable:
    """requestCode -> processor, with an optional default (NettyRemotingAbstract.processorTable)."""

    def __init__(self) -> None:
        self._table: dict[int, Processor] = {}
        self._default: Processor | None = None

    def register(self, code: int, processor: Processor) -> None:
        self._table[int(code)] = processor

    def register_default(self, processor: Processor) -> None:
        self._default = processor

    async def dispatch(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """Run the processor; unknown codes and exceptions become error responses, never raise."""
        processor = self._table.get(request.code, self._default)
        if processor is None:
            return request.response_to(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                       f" request type {request.code} not supported")
        try:
            return await processor(request, channel)
        except Exception as exc:  # a processor bug must not kill the connection
            log.exception("process request code=%s from %s failed", request.code, channel.remote_address)
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
