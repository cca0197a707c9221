"""CommitLog: the single append-only log of every message of every topic on this broker.

Appends run on the event loop thread only (batches and segment rollover also under
putMessageLock): they assign physical offsets, per topic-queue logical offsets
(topicQueueTable) and non-decreasing store timestamps, and copy the encoded records into the
mmap'd segment (``MappedFile.wbuf``: its transient store pool buffer when it holds one, which
CommitRealTimeService then commits into the file). Durability is the flush services' job
(flush.py), so an ASYNC_FLUSH append costs one CRC32, one struct pack and one memcpy per
record and no disk wait.

Three ways records get written, each keeping only what a measurement justified (per-path
figures in the docstrings: 1 KiB messages, this CommitLog alone, writer-thread CPU, medians of
interleaved runs on the 2-core development VM, 2026-12-01):
- ``put_messages`` → ``_append_locked``: the plain path. It takes anything (a foreign store
  host, a new topic or born host, a batch across segments) and reports the precise failure;
  the others hand it whatever is unusual before writing a byte.
- ``put_message``: one record inline, no lock and no item tuple.
- ``put_uniform_items`` (from ``_put_uniform`` for messages, or from the broker's decoded
  SEND_BATCH_MESSAGE tuples): a batch that shares one topic/queue/host, laid out once.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable

from orbitmq.broker.store.allocate import AllocateMappedFileService
from orbitmq.broker.store.checkpoint import StoreCheckpoint
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.broker.store.mapped_file import MappedFile
from orbitmq.broker.store.mapped_file_queue import MappedFileQueue
from orbitmq.broker.store.model import (
    AppendMessageResult,
    AppendMessageStatus,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
    put_ok_result,
)
from orbitmq.broker.store.transient_store_pool import TransientStorePool
from orbitmq.common import speedups, sysflag
from orbitmq.common.constants import (
    LMQ_DISPATCH_SEPARATOR,
    LMQ_QUEUE_ID,
    RMQ_SYS_SCHEDULE_TOPIC,
    is_lmq,
    split_lmq_names,
    topic_allows_lmq,
)
from orbitmq.common.message import MessageConst, properties_to_string, string_to_properties
from orbitmq.common.message_codec import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_OVERHEAD_V4,
    INT,
    LONG,
    MAGIC_POSITION,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    SIZE_MAGIC,
    SYS_FLAG_POSITION,
    body_crc32,
    header_struct,
    host_to_bytes,
    store_timestamp_position,
    tags_hash_code,
)

log = logging.getLogger(__name__)

_V6_BITS = sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG
_TRAN_MASK = sysflag.TRANSACTION_ROLLBACK_TYPE
_TRAN_PREPARED = sysflag.TRANSACTION_PREPARED_TYPE
_TRAN_ROLLBACK = sysflag.TRANSACTION_ROLLBACK_TYPE


_crc32 = zlib.crc32
_HEADER_STRUCTS = ((header_struct(False, False), header_struct(False, True)),
                   (header_struct(True, False), header_struct(True, True)))
_SHORT = struct.Struct(">H")
# Room a record may take beyond maxMessageSize for everything outside the body (RocketMQ 5).
RECORD_HEADROOM = 64 * 1024
# Most DispatchRequests waiting in the hand-off to the reput service (~1 KiB each with their
# properties). Past it appends stop handing off and reput decodes those records from the log.
HANDOFF_MAX = 16384
# CommitLog#asyncPutMessage warns of an append that held the put lock longer than this.
SLOW_PUT_IN_LOCK_MS = 500
_TAGS = MessageConst.TAGS
_KEYS = MessageConst.KEYS
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_DELAY = MessageConst.DELAY_TIME_LEVEL
_MULTI_DISPATCH = MessageConst.INNER_MULTI_DISPATCH
_MULTI_QUEUE_OFFSET = MessageConst.INNER_MULTI_QUEUE_OFFSET


def _dispatch_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    """The header fields dispatch needs (the rest skipped as pad bytes), one unpack per record:
    totalSize, magic, bodyCRC, queueId, queueOffset, physicalOffset, sysFlag, storeTimestamp,
    preparedTransactionOffset, bodyLength."""
    born = 20 if born_v6 else 8
    store = 20 if store_v6 else 8
    return struct.Struct(f">iIii4xqqi8x{born}xq{store}x4xqi")


_DISPATCH_STRUCTS = {
    0: _dispatch_struct(False, False),
    sysflag.BORNHOST_V6_FLAG: _dispatch_struct(True, False),
    sysflag.STOREHOSTADDRESS_V6_FLAG: _dispatch_struct(False, True),
    sysflag.BORNHOST_V6_FLAG | sysflag.STOREHOSTADDRESS_V6_FLAG: _dispatch_struct(True, True),
}


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _fields_fit(msg: MessageExtBrokerInner) -> bool:
    """Every numeric field is an int that fits its on-disk Java type (queueId non-negative)."""
    try:
        return (
            0 <= msg.queue_id <= _INT_MAX
            and _INT_MIN <= msg.flag <= _INT_MAX
            and _INT_MIN <= msg.sys_flag <= _INT_MAX
            and _INT_MIN <= msg.reconsume_times <= _INT_MAX
            and _LONG_MIN <= msg.born_timestamp <= _LONG_MAX
            and _LONG_MIN <= msg.prepared_transaction_offset <= _LONG_MAX
            and 0 <= msg.born_host[1] <= 0xFFFF
            and isinstance(msg.body, (bytes, bytearray, memoryview))
        )
    except (TypeError, IndexError):
        return False


# Compiled twin: _speedups_commitlog._layout_uniform (same layout).
def _layout_uniform(items: list, fixed: int, max_body: int, max_record: int,
                    max_fit: int) -> tuple[list[tuple], int] | None:
    """Pass 1 of put_uniform_items: check and lay out each (flag, body, properties,
    properties_string) item of a uniform batch whose fixed part (header and topic field) takes
    ``fixed`` bytes; nothing is written. ([(total, crc, flag, body, tail, properties_string,
    properties)], the batch's bytes), where ``tail`` is the properties length and bytes; None
    when any item is unusual (the general path then reports it)."""
    short_pack = _SHORT.pack
    crc32 = _crc32
    recs = []
    add = recs.append
    batch_bytes = 0
    for flag, body, props, props_s in items:
        if (type(flag) is not int or not _INT_MIN <= flag <= _INT_MAX
                or not isinstance(body, (bytes, bytearray, memoryview))):
            return None
        if props_s is None:
            props_s = properties_to_string(props) if props else ""
            props = None
        props_b = props_s.encode("utf-8")
        lp = len(props_b)
        lb = len(body)
        total = fixed + lb + lp
        if lp > MAX_PROPERTIES_LENGTH or lb > max_body or total > max_record or total > max_fit:
            return None
        crc = crc32(body) & 0x7FFFFFFF
        add((total, crc, flag, body, short_pack(lp) + props_b, props_s, props))
        batch_bytes += total
    return recs, batch_bytes


# Compiled twin: _speedups_commitlog._write_uniform (same bytes, same DispatchRequests).
def _write_uniform(mm, start: int, base: int, recs: list[tuple], hs: struct.Struct, topic: str, queue_id: int,
                   sflag: int, born_ts: int, born_addr: bytes, born_port: int, now: int, store_addr: bytes,
                   store_port: int, reconsume: int, prepared: int, topic_field: bytes, prefix: str, qoff: int,
                   counted: bool, handoff: bool) -> tuple[int, int, str, list[tuple[int, int]], list[DispatchRequest]]:
    """Pass 2 of put_uniform_items: write the records _layout_uniform laid out into ``mm`` from
    byte ``start`` (``base`` its segment's offset) with header layout ``hs``, the first at queue
    offset ``qoff`` (``counted``: each takes the next one). (end position, next queue offset,
    the comma-joined message ids, [(physical offset, queue offset)], the DispatchRequests when
    ``handoff``). Nothing is written when anything raises."""
    pack = hs.pack
    parts: list = []
    extend = parts.extend
    ids: list[str] = []
    offsets: list[tuple[int, int]] = []
    requests: list[DispatchRequest] = []
    last_tags = None
    tags_code = 0
    pos = start
    for total, crc, flag, body, tail, props_s, props in recs:
        phy = base + pos
        extend((pack(total, MESSAGE_MAGIC_CODE, crc, queue_id, flag, qoff, phy, sflag, born_ts, born_addr,
                     born_port, now, store_addr, store_port, reconsume, prepared, len(body)),
                body, topic_field, tail))
        ids.append(f"{prefix}{phy:016X}")
        offsets.append((phy, qoff))
        if handoff:
            if props is None:
                props = string_to_properties(props_s) if props_s else {}
            tags = props.get(_TAGS)
            if tags != last_tags:  # a batch's messages mostly share their tag
                last_tags = tags
                tags_code = tags_hash_code(tags) if tags else 0
            requests.append(DispatchRequest(
                topic, queue_id, phy, total, tags_code, now, qoff,
                props.get(_KEYS, ""), props.get(_UNIQ_KEY), sflag, prepared, props))
        pos += total
        if counted:
            qoff += 1
    mm[start:pos] = b"".join(parts)
    return pos, qoff, ",".join(ids), offsets, requests


_py_layout_uniform = _layout_uniform
_py_write_uniform = _write_uniform


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class CommitLog:
    def __init__(
        self,
        config: MessageStoreConfig,
        store_host: tuple[str, int],
        checkpoint: StoreCheckpoint,
        transient_store_pool: TransientStorePool | None = None,
    ) -> None:
        self.config = config
        self.checkpoint = checkpoint
        self.allocate_service = (
            AllocateMappedFileService(warm=config.warm_maped_file_enable,
                                      warm_flush_least_pages=config.flush_least_pages_when_warm_maped_file)
            if config.allocate_mapped_file_enable else None
        )
        # Appends write into the pool's buffers and readers stop at the committed end
        # (transient_store_pool.py); None writes straight into the segments' mappings.
        self.transient_store_pool = transient_store_pool
        self.mapped_file_queue = MappedFileQueue(
            config.commit_log_dir, config.mapped_file_size_commit_log, self.allocate_service, transient_store_pool
        )
        self.file_size = config.mapped_file_size_commit_log
        # RocketMQ 5 (MessageExtEncoder): maxMessageSize limits the body; the record may use 64 KiB
        # more for its header, topic and properties, so a 4 MiB body is storable at the default.
        self.max_body_size = config.max_message_size
        self.max_message_size = config.max_message_size + RECORD_HEADROOM
        self.store_addr, self.store_v6 = host_to_bytes(*store_host)
        self.store_port = store_host[1]
        self.store_host = store_host
        self._store_id_prefix = (self.store_addr + INT.pack(self.store_port)).hex().upper()
        # "topic-queueId" -> next logical offset, kept as a (topic, queue_id) key.
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        # QueueOffsetOperator#lmqTopicQueueTable: (LMQ name, LMQ_QUEUE_ID) -> next offset of
        # that Light Message Queue, assigned at put (enableLmq) and rebuilt from the
        # ConsumeQueues at recovery (recover_topic_queue_table).
        self.lmq_topic_queue_table: dict[tuple[str, int], int] = {}
        self.put_message_lock = threading.Lock()
        self.begin_time_in_lock = 0
        self._last_store_timestamp = 0
        # SCHEDULE_TOPIC_XXXX entries carry their delivery time as tag code (delay service sets it).
        self.delivery_time_of: Callable[[int, int], int] | None = None
        # Test hook run by the flush threads before each flush (e.g. to slow the disk down).
        self.before_flush_hook: Callable[[], None] | None = None
        # Hot-path caches: encoded topic field per topic, record layout per born host (_born_entry).
        self._topic_fields: dict[str, bytes] = {}
        self._born_hosts: dict[tuple[str, int], tuple] = {}
        self._topic_names: dict[bytes, str] = {}
        # Appends put here the DispatchRequest of every record they write, in log order: what
        # check_message_and_return_size would decode from it, built from what the append knew.
        # The reput service installs the deque and uses an entry only when its offset is the
        # next one to dispatch; None (no reput service) hands nothing off.
        self.handoff: deque[DispatchRequest] | None = None
        self.put_message_times_total = 0
        self.put_message_size_total = 0

    # --- lifecycle -----------------------------------------------------------------------
    def load(self) -> None:
        self.mapped_file_queue.load()

    def shutdown(self) -> None:
        if self.allocate_service is not None:
            self.allocate_service.shutdown()
        self.mapped_file_queue.shutdown(0)

    def get_min_offset(self) -> int:
        first = self.mapped_file_queue.get_first_mapped_file()
        if first is None:
            return -1
        return first.file_from_offset if first.available else self.roll_next_file(first.file_from_offset)

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    def _next_store_timestamp(self) -> int:
        """Now in ms, but never before the last record's: store time does not go backwards in log order."""
        now = _now_ms()
        if now < self._last_store_timestamp:
            return self._last_store_timestamp
        self._last_store_timestamp = now
        return now

    def offset_msg_id(self, phy_offset: int) -> str:
        return self._store_id_prefix + LONG.pack(phy_offset).hex().upper()

    # --- append --------------------------------------------------------------------------
    def _prepare(self, msg: MessageExtBrokerInner, store_addr: bytes, store_v6: bool, store_port: int):
        """Everything about a record that does not depend on its position; or a failure status."""
        topic_b = msg.topic.encode("utf-8")
        if len(topic_b) > MAX_TOPIC_LENGTH or not topic_b or not _fields_fit(msg):
            return PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.UNKNOWN_ERROR
        props_s = msg.encoded_properties()
        props_b = props_s.encode("utf-8")
        if len(props_b) > MAX_PROPERTIES_LENGTH:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED
        try:
            born_addr, born_v6 = host_to_bytes(*msg.born_host)
        except (ValueError, TypeError, IndexError):
            return PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.UNKNOWN_ERROR
        flag = msg.sys_flag & ~_V6_BITS
        if born_v6:
            flag |= sysflag.BORNHOST_V6_FLAG
        if store_v6:
            flag |= sysflag.STOREHOSTADDRESS_V6_FLAG
        body = msg.body
        total = FIXED_OVERHEAD_V4 + (12 if born_v6 else 0) + (12 if store_v6 else 0) + len(body) + len(topic_b) + len(props_b)
        if (len(body) > self.max_body_size or total > self.max_message_size
                or total + END_FILE_MIN_BLANK_LENGTH > self.file_size):
            log.warning("message size exceeded, body %d (max %d), record %d (max %d)",
                        len(body), self.max_body_size, total, self.max_message_size)
            return PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
        crc = zlib.crc32(body) & 0x7FFFFFFF
        msg.body_crc = crc
        tail = b"".join((bytes((len(topic_b),)), topic_b, len(props_b).to_bytes(2, "big"), props_b))
        tran = flag & _TRAN_MASK
        key = None if tran == _TRAN_PREPARED or tran == _TRAN_ROLLBACK else (msg.topic, msg.queue_id)
        return (
            _HEADER_STRUCTS[born_v6][store_v6], total, crc, msg.queue_id, msg.flag, flag, msg.born_timestamp,
            born_addr, msg.born_host[1], store_addr, store_port, msg.reconsume_times,
            msg.prepared_transaction_offset, body, tail, key, msg, props_s,
        )

    def _prepare_own(self, msg: MessageExtBrokerInner) -> tuple | None:
        """_prepare for a record of this store's own host, from the per-topic and per-born-host
        caches put_message uses; None for anything unusual (a new or bad topic or host, a field
        or size out of range), which _prepare then handles and reports exactly. The caches save
        0.27 µs per record of a mixed batch (1.08 against 1.35 µs per call)."""
        topic = msg.topic
        try:
            topic_field = self._topic_fields.get(topic)
            born = self._born_hosts.get(msg.born_host)
        except TypeError:  # an unhashable topic or host
            return None
        if topic_field is None:
            if not isinstance(topic, str):
                return None
            topic_b = topic.encode("utf-8")
            if len(topic_b) > MAX_TOPIC_LENGTH or not topic_b:
                return None
            topic_field = bytes((len(topic_b),)) + topic_b
            if len(self._topic_fields) < 100_000:
                self._topic_fields[topic] = topic_field
        if born is None:
            born = self._born_entry(msg.born_host)
            if born is None:
                return None
        if not _fields_fit(msg):
            return None
        props_s = msg.encoded_properties()
        props_b = props_s.encode("utf-8")
        body = msg.body
        born_addr, born_port, host_bits, hs, fixed = born
        lp = len(props_b)
        lb = len(body)
        total = fixed + lb + len(topic_field) + lp
        if (lp > MAX_PROPERTIES_LENGTH or lb > self.max_body_size or total > self.max_message_size
                or total + END_FILE_MIN_BLANK_LENGTH > self.file_size):
            return None
        crc = _crc32(body) & 0x7FFFFFFF
        msg.body_crc = crc
        sflag = (msg.sys_flag & ~_V6_BITS) | host_bits
        tran = sflag & _TRAN_MASK
        queue_id = msg.queue_id
        key = None if tran == _TRAN_PREPARED or tran == _TRAN_ROLLBACK else (topic, queue_id)
        return (
            hs, total, crc, queue_id, msg.flag, sflag, msg.born_timestamp, born_addr, born_port, self.store_addr,
            self.store_port, msg.reconsume_times, msg.prepared_transaction_offset, body,
            topic_field + _SHORT.pack(lp) + props_b, key, msg, props_s,
        )

    def _born_entry(self, born_host) -> tuple | None:
        """Per born host: (address bytes, port, host-form sysFlag bits, header Struct, fixed size).

        Everything of a record that depends only on the two host forms, looked up once per put.
        None when the host is not a valid address (the general path reports it).
        """
        try:
            born_addr, born_v6 = host_to_bytes(born_host[0], born_host[1])
        except (ValueError, TypeError, IndexError):
            return None
        store_v6 = self.store_v6
        bits = (sysflag.BORNHOST_V6_FLAG if born_v6 else 0) | (sysflag.STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)
        # The topic field below includes its length byte, hence the -1.
        fixed = FIXED_OVERHEAD_V4 - 1 + (12 if born_v6 else 0) + (12 if store_v6 else 0)
        entry = (born_addr, born_host[1], bits, _HEADER_STRUCTS[born_v6][store_v6], fixed)
        if len(self._born_hosts) < 100_000 and isinstance(born_host, tuple):
            self._born_hosts[born_host] = entry
        return entry

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Append one record: the hot path, one header pack and one slice copy into the mmap.

        What it adds over put_messages([msg]): no item tuple, no lock, no batch bookkeeping
        (4.3 against 6.2 µs per message). It runs on the event loop thread only (as every
        append), so nothing else appends in between. Anything unusual (foreign store host, bad
        topic or host, size limits, no open segment or a rollover) goes to put_messages, which
        reports the precise failure.
        """
        store_host = msg.store_host
        if store_host is not None and store_host != self.store_host:
            return self.put_messages([msg])
        if self.config.enable_lmq:
            names = msg.properties.get(_MULTI_DISPATCH)
            if names and not names.isspace() and topic_allows_lmq(msg.topic):  # needDispatchLMQ
                return self._put_lmq_message(msg, names)
        topic = msg.topic
        topic_field = self._topic_fields.get(topic)
        if topic_field is None:
            topic_b = topic.encode("utf-8")
            if len(topic_b) > MAX_TOPIC_LENGTH or not topic_b:
                return self.put_messages([msg])  # reports MESSAGE_ILLEGAL
            topic_field = bytes((len(topic_b),)) + topic_b
            if len(self._topic_fields) < 100_000:
                self._topic_fields[topic] = topic_field
        props_s = msg.properties_string
        if not props_s and msg.properties:
            props_s = msg.encoded_properties()
        props_b = props_s.encode("utf-8")
        born_host = msg.born_host
        try:
            born_addr, born_port, host_bits, hs, fixed = self._born_hosts[born_host]
        except (KeyError, TypeError):
            entry = self._born_entry(born_host)
            if entry is None:
                return self.put_messages([msg])  # reports MESSAGE_ILLEGAL
            born_addr, born_port, host_bits, hs, fixed = entry
        body = msg.body
        queue_id = msg.queue_id
        lp = len(props_b)
        lb = len(body)
        total = fixed + lb + len(topic_field) + lp
        if (lp > MAX_PROPERTIES_LENGTH or lb > self.max_body_size or total > self.max_message_size
                or total + END_FILE_MIN_BLANK_LENGTH > self.file_size or not 0 <= queue_id <= _INT_MAX):
            return self.put_messages([msg])  # the general path reports the precise failure
        files = self.mapped_file_queue.mapped_files
        mf = files[-1] if files else None
        if mf is None or mf.wrote_position + total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return self.put_messages([msg])  # no open segment, or a rollover (once per segment)
        sflag = (msg.sys_flag & ~_V6_BITS) | host_bits
        crc = _crc32(body) & 0x7FFFFFFF
        msg.body_crc = crc
        now = self._next_store_timestamp()
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        # Prepared and rolled-back transaction records get no ConsumeQueue entry (tranType 4, 12).
        if sflag & _TRAN_PREPARED:
            key = None
            qoff = 0
        else:
            key = (topic, queue_id)
            qoff = self.topic_queue_table.get(key, 0)
        try:
            header = hs.pack(total, MESSAGE_MAGIC_CODE, crc, queue_id, msg.flag, qoff, phy, sflag,
                             msg.born_timestamp, born_addr, born_port, now, self.store_addr, self.store_port,
                             msg.reconsume_times, msg.prepared_transaction_offset, lb)
        except struct.error:
            # A numeric field does not fit its Java type; nothing was written or counted.
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR))
        mf.wbuf[pos : pos + total] = b"".join((header, body, topic_field, _SHORT.pack(lp), props_b))
        if key is not None:
            self.topic_queue_table[key] = qoff + 1
        mf.wrote_position = pos + total
        mf.store_timestamp = now
        msg.store_timestamp = now
        handoff = self.handoff
        if handoff is not None and len(handoff) < HANDOFF_MAX:
            handoff.append(self._dispatch_request(msg, props_s, topic, queue_id, phy, total, now, qoff, sflag))
        self.put_message_times_total += 1
        self.put_message_size_total += total
        # Not timed for the slow-put warning (put_messages is): this path holds no lock, and one
        # more clock read costs ~0.3 µs, several percent of it.
        return put_ok_result(phy, total, now, qoff, self._store_id_prefix)

    def _put_lmq_message(self, msg: MessageExtBrokerInner, names_value: str) -> PutMessageResult:
        """A message to dispatch to Light Message Queues (enableLmq, INNER_MULTI_DISPATCH):
        each %LMQ% queue it names gets its next offset in INNER_MULTI_QUEUE_OFFSET, the other
        names an empty item (LmqDispatch#wrapLmqDispatch, StringUtils.join of nulls), the
        properties string is written again from the dict (handlePropertiesForLmqMsg), and once
        the record is in, each named LMQ's offset moves on by one (LmqDispatch#updateLmqOffsets).

        Such records always take the plain pure-Python path (put_messages) since their
        properties are rewritten; appends run on the loop only, so no other put comes between
        reading and moving the offsets."""
        names = split_lmq_names(names_value)
        table = self.lmq_topic_queue_table
        offsets = [str(table.get((name, LMQ_QUEUE_ID), 0)) if is_lmq(name) else "" for name in names]
        msg.properties[_MULTI_QUEUE_OFFSET] = LMQ_DISPATCH_SEPARATOR.join(offsets)
        msg.properties_string = properties_to_string(msg.properties)
        msg.parsed_properties = None
        result = self.put_messages([msg])
        if result.status is PutMessageStatus.PUT_OK:
            for name in names:
                if is_lmq(name):
                    key = (name, LMQ_QUEUE_ID)
                    table[key] = table.get(key, 0) + 1
        return result

    def put_messages(self, msgs: list[MessageExtBrokerInner]) -> PutMessageResult:
        """Append all records or none, in one lock; a batch may span segments (the plain path,
        after _put_uniform declined the batch)."""
        if len(msgs) > 1:
            result = self._put_uniform(msgs)
            if result is not None:
                return result
        items = []
        store_addr, store_v6, store_port = self.store_addr, self.store_v6, self.store_port
        own_host = self.store_host
        for msg in msgs:
            store_host = msg.store_host
            if store_host is None or store_host == own_host:
                item = self._prepare_own(msg)
                if item is None:
                    item = self._prepare(msg, store_addr, store_v6, store_port)
            else:
                try:
                    addr, v6 = host_to_bytes(*store_host)
                except (ValueError, TypeError):
                    return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                            AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR))
                item = self._prepare(msg, addr, v6, store_host[1])
            if len(item) == 2:
                return PutMessageResult(item[0], AppendMessageResult(item[1]))
            items.append(item)
        if not items:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR))
        with self.put_message_lock:
            started = _now_ms()
            try:
                result = self._append_locked(items)
            finally:
                self.begin_time_in_lock = 0
        elapsed = _now_ms() - started
        if elapsed > SLOW_PUT_IN_LOCK_MS:
            _warn_slow_put(elapsed, sum(len(m.body) for m in msgs), result)
        return result

    def _put_uniform(self, msgs: list[MessageExtBrokerInner]) -> PutMessageResult | None:
        """put_messages for a batch whose messages share one topic, queue, sysFlag, born host
        and time, reconsume times and prepared offset (the very same objects, as one
        SEND_BATCH_MESSAGE builds them): what they share is checked and laid out once, and the
        records are written straight from the messages (RocketMQ's encodeBatch): 2.5 against
        4.6 µs per message of a 32-message batch on the plain path. Such batches come from the
        revive log's batched acks and from SEND_BATCH_MESSAGE when a put hook needs messages.

        None, before anything is written or counted, whenever the batch is not like that or
        anything is unusual (a new topic or born host, a field or size out of range, a segment
        rollover): put_messages then takes its general path, which reports the precise result.
        """
        m0 = msgs[0]
        topic = m0.topic
        queue_id = m0.queue_id
        sys_flag = m0.sys_flag
        born_ts = m0.born_timestamp
        born_host = m0.born_host
        reconsume = m0.reconsume_times
        prepared = m0.prepared_transaction_offset
        store_host = m0.store_host
        if store_host is not None and store_host != self.store_host:
            return None
        if topic == RMQ_SYS_SCHEDULE_TOPIC and self.delivery_time_of is not None:
            return None  # the delivery time as tag code: the general path's dispatch computes it
        items = []
        add = items.append
        for m in msgs:
            if (m.topic is not topic or m.queue_id is not queue_id or m.sys_flag is not sys_flag
                    or m.born_timestamp is not born_ts or m.born_host is not born_host
                    or m.reconsume_times is not reconsume or m.prepared_transaction_offset is not prepared
                    or m.store_host is not store_host):
                return None
            props_s = m.properties_string
            if not props_s and m.properties:
                props_s = m.encoded_properties()
            parsed = m.parsed_properties
            add((m.flag, m.body, parsed[1] if parsed is not None and parsed[0] is props_s else None, props_s or ""))
        crcs: list[int] = []
        result = self.put_uniform_items(topic, queue_id, sys_flag, born_ts, born_host, reconsume, items,
                                        prepared, crcs)
        if result is not None:
            now = result.append_message_result.store_timestamp
            for m, crc in zip(msgs, crcs, strict=True):
                m.store_timestamp = now
                m.body_crc = crc
        return result

    def put_uniform_items(self, topic: str, queue_id: int, sys_flag: int, born_ts: int, born_host: tuple[str, int],
                          reconsume: int, items: list[tuple[int, bytes, dict[str, str] | None, str | None]],
                          prepared: int = 0, crcs: list[int] | None = None) -> PutMessageResult | None:
        """Append a uniform batch (one topic, queue, sysFlag, born host and time, reconsume times,
        prepared offset; the store's own host) given per message as (flag, body, properties,
        properties_string): the records, result and DispatchRequests _put_uniform writes for the
        MessageExtBrokerInners new_batch_inner_messages builds from the same tuples, without
        building them (SEND_BATCH_MESSAGE, no put hook to run): a MessageExtBrokerInner less
        per record, 17.6 → 15.7 broker µs per sent message (docs/benchmarks.md, Round 4).

        ``properties_string`` None: the string is properties_to_string(properties) and dispatch
        parses it. Otherwise it is stored as is and ``properties`` (None: parse the string) is
        the dict dispatch gets, so it must be what the string parses to and nobody may change it.
        ``crcs``, when given, receives each body's CRC.

        None, before anything is written or counted, whenever anything is unusual (a new topic
        or born host, a field or size out of range, a segment rollover, a delayed-delivery
        topic): the caller then takes put_messages' general path, which reports the precise result.
        """
        if topic == RMQ_SYS_SCHEDULE_TOPIC and self.delivery_time_of is not None:
            return None
        try:
            topic_field = self._topic_fields.get(topic)
            born = self._born_hosts.get(born_host)
        except TypeError:  # an unhashable topic or host
            return None
        if (topic_field is None or born is None or type(queue_id) is not int or not 0 <= queue_id <= _INT_MAX
                or type(sys_flag) is not int or not _INT_MIN <= sys_flag <= _INT_MAX
                or type(reconsume) is not int or not _INT_MIN <= reconsume <= _INT_MAX
                or type(born_ts) is not int or not _LONG_MIN <= born_ts <= _LONG_MAX
                or type(prepared) is not int or not _LONG_MIN <= prepared <= _LONG_MAX):
            return None
        born_addr, born_port, host_bits, hs, fixed = born
        if not 0 <= born_port <= 0xFFFF:
            return None
        fixed += len(topic_field)
        # Pass 1: check and lay out every record; nothing is written yet.
        laid = _layout_uniform(items, fixed, self.max_body_size, self.max_message_size,
                               self.file_size - END_FILE_MIN_BLANK_LENGTH)
        if laid is None:
            return None
        recs, batch_bytes = laid
        if crcs is not None:
            crcs.extend([rec[1] for rec in recs])
        sflag = (sys_flag & ~_V6_BITS) | host_bits
        tran = sflag & _TRAN_MASK
        key = None if tran == _TRAN_PREPARED or tran == _TRAN_ROLLBACK else (topic, queue_id)
        handoff = self.handoff
        if handoff is not None and len(handoff) + len(recs) > HANDOFF_MAX:
            handoff = None
        max_fit = self.file_size - END_FILE_MIN_BLANK_LENGTH
        table = self.topic_queue_table
        with self.put_message_lock:
            try:
                files = self.mapped_file_queue.mapped_files
                mf = files[-1] if files else None
                if mf is None or mf.wrote_position + batch_bytes > max_fit:
                    return None  # no open segment, or the batch rolls over: the general path
                now = self._next_store_timestamp()
                started = now
                self.begin_time_in_lock = now
                start = mf.wrote_position
                base = mf.file_from_offset
                first_logic = table.get(key, 0) if key is not None else 0
                pos, qoff, msg_ids, offsets, requests = _write_uniform(
                    mf.wbuf, start, base, recs, hs, topic, queue_id, sflag, born_ts, born_addr, born_port, now,
                    self.store_addr, self.store_port, reconsume, prepared, topic_field, self._store_id_prefix,
                    first_logic, key is not None, handoff is not None)
                if key is not None:
                    table[key] = qoff
                self._appended(mf, pos, now, handoff, requests, len(recs), batch_bytes)
                result = AppendMessageResult(AppendMessageStatus.PUT_OK, base + start, batch_bytes, msg_ids,
                                             now, first_logic, len(recs), offsets)
                put = PutMessageResult(PutMessageStatus.PUT_OK, result)
            finally:
                self.begin_time_in_lock = 0
        elapsed = _now_ms() - started
        if elapsed > SLOW_PUT_IN_LOCK_MS:
            _warn_slow_put(elapsed, sum(len(item[1]) for item in items), put)
        return put

    def _appended(self, mf: MappedFile, pos: int, now: int, handoff: deque[DispatchRequest] | None,
                  requests: list[DispatchRequest], count: int, size: int) -> None:
        """After a batch was written into ``mf`` up to ``pos``: the segment's position and store
        time, the records' DispatchRequests handed to reput, the put counters."""
        mf.wrote_position = pos
        mf.store_timestamp = now
        if handoff is not None:
            handoff.extend(requests)
        self.put_message_times_total += count
        self.put_message_size_total += size

    def _append_locked(self, items: list) -> PutMessageResult:
        now = self._next_store_timestamp()
        self.begin_time_in_lock = now
        mfq = self.mapped_file_queue
        file_size = self.file_size
        table = self.topic_queue_table
        created: list[MappedFile] = []
        try:
            mf = mfq.get_last_mapped_file_or_create(0)
        except OSError as exc:
            log.error("create mapped file failed: %s", exc)
            return PutMessageResult(
                PutMessageStatus.CREATE_MAPPED_FILE_FAILED, AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
            )
        # Make sure every segment the batch will touch exists before writing anything, so a
        # failure to create one leaves nothing half-written.
        pos = mf.wrote_position
        cur = mf
        for item in items:
            total = item[1]
            if pos + total + END_FILE_MIN_BLANK_LENGTH > file_size:
                try:
                    cur = self._next_file(cur, created)
                except OSError as exc:
                    log.error("create mapped file failed: %s", exc)
                    for _ in created:
                        mfq.delete_last_mapped_file()
                    return PutMessageResult(
                        PutMessageStatus.CREATE_MAPPED_FILE_FAILED,
                        AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR),
                    )
                pos = 0
            pos += total
        # Write.
        first_offset = -1
        first_logic = 0
        ids: list[str] = []
        offsets: list[tuple[int, int]] = []
        parts: list[bytes] = []
        mf_start = mf.wrote_position
        pos = mf_start
        base = mf.file_from_offset
        wrote_bytes = 0
        prefix = self._store_id_prefix
        own_addr = self.store_addr
        pack_long = LONG.pack
        handoff = self.handoff
        if handoff is not None and len(handoff) + len(items) > HANDOFF_MAX:
            handoff = None
        requests: list[DispatchRequest] = []
        dispatch_request = self._dispatch_request
        for item in items:
            (hs, total, crc, queue_id, flag, sflag, born_ts, born_addr, born_port, store_addr, store_port,
             reconsume, prepared, body, tail, key, msg, props_s) = item
            if pos + total + END_FILE_MIN_BLANK_LENGTH > file_size:
                if parts:
                    mf.wbuf[mf_start:pos] = b"".join(parts)
                    parts = []
                blank = file_size - pos
                SIZE_MAGIC.pack_into(mf.wbuf, pos, blank, BLANK_MAGIC_CODE)
                wrote_bytes += blank
                mf.wrote_position = file_size
                mf.store_timestamp = now
                mf = self._following(mf)
                mf_start = pos = 0
                base = mf.file_from_offset
            phy = base + pos
            if key is not None:
                qoff = table.get(key, 0)
                table[key] = qoff + 1
            else:
                qoff = 0
            parts.append(hs.pack(total, MESSAGE_MAGIC_CODE, crc, queue_id, flag, qoff, phy, sflag, born_ts,
                                 born_addr, born_port, now, store_addr, store_port, reconsume, prepared, len(body)))
            parts.append(body)
            parts.append(tail)
            msg.store_timestamp = now
            if first_offset < 0:
                first_offset = phy
                first_logic = qoff
            ids.append(f"{prefix}{phy:016X}" if store_addr is own_addr
                       else (store_addr + INT.pack(store_port) + pack_long(phy)).hex().upper())
            offsets.append((phy, qoff))
            if handoff is not None:
                requests.append(dispatch_request(msg, props_s, msg.topic, queue_id, phy, total, now, qoff, sflag))
            pos += total
            wrote_bytes += total
        if parts:
            mf.wbuf[mf_start:pos] = parts[0] if len(parts) == 1 else b"".join(parts)
        self._appended(mf, pos, now, handoff, requests, len(items), wrote_bytes)
        result = AppendMessageResult(
            AppendMessageStatus.PUT_OK, first_offset, wrote_bytes, ids[0] if len(ids) == 1 else ",".join(ids),
            now, first_logic, len(items), offsets,
        )
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def _dispatch_request(self, msg: MessageExtBrokerInner, props_s: str, topic: str, queue_id: int, phy: int,
                          total: int, store_ts: int, qoff: int, sflag: int) -> DispatchRequest:
        """What check_message_and_return_size decodes from the record just written (same fields,
        same tag code), from the values the append wrote into it; ``props_s`` is the stored
        properties string."""
        parsed = msg.parsed_properties
        if parsed is not None and parsed[0] is props_s:
            props = parsed[1]
        else:
            props = string_to_properties(props_s) if props_s else {}
        tags = props.get(_TAGS)
        tags_code = tags_hash_code(tags) if tags else 0
        if topic == RMQ_SYS_SCHEDULE_TOPIC and self.delivery_time_of is not None:
            level = props.get(_DELAY)
            if level and level.isdigit() and int(level) > 0:
                tags_code = self.delivery_time_of(int(level), store_ts)
        return DispatchRequest(topic, queue_id, phy, total, tags_code, store_ts, qoff, props.get(_KEYS, ""),
                               props.get(_UNIQ_KEY), sflag, msg.prepared_transaction_offset, props)

    def _next_file(self, cur: MappedFile, created: list[MappedFile]) -> MappedFile:
        """The segment after ``cur``, creating it when it does not exist yet."""
        following = self._following(cur)
        if following is not None:
            return following
        nxt = self.mapped_file_queue._create(cur.file_from_offset + self.file_size)
        created.append(nxt)
        return nxt

    def _following(self, cur: MappedFile) -> MappedFile | None:
        return self.mapped_file_queue.find_mapped_file_by_offset(cur.file_from_offset + self.file_size)

    # --- read ----------------------------------------------------------------------------
    def get_message(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes of the record at ``offset``; None when gone or not written."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.read(offset - mf.file_from_offset, size)

    def get_record(self, offset: int) -> bytes | None:
        """The whole record at ``offset`` (its size read from the record itself)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + 8 > mf.read_position or not mf.available:
            return None
        total, magic = SIZE_MAGIC.unpack_from(mf.mm, pos)
        if magic != MESSAGE_MAGIC_CODE or total <= 0:
            return None
        return mf.read(pos, total)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """Store timestamp of the record at ``offset``, -1 when it is not readable."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None or not mf.available:
            return -1
        pos = offset - mf.file_from_offset
        if pos + FIXED_OVERHEAD_V4 > mf.read_position:
            return -1
        try:
            (sflag,) = INT.unpack_from(mf.mm, pos + SYS_FLAG_POSITION)
            (ts,) = LONG.unpack_from(mf.mm, pos + store_timestamp_position(sflag))
        except ValueError:  # unmapped by a retention thread in between
            return -1
        return ts

    # --- parse for dispatch and recovery -------------------------------------------------
    def check_message_and_return_size(
        self, buf, pos: int, limit: int, check_crc: bool, expected_phy: int | None = None
    ) -> DispatchRequest:
        """Parse the record at ``pos``: msg_size 0 for a blank, success False when invalid."""
        if pos + 8 > limit:
            return _invalid(-1)
        total, magic = SIZE_MAGIC.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_CODE:
            return DispatchRequest("", 0, 0, 0, 0, 0, 0, success=True)
        if magic != MESSAGE_MAGIC_CODE:
            return _invalid(-1)
        if total < FIXED_OVERHEAD_V4 or pos + total > limit:
            return _invalid(-1)
        (sflag,) = INT.unpack_from(buf, pos + SYS_FLAG_POSITION)
        ds = _DISPATCH_STRUCTS[sflag & _V6_BITS]
        hsize = ds.size
        if hsize + 3 > total:
            return _invalid(total)
        _t, _m, crc, queue_id, queue_offset, physical_offset, _s, store_ts, prepared, body_len = ds.unpack_from(buf, pos)
        topic_at = pos + hsize + body_len
        end = pos + total
        if body_len < 0 or topic_at + 3 > end:
            return _invalid(total)
        if expected_phy is not None and physical_offset != expected_phy:
            return _invalid(total)
        if check_crc and body_crc32(buf[pos + hsize : topic_at]) != crc:
            log.warning("CRC check failed for the record at %d", physical_offset)
            return _invalid(-1)
        props_at = topic_at + 1 + buf[topic_at]
        if props_at + 2 > end:
            return _invalid(total)
        props_len = (buf[props_at] << 8) | buf[props_at + 1]
        if props_at + 2 + props_len != end:
            return _invalid(total)
        topic_b = buf[topic_at + 1 : props_at]
        topic = self._topic_names.get(topic_b)
        try:
            if topic is None:
                topic = topic_b.decode("utf-8")
                if len(self._topic_names) < 100_000:
                    self._topic_names[topic_b] = topic
            props = string_to_properties(buf[props_at + 2 : end].decode("utf-8")) if props_len else {}
        except UnicodeDecodeError:
            return _invalid(total)
        tags = props.get("TAGS")
        tags_code = tags_hash_code(tags) if tags else 0
        if topic == RMQ_SYS_SCHEDULE_TOPIC and self.delivery_time_of is not None:
            level = props.get(MessageConst.DELAY_TIME_LEVEL)
            if level and level.isdigit() and int(level) > 0:
                tags_code = self.delivery_time_of(int(level), store_ts)
        return DispatchRequest(
            topic, queue_id, physical_offset, total, tags_code, store_ts, queue_offset,
            props.get("KEYS", ""), props.get("UNIQ_KEY"), sflag, prepared, props,
        )

    # --- recovery ------------------------------------------------------------------------
    def _scan(self, index: int, check_crc: bool, on_record: Callable[[DispatchRequest], None] | None) -> int:
        """Walk records from segment ``index`` on; return the offset where valid data ends."""
        files = self.mapped_file_queue.mapped_files
        mf = files[index]
        process_offset = mf.file_from_offset
        pos = 0
        while True:
            req = self.check_message_and_return_size(mf.mm, pos, self.file_size, check_crc, mf.file_from_offset + pos)
            if req.success and req.msg_size > 0:
                if on_record is not None:
                    on_record(req)
                pos += req.msg_size
            elif req.success:
                index += 1
                if index >= len(files):
                    log.info("recover physics file over, last mapped file %s", mf.file_name)
                    break
                mf = files[index]
                process_offset = mf.file_from_offset
                pos = 0
            else:
                log.info("recover physics file end at %s pos %d", mf.file_name, pos)
                break
        return process_offset + pos

    def recover_normally(self) -> int:
        """Clean shutdown: check the last three segments; returns the valid end offset."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            self.mapped_file_queue.flushed_where = self.mapped_file_queue.committed_where = 0
            return 0
        end = self._scan(max(0, len(files) - 3), self.config.check_crc_on_recover, None)
        self._set_end(end)
        return end

    def recover_abnormally(self, min_timestamp: int | None = None) -> tuple[int, int]:
        """Crash: scan from the newest segment older than the checkpoint; (scan start, valid end)."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            self.mapped_file_queue.flushed_where = self.mapped_file_queue.committed_where = 0
            return 0, 0
        index = 0
        for i in range(len(files) - 1, -1, -1):
            if self._is_mapped_file_matched_recover(files[i], min_timestamp):
                log.info("recover from this mapped file %s", files[i].file_name)
                index = i
                break
        start = files[index].file_from_offset
        end = self._scan(index, self.config.check_crc_on_recover, None)
        self._set_end(end)
        return start, end

    def _is_mapped_file_matched_recover(self, mf: MappedFile, min_timestamp: int | None) -> bool:
        (magic,) = INT.unpack_from(mf.mm, MAGIC_POSITION)
        if magic & 0xFFFFFFFF != MESSAGE_MAGIC_CODE:
            return False
        (sflag,) = INT.unpack_from(mf.mm, SYS_FLAG_POSITION)
        (ts,) = LONG.unpack_from(mf.mm, store_timestamp_position(sflag))
        if ts <= 0:
            return False
        limit = self.checkpoint.get_min_timestamp() if min_timestamp is None else min_timestamp
        return ts <= limit

    def _set_end(self, end: int) -> None:
        if self.handoff is not None:
            self.handoff.clear()  # nothing handed off may outlive the data it describes
        mfq = self.mapped_file_queue
        mfq.truncate_dirty_files(end)
        mfq.flushed_where = mfq.committed_where = end

    def prepare_segments(self) -> None:
        """Before traffic (on a thread): make sure a segment is ready, and the next one coming."""
        mfq = self.mapped_file_queue
        if mfq.get_last_mapped_file() is None:
            mfq._create(0, warm=self.config.warm_maped_file_enable)
        else:
            mfq.prepare_next()

    def recover_topic_queue_table(self, table: dict[tuple[str, int], int]) -> None:
        """The queues' next offsets from their ConsumeQueues; the %LMQ% ones also make the LMQ
        table (AbstractConsumeQueueStore#setTopicQueueTable → setLmqTopicQueueTable)."""
        self.topic_queue_table = table
        self.lmq_topic_queue_table = {key: offset for key, offset in table.items() if is_lmq(key[0])}

    def remove_queue_from_topic_queue_table(self, topic: str, queue_id: int) -> None:
        with self.put_message_lock:
            self.topic_queue_table.pop((topic, queue_id), None)
            self.lmq_topic_queue_table.pop((topic, queue_id), None)  # QueueOffsetOperator#remove

    def flush_all(self) -> None:
        """Everything appended into the files (commit, with a pool) and onto the disk."""
        mfq = self.mapped_file_queue
        if self.transient_store_pool is not None:
            mfq.commit_all()
        mfq.flush_until(self.get_max_offset())

    def remain_how_many_data_to_commit(self) -> int:
        return self.mapped_file_queue.remain_how_many_data_to_commit() if self.transient_store_pool else 0


def _invalid(size: int) -> DispatchRequest:
    return DispatchRequest("", 0, 0, size, 0, 0, 0, success=False)


__all__ = ["CommitLog", "MESSAGE_MAGIC_CODE", "BLANK_MAGIC_CODE"]


def _warn_slow_put(elapsed_ms: int, body_length: int, result: PutMessageResult) -> None:
    """CommitLog#asyncPutMessage's warning for an append that held the put lock over 500 ms (a
    page fault on a cold segment, a stalled disk): the log says when the store, not the network,
    made a send slow."""
    log.warning("[NOTIFYME]putMessage in lock cost time(ms)=%d, bodyLength=%d AppendMessageResult=%s",
                elapsed_ms, body_length, result.append_message_result)


_fast = speedups.load("orbitmq.broker.store._speedups_commitlog")  # None: the code above runs
if _fast is not None:
    _layout_uniform = _fast._layout_uniform
    _write_uniform = _fast._write_uniform
