"""Remoting over TLS with upstream's TlsSystemConfig keys (TlsHelper / TlsModeHandler's roles).

Server: ``tls.server.mode`` disabled | permissive | enforcing. Permissive serves plaintext and TLS
on one port: a Remoting frame starts with the high byte of its length (0x00 or 0x01 below the
16 MiB frame limit), a TLS ClientHello with 0x16, so the first byte, peeked without consuming it,
decides whether the accepted socket gets TLS. The certificate is ``tls.server.certPath`` /
``tls.server.keyPath``, or a self-signed pair with ``tls.test.mode.enable``.
Client: ``tls.enable`` makes a process's Remoting connections TLS; ``tls.client.authServer``
verifies the server against ``tls.client.trustCertPath`` (off, as upstream's default).

Mutual TLS: ``tls.server.need.client.auth`` none (default) | optional | require makes the server
ask its TLS peers for a certificate, which ``tls.client.certPath`` / ``tls.client.keyPath`` (with
``tls.client.keyPassword``) provide. Deviation: upstream with ``tls.server.authClient=false`` asks
for a certificate and accepts any, signed by anyone, which authenticates nobody; Python's ssl
cannot ask without verifying, so OrbitMQ refuses to start with that combination and needs
``tls.server.authClient=true``, verifying against ``tls.server.trustCertPath`` (the system's roots
when empty, as upstream's default trust manager).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orbitmq.common.config import load_properties
from orbitmq.remoting.server_config import RemotingServerConfig

log = logging.getLogger("orbitmq.remoting")

DISABLED, PERMISSIVE, ENFORCING = "disabled", "permissive", "enforcing"
# tls.server.need.client.auth (Netty's ClientAuth names, lower case as upstream documents them)
CLIENT_AUTH_NONE, CLIENT_AUTH_OPTIONAL, CLIENT_AUTH_REQUIRE = "none", "optional", "require"
_VERIFY_MODES = {CLIENT_AUTH_NONE: ssl.CERT_NONE, CLIENT_AUTH_OPTIONAL: ssl.CERT_OPTIONAL,
                 CLIENT_AUTH_REQUIRE: ssl.CERT_REQUIRED}
_TLS_HANDSHAKE = 0x16
FIRST_BYTE_TIMEOUT_SECONDS = 10.0


def generate_self_signed(cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str],
                         hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> None:
    """A self-signed certificate (RSA 2048, one year) naming ``hosts`` as subjectAltNames: with
    the ``cryptography`` package when installed, else the ``openssl`` command. Blocking."""
    Path(cert_path).parent.mkdir(parents=True, exist_ok=True)
    Path(key_path).parent.mkdir(parents=True, exist_ok=True)
    try:
        _generate_with_cryptography(str(cert_path), str(key_path), hosts)
        return
    except ImportError:
        pass
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("cannot make a self-signed certificate: neither the cryptography package nor openssl")
    san = ",".join(f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in hosts)
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "365",
                    "-keyout", str(key_path), "-out", str(cert_path), "-subj", f"/CN={hosts[0]}",
                    "-addext", f"subjectAltName={san}"], check=True, capture_output=True, timeout=60)
    os.chmod(key_path, 0o600)


def _is_ip(host: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _generate_with_cryptography(cert_path: str, key_path: str, hosts: tuple[str, ...]) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    now = datetime.datetime.now(datetime.UTC)
    sans = [x509.IPAddress(ipaddress.ip_address(h)) if _is_ip(h) else x509.DNSName(h) for h in hosts]
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(key, hashes.SHA256()))
    Path(key_path).write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    Path(cert_path).write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def is_encrypted_key(pem: bytes) -> bool:
    """A PKCS#8 "ENCRYPTED PRIVATE KEY" or a traditional PEM key with "Proc-Type: 4,ENCRYPTED"."""
    return b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in pem or b"Proc-Type: 4,ENCRYPTED" in pem


