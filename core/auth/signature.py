"""Request signatures as the official RocketMQ clients compute them (Signature, AclClientRPCHook, AclUtils).

gRPC: ``authorization: MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time,
Signature=<hex>`` where the signature is HMAC-SHA1(key=secret, msg=x-mq-date-time).
Remoting: ext fields ``AccessKey`` and ``Signature`` = base64(HMAC-SHA1(key=secret, msg=the
values of all other ext fields sorted by key, concatenated, then the body)).

Pure functions only: the SDK, the admin CLI and the servers all import them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
SESSION_TOKEN = "x-mq-session-token"
ALGORITHM = "MQv2-HMAC-SHA1"
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def hmac_sha1(secret: str, content: bytes) -> bytes:
    return hmac.new(secret.encode("utf-8"), content, hashlib.sha1).digest()


# ---- gRPC ------------------------------------------------------------------------------------

def grpc_date_time(now: datetime | None = None) -> str:
    """``yyyyMMdd'T'HHmmss'Z'`` in local time, as every official client writes it (a literal Z)."""
    return (now or datetime.now()).strftime(DATE_TIME_FORMAT)


def grpc_auth_headers(access_key: str, secret_key: str, date_time: str | None = None) -> list[tuple[str, str]]:
    """The two metadata pairs a client adds to every RPC (lower-case hex, as the Python client)."""
    stamp = date_time or grpc_date_time()
    signature = hmac_sha1(secret_key, stamp.encode("utf-8")).hex()
    value = f"{ALGORITHM} Credential={access_key}, SignedHeaders={DATE_TIME}, Signature={signature}"
    return [(AUTHORIZATION, value), (DATE_TIME, stamp)]


def parse_grpc_authorization(header: str) -> tuple[str, bytes]:
    """``authorization`` value -> (username, raw signature bytes); ValueError when malformed."""
    _algorithm, sep, rest = header.strip().partition(" ")
    if not sep:
        raise ValueError("authorization header is malformed")
    fields: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, value = item.strip().partition("=")
        if eq:
            fields[key.strip()] = value.strip()
    credential = fields.get("Credential", "")
    username = credential.split("/", 1)[0].strip()
    if not username:
        raise ValueError("authorization header carries no Credential")
    try:
        signature = binascii.unhexlify(fields.get("Signature", ""))
    except (binascii.Error, ValueError):
        raise ValueError("authorization header Signature is not hex") from None
    if not signature:
        raise ValueError("authorization header carries no Signature")
    return username, signature


def parse_grpc_date_time(stamp: str) -> datetime:
    """The header's naive wall-clock time (the trailing Z is not trusted: clients send local time)."""
    return datetime.strptime(stamp.strip(), DATE_TIME_FORMAT)


def grpc_clock_skew_ms(stamp: str, now: float | None = None) -> int:
    """Distance of ``stamp`` from now, read as UTC or as this host's local time, whichever is closer.

    Official clients write local time with a literal 'Z'; taking the nearer reading accepts both
    a UTC-stamping client and a local-time one in the server's zone.
    """
    moment = parse_grpc_date_time(stamp)
    ts = time.time() if now is None else now
    as_utc = datetime.fromtimestamp(ts, UTC).replace(tzinfo=None)
    as_local = datetime.fromtimestamp(ts)
    return int(min(abs(moment - as_utc), abs(moment - as_local)) / timedelta(milliseconds=1))


def verify_grpc_signature(secret_key: str, stamp: str, signature: bytes) -> bool:
    """Constant-time comparison of HMAC-SHA1(secret, date-time) with the header's signature."""
    return hmac.compare_digest(hmac_sha1(secret_key, stamp.encode("utf-8")), signature)


# ---- Remoting --------------------------------------------------------------------------------

def remoting_signature_content(ext_fields: Mapping[str, Any], body: bytes | None) -> bytes:
    """Values of every ext field except Signature, sorted by key, concatenated, then the body."""
    parts = [str(ext_fields[k]) for k in sorted(ext_fields) if k != SIGNATURE and ext_fields[k] is not None]
    content = "".join(parts).encode("utf-8")
    return content + body if body else content


def remoting_signature(secret_key: str, ext_fields: Mapping[str, Any], body: bytes | None) -> str:
    return base64.b64encode(hmac_sha1(secret_key, remoting_signature_content(ext_fields, body))).decode("ascii")


def sign_remoting_fields(ext_fields: dict[str, str], body: bytes | None, access_key: str, secret_key: str,
                         security_token: str | None = None) -> None:
    """AclClientRPCHook.doBeforeRequest: add AccessKey (and SecurityToken), then the Signature."""
    ext_fields.pop(SIGNATURE, None)
    ext_fields[ACCESS_KEY] = access_key
    if security_token:
        ext_fields[SECURITY_TOKEN] = security_token
    ext_fields[SIGNATURE] = remoting_signature(secret_key, ext_fields, body)


def verify_remoting_signature(secret_key: str, ext_fields: Mapping[str, Any], body: bytes | None) -> bool:
    given = str(ext_fields.get(SIGNATURE) or "")
    try:
        raw = base64.b64decode(given, validate=True)
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac_sha1(secret_key, remoting_signature_content(ext_fields, body)), raw)
