"""TLS for the proxy's gRPC port, as upstream's ProxyAndTlsProtocolNegotiator serves it.

``tls.server.mode`` (TlsSystemConfig): ``disabled`` (plaintext only), ``permissive`` (plaintext and
TLS on the same port, told apart by the first byte a client sends: a TLS ClientHello record starts
with 0x16, an HTTP/2 preface with "P") or ``enforcing`` (TLS only). The certificate is
``tlsCertPath``/``tlsKeyPath``, or a self-signed pair made at start-up when ``tlsTestModeEnable``.
Mutual TLS: ``tls.server.need.client.auth=require`` (with ``tls.server.authClient=true``) makes TLS
clients present a certificate signed by a CA of ``tls.server.trustCertPath``; grpcio's server can
require one or not ask, so ``optional`` is refused at start-up rather than read as either.

grpcio cannot tell the two apart on one listening socket, so in permissive mode the gRPC server
listens on two loopback ports (plaintext and TLS, both handled by grpc's C core) and a small
asyncio front on the public port looks at the first byte and splices the connection to the right
one. The front only copies bytes (TLS stays in grpc's C code); it pauses reading from either side
while the other side's socket buffer is full, so it buffers at most a transport's high-water mark
per direction. The client's real address is remembered per spliced connection
(``relayed_peer``), so ACL source IPs and born hosts still see the client, not the loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from pathlib import Path

import grpc

from orbitmq.remoting.tls import (
    CLIENT_AUTH_NONE,
    CLIENT_AUTH_OPTIONAL,
    generate_self_signed,
    need_client_auth,
    private_key_pem,
)

log = logging.getLogger("orbitmq.proxy.tls")

DISABLED, PERMISSIVE, ENFORCING = "disabled", "permissive", "enforcing"
TLS_MODES = (DISABLED, PERMISSIVE, ENFORCING)
_TLS_HANDSHAKE = 0x16  # TLS record type of a ClientHello
# A client must send its first byte within this long, or the front closes the connection.
FIRST_BYTE_TIMEOUT_SECONDS = 10.0

# "127.0.0.1:<port of the front's connection to grpc>" -> the client's own "ip:port".
_RELAYED_PEERS: dict[str, str] = {}


def relayed_peer(address: str) -> str:
    """The client behind a connection the TLS front spliced to grpc (the address itself otherwise)."""
    return _RELAYED_PEERS.get(address, address) if _RELAYED_PEERS else address


def parse_tls_mode(value: str) -> str:
    mode = (value or "").strip().lower()
    if mode not in TLS_MODES:
        raise ValueError(f"tls.server.mode {value!r} is not one of {', '.join(TLS_MODES)}")
    return mode


# ---- certificates ------------------------------------------------------------------------------

def trust_hint(cert_path: str) -> str:
    """How a client trusts a self-signed certificate (printed by `orbitmq local --tls`)."""
    return (f"TLS certificate: {cert_path} (self-signed). Trust it in clients: Python/C++ (grpc core) "
            f"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={cert_path}; Go SSL_CERT_FILE={cert_path}; Node.js NODE_EXTRA_CA_CERTS={cert_path}; "
            f"Java keytool -importcert -file {cert_path} -keystore <truststore>; grpcurl -cacert {cert_path}")


def tls_enabled(config: object) -> bool:
    """TLS is served when a mode other than disabled is set and there is a certificate to use."""
    mode = parse_tls_mode(getattr(config, "tls_server_mode", DISABLED))
    has_pair = bool(getattr(config, "tls_cert_path", "") and getattr(config, "tls_key_path", ""))
    return mode != DISABLED and (bool(getattr(config, "tls_test_mode_enable", False)) or has_pair)


def client_auth_roots(config: object) -> bytes | None:
    """The PEM roots client certificates must chain to, or None when clients are not asked for one.
    Blocking (reads the file). ValueError for what grpcio cannot serve (see the module's note)."""
    mode = need_client_auth(config)  # none | optional | require, checked as for Remoting
    if mode == CLIENT_AUTH_NONE:
        return None
    if mode == CLIENT_AUTH_OPTIONAL:
        raise ValueError("tls.server.need.client.auth=optional is not available on the proxy's gRPC port: "
                         "grpcio's server either requires a client certificate or does not ask (use require)")
    trust = getattr(config, "tls_server_trust_cert_path", "")
    if not trust:
        raise ValueError("tls.server.need.client.auth=require needs tls.server.trustCertPath: the CA "
                         "certificates client certificates must be signed by")
    return Path(trust).read_bytes()


async def server_credentials(config: object, workdir: str | None = None) -> tuple[bytes, bytes]:
    """(certificate chain PEM, private key PEM): tlsCertPath/tlsKeyPath, or with tlsTestModeEnable
    a self-signed pair (written to tlsCertPath/tlsKeyPath when set, else to a private directory)."""
    return await asyncio.to_thread(_load_or_make, config, workdir)


def _load_or_make(config: object, workdir: str | None) -> tuple[bytes, bytes]:
    cert = getattr(config, "tls_cert_path", "")
    key = getattr(config, "tls_key_path", "")
    if getattr(config, "tls_test_mode_enable", False) and not (cert and os.path.exists(cert)
                                                               and key and os.path.exists(key)):
        if not (cert and key):
            import tempfile
            base = workdir or tempfile.mkdtemp(prefix="orbitmq-tls-")
            cert, key = os.path.join(base, "rocketmq.crt"), os.path.join(base, "rocketmq.key")
        generate_self_signed(cert, key)
        log.info("tlsTestModeEnable: serving a self-signed certificate %s", cert)
    return Path(cert).read_bytes(), private_key_pem(key, getattr(config, "tls_server_key_password", ""))


# ---- certificate rotation -----------------------------------------------------------------------

class ReloadableCredentials:
    """grpc server credentials whose certificate can be replaced while the server runs (upstream's
    TlsCertificateManager: ``tlsCertWatchIntervalMs``). grpc asks :meth:`_fetch` on every new
    handshake; it hands over a replacement once, after :meth:`replace` checked that it loads."""

    def __init__(self, chain: bytes, key: bytes, roots: bytes | None) -> None:
        self.roots = roots
        self._initial = grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=roots)
        self._next: grpc.ServerCertificateConfiguration | None = None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(self._initial, self._fetch,
                                                   require_client_authentication=self.roots is not None)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        replacement, self._next = self._next, None  # called on grpc's threads: one swap, no lock needed
        return replacement

    def replace(self, cert_path: str, key_path: str, roots: bytes | None, key_password: str = "") -> None:
        """Blocking. Raises (ssl.SSLError, OSError, ValueError) when the files do not make a pair
        yet, e.g. the certificate was replaced before its key: grpc then keeps serving the old one."""
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        probe.load_cert_chain(cert_path, key_path, key_password or None)
        chain, key = Path(cert_path).read_bytes(), private_key_pem(key_path, key_password)
        self._next = grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=roots)


