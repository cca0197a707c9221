"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): a responder's reply, pushed to the requester.

Request/reply over Remoting (RocketMQ's ReplyMessageProcessor): the requester sends an ordinary
message carrying CORRELATION_ID, REPLY_TO_CLIENT (its client id) and TTL, and heartbeats as a
producer so the broker knows its connection; SendMessageProcessor stamps CLUSTER on it. The
responder replies to ``<CLUSTER>_REPLY_TOPIC`` with MSG_TYPE=reply through this processor, which
runs the send checks, finds the requester's channel by REPLY_TO_CLIENT and pushes the reply to
it as PUSH_REPLY_MESSAGE_TO_CLIENT (326), waiting up to 10 s for the answer. SUCCESS when the push
was answered SUCCESS, SYSTEM_ERROR (with upstream's remark) when the requester is unknown,
disconnected or failed; either way the reply is also stored in the reply topic while
``storeReplyMessageEnable`` (default true) is on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from orbitmq.common.message import MessageConst, parse_properties_exact, properties_to_string
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .base import RequestError, ext
from .send import SendHeader, SendMessageProcessor, parse_send_header
from .store_results import map_put_result

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

PUSH_REPLY_TIMEOUT_S = 10.0
_REPLY_TO_CLIENT = MessageConst.MESSAGE_REPLY_TO_CLIENT


class ReplyMessageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        # The send checks (msgCheck) and queue choice are SendMessageProcessor's; it is not registered.
        self._send = SendMessageProcessor(broker)

    def register(self) -> None:
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            self.broker.register_processor(code, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        broker = self.broker
        cfg = broker.config
        header = parse_send_header(request)
        region = {MessageConst.MSG_REGION: cfg.region_id,
                  MessageConst.TRACE_SWITCH: "true" if cfg.trace_on else "false"}
        body = bytes(request.body or b"")
        try:
            topic_config = self._send._msg_check(header, channel)
            # Before the push (upstream leaves it to the store): a reply too large to store is not pushed.
            self._send._check_body_and_properties(body, header.properties or "")
        except RequestError as exc:
            return request.response_to(exc.code, exc.remark, region)
        queue_id = self._send._pick_queue(header, topic_config)
        props, exact = parse_properties_exact(header.properties)
        inner = broker.new_inner_message(
            topic=header.topic, queue_id=queue_id, body=body, flag=header.flag, properties=props,
            sys_flag=header.sys_flag, born_timestamp=header.born_timestamp, born_host=broker.remote_addr(channel),
            reconsume_times=header.reconsume_times,
            properties_string=header.properties if exact and props else None)

        pushed, remark = await self._push_reply(header, props, body, channel)
        if pushed:
            code: int = ResponseCode.SUCCESS
            remark = None
            # msgId "0" keeps a client's decoder happy when the reply is not stored.
            region.update(ext(msgId="0", queueId=queue_id, queueOffset=0))
        else:
            code = ResponseCode.SYSTEM_ERROR
        if cfg.store_reply_message_enable:
            result = await broker.send_queue.submit(lambda: broker.put_message(inner))
            _, _, stored = map_put_result(result, queue_id, batch=False)
            if stored:
                region.update(stored)
            else:
                log.warning("reply to %s not stored: %s", header.topic, getattr(result, "status", None))
        return request.response_to(code, remark, region)

    async def _push_reply(self, header: SendHeader, props: dict[str, str], body: bytes,
                          channel: Any) -> tuple[bool, str]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the REPLY_TO_CLIENT's connection: (pushed, remark)."""
        broker = self.broker
        sender_id = props.get(_REPLY_TO_CLIENT)
        if sender_id is None:
            log.warning("%s is null, can not reply message", _REPLY_TO_CLIENT)
            return False, f"reply message properties[{_REPLY_TO_CLIENT}] is null"
        target = broker.producer_manager.find_channel(sender_id)
        if target is None:
            remark = f"push reply message fail, channel of <{sender_id}> not found."
            log.warning(remark)
            return False, remark
        pushed_props = dict(props)
        pushed_props[MessageConst.PUSH_REPLY_TIME] = str(broker.now_ms())
        fields = ext(
            producerGroup=header.producer_group, topic=header.topic, defaultTopic=header.default_topic,
            defaultTopicQueueNums=header.default_topic_queue_nums, queueId=header.queue_id,
            sysFlag=header.sys_flag, bornTimestamp=header.born_timestamp, flag=header.flag,
            properties=properties_to_string(pushed_props), reconsumeTimes=header.reconsume_times,
            unitMode=header.unit_mode, bornHost=broker.remote_addr(channel),
            storeHost=broker.config.broker_addr, storeTimestamp=broker.now_ms())
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, body)
        failed = f"push reply message to {sender_id}fail."  # upstream's remark, spacing included
        try:
            response = await target.invoke(push, PUSH_REPLY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 -- any transport failure is a failed push
            log.warning("push reply message to <%s> fail: %s", sender_id, exc)
            return False, failed
        if response.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender_id, response.remark)
            return False, failed
        return True, ""
