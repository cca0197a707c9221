"""RECALL_MESSAGE (370): write the delete marker that keeps a timer message from being delivered.

Checks run in upstream's order (RecallMessageProcessor), each answered with its response code:
recall off (``recallMessageEnable``, default false) NO_PERMISSION; a slave SLAVE_NOT_AVAILABLE;
before ``startAcceptSendRequestTimeStamp``, or a read-only broker without
``allowRecallWhenBrokerNotWriteable``, SERVICE_NOT_AVAILABLE; an unknown topic TOPIC_NOT_EXIST;
a handle that does not decode, names another topic or broker, or whose time is not ahead within
``timerMaxDelaySec`` ILLEGAL_OPERATION. Beyond upstream, a well-formed handle that names no timer
message waiting here (forged) is ILLEGAL_OPERATION too. Nothing is stored for any of them.

The marker is an ordinary timer message of the handle's topic (queue 0, body "0", tag
``_RECALL_TAG_``) with TIMER_DEL_UNIQKEY = topic + "+" + id and TIMER_DELIVER_MS = the handle's
time, so the timer put hook (services/broker/timer/put_hook.py) files it into the very slot of
the message it names, with the DELETE magic; the dequeue then drops both.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from orbitmq.broker.processors.base import Fields
from orbitmq.broker.store.config import SLAVE
from orbitmq.broker.timer.wheel_math import TIMER_TOPIC
from orbitmq.common.constants import is_writeable
from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import RecordError, decode_record
from orbitmq.common.recall_handle import RecallHandle, RecallHandleError, decode_recall_handle, delete_key
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

RECALL_MESSAGE_TAG = "_RECALL_TAG_"
_STORED = frozenset({"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})
_NOT_AVAILABLE = "recall failed, broker service not available"
# How long a recall waits for dispatch (index) to reach what was stored before it arrived.
DISPATCH_WAIT_S = 1.0
DISPATCH_WAIT_STEPS = 100
# Timer-topic records with one UNIQ_KEY: the message, its rolled copies, a few re-sends.
MAX_CANDIDATES = 32


class RecallMessageProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self) -> None:
        self.broker.register_processor(RequestCode.RECALL_MESSAGE, self.process)

    async def process(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        broker = self.broker
        cfg = broker.config
        region = {MessageConst.MSG_REGION: cfg.region_id}

        def refuse(code: int, remark: str) -> RemotingCommand:
            return request.response_to(code, remark, region)

        fields = Fields(request.ext_fields)
        # RecallMessageRequestHeader: topic and recallHandle are required, producerGroup is not.
        topic = fields.str("topic")
        text = fields.str("recallHandle")
        producer_group = fields.opt_str("producerGroup")
        if not cfg.recall_message_enable:
            return refuse(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if broker.store_config.broker_role == SLAVE:
            return refuse(ResponseCode.SLAVE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if broker.now_ms() < cfg.start_accept_send_request_time_stamp:
            return refuse(ResponseCode.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if not is_writeable(cfg.broker_permission) and not cfg.allow_recall_when_broker_not_writeable:
            return refuse(ResponseCode.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if broker.topic_config_manager.select_topic_config(topic) is None:
            return refuse(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist")
        try:
            handle = decode_recall_handle(text)
        except RecallHandleError as exc:
            return refuse(ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != topic:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != cfg.broker_name:
            return refuse(ResponseCode.ILLEGAL_OPERATION, _NOT_AVAILABLE)
        time_left = handle.timestamp_ms - broker.now_ms()
        if time_left <= 0 or time_left >= broker.store_config.timer_max_delay_sec * 1000:
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")

        if not await self._timer_message_waiting(handle):
            return refuse(ResponseCode.ILLEGAL_OPERATION, "recall failed, no timer message matches the handle")

        now = broker.now_ms()
        props = {
            MessageConst.TAGS: RECALL_MESSAGE_TAG,
            MessageConst.TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
            MessageConst.TIMER_DELIVER_MS: handle.timestamp,
            MessageConst.BORN_TIMESTAMP: str(now),
            MessageConst.TRACE_CONTEXT: "",
        }
        if producer_group is not None:
            props[MessageConst.PRODUCER_GROUP] = producer_group
        inner = broker.new_inner_message(
            topic=handle.topic, queue_id=0, body=b"0", flag=0, properties=props, sys_flag=0,
            born_timestamp=now, born_host=broker.remote_addr(channel), reconsume_times=0, copy_properties=False)
        result = await broker.send_queue.submit(lambda: broker.put_message(inner))
        status = getattr(getattr(result, "status", None), "name", None)
        if status not in _STORED:
            log.warning("recall of %s in %s not stored: %s", handle.message_id, topic, status)
            return refuse(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        log.info("recall marker for %s in %s stored (slot %s)", handle.message_id, topic, handle.timestamp)
        region["msgId"] = handle.message_id
        return request.response_to(ResponseCode.SUCCESS, None, region)

    async def _timer_message_waiting(self, handle: RecallHandle) -> bool:
        """Whether the handle names a timer message this broker holds (beyond upstream).

        Upstream writes a marker for any well-formed handle; here a forged one (no such message
        in rmq_sys_wheel_timer with that UNIQ_KEY, REAL_TOPIC and slot) is refused and nothing
        is stored. The message is found through the index (UNIQ_KEY), once dispatch has caught
        up with what was stored before the recall arrived. Without an index
        (messageIndexEnable=false) there is nothing to look in, and upstream's behaviour stays.
        """
        store = self.broker.message_store
        if store is None or store.index_service is None:
            return True
        target = min(store.get_max_phy_offset(), store.replication.get_confirm_offset())
        for _ in range(DISPATCH_WAIT_STEPS):
            if store.get_reput_from_offset() >= target:
                break
            await asyncio.sleep(DISPATCH_WAIT_S / DISPATCH_WAIT_STEPS)
        slot = str(handle.timestamp_ms - 1)
        records, _, _ = await self.broker.query_message(TIMER_TOPIC, handle.message_id, MAX_CANDIDATES, 0, 2**63 - 1)
        for record in records:
            try:
                props = decode_record(record, 0, check_crc=False).properties
            except RecordError:
                continue
            if props.get(MessageConst.REAL_TOPIC) == handle.topic and props.get(MessageConst.TIMER_OUT_MS) == slot:
                return True
        return False
