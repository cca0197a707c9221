"""Fuzz harnesses: one per decoder that reads bytes from outside the process (issue 16, item 4).

Each harness takes raw bytes and drives one decoder. A decoder may fail only with its documented
exception type (``Target.allowed``); anything else escaping a harness -- IndexError, struct.error,
KeyError, UnicodeDecodeError, TypeError, RecursionError -- is a crash. Hangs and unbounded
allocation are caught by libFuzzer's -timeout / -rss_limit_mb when run under atheris
(tests/fuzz/run.py), and by the replay test's time budget.

Harnesses do not import atheris: the corpus replay in ``make test`` runs them as plain functions.
Where a decoder needs structure (a dict of ext fields, a file), the first byte(s) pick the variant
and the rest is the payload, so every byte string is a valid harness input.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orbitmq.controller.headers  # noqa: F401  (registers the controller's CommandCustomHeaders)
from orbitmq.auth import signature as auth_sig
from orbitmq.auth.engine import remoting_requirements
from orbitmq.auth.model import AuthError
from orbitmq.broker.ha.classic_ha import DefaultHAConnection
from orbitmq.broker.ha.controller_client import SyncStateSet
from orbitmq.broker.ha.epoch_file import decode_epoch_file
from orbitmq.broker.ha.ha_client import AutoSwitchHAClient
from orbitmq.broker.ha.ha_connection import AutoSwitchHAConnection, ProtocolError
from orbitmq.broker.pop.checkpoint import parse_batch_ack_body
from orbitmq.broker.processors.batch_codec import BatchItem, decode_batch, encode_batch
from orbitmq.broker.store.commit_log import CommitLog
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.broker.store.consume_queue import ConsumeQueue
from orbitmq.broker.store.index_file import IndexFile, IndexFileError, index_file_size
from orbitmq.broker.transaction.op_codec import decode_op_body
from orbitmq.common.extra_info import (
    ExtraInfoError,
    parse_extra_info,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
)
from orbitmq.common.filter.errors import FilterExpressionError
from orbitmq.common.filter.java_compat import EvaluationError
from orbitmq.common.filter.message_filter import build_message_filter
from orbitmq.common.message import (
    _py_parse_properties_exact,
    _py_string_to_properties,
    bytes_to_properties,
    parse_properties_exact,
    properties_to_string,
    string_to_properties,
)
from orbitmq.common.message_codec import RecordError, decode_pop_records, decode_record, decode_records
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.route import (
    ClusterInfo,
    KVTable,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from orbitmq.controller.replicas_info import EventDecodeError, decode_event, parse_sync_state_set_body
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.converter import build_message_properties, encode_message_properties
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.receipt_handle import InvalidReceiptHandle, ReceiptHandle
from orbitmq.proxy.transaction import decode_transaction_id
from orbitmq.remoting.errors import RemotingCommandError
from orbitmq.remoting.headers import CommandCustomHeader
from orbitmq.remoting.protocol import RemotingCommand, _py_decode_command, decode_command

Harness = Callable[[bytes], None]


@dataclass(frozen=True)
class Target:
    fn: Harness
    allowed: tuple[type[BaseException], ...]
    doc: str
    seeds: Callable[[], list[bytes]] = field(default=lambda: [])


TARGETS: dict[str, Target] = {}


def target(name: str, allowed: tuple[type[BaseException], ...], seeds: Callable[[], list[bytes]] | None = None,
           ) -> Callable[[Harness], Harness]:
    def register(fn: Harness) -> Harness:
        TARGETS[name] = Target(fn, allowed, (fn.__doc__ or "").strip(), seeds or (lambda: []))
        return fn
    return register


def run_one(name: str, data: bytes) -> None:
    """Run one input through a harness; the documented failure is swallowed, anything else raised."""
    t = TARGETS[name]
    try:
        t.fn(data)
    except t.allowed:
        pass


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _split(data: bytes, parts: int) -> list[bytes]:
    """Cut at NUL bytes into ``parts`` pieces (missing ones empty): cheap structure for mutators."""
    pieces = data.split(b"\0", parts - 1)
    return pieces + [b""] * (parts - len(pieces))


def _ext_fields(data: bytes) -> dict[str, str]:
    """Pairs key NUL value NUL ...: an extFields map from bytes."""
    items = _text(data).split("\0")
    return {items[i]: items[i + 1] for i in range(0, len(items) - 1, 2)}


# ---- Remoting ------------------------------------------------------------------------------------

def _frame_seeds() -> list[bytes]:
    out = []
    for st in (0, 1):
        cmd = RemotingCommand.request(10, {"topic": "T", "queueId": "1", "p": "\u00e9"}, b"body")
        cmd.serialize_type = type(cmd.serialize_type)(st)
        cmd.remark = "r"
        out.append(cmd.encode()[4:])
    return out


@target("remoting_frame", (RemotingCommandError,), _frame_seeds)
def fuzz_remoting_frame(data: bytes) -> None:
    """A frame after its length prefix: the compiled decoder and the pure-Python one (JSON and
    ROCKETMQ headers) must agree, and a decoded command must encode again."""
    try:
        py = _py_decode_command(data, 0, len(data))
    except RemotingCommandError:
        py = None
    try:
        fast = decode_command(data, 0, len(data))
    except RemotingCommandError:
        fast = None
    if (py is None) != (fast is None):
        raise AssertionError(f"decoders disagree: python={py!r} compiled={fast!r}")
    if py is None or fast is None:
        return
    if (py.code, py.opaque, py.flag, py.remark, py.ext_fields, py.body) != \
            (fast.code, fast.opaque, fast.flag, fast.remark, fast.ext_fields, fast.body):
        raise AssertionError(f"decoders disagree: python={py!r} compiled={fast!r}")
    try:
        py.encode()
    except RemotingCommandError:
        pass


def _all_headers() -> list[type[CommandCustomHeader]]:
    seen: list[type[CommandCustomHeader]] = []
    stack = list(CommandCustomHeader.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls not in seen:
            seen.append(cls)
            stack.extend(cls.__subclasses__())
    return sorted(seen, key=lambda c: (c.__module__, c.__name__))


@target("custom_header", (RemotingCommandError,),
        lambda: [b"\x00topic\x00T\x00queueId\x001", b"\x05brokerName\x00b\x00brokerId\x00x"])
def fuzz_custom_header(data: bytes) -> None:
    """Every CommandCustomHeader (broker, proxy client and controller requests) from extFields."""
    if not data:
        return
    headers = _all_headers()
    cls = headers[data[0] % len(headers)]
    header = cls.from_ext_fields(_ext_fields(data[1:]))
    header.to_ext_fields()


# ---- messages ------------------------------------------------------------------------------------

@target("properties", (ValueError,), lambda: [b"KEYS\x01k1\x02TAGS\x01t\x02", b"a\x01b\x02\x02c\x01\x02"])
def fuzz_properties(data: bytes) -> None:
    """Message properties (NAME\\x01VALUE\\x02...) as read from a record or a Remoting header."""
    text = _text(data)
    if string_to_properties(text) != _py_string_to_properties(text):
        raise AssertionError("compiled and pure-Python string_to_properties disagree")
    if parse_properties_exact(text) != _py_parse_properties_exact(text):
        raise AssertionError("compiled and pure-Python parse_properties_exact disagree")
    bytes_to_properties(data)  # UnicodeDecodeError is a ValueError: the documented failure


def _record_seeds() -> list[bytes]:
    from tests.fuzz.corpus_records import sample_records
    return sample_records()


@target("commitlog_record", (RecordError,), _record_seeds)
def fuzz_commitlog_record(data: bytes) -> None:
    """CommitLog records (pull/POP response bodies, queryMsgById): decode_record and friends."""
    for check_crc in (False, True):
        try:
            decode_records(data, check_crc)
        except RecordError:
            pass
    try:
        decode_pop_records(data)
    except RecordError:
        pass
    decode_record(data, 0, False)


if os.environ.get("FUZZ_STORE_DIR"):  # set by tests/fuzz/run.py: inside its work directory
    _STORE_DIR = os.environ["FUZZ_STORE_DIR"]
    os.makedirs(_STORE_DIR, exist_ok=True)
else:  # imported by the replay tests: a process that ends normally
    _STORE_DIR = tempfile.mkdtemp(prefix="orbitmq-fuzz-")
    atexit.register(shutil.rmtree, _STORE_DIR, True)
_FAKE_COMMITLOG = SimpleNamespace(_topic_names={}, delivery_time_of=lambda level, ts: ts + level)


@target("commitlog_check", (), _record_seeds)
def fuzz_commitlog_check(data: bytes) -> None:
    """CommitLog.check_message_and_return_size, the record parser of dispatch and recovery: it
    answers an invalid DispatchRequest for garbage, never raises."""
    _FAKE_COMMITLOG._topic_names.clear()
    pos = 0
    for _ in range(64):
        req = CommitLog.check_message_and_return_size(_FAKE_COMMITLOG, data, pos, len(data), False, None)
        if not req.success or req.msg_size <= 0:
            break
        pos += req.msg_size
    CommitLog.check_message_and_return_size(_FAKE_COMMITLOG, data, 0, len(data), True, 0)


_SEGMENT = 4096


def _write_segments(directory: str, data: bytes, size: int) -> None:
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    chunks = [data[i:i + size] for i in range(0, max(len(data), 1), size)][:3]
    for n, chunk in enumerate(chunks):
        with open(os.path.join(directory, f"{n * size:020d}"), "wb") as f:
            f.write(chunk.ljust(size, b"\0"))


@target("commitlog_recovery", (), _record_seeds)
def fuzz_commitlog_recovery(data: bytes) -> None:
    """The recovery scan over CommitLog segments holding the input (normal and abnormal recovery)."""
    root = os.path.join(_STORE_DIR, "cl")
    config = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=_SEGMENT,
                                allocate_mapped_file_enable=False)
    _write_segments(config.commit_log_dir, data, _SEGMENT)
    checkpoint = SimpleNamespace(get_min_timestamp=lambda: 1 << 62)
    for abnormal in (False, True):
        log = CommitLog(config, ("127.0.0.1", 10911), checkpoint)  # type: ignore[arg-type]
        log.load()
        segments = len(log.mapped_file_queue.mapped_files)
        try:
            end = log.recover_abnormally()[1] if abnormal else log.recover_normally()
            if not 0 <= end <= segments * _SEGMENT:
                raise AssertionError(f"recovered end {end} outside the segments")
        finally:
            log.mapped_file_queue.shutdown()
        _write_segments(config.commit_log_dir, data, _SEGMENT)


@target("consumequeue", (), lambda: [struct.pack(">qiq", 0, 100, 7) * 3, struct.pack(">qiq", 100, 50, 0)])
def fuzz_consumequeue(data: bytes) -> None:
    """ConsumeQueue 20-byte entries: recovery and the dirty-entry truncation against a CommitLog end."""
    size = 20 * 16
    directory = os.path.join(_STORE_DIR, "cq")
    qdir = os.path.join(directory, "T", "0")
    _write_segments(qdir, data, size)
    cq = ConsumeQueue("T", 0, directory, size)
    try:
        cq.load()
        cq.recover()
        cq.get_min_offset_in_queue()
        cq.get_max_offset_in_queue()
        for index in range(0, 8):
            cq.get_entry(index)
        cq.get_index_buffer(0, 4)
        cq.truncate_dirty_logic_files(int.from_bytes(data[:2] or b"\1", "big"))
    finally:
        cq.shutdown()


@target("indexfile", (IndexFileError,), lambda: [b"\0" * 40 + struct.pack(">ii", 1, 2)])
def fuzz_indexfile(data: bytes) -> None:
    """An IndexFile's header, hash slots and item chains as found on disk: lookups walk them."""
    slots, items = 8, 8
    path = os.path.join(_STORE_DIR, "index", "20250101000000000")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data[:index_file_size(slots, items)].ljust(index_file_size(slots, items), b"\0"))
    index = IndexFile(path, slots, items)
    try:
        for key in ("T#k", "T#a", "x"):
            index.select_phy_offset(key, 32, 0, 1 << 62)
        index.is_time_matched(0, 1 << 40)
        index.put_key("T#k", 1, 2)
    finally:
        index.close()


