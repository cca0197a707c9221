"""Half-message bridge (RocketMQ's TransactionalMessageBridge): the message rewrites.

A prepared send is stored in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with its real topic and queue in
REAL_TOPIC / REAL_QID and its transaction bits reset to NOT_TYPE, so the half queue indexes it
like any message. A commit stores the message again under its real topic; check copies and
discards are rewrites of the stored half record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orbitmq.common.constants import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from orbitmq.common.message import MessageConst, MessageExt, properties_to_string
from orbitmq.common.message_codec import tags_hash_code
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.sysflag import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_COMPARATOR,
    MULTI_TAGS_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    reset_transaction_value,
)

from .op_codec import REMOVE_TAG, encode_op_body

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController
    from orbitmq.broker.store.model import MessageExtBrokerInner

HALF_QUEUE_ID = 0
_REAL_TOPIC = MessageConst.REAL_TOPIC
_REAL_QID = MessageConst.REAL_QUEUE_ID
_TRAN_MSG = MessageConst.TRANSACTION_PREPARED
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_TRANSACTION_ID = MessageConst.TRANSACTION_ID
# sysFlag bits a rewritten message keeps (upstream copies the half's sysFlag); the store sets the
# host-address bits itself. The compression type bits say which codec reads the body (LZ4, ZSTD).
_KEPT_SYS_FLAG = COMPRESSED_FLAG | COMPRESSION_TYPE_COMPARATOR | MULTI_TAGS_FLAG


def is_half_send(properties: dict[str, str], reconsume_times: int) -> bool:
    """SendMessageProcessor's test: TRAN_MSG=true (a resend of a pre-4.6.1 delayed retry is not)."""
    if properties.get(_TRAN_MSG, "").lower() != "true":
        return False
    delay = properties.get(MessageConst.DELAY_TIME_LEVEL, "0")
    return not (reconsume_times > 0 and delay not in ("", "0"))


# Properties that would make the store's put hooks park a message for later delivery.
_SCHEDULE_PROPERTIES = (MessageConst.TIMER_DELIVER_MS, MessageConst.TIMER_DELAY_SEC, MessageConst.TIMER_DELAY_MS)


def half_message_refusal(properties: dict[str, str]) -> str | None:
    """Why a half message cannot be stored, or None.

    Its transaction bits are NOT_TYPE once rewritten, so the delay-level and timer put hooks
    would move it out of the half queue and deliver it uncommitted. RocketMQ's clients never
    send one (the Remoting producer clears DELAY, the gRPC clients refuse a delivery time on a
    transactional message); OrbitMQ refuses what a raw client might send instead.
    """
    if properties.get(MessageConst.DELAY_TIME_LEVEL, "0") not in ("", "0") or any(
            name in properties for name in _SCHEDULE_PROPERTIES):
        return "transactional message does not support delay or timer delivery"
    return None


def rewrite_half_message(msg: MessageExtBrokerInner) -> None:
    """parseHalfMessageInner, in place: to the half queue, real topic/queue kept as properties."""
    props = msg.properties
    uniq = props.get(_UNIQ_KEY)
    if uniq:
        props[_TRANSACTION_ID] = uniq
    props[_REAL_TOPIC] = msg.topic
    props[_REAL_QID] = str(msg.queue_id)
    msg.sys_flag = reset_transaction_value(msg.sys_flag, TRANSACTION_NOT_TYPE)
    msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
    msg.queue_id = HALF_QUEUE_ID
    msg.properties_string = properties_to_string(props)
    msg.parsed_properties = None


def transaction_id_of(half: MessageExt) -> str:
    """The key a transaction is known by: __transactionId__, else UNIQ_KEY, else the offset id."""
    props = half.properties
    return props.get(_TRANSACTION_ID) or props.get(_UNIQ_KEY) or half.msg_id


def real_topic_of(half: MessageExt) -> str:
    return half.properties.get(_REAL_TOPIC, half.topic)


def _inner(broker: BrokerController, half: MessageExt, topic: str, queue_id: int, props: dict[str, str],
           sys_flag: int) -> MessageExtBrokerInner:
    inner = broker.new_inner_message(
        topic=topic, queue_id=queue_id, body=bytes(half.body), flag=half.flag, properties=props,
        sys_flag=sys_flag, born_timestamp=half.born_timestamp, born_host=half.born_host,
        reconsume_times=half.reconsume_times, copy_properties=False)
    tags = props.get(MessageConst.TAGS)
    inner.tags_code = tags_hash_code(tags) if tags else 0
    return inner


def commit_message(broker: BrokerController, half: MessageExt) -> MessageExtBrokerInner:
    """endMessageTransaction: the half message under its real topic and queue, flagged COMMIT."""
    props = dict(half.properties)
    topic = props.pop(_REAL_TOPIC, half.topic)
    try:
        queue_id = int(props.pop(_REAL_QID, "0"))
    except ValueError:
        queue_id = 0
    props.pop(_TRAN_MSG, None)
    sys_flag = (half.sys_flag & _KEPT_SYS_FLAG) | TRANSACTION_COMMIT_TYPE
    inner = _inner(broker, half, topic, queue_id, props, sys_flag)
    inner.prepared_transaction_offset = half.commit_log_offset
    return inner


def half_copy(broker: BrokerController, half: MessageExt, updates: dict[str, str]) -> MessageExtBrokerInner:
    """A new record of a half message in the half queue (putBackHalfMsgQueue, immunity copies)."""
    props = dict(half.properties)
    props.update(updates)
    return _inner(broker, half, RMQ_SYS_TRANS_HALF_TOPIC, HALF_QUEUE_ID, props, half.sys_flag & _KEPT_SYS_FLAG)


def discard_message(broker: BrokerController, half: MessageExt) -> MessageExtBrokerInner:
    """A half message checked too often, as kept in TRANS_CHECK_MAX_TIME_TOPIC queue 0."""
    return _inner(broker, half, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(half.properties),
                  half.sys_flag & _KEPT_SYS_FLAG)


def op_message(broker: BrokerController, half_offsets: list[int]) -> MessageExtBrokerInner:
    """An op message (tag ``d``) marking half-queue offsets as finished."""
    cfg = broker.config
    inner = broker.new_inner_message(
        topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=encode_op_body(half_offsets), flag=0,
        properties={MessageConst.TAGS: REMOVE_TAG, _UNIQ_KEY: create_uniq_id()},
        sys_flag=0, born_timestamp=broker.now_ms(), born_host=f"{cfg.broker_ip1}:{cfg.listen_port}",
        reconsume_times=0, copy_properties=False)
    inner.tags_code = tags_hash_code(REMOVE_TAG)
    return inner

