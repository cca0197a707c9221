"""Re-encodes popped CommitLog records for the POP response.

Every returned message carries its POP_CK ExtraInfo (the proxy builds the receipt handle from
it), a message from a pop retry topic is shown under the topic the consumer asked for, and an
orderly redelivery carries its delivery count as reconsumeTimes.
"""

from __future__ import annotations

from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import decode_record, encode_record


def parse_host(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return host.strip("[]") or "127.0.0.1", int(port)
    except ValueError:
        return "127.0.0.1", 0


def encode_message_ext(msg: MessageExt) -> bytes:
    return encode_record(
        topic=msg.topic, queue_id=msg.queue_id, body=msg.body, flag=msg.flag, queue_offset=msg.queue_offset,
        physical_offset=msg.commit_log_offset, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
        born_host=parse_host(msg.born_host), store_timestamp=msg.store_timestamp,
        store_host=parse_host(msg.store_host), reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset, properties=msg.properties)


def rewrite_popped(record: bytes, *, extra_info: str, pop_time: int, shown_topic: str | None = None,
                   reconsume_times: int | None = None) -> tuple[bytes, MessageExt]:
    msg = decode_record(record, 0, check_crc=False)
    msg.properties.setdefault(MessageConst.POP_CK, extra_info)
    msg.properties.setdefault(MessageConst.FIRST_POP_TIME, str(pop_time))
    if shown_topic is not None:
        msg.topic = shown_topic
    if reconsume_times is not None:
        msg.reconsume_times = reconsume_times
    return encode_message_ext(msg), msg