# ---- bodies brokers and NameServers read ---------------------------------------------------------

def _body_seeds() -> list[bytes]:
    batch = encode_batch([BatchItem(0, b"a", "KEYS\x01k\x02"), BatchItem(0, b"bb", "")])
    route = b'{"queueDatas":[{"brokerName":"b","readQueueNums":4,"writeQueueNums":4,"perm":6}],' \
            b'"brokerDatas":[{"cluster":"c","brokerName":"b","brokerAddrs":{"0":"127.0.0.1:10911"}}]}'
    acks = b'{"brokerName":"b","acks":[{"c":"g","t":"T","q":0,"so":0,"ro":1,"b":"AQ=="}]}'
    return [b"\x00" + batch, b"\x01" + route, b"\x02" + acks, b"\x03" + b"1,2,3", b"\x04" + b'{"topicConfigTable":{}}']


@target("broker_bodies", (ValueError,), _body_seeds)
def fuzz_broker_bodies(data: bytes) -> None:
    """Request/response bodies: SEND_BATCH_MESSAGE's batch, route data and cluster info (from a
    NameServer), POP batch acks, transaction op bodies, topic config wrappers, register-broker bodies.
    Each decoder's documented failure is a ValueError subclass (BatchDecodeError, RouteDataError,
    RevivePayloadError)."""
    if not data:
        return
    kind, payload = data[0] % 6, data[1:]
    if kind == 0:
        decode_batch(payload)
    elif kind == 1:
        TopicRouteData.decode(payload)
        ClusterInfo.decode(payload)
    elif kind == 2:
        parse_batch_ack_body(payload)
    elif kind == 3:
        decode_op_body(payload)
    elif kind == 4:
        TopicConfigSerializeWrapper.decode(payload)
        KVTable.decode(payload)
    else:
        RegisterBrokerBody.decode(payload, compressed=bool(payload[:1] == b"\x78"))


