"""gRPC request metadata as the official RocketMQ 5 clients send it, signature included.

The signature is HMAC-SHA1 over the ``x-mq-date-time`` value with the secret key, hex-encoded
(lowercase, as the Python client writes it); the date is local time with a literal 'Z', exactly
as every official client formats it (the server does not check clock skew).
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from datetime import datetime

from orbitmq.clientcore.config import Credentials

SDK_VERSION = "0.1.0"
LANGUAGE = "PYTHON"
PROTOCOL = "v2"
ALGORITHM = "MQv2-HMAC-SHA1"
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


def sign(secret_key: str, date_time: str) -> str:
    """Lowercase hex HMAC-SHA1(key=secret_key, message=date_time)."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def authorization(credentials: Credentials, date_time: str) -> str:
    return (f"{ALGORITHM} Credential={credentials.access_key}, SignedHeaders=x-mq-date-time, "
            f"Signature={sign(credentials.secret_key, date_time)}")


def request_metadata(client_id: str, namespace: str, credentials: Credentials | None,
                     now: datetime | None = None) -> list[tuple[str, str]]:
    """The headers of one call: identity, a fresh request id, date-time and (with credentials) signature."""
    date_time = (now or datetime.now()).strftime(DATE_TIME_FORMAT)
    md = [("x-mq-language", LANGUAGE), ("x-mq-protocol", PROTOCOL), ("x-mq-client-version", SDK_VERSION),
          ("x-mq-client-id", client_id), ("x-mq-request-id", str(uuid.uuid4())), ("x-mq-date-time", date_time)]
    if namespace:
        md.append(("x-mq-namespace", namespace))
    if credentials is not None:
        md.append(("authorization", authorization(credentials, date_time)))
        if credentials.security_token:
            md.append(("x-mq-session-token", credentials.security_token))
    return md
