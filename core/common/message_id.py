"""The two RocketMQ message ids: the client unique id (UNIQ_KEY) and the offset message id.

Client id (MessageClientIDSetter): a fixed per-process prefix of IP (4 or 16 bytes) + pid
(2 bytes) + a 4-byte instance value (Java uses the class loader's hash; we use random bytes)
followed by the milliseconds since the start of the current local month (4 bytes) and a
2-byte counter, all big-endian, as upper-case hex: 32 chars for IPv4, 56 for IPv6.

Offset id (MessageDecoder.createMessageId): store host IP + port (4 bytes) + CommitLog offset
(8 bytes): 32 hex chars for IPv4, 56 for IPv6. It locates a message without any index.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import socket
import struct
import threading
import time
from datetime import datetime

_IPV4_UNIQ_LEN = 4 + 2 + 4 + 4 + 2
_IPV6_UNIQ_LEN = 16 + 2 + 4 + 4 + 2
_IPV4_OFFSET_ID_LEN = 4 + 4 + 8
_IPV6_OFFSET_ID_LEN = 16 + 4 + 8


def _local_ip_bytes() -> bytes:
    """This host's outward IPv4 address; a time-derived fake one when there is none."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            # connect() on UDP only picks a route; nothing is sent.
            s.connect(("10.255.255.255", 1))
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        pass
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return struct.pack(">Q", int(time.time() * 1000))[4:]


def _month_bounds_ms(now_ms: int) -> tuple[int, int]:
    """Start of the local month containing now_ms, and start of the next one (ms epoch)."""
    now = datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


def _build_prefix(ip: bytes) -> str:
    return (ip + struct.pack(">H", os.getpid() & 0xFFFF) + os.urandom(4)).hex().upper()


class _UniqIdState:
    """Per-process id generator state; rebuilt after fork so children never share a prefix."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.prefix = _build_prefix(_local_ip_bytes())
        self.counter = itertools.count()
        self.start_ms, self.next_start_ms = _month_bounds_ms(int(time.time() * 1000))


_state = _UniqIdState()


def create_uniq_id() -> str:
    """A new client message id (the UNIQ_KEY property), 32 upper-case hex chars."""
    global _state
    if _state.pid != os.getpid():
        _state = _UniqIdState()
    st = _state
    now_ms = int(time.time() * 1000)
    if now_ms >= st.next_start_ms:
        with st.lock:
            if now_ms >= st.next_start_ms:
                st.start_ms, st.next_start_ms = _month_bounds_ms(now_ms)
    span = (now_ms - st.start_ms) & 0xFFFFFFFF
    count = next(st.counter) & 0xFFFF
    return st.prefix + struct.pack(">IH", span, count).hex().upper()


def _uniq_bytes(uniq_id: str) -> bytes:
    if len(uniq_id) not in (_IPV4_UNIQ_LEN * 2, _IPV6_UNIQ_LEN * 2):
        raise ValueError(
            f"invalid unique message id {uniq_id!r}: expected {_IPV4_UNIQ_LEN * 2} or "
            f"{_IPV6_UNIQ_LEN * 2} hex characters, got {len(uniq_id)}"
        )
    try:
        return bytes.fromhex(uniq_id)
    except ValueError:
        raise ValueError(f"invalid unique message id {uniq_id!r}: not hexadecimal") from None


def uniq_id_timestamp(uniq_id: str, now_ms: int | None = None) -> int:
    """Approximate creation time (ms epoch) of a client id, as getNearlyTimeFromID.

    The id only stores the offset into its month, so an offset that would lie in the
    future is taken to belong to the previous month.
    """
    raw = _uniq_bytes(uniq_id)
    ip_len = 16 if len(raw) == _IPV6_UNIQ_LEN else 4
    (span,) = struct.unpack_from(">I", raw, ip_len + 2 + 4)
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    month_start, _ = _month_bounds_ms(now_ms)
    if month_start + span > now_ms:
        month_start, _ = _month_bounds_ms(month_start - 1)
    return month_start + span


def uniq_id_ip(uniq_id: str) -> str:
    """The producer host address embedded in a client id."""
    raw = _uniq_bytes(uniq_id)
    if len(raw) == _IPV6_UNIQ_LEN:
        return str(ipaddress.IPv6Address(raw[:16]))
    return str(ipaddress.IPv4Address(raw[:4]))


def _ip_bytes(host: str) -> bytes:
    try:
        return ipaddress.ip_address(host.strip("[]")).packed
    except ValueError:
        raise ValueError(
            f"invalid store host {host!r}: an IPv4 or IPv6 address literal is required"
        ) from None


def split_host_port(addr: str) -> tuple[str, int]:
    """Split "ip:port" (or "[v6]:port" / bare "v6:port") as RocketMQ prints socket addresses."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"invalid address {addr!r}: expected ip:port")
    return host.strip("[]").lstrip("/"), int(port)


def create_offset_message_id(host: str, port: int, commit_log_offset: int) -> str:
    """The broker-side message id: store host + CommitLog offset, upper-case hex."""
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"invalid port {port}: must be 0..65535")
    if not 0 <= commit_log_offset <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"invalid commit log offset {commit_log_offset}: must be a non-negative long")
    return (_ip_bytes(host) + struct.pack(">Iq", port, commit_log_offset)).hex().upper()


def create_offset_message_id_from_addr(addr: str, commit_log_offset: int) -> str:
    """Same as create_offset_message_id, taking the "ip:port" form MessageExt keeps."""
    host, port = split_host_port(addr)
    return create_offset_message_id(host, port, commit_log_offset)


def decode_offset_message_id(msg_id: str) -> tuple[str, int, int]:
    """(host, port, commit_log_offset) from an offset message id."""
    if not isinstance(msg_id, str):
        raise ValueError(f"invalid message id {msg_id!r}: expected a hex string")
    if len(msg_id) not in (_IPV4_OFFSET_ID_LEN * 2, _IPV6_OFFSET_ID_LEN * 2):
        raise ValueError(
            f"invalid message id {msg_id!r}: expected {_IPV4_OFFSET_ID_LEN * 2} (IPv4) or "
            f"{_IPV6_OFFSET_ID_LEN * 2} (IPv6) hex characters, got {len(msg_id)}"
        )
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"invalid message id {msg_id!r}: not hexadecimal") from None
    if len(raw) * 2 != len(msg_id):  # fromhex skips whitespace (fuzz finding: struct.error)
        raise ValueError(f"invalid message id {msg_id!r}: not hexadecimal")
    ip_len = 16 if len(raw) == _IPV6_OFFSET_ID_LEN else 4
    port, offset = struct.unpack_from(">Iq", raw, ip_len)
    if offset < 0:
        raise ValueError(f"invalid message id {msg_id!r}: negative commit log offset")
    return str(ipaddress.ip_address(raw[:ip_len])), port, offset