# ---- POP / proxy handles ---------------------------------------------------------------------------

@target("receipt_handle", (InvalidReceiptHandle,),
        lambda: [b"0 1700000000000 60000 0 0 broker-a 1 5 1024", b"3 1 2 3 1 b 0 9"])
def fuzz_receipt_handle(data: bytes) -> None:
    """Receipt handles clients send back on Ack/ChangeInvisibleDuration (ExtraInfo + CommitLog offset)."""
    ReceiptHandle.decode(_text(data))


@target("extra_info", (ExtraInfoError,), lambda: [b"0 1 2 3 0 b 1 5", b"0 1 5;1 2 3", b"0 1 5,6,7"])
def fuzz_extra_info(data: bytes) -> None:
    """ExtraInfo and the POP response header items (startOffsetInfo, msgOffsetInfo, orderCountInfo)."""
    text = _text(data)
    for parse in (parse_extra_info, parse_start_offset_info, parse_msg_offset_info, parse_order_count_info):
        try:
            parse(text)
        except ExtraInfoError:
            pass


@target("message_id", (ValueError,), lambda: [b"7F00000100002A9F0000000000000064", b"0" * 56])
def fuzz_message_id(data: bytes) -> None:
    """Offset message ids (queryMsgById, viewMessage)."""
    decode_offset_message_id(_text(data))


