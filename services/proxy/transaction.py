"""Transactions through the proxy: EndTransaction and the check-back relay.

Beyond upstream (whose proxy keeps each transaction's broker and offsets in its own memory for
30 s, so EndTransaction must reach the proxy that saw the send), the transaction id handed to
the client carries what END_TRANSACTION needs: the broker name, the half record's CommitLog
offset and its half-queue offset. Any proxy replica can then end any transaction, also after
a restart. The id is base64url (no padding) of

    version (1 byte) | commitLogOffset (varint) | tranStateTableOffset (varint) |
    brokerName (UTF-8) | CRC32 of all the bytes before it (4 bytes, big-endian)

and a garbled or forged id is refused with INVALID_TRANSACTION_ID before any broker is asked.
The broker in turn checks that the record is a half message of this topic (producer group)
and message id, and refuses a transaction that is no longer open.

Check-backs: a broker's CHECK_TRANSACTION_STATE (39) arrives on the proxy's Remoting
connection (the proxy registered each gRPC producer's topics as producer groups) and goes to
one client of the group with an open Telemetry stream as RecoverOrphanedTransactionCommand.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import logging
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orbitmq.common.message import MessageConst
from orbitmq.common.message_codec import RecordError, decode_record
from orbitmq.common.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter, errors, validation
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.trace import ProxyTracer
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from orbitmq.client.results import SendResult
    from orbitmq.proxy.client_manager import ClientManager
    from orbitmq.proxy.cluster import ClusterService
    from orbitmq.proxy.config import ProxyConfig
    from orbitmq.proxy.context import ProxyContext

log = logging.getLogger("orbitmq.proxy.transaction")
Code = pb.Code

TRANSACTION_ID_VERSION = 1
_MAX_ID_LENGTH = 512
_MAX_BROKER_NAME = 255
_CRC = struct.Struct(">I")
_LONG_MAX = 2**63 - 1
_RESOLUTIONS = {
    pb.TransactionResolution.COMMIT: TRANSACTION_COMMIT_TYPE,
    pb.TransactionResolution.ROLLBACK: TRANSACTION_ROLLBACK_TYPE,
}


@dataclass(frozen=True, slots=True)
class TransactionHandle:
    """What END_TRANSACTION needs to find a half message."""

    broker_name: str
    commit_log_offset: int
    tran_state_table_offset: int


def _put_varint(out: bytearray, value: int) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _get_varint(raw: bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= len(raw) or shift > 63:
            raise ValueError("truncated varint")
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value > _LONG_MAX:
                raise ValueError("offset out of range")
            return value, pos
        shift += 7


def encode_transaction_id(handle: TransactionHandle) -> str:
    name = handle.broker_name.encode("utf-8")
    if not name or len(name) > _MAX_BROKER_NAME:
        raise ValueError("broker name must be 1..255 bytes")
    if not 0 <= handle.commit_log_offset <= _LONG_MAX or not 0 <= handle.tran_state_table_offset <= _LONG_MAX:
        raise ValueError("offsets must be non-negative longs")
    raw = bytearray((TRANSACTION_ID_VERSION,))
    _put_varint(raw, handle.commit_log_offset)
    _put_varint(raw, handle.tran_state_table_offset)
    raw += name
    raw += _CRC.pack(binascii.crc32(raw))
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")


def decode_transaction_id(text: str) -> TransactionHandle:
    """The handle in a transaction id; ProxyError(INVALID_TRANSACTION_ID) when it is not one."""
    def invalid(why: str) -> ProxyError:
        return ProxyError(Code.INVALID_TRANSACTION_ID, f"transaction id is invalid: {why}")

    if not text or not text.strip():
        raise invalid("empty")
    if len(text) > _MAX_ID_LENGTH:
        raise invalid("too long")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise invalid("not base64url") from None
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != text:
        raise invalid("not canonical base64url")
    if len(raw) < 1 + 1 + 1 + 1 + _CRC.size:
        raise invalid("too short")
    body, (crc,) = raw[:-_CRC.size], _CRC.unpack(raw[-_CRC.size:])
    if binascii.crc32(body) != crc:
        raise invalid("checksum mismatch")
    if body[0] != TRANSACTION_ID_VERSION:
        raise invalid(f"unknown version {body[0]}")
    try:
        commit_log_offset, pos = _get_varint(body, 1)
        table_offset, pos = _get_varint(body, pos)
        broker_name = body[pos:].decode("utf-8")
    except (ValueError, UnicodeDecodeError) as exc:
        raise invalid(str(exc)) from None
    if not broker_name:
        raise invalid("no broker name")
    return TransactionHandle(broker_name, commit_log_offset, table_offset)


def offset_of_msg_id(offset_msg_id: str) -> int:
    """The CommitLog offset in an offset message id (last 8 bytes, hex), as clients decode it."""
    raw = bytes.fromhex(offset_msg_id.split(",")[0])
    return struct.unpack(">q", raw[-8:])[0]


def transaction_id_of_send(result: SendResult) -> str:
    """The transaction id of a half message's SEND_OK (ProducerProcessor.fillTransactionData)."""
    return encode_transaction_id(TransactionHandle(
        result.broker_name, offset_of_msg_id(result.offset_msg_id), result.queue_offset))


