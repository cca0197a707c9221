"""Request/reply futures of the Remoting client (RequestFutureHolder and RequestResponseFuture).

A request carries CORRELATION_ID, REPLY_TO_CLIENT (the client id) and TTL; the broker pushes the
reply as PUSH_REPLY_MESSAGE_TO_CLIENT, and MQClientInstance hands it to ``complete``. The wire
pieces (decoding the push, building a reply) are orbitmq.client.request_reply's.
"""

from __future__ import annotations

import asyncio
import logging

from orbitmq.client.request_reply import REPLY_MESSAGE_FLAG, create_reply_message, reply_topic
from orbitmq.common.message import MessageConst, MessageExt

log = logging.getLogger("orbitmq.remoting_client")

__all__ = ["REPLY_MESSAGE_FLAG", "RequestFutureHolder", "create_reply_message", "reply_topic"]


class RequestFutureHolder:
    """correlation id -> the future its requester waits on."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[MessageExt]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def register(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        future: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        return future

    def remove(self, correlation_id: str) -> None:
        self._waiting.pop(correlation_id, None)

    def complete(self, reply: MessageExt) -> bool:
        """Deliver a pushed reply; False (logged) when no request waits for its CORRELATION_ID."""
        correlation_id = reply.properties.get(MessageConst.CORRELATION_ID, "")
        future = self._waiting.get(correlation_id)
        if future is None or future.done():
            log.warning("receive reply message, but not matched any request, CorrelationId: %s", correlation_id)
            return False
        future.set_result(reply)
        return True

    def fail_all(self, exc: BaseException) -> None:
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(exc)
        self._waiting.clear()