@target("transaction_id", (ProxyError,), lambda: [b"AQoUYnJva2VyLWGgU7Fq", b"AQAAYg"])
def fuzz_transaction_id(data: bytes) -> None:
    """The proxy's self-contained transaction ids (EndTransaction)."""
    decode_transaction_id(_text(data))


# ---- SQL92 filters ---------------------------------------------------------------------------------

_SQL_PROPS = {"a": "1", "b": "abc", "TAGS": "t", "c": "2.5", "d": "true"}


@target("sql92", (FilterExpressionError, EvaluationError),
        lambda: [b"a > 0 AND b = 'abc'", b"c BETWEEN 1 AND 3 OR TAGS IN ('t','u')", b"b LIKE 'a%' AND d IS NOT NULL",
                 b"NOT (a <> 1) AND b CONTAINS 'b'"])
def fuzz_sql92(data: bytes) -> None:
    """SQL92 subscription expressions (a consumer's filter): build the filter as the broker does,
    then evaluate it against a message's properties and against none."""
    msg_filter = build_message_filter("SQL92", _text(data))
    for props in (_SQL_PROPS, {}, None):
        msg_filter.is_matched_by_commit_log(props)


# ---- replication -------------------------------------------------------------------------------

_LOOP = asyncio.new_event_loop()