# Broker answers to END_TRANSACTION -> gRPC codes. SYSTEM_ERROR is every "no such open
# transaction" (missing record, offsets/group/message id mismatch, already resolved): the
# upstream proxy answers INTERNAL_SERVER_ERROR when it has no data for a transaction.
_END_CODES = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    ResponseCode.ILLEGAL_OPERATION: Code.FORBIDDEN,
}


class TransactionActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService, clients: ClientManager) -> None:
        self.config = config
        self.cluster = cluster
        self.clients = clients
        self._counter = itertools.count()
        # Message trace for gRPC clients (services/proxy/trace.py), set by the server with traceEnable.
        self.tracer: ProxyTracer | None = None

    def start(self) -> None:
        """Take CHECK_TRANSACTION_STATE requests the brokers send on our connections."""
        self.cluster.api.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self.on_check)

    # ---- EndTransaction -------------------------------------------------------------------

    async def end_transaction(self, ctx: ProxyContext, request: spb.EndTransactionRequest
                              ) -> spb.EndTransactionResponse:
        topic = validation.topic_of(request.topic)  # "{namespace}%{name}": the producer group too
        handle = decode_transaction_id(request.transaction_id)
        message_id = request.message_id
        if not message_id.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        resolution = _RESOLUTIONS.get(request.resolution, TRANSACTION_NOT_TYPE)
        if resolution == TRANSACTION_NOT_TYPE:
            # The broker ignores an unknown outcome (the transaction stays for the check).
            return spb.EndTransactionResponse(status=errors.ok())
        addr = await self.cluster.master_of(handle.broker_name, topic, ProxyError(
            Code.INVALID_TRANSACTION_ID, f"transaction id names broker {handle.broker_name}, which has no master now"))
        header = h.EndTransactionRequestHeader(
            producer_group=topic, tran_state_table_offset=handle.tran_state_table_offset,
            commit_log_offset=handle.commit_log_offset, commit_or_rollback=resolution, msg_id=message_id,
            topic=topic, from_transaction_check=request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            transaction_id=message_id)
        response = await self.cluster.api.invoke(addr, RequestCode.END_TRANSACTION, header)
        code = _END_CODES.get(response.code, Code.INTERNAL_SERVER_ERROR)
        if self.tracer is not None and code == Code.OK:  # an EndTransaction record, queued
            self.tracer.on_end_transaction(topic, topic, message_id, request.transaction_id,
                                           "COMMIT_MESSAGE" if resolution == TRANSACTION_COMMIT_TYPE
                                           else "ROLLBACK_MESSAGE", header.from_transaction_check, addr)
        return spb.EndTransactionResponse(status=errors.status(code, response.remark or Code.Name(code)))

    # ---- check-back relay -----------------------------------------------------------------

    async def on_check(self, request: RemotingCommand, channel: Any) -> RemotingCommand | None:
        """CHECK_TRANSACTION_STATE from a broker -> RecoverOrphanedTransactionCommand to a client."""
        fields = request.ext_fields or {}
        try:
            msg = decode_record(bytes(request.body or b""), 0, check_crc=False)
            broker_name = str(fields["bname"])
            handle = TransactionHandle(broker_name, int(fields["commitLogOffset"]),
                                       int(fields["tranStateTableOffset"]))
            transaction_id = encode_transaction_id(handle)
        except (RecordError, KeyError, ValueError, TypeError) as exc:
            log.warning("malformed CHECK_TRANSACTION_STATE from %s: %s", getattr(channel, "remote_address", "?"), exc)
            return None
        group = msg.properties.get(MessageConst.PRODUCER_GROUP) or msg.topic
        client_id = self._pick_client(group)
        if client_id is None:
            log.info("no client of producer group %s with a telemetry stream; check of %s dropped", group,
                     fields.get("msgId"))
            return None
        message = converter.build_proto_message(msg)
        command = spb.TelemetryCommand(recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=message, transaction_id=transaction_id))
        self.clients.send_command(client_id, command)
        return None

    def _pick_client(self, group: str) -> str | None:
        """Round robin over the producers of ``group`` (= a topic) with an open Telemetry stream."""
        candidates = [c.client_id for c in self.clients.clients.values()
                      if c.outbox is not None and c.is_producer and group in c.topics()]
        if not candidates:
            return None
        return candidates[next(self._counter) % len(candidates)]