def private_key_pem(key_path: str, password: str = "") -> bytes:
    """The private key at ``key_path`` as unencrypted PEM, in memory only, for TLS stacks that take
    key bytes (grpcio's server credentials cannot take a password). An encrypted key is decrypted
    with ``password`` (tls.server.keyPassword) by the cryptography package when installed, else by
    ``openssl pkey`` given the password through its environment (never on its command line).
    Blocking. ValueError naming the file when it is encrypted and the password is missing or wrong."""
    pem = Path(key_path).read_bytes()
    if not is_encrypted_key(pem):
        return pem
    if not password:
        raise ValueError(f"TLS key {key_path} is encrypted: set tls.server.keyPassword")
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        return _decrypt_with_openssl(key_path, password)
    try:
        key = serialization.load_pem_private_key(pem, password.encode("utf-8"))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"TLS key {key_path}: cannot decrypt it with tls.server.keyPassword ({exc})") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _decrypt_with_openssl(key_path: str, password: str) -> bytes:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ValueError(f"TLS key {key_path} is encrypted: decrypting it needs the cryptography package or openssl")
    env = {**os.environ, "ORBITMQ_TLS_KEY_PASSWORD": password}
    done = subprocess.run([openssl, "pkey", "-in", key_path, "-passin", "env:ORBITMQ_TLS_KEY_PASSWORD"],
                          env=env, capture_output=True, timeout=30, check=False)
    if done.returncode != 0 or b"PRIVATE KEY-----" not in done.stdout:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise ValueError(f"TLS key {key_path}: cannot decrypt it with tls.server.keyPassword ({' '.join(reason)})")
    return done.stdout


def server_ssl_context(config: Any) -> ssl.SSLContext | None:
    """The server context a config asks for (None: plaintext only). Blocking (may write a pair)."""
    mode = str(getattr(config, "tls_server_mode", DISABLED)).strip().lower()
    if mode not in (DISABLED, PERMISSIVE, ENFORCING):
        raise ValueError(f"tls.server.mode {mode!r} is not one of disabled, permissive, enforcing")
    client_auth = need_client_auth(config)
    cert = getattr(config, "tls_server_cert_path", "")
    key = getattr(config, "tls_server_key_path", "")
    test_mode = bool(getattr(config, "tls_test_mode_enable", False))
    if mode == DISABLED or not (test_mode or (cert and key)):
        return None
    if test_mode and not (cert and key and os.path.exists(cert) and os.path.exists(key)):
        if cert and key:
            generate_self_signed(cert, key)
        else:
            cert, key = _test_mode_pair()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key, getattr(config, "tls_server_key_password", "") or None)
    if client_auth != CLIENT_AUTH_NONE:
        ctx.verify_mode = _VERIFY_MODES[client_auth]
        trust = getattr(config, "tls_server_trust_cert_path", "")
        if trust:
            ctx.load_verify_locations(trust)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


# How often a Remoting server looks at its certificate files (upstream's FileWatchService default).
CERT_WATCH_INTERVAL_S = 0.5


class ReloadableServerContext:
    """A Remoting port's server context that can be replaced while it serves (certificate
    rotation, as upstream's broker and NameServer reload their SslContext on a file change).

    The listener keeps ``context`` for good; its SNI callback, which OpenSSL calls on every
    handshake with or without SNI, moves the connection to the newest context. Connections already
    open keep the certificate they were made with."""

    def __init__(self, config: Any) -> None:
        """Blocking (reads files, may write a self-signed pair)."""
        self.config = config
        self.context = server_ssl_context(config)
        self._current = self.context
        if self.context is not None:
            self.context.sni_callback = self._pick

    def _pick(self, ssl_object: Any, server_name: str | None, base: ssl.SSLContext) -> None:
        current = self._current
        if current is not None and current is not base:
            ssl_object.context = current

    def watched_paths(self) -> list[str]:
        """The files whose change reloads the context: tls.server.certPath, keyPath, trustCertPath
        (none for a test-mode pair made without paths)."""
        cert = getattr(self.config, "tls_server_cert_path", "")
        key = getattr(self.config, "tls_server_key_path", "")
        if self.context is None or not (cert and key):
            return []
        return [p for p in (cert, key, getattr(self.config, "tls_server_trust_cert_path", "")) if p]

    def reload(self) -> None:
        """Blocking. Raises (ssl.SSLError, OSError, ValueError) and keeps the current context when
        the files do not make one, e.g. a new certificate whose key is not written yet."""
        fresh = server_ssl_context(self.config)
        if fresh is not None:
            self._current = fresh