class _Failures(logging.Handler):
    """Collects exceptions the HA loops log instead of raising (their catch-all branch)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


_FAILURES = _Failures()
logging.getLogger("orbitmq").addHandler(_FAILURES)


class _Writer:
    def __init__(self) -> None:
        self.written = 0

    def get_extra_info(self, name: str) -> Any:
        return None

    def write(self, data: bytes) -> None:
        self.written += len(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None


def _ha_service() -> SimpleNamespace:
    replication = SimpleNamespace(append_to_commit_log=lambda offset, body: True,
                                  set_confirm_offset=lambda offset: None, truncate_files=lambda offset: True)
    store = SimpleNamespace(get_max_phy_offset=lambda: 0, replication=replication)
    return SimpleNamespace(
        store=store, store_config=SimpleNamespace(ha_housekeeping_interval=1000, ha_transfer_batch_size=32768,
                                                  ha_send_heartbeat_interval=5000),
        epoch_cache=SimpleNamespace(last_epoch=lambda: -1, append_entry=lambda entry: None, size=lambda: 0),
        on_slave_handshake=lambda conn: None, update_connection_last_caught_up_time=lambda *a: None,
        maybe_expand_in_sync_state_set=lambda *a: None, update_confirm_offset_when_slave_ack=lambda *a: None,
        notify_transfer_some=lambda *a: None, remove_connection=lambda conn: None)


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(loop=_LOOP)
    reader.feed_data(data)
    reader.feed_eof()
    return reader


@target("ha_frames", (ProtocolError, asyncio.IncompleteReadError, TimeoutError),
        lambda: [b"\x00" + struct.pack(">ihhq", 1, 0, 0, 2) + struct.pack(">iq", 2, 100),
                 b"\x01" + struct.pack(">iiqi", 1, 12, 100, 1) + struct.pack(">iq", 1, 0)
                 + struct.pack(">iiqiqq", 2, 4, 0, 1, 0, 0) + b"abcd",
                 b"\x02" + struct.pack(">q", 0) + struct.pack(">q", 4096)])
def fuzz_ha_frames(data: bytes) -> None:
    """HA frames: what an AutoSwitch master reads from a slave (handshake, acks), what an AutoSwitch
    slave reads from its master (handshake reply with epochs, transfer headers and bodies), and
    the offset reports a classic HA master reads."""
    if not data:
        return
    _FAILURES.errors.clear()
    service = _ha_service()
    kind = data[0] % 3
    if kind == 0:
        conn = AutoSwitchHAConnection(service, _reader(data[1:]), _Writer())  # type: ignore[arg-type]
        _LOOP.run_until_complete(conn._read_loop())
    elif kind == 2:  # classic HA: the master reads the slave's 8-byte offset reports
        classic = DefaultHAConnection(service, _reader(data[1:]), _Writer())  # type: ignore[arg-type]
        _LOOP.run_until_complete(classic._read_loop())
    else:
        client = AutoSwitchHAClient(service, 2)  # type: ignore[arg-type]
        client._writer = _Writer()  # type: ignore[assignment]
        reader = _reader(data[1:])

        async def slave() -> None:
            await client._read_handshake_reply(reader)
            await client._transfer_loop(reader)
        _LOOP.run_until_complete(slave())
    if _FAILURES.errors:
        raise _FAILURES.errors[0]


@target("controller_bodies", (EventDecodeError, ValueError, RemotingCommandError),
        lambda: [b"\x00\x00\x01" + b'{"brokerName":"b","newSyncStateSet":[1,2]}',
                 b"\x01" + b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}',
                 b"\x02" + b'{"syncStateSet":[1],"syncStateSetEpoch":1}',
                 b"\x03" + b"0-100\n1-200\n"])
def fuzz_controller_bodies(data: bytes) -> None:
    """The controller's request/response bodies and its Raft log events: an event, a SyncStateSet
    (ALTER_SYNC_STATE_SET and its answer), the broker's epoch file text."""
    if not data:
        return
    kind, payload = data[0] % 4, data[1:]
    if kind == 0:
        decode_event(payload)
    elif kind == 1:
        parse_sync_state_set_body(payload)
    elif kind == 2:
        SyncStateSet.decode(payload)
    else:
        decode_epoch_file(_text(payload))