def watched_paths(config: object) -> list[str]:
    """The files whose change replaces the proxy's certificate: tlsCertPath, tlsKeyPath and, with
    mutual TLS, tls.server.trustCertPath (none for a test-mode pair made in a private directory)."""
    cert, key = getattr(config, "tls_cert_path", ""), getattr(config, "tls_key_path", "")
    if not (cert and key):
        return []
    trust = getattr(config, "tls_server_trust_cert_path", "") if need_client_auth(config) != CLIENT_AUTH_NONE else ""
    return [p for p in (cert, key, trust) if p]


# ---- the permissive front ------------------------------------------------------------------------

class _Splice(asyncio.Protocol):
    """One side of a spliced connection: what it reads goes to the other side's transport."""

    def __init__(self, other: _Splice | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.other = other
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Duck-typed, not asserted: uvloop's transports (ORBITMQ_EVENT_LOOP=uvloop) are no
        # asyncio.Transport but have every method the splice uses.
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        other = self.other
        if other is not None and other.transport is not None:
            other.transport.write(data)

    def eof_received(self) -> bool:
        other = self.other
        if other is not None and other.transport is not None and other.transport.can_write_eof():
            other.transport.write_eof()
            return True  # half-close: the other direction may still carry data
        return False

    # back-pressure: while our socket buffer is full, stop reading what would be written to it
    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None and not self.other.closed:
            self.other.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()


class _Accepted(_Splice):
    """A client connection: waits for the first byte, then dials the plaintext or TLS backend."""

    def __init__(self, front: TlsFront) -> None:
        super().__init__()
        self.front = front
        self.first: bytes | None = None
        self.peer = "?"
        self.relay_key: str | None = None
        self.counted = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        front = self.front
        if front.connections >= front.max_connections:
            front.refused += 1
            transport.close()
            return
        front.connections += 1
        self.counted = True
        self._timer = asyncio.get_running_loop().call_later(FIRST_BYTE_TIMEOUT_SECONDS, transport.close)

    def data_received(self, data: bytes) -> None:
        if self.other is not None:
            if self.other.transport is not None:
                self.other.transport.write(data)
            return
        if self.first is not None:  # still dialing: keep the bytes (reading is paused meanwhile)
            self.first += data
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.first = data
        assert self.transport is not None
        self.transport.pause_reading()
        port = self.front.tls_port if data[0] == _TLS_HANDSHAKE else self.front.plain_port
        if port is None:  # enforcing mode without a plaintext backend, or the reverse
            self.transport.close()
            return
        task = asyncio.get_running_loop().create_task(self._dial(port))
        self.front.tasks.add(task)
        task.add_done_callback(self.front.tasks.discard)

    async def _dial(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            # The backend side knows its client from birth: grpc's server sends its SETTINGS on
            # accept, and uvloop can deliver them before create_connection returns here.
            _, backend = await loop.create_connection(lambda: _Splice(other=self), "127.0.0.1", port)
        except OSError as exc:
            log.warning("TLS front: backend 127.0.0.1:%d refused %s: %s", port, self.peer, exc)
            if self.transport is not None:
                self.transport.close()
            return
        assert isinstance(backend, _Splice) and backend.transport is not None
        if self.closed:
            backend.transport.close()
            return
        local = backend.transport.get_extra_info("sockname")
        self.relay_key = f"127.0.0.1:{local[1]}"
        _RELAYED_PEERS[self.relay_key] = self.peer
        self.other = backend
        backend.transport.write(self.first or b"")
        self.first = None
        if self.transport is not None:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.counted:
            self.counted = False
            self.front.connections -= 1
        if self.relay_key is not None:
            _RELAYED_PEERS.pop(self.relay_key, None)
        super().connection_lost(exc)


class TlsFront:
    """The public port in permissive mode: splices each connection to grpc's plaintext or TLS port."""

    def __init__(self, host: str, port: int, plain_port: int | None, tls_port: int | None,
                 max_connections: int = 100_000, *, reuse_port: bool = False) -> None:
        self.host = host
        self.reuse_port = reuse_port  # a worker of `orbitmq proxy --workers N` shares the port
        self.port = port
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.max_connections = max_connections
        self.connections = 0
        self.refused = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Accepted(self), self.host, self.port,
                                                backlog=1024, reuse_address=True, reuse_port=self.reuse_port or None)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self.tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