def need_client_auth(config: Any) -> str:
    """tls.server.need.client.auth, checked: ValueError for a value upstream would silently read as
    none, and for asking without verifying (tls.server.authClient=false; see the module's note)."""
    value = str(getattr(config, "tls_server_need_client_auth", CLIENT_AUTH_NONE) or CLIENT_AUTH_NONE)
    value = value.strip().lower()
    if value not in _VERIFY_MODES:
        raise ValueError(f"tls.server.need.client.auth {value!r} is not one of none, optional, require")
    if value != CLIENT_AUTH_NONE and not getattr(config, "tls_server_auth_client", False):
        raise ValueError(f"tls.server.need.client.auth={value} needs tls.server.authClient=true (and "
                         "tls.server.trustCertPath naming the CA of the client certificates): OrbitMQ does "
                         "not accept client certificates it has not verified")
    return value


def _test_mode_pair() -> tuple[str, str]:
    """tls.test.mode.enable without paths: one self-signed pair per user, made once and reused by
    every server started that way (a fresh directory per start piled up in the temp dir)."""
    base = Path(tempfile.gettempdir()) / f"orbitmq-remoting-tls-test-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    cert, key = base / "server.crt", base / "server.key"
    with open(base / ".lock", "w") as lock:  # servers starting together make one pair
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cert.exists() and key.exists()):
            generate_self_signed(str(cert), str(key))
    return str(cert), str(key)


def server_tls_mode(config: Any) -> str:
    return str(getattr(config, "tls_server_mode", DISABLED)).strip().lower()


def client_ssl_context(config: Any) -> ssl.SSLContext | None:
    """tls.enable: the context for this process's Remoting connections (None: plaintext)."""
    if not getattr(config, "tls_enable", False):
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if getattr(config, "tls_client_auth_server", False):
        trust = getattr(config, "tls_client_trust_cert_path", "")
        if trust:
            ctx.load_verify_locations(trust)
        else:
            ctx.load_default_certs()
    else:  # upstream's default: encrypt without checking who answers (tls.client.authServer=false)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert, key = getattr(config, "tls_client_cert_path", ""), getattr(config, "tls_client_key_path", "")
    if cert or key:  # mutual TLS: the certificate this process shows servers that ask for one
        if not (cert and key):
            raise ValueError("tls.client.certPath and tls.client.keyPath go together")
        ctx.load_cert_chain(cert, key, getattr(config, "tls_client_key_password", "") or None)
    return ctx


# upstream's tls.config.file default: the tls.client.* keys of command-line tools (mqadmin)
DEFAULT_TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"


def tool_ssl_context(enable: bool, config_file: str | None = None) -> ssl.SSLContext | None:
    """The Remoting client context of a command-line tool: tls.enable, with the tls.client.* keys
    of a properties file (upstream's tls.config.file, /etc/rocketmq/tls.properties when it exists
    and none is named). None when TLS is off."""
    if not enable:
        return None
    path = config_file or (DEFAULT_TLS_CONFIG_FILE if os.path.exists(DEFAULT_TLS_CONFIG_FILE) else None)
    values = load_properties(path) if path else {}
    config = RemotingServerConfig.from_mapping({**values, "tls.enable": "true"})
    return client_ssl_context(config)


class PermissiveListener:
    """A listening socket whose connections get TLS or not by their first byte."""

    def __init__(self, host: str, port: int, factory: Callable[[], asyncio.Protocol], ctx: ssl.SSLContext,
                 backlog: int = 1024, reuse_port: bool = False) -> None:
        self._factory = factory
        self._ctx = ctx
        self._sock = socket.create_server((host, port), backlog=backlog, reuse_port=reuse_port)
        self._sock.setblocking(False)
        self.sockets = [self._sock]
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:  # e.g. EMFILE: back off instead of spinning
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._classify(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _classify(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: readable.done() or readable.set_result(None))
        try:
            await asyncio.wait_for(readable, FIRST_BYTE_TIMEOUT_SECONDS)
            first = conn.recv(1, socket.MSG_PEEK)
        except (TimeoutError, OSError):
            first = b""
        finally:
            loop.remove_reader(conn.fileno())
        if not first:
            conn.close()
            return
        ctx = self._ctx if first[0] == _TLS_HANDSHAKE else None
        try:
            await loop.connect_accepted_socket(self._factory, conn, ssl=ctx)
        except (OSError, ssl.SSLError) as exc:
            log.info("TLS handshake failed: %s", exc)
            conn.close()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in list(self._pending):
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