# ---- gRPC -> Remoting conversion -----------------------------------------------------------------

_PROXY_CONFIG = ProxyConfig()


def _converter_seeds() -> list[bytes]:
    msg = pb.Message()
    msg.topic.name = "T"
    msg.body = b"hello"
    msg.system_properties.tag = "t"
    msg.system_properties.keys.extend(["k1", "k2"])
    msg.system_properties.message_id = "01AABBCC"
    msg.system_properties.message_group = "g"
    msg.user_properties["u"] = "v"
    return [msg.SerializeToString()]


@target("grpc_message", (ProxyError,), _converter_seeds)
def fuzz_grpc_message(data: bytes) -> None:
    """A gRPC apache.rocketmq.v2.Message as a client sends it, converted to Remoting properties
    (both the dict path and the single-pass encoder must agree)."""
    from google.protobuf.message import DecodeError
    try:
        message = pb.Message.FromString(data)
    except DecodeError:
        return
    try:
        props = build_message_properties(message, "G", "127.0.0.1:1", _PROXY_CONFIG)
    except ProxyError as exc:
        try:
            encode_message_properties(message, "G", "127.0.0.1:1", _PROXY_CONFIG)
        except ProxyError:
            return
        raise AssertionError(f"the dict path refused ({exc}) what the encoder took") from None
    text, _msg_id, _type = encode_message_properties(message, "G", "127.0.0.1:1", _PROXY_CONFIG)
    if text != properties_to_string(props):
        raise AssertionError(f"encoder and dict path disagree: {text!r} != {props}")
    # what the broker reads back is what the client set: no property smuggled in by a separator
    decoded = string_to_properties(text)
    for key, value in props.items():
        if key and decoded.get(key) != value:
            raise AssertionError(f"property {key!r}={value!r} reads back as {decoded.get(key)!r}")


# ---- ACL 2.0 ---------------------------------------------------------------------------------------

@target("auth", (ValueError, AuthError),
        lambda: [b"\x00MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=0aff",
                 b"\x0120250101T120000Z", b"\x02\x0a\x00topic\x00T\x00AccessKey\x00ak\x00Signature\x00abc="])
def fuzz_auth(data: bytes) -> None:
    """ACL signatures and headers: the gRPC authorization and x-mq-date-time headers, and the
    Remoting AccessKey/Signature ext fields with the resources a request code needs."""
    if not data:
        return
    kind, payload = data[0] % 3, data[1:]
    if kind == 0:
        user, sig = auth_sig.parse_grpc_authorization(_text(payload))
        auth_sig.verify_grpc_signature("secret", "20250101T120000Z", sig)
    elif kind == 1:
        auth_sig.grpc_clock_skew_ms(_text(payload), 1_700_000_000.0)
    else:
        code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 0
        head, body = _split(payload[2:], 2)
        ext = _ext_fields(head)
        auth_sig.verify_remoting_signature("secret", ext, body)
        remoting_requirements(code, ext, body, "DefaultCluster")


def json_seed(obj: Any) -> bytes:
    return json.dumps(obj).encode()
