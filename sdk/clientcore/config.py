"""ClientConfig: where the proxies are, how to authenticate, how long a request may take."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def parse_endpoints(endpoints: str | Sequence[str]) -> list[str]:
    """"host:port;host:port" (or a list) -> ["host:port", ...]; ',' and ';' both separate."""
    if isinstance(endpoints, str):
        items = endpoints.replace(",", ";").split(";")
    elif isinstance(endpoints, (list, tuple)):
        items = list(endpoints)
    else:
        raise TypeError(f"endpoints must be a 'host:port;host:port' str or a list of them, not "
                        f"{type(endpoints).__name__}")
    result: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"endpoint must be a 'host:port' string, not {type(item).__name__}")
        addr = item.strip()
        if not addr:
            continue
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad endpoint {addr!r}: expected host:port")
        if addr not in result:
            result.append(addr)
    if not result:
        raise ValueError("no endpoint given: expected 'host:port[;host:port...]'")
    return result


@dataclass
class Credentials:
    """AccessKey/SecretKey (ACL 2.0 username/password); security_token for STS-style credentials."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("access_key and secret_key must both be non-empty")


@dataclass
class ClientConfig:
    """Connection settings shared by every client.

    ``endpoints``: any proxies of one cluster; requests fail over between them. ``tls``: use a
    TLS channel (``ca_file`` overrides the system roots; ``tls_server_name`` the expected name;
    ``cert_file``/``key_file``, PEM, the client certificate a proxy with
    tls.server.need.client.auth=require asks for).
    """

    endpoints: str | Sequence[str]
    credentials: Credentials | None = None
    request_timeout: float = 5.0
    namespace: str = ""
    tls: bool = False
    ca_file: str | None = None
    tls_server_name: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    # Extra grpc channel options, e.g. [("grpc.keepalive_time_ms", 30000)].
    channel_options: list[tuple[str, object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.endpoint_list = parse_endpoints(self.endpoints)
        if not isinstance(self.request_timeout, (int, float)) or self.request_timeout <= 0:
            raise ValueError(f"request_timeout must be a positive number of seconds, not {self.request_timeout!r}")
        if self.credentials is not None and not isinstance(self.credentials, Credentials):
            raise TypeError("credentials must be an orbitmq.Credentials")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("cert_file and key_file go together (the client certificate and its key)")
        if (self.ca_file or self.cert_file) and not self.tls:
            self.tls = True
