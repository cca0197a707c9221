"""Re-encodes popped CommitLog records for the POP response.

Every returned message carries its POP_CK ExtraInfo (the proxy builds the receipt handle from
it), a message from a pop retry topic is shown under the topic the consumer asked for, and an
orderly redelivery carries its delivery count as reconsumeTimes.
"""

from __future__ import annotations

from orbitmq.common.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    MessageConst,
    MessageExt,
    parse_properties_exact,
    properties_to_string,
)
from orbitmq.common.message_codec import (
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    body_crc32,
    calc_msg_length,
    decode_record,
    encode_record,
    header_struct,
)
from orbitmq.common.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG


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


# Where bornHost starts, and the size of everything before the body of an IPv4/IPv4 record.
_V4_HEADER = header_struct(False, False)
_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_POP_CK_ITEM = MessageConst.POP_CK + NAME_VALUE_SEPARATOR
_FIRST_POP_ITEM = MessageConst.FIRST_POP_TIME + NAME_VALUE_SEPARATOR


def rewrite_popped_record(record: bytes, *, extra_info: str, pop_time: int, shown_topic: str | None = None,
                          reconsume_times: int | None = None) -> bytes:
    """The bytes rewrite_popped returns, spliced from the record instead of decoded and re-encoded.

    Decoding builds host strings, a message id and a MessageExt that the POP response never
    needs. Only a record whose round trip through MessageExt is known to be the identity is
    spliced (IPv4 hosts with valid ports, consistent lengths); anything else takes the
    decode/re-encode path, so the bytes (and errors) are always those of rewrite_popped.
    """
    hs = _V4_HEADER
    size = len(record)
    if size < hs.size + 3:
        return rewrite_popped(record, extra_info=extra_info, pop_time=pop_time, shown_topic=shown_topic,
                              reconsume_times=reconsume_times)[0]
    (total, magic, _crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_addr, born_port,
     store_ts, store_addr, store_port, reconsume, prepared, body_len) = hs.unpack_from(record, 0)
    body_end = hs.size + body_len
    if (magic != MESSAGE_MAGIC_CODE or total != size or sys_flag & _HOST_FLAGS or body_len < 0
            or body_end + 3 > size or not 0 <= born_port <= 0xFFFF or not 0 <= store_port <= 0xFFFF):
        return rewrite_popped(record, extra_info=extra_info, pop_time=pop_time, shown_topic=shown_topic,
                              reconsume_times=reconsume_times)[0]
    topic_len = record[body_end]
    props_at = body_end + 1 + topic_len + 2
    props_len = int.from_bytes(record[props_at - 2:props_at], "big")
    if props_at + props_len != size:
        return rewrite_popped(record, extra_info=extra_info, pop_time=pop_time, shown_topic=shown_topic,
                              reconsume_times=reconsume_times)[0]
    if shown_topic is None:
        topic_b = record[body_end + 1:body_end + 1 + topic_len]
        topic_b.decode("utf-8")  # the same UnicodeDecodeError decoding would raise
    else:
        record[body_end + 1:body_end + 1 + topic_len].decode("utf-8")
        topic_b = shown_topic.encode("utf-8")
    props_text = record[props_at:size].decode("utf-8") if props_len else ""
    props, exact = parse_properties_exact(props_text)
    if exact:
        # properties_to_string(props) would give props_text back: append what setdefault adds.
        if MessageConst.POP_CK not in props:
            props_text += f"{_POP_CK_ITEM}{extra_info}{PROPERTY_SEPARATOR}"
        if MessageConst.FIRST_POP_TIME not in props:
            props_text += f"{_FIRST_POP_ITEM}{pop_time}{PROPERTY_SEPARATOR}"
    else:
        props.setdefault(MessageConst.POP_CK, extra_info)
        props.setdefault(MessageConst.FIRST_POP_TIME, str(pop_time))
        props_text = properties_to_string(props)
    props_b = props_text.encode("utf-8")
    if len(topic_b) > MAX_TOPIC_LENGTH or len(props_b) > MAX_PROPERTIES_LENGTH:
        return rewrite_popped(record, extra_info=extra_info, pop_time=pop_time, shown_topic=shown_topic,
                              reconsume_times=reconsume_times)[0]
    body = record[hs.size:body_end]
    header = hs.pack(
        calc_msg_length(sys_flag, body_len, len(topic_b), len(props_b)), magic, body_crc32(body), queue_id, flag,
        queue_offset, physical_offset, sys_flag, born_ts, born_addr, born_port, store_ts, store_addr, store_port,
        reconsume if reconsume_times is None else reconsume_times, prepared, body_len)
    return b"".join((header, body, bytes((len(topic_b),)), topic_b, len(props_b).to_bytes(2, "big"), props_b))
