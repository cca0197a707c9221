"""Request/reply over Remoting (RocketMQ's DefaultMQProducer.request and MessageUtil.createReplyMessage).

The requester stamps CORRELATION_ID (a fresh UUID), REPLY_TO_CLIENT (its client id) and TTL (the
timeout in ms) on an ordinary message and heartbeats to the broker as a producer, so that the
broker knows which connection is that client id's. A responder consumes the request, builds
the reply with ``create_reply_message`` (topic ``<CLUSTER>_REPLY_TOPIC``, MSG_TYPE=reply) and
sends it with ``MQClientAPI.send_reply_message`` (SEND_REPLY_MESSAGE_V2); the broker pushes it
to the requester's connection as PUSH_REPLY_MESSAGE_TO_CLIENT (326), which ``Requester`` answers
and hands to the waiting ``request`` call by CORRELATION_ID.

Only Remoting clients take part: apache.rocketmq.v2 (gRPC) has no reply RPC, so the proxy, like
upstream's, neither forwards pushed replies nor lets gRPC clients set these system properties.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from typing import Any

from orbitmq.client.api import MQClientAPI, ProducerData
from orbitmq.client.errors import MQClientError
from orbitmq.client.results import SendResult
from orbitmq.common.compression import decompress_by_sys_flag
from orbitmq.common.message import Message, MessageConst, MessageExt, string_to_properties
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.sysflag import COMPRESSED_FLAG
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

log = logging.getLogger(__name__)

REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"  # MixAll.REPLY_TOPIC_POSTFIX
REPLY_MESSAGE_FLAG = "reply"  # MixAll.REPLY_MESSAGE_FLAG
# A requester re-announces itself this often: the broker forgets producer channels after 120 s.
HEARTBEAT_INTERVAL_S = 30.0


class RequestTimeoutError(MQClientError):
    """No reply within the request's timeout (RequestTimeoutException upstream)."""


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to ``request`` (MessageUtil.createReplyMessage); MQClientError without CLUSTER."""
    cluster = request.properties.get(MessageConst.CLUSTER)
    if not cluster:
        raise MQClientError(f"create reply message fail, requestMessage error, property[{MessageConst.CLUSTER}] "
                            "is null.")
    props = {MessageConst.MESSAGE_TYPE: REPLY_MESSAGE_FLAG}
    for key in (MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT, MessageConst.MESSAGE_TTL):
        value = request.properties.get(key)
        if value is not None:
            props[key] = value
    reply = Message(reply_topic(cluster), body, 0, props)
    reply.uniq_key = create_uniq_id()
    return reply


class Requester:
    """One requester client: sends requests and receives the replies pushed on its connections.

    ``api``'s RemotingClient gets the PUSH_REPLY_MESSAGE_TO_CLIENT processor, so every broker
    connection of that client can deliver replies.
    """

    def __init__(self, api: MQClientAPI, producer_group: str, client_id: str | None = None) -> None:
        self.api = api
        self.producer_group = producer_group
        self.client_id = client_id or f"127.0.0.1@{uuid.uuid4().hex[:12]}"
        self._waiting: dict[str, asyncio.Future[MessageExt]] = {}
        self._announced: dict[str, float] = {}
        api.remoting.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_push_reply)

    async def announce(self, broker_addr: str) -> None:
        """HEART_BEAT as a producer of the group, so the broker maps our client id to this connection."""
        await self.api.heartbeat(broker_addr, self.client_id, producers=[ProducerData(self.producer_group)])
        self._announced[broker_addr] = time.monotonic()

    async def request(self, broker_addr: str, broker_name: str, msg: Message, queue_id: int,
                      timeout: float = 3.0) -> MessageExt:  # noqa: ASYNC109
        """Send ``msg`` as a request and return the reply; RequestTimeoutError after ``timeout`` s."""
        last = self._announced.get(broker_addr)
        if last is None or time.monotonic() - last >= HEARTBEAT_INTERVAL_S:
            await self.announce(broker_addr)
        correlation_id = str(uuid.uuid4())
        msg.properties[MessageConst.CORRELATION_ID] = correlation_id
        msg.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] = self.client_id
        msg.properties[MessageConst.MESSAGE_TTL] = str(int(timeout * 1000))
        if not msg.uniq_key:
            msg.uniq_key = create_uniq_id()
        future: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = future
        started = time.monotonic()
        try:
            result: SendResult = await self.api.send_message(broker_addr, broker_name, msg, self.producer_group,
                                                             queue_id, timeout=timeout)
            log.debug("request %s sent: %s", correlation_id, result.msg_id)
            remaining = timeout - (time.monotonic() - started)
            try:
                return await asyncio.wait_for(future, max(remaining, 0.0))
            except TimeoutError:
                raise RequestTimeoutError(f"request timeout, no reply message received in {timeout * 1000:.0f}ms, "
                                          f"correlation id {correlation_id}") from None
        finally:
            self._waiting.pop(correlation_id, None)

    async def _on_push_reply(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """ClientRemotingProcessor.receiveReplyMessage: the reply -> the waiting request, SUCCESS."""
        try:
            reply = decode_push_reply(request)
        except (ValueError, zlib.error) as exc:
            log.warning("unreadable reply message from %s: %s", getattr(channel, "remote_address", "?"), exc)
            return request.response_to(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = reply.properties.get(MessageConst.CORRELATION_ID, "")
        future = self._waiting.get(correlation_id)
        if future is None or future.done():
            log.warning("receive reply message, but not matched any request, CorrelationId: %s", correlation_id)
        else:
            future.set_result(reply)
        return request.response_to(ResponseCode.SUCCESS, None)


def decode_push_reply(request: RemotingCommand) -> MessageExt:
    """The MessageExt of a PUSH_REPLY_MESSAGE_TO_CLIENT (ReplyMessageRequestHeader + body)."""
    fields = request.ext_fields or {}
    try:
        sys_flag = int(fields.get("sysFlag") or 0)
        body = bytes(request.body or b"")
        if sys_flag & COMPRESSED_FLAG:
            body = decompress_by_sys_flag(body, sys_flag)  # the replier's compressType
        props = string_to_properties(fields.get("properties"))
        props[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] = str(int(time.time() * 1000))
        return MessageExt(
            topic=str(fields.get("topic") or ""), body=body, flag=int(fields.get("flag") or 0), properties=props,
            queue_id=int(fields.get("queueId") or 0), sys_flag=sys_flag,
            born_timestamp=int(fields.get("bornTimestamp") or 0), born_host=str(fields.get("bornHost") or ""),
            store_timestamp=int(fields.get("storeTimestamp") or 0), store_host=str(fields.get("storeHost") or ""),
            reconsume_times=int(fields.get("reconsumeTimes") or 0))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad ReplyMessageRequestHeader: {exc}") from None
