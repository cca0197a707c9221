"""TLS on the proxy (issue 16, item 3): in tls.server.mode=permissive (upstream's default) one port
serves plaintext and TLS clients; the official Python client connects with and without
tls_enable=True; the client's own address survives the splice (ACL source IPs)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.support import ManagedProcess, free_port, running, start_broker, start_namesrv

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def _tls_cluster(workdir: Path, env: dict[str, str] | None = None,
                 extra: tuple[str, ...] = ()) -> Iterator[tuple[str, Path, ManagedProcess]]:
    """A NameServer, a broker and a permissive-TLS proxy (test-mode pair): (endpoint, cert, proxy)."""
    cert, key = workdir / "tls" / "rocketmq.crt", workdir / "tls" / "rocketmq.key"
    with running(workdir) as runner:
        proxy_port = free_port()
        _, namesrv = start_namesrv(runner, name="namesrv")
        start_broker(runner, workdir, namesrv)
        proxy = runner.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "autoCreateTopicEnable=true",
                                       "tlsTestModeEnable=true", f"tlsCertPath={cert}", f"tlsKeyPath={key}",
                                       "tls.server.mode=permissive", *extra],
                             ready_port=proxy_port, name="proxy", timeout=30, env=env)
        yield f"127.0.0.1:{proxy_port}", cert, proxy


@pytest.fixture(scope="module")
def tls_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    with _tls_cluster(tmp_path_factory.mktemp("tls")) as (endpoint, cert, _proxy):
        yield endpoint, cert


def _route(channel: grpc.Channel) -> spb.QueryRouteResponse:
    stub = sgrpc.MessagingServiceStub(channel)
    return stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="TlsTopic")),
                           metadata=(("x-mq-client-id", "tls-test"),), timeout=10)


def test_plaintext_and_tls_clients_on_one_port(tls_proxy: tuple[str, Path]) -> None:
    endpoint, cert = tls_proxy
    with grpc.insecure_channel(endpoint) as plain:
        assert _route(plain).status.code == pb.Code.OK
    creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    with grpc.secure_channel(endpoint, creds) as secure:
        assert _route(secure).status.code == pb.Code.OK
    # a TLS client that does not trust the certificate is refused at the handshake
    with grpc.secure_channel(endpoint, grpc.ssl_channel_credentials()) as untrusted:
        with pytest.raises(grpc.RpcError):
            _route(untrusted)


def test_the_official_client_with_and_without_tls(tls_proxy: tuple[str, Path]) -> None:
    endpoint, cert = tls_proxy
    script = textwrap.dedent(f"""
        from rocketmq import ClientConfiguration, Credentials, Message, Producer
        for tls in (True, False):
            producer = Producer(ClientConfiguration({endpoint!r}, Credentials(), request_timeout=10),
                                ("TlsTopic",), tls_enable=tls)
            producer.startup()
            try:
                msg = Message()
                msg.topic = "TlsTopic"
                msg.body = b"over tls" if tls else b"plaintext"
                print("SENT", tls, producer.send(msg).message_id, flush=True)
            finally:
                producer.shutdown()
    """)
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert)}  # how `orbitmq local --tls` says to trust it
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "SENT True" in proc.stdout and "SENT False" in proc.stdout


def test_permissive_front_on_uvloop(tmp_path: Path) -> None:
    """The front splices uvloop's transports too (ORBITMQ_EVENT_LOOP=uvloop): no asyncio.Transport."""
    with _tls_cluster(tmp_path, env={**os.environ, "ORBITMQ_EVENT_LOOP": "uvloop"}) as (endpoint, cert, proxy):
        assert "uvloop" in Path(f"/proc/{proxy.pid}/maps").read_text()  # really on uvloop
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        # Many fresh connections: grpc's server speaks first (SETTINGS), and on uvloop that once
        # reached the front before it had linked the splice and was dropped (the client hung).
        for _ in range(10):
            with grpc.insecure_channel(endpoint) as plain:
                assert _route(plain).status.code == pb.Code.OK
            with grpc.secure_channel(endpoint, creds) as secure:
                assert _route(secure).status.code == pb.Code.OK
        assert proxy.popen.poll() is None


def _secure_route_ok(endpoint: str, trust: Path) -> bool:
    creds = grpc.ssl_channel_credentials(root_certificates=trust.read_bytes())
    with grpc.secure_channel(endpoint, creds, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        try:
            return _route(channel).status.code == pb.Code.OK
        except grpc.RpcError:
            return False


def test_a_rotated_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    """tlsCertWatchIntervalMs (upstream's TlsCertificateManager): a new tlsCertPath/tlsKeyPath pair
    reaches new TLS connections; half a rotation (the certificate alone) keeps the old pair."""
    from orbitmq.remoting.tls import generate_self_signed

    live_cert, live_key = tmp_path / "tls" / "rocketmq.crt", tmp_path / "tls" / "rocketmq.key"
    live_cert.parent.mkdir()
    generate_self_signed(str(live_cert), str(live_key))
    old_cert = tmp_path / "old.crt"
    old_cert.write_bytes(live_cert.read_bytes())
    new_cert, new_key = tmp_path / "new.crt", tmp_path / "new.key"
    generate_self_signed(str(new_cert), str(new_key))
    with _tls_cluster(tmp_path, extra=("tlsCertWatchIntervalMs=300",)) as (endpoint, cert, proxy):
        assert cert == live_cert
        assert _secure_route_ok(endpoint, old_cert)
        assert not _secure_route_ok(endpoint, new_cert)
        live_cert.write_bytes(new_cert.read_bytes())  # the certificate first: not a pair yet
        time.sleep(1.0)
        assert _secure_route_ok(endpoint, old_cert)
        live_key.write_bytes(new_key.read_bytes())
        deadline = time.monotonic() + 15
        while not _secure_route_ok(endpoint, new_cert):
            assert time.monotonic() < deadline, "the proxy never served the new certificate"
            time.sleep(0.3)
        assert not _secure_route_ok(endpoint, old_cert)
        with grpc.insecure_channel(endpoint) as plain:  # the plaintext side is untouched
            assert _route(plain).status.code == pb.Code.OK
        assert "do not load yet" in proxy.log_text() and proxy.popen.poll() is None


def _encrypted_pair(base: Path, password: str, pkcs8: bool) -> tuple[Path, Path]:
    """A self-signed pair whose key is encrypted with ``password`` (PKCS#8, or traditional PEM)."""
    from orbitmq.remoting.tls import generate_self_signed

    base.mkdir(parents=True, exist_ok=True)
    cert, plain, key = base / "server.crt", base / "plain.key", base / "server.key"
    generate_self_signed(str(cert), str(plain))
    args = ["openssl", "pkey", "-in", str(plain), "-aes-256-cbc", "-passout", f"pass:{password}", "-out", str(key)]
    if not pkcs8:
        args.insert(2, "-traditional")
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    plain.unlink()
    return cert, key


@pytest.mark.parametrize("pkcs8", [True, False], ids=["pkcs8", "traditional"])
def test_an_encrypted_key_with_its_password(tmp_path: Path, pkcs8: bool) -> None:
    """tls.server.keyPassword opens an encrypted tlsKeyPath for the gRPC port (upstream's gRPC port
    cannot) and for the Remoting port, in enforcing mode."""
    import socket
    import ssl

    cert, key = _encrypted_pair(tmp_path / "pki", "s3cret pass", pkcs8)
    assert b"ENCRYPTED" in key.read_bytes()
    remoting_port = free_port()
    extra = ("tls.server.mode=enforcing", f"tlsCertPath={cert}", f"tlsKeyPath={key}",
             "tls.server.keyPassword=s3cret pass", f"remotingListenPort={remoting_port}")
    with running(tmp_path) as runner:
        _, namesrv = start_namesrv(runner, name="namesrv")
        start_broker(runner, tmp_path, namesrv)
        port = free_port()
        proxy = runner.start("proxy", ["-n", namesrv, "--port", str(port), "autoCreateTopicEnable=true", *extra],
                             ready_port=port, name="proxy", timeout=30)
        endpoint = f"127.0.0.1:{port}"
        assert _secure_route_ok(endpoint, cert)
        context = ssl.create_default_context(cafile=str(cert))
        with socket.create_connection(("127.0.0.1", remoting_port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls_socket:
            assert tls_socket.version() is not None  # the Remoting port's handshake with the same key
        assert proxy.popen.poll() is None
        assert b"s3cret" not in proxy.log_path.read_bytes()  # the password is never logged


@pytest.mark.parametrize("password", ["", "wrong"], ids=["missing", "wrong"])
def test_an_encrypted_key_without_its_password_stops_the_start(tmp_path: Path, password: str) -> None:
    cert, key = _encrypted_pair(tmp_path / "pki", "right", pkcs8=True)
    with running(tmp_path) as runner:
        _, namesrv = start_namesrv(runner, name="namesrv")
        port = free_port()
        proxy = runner.spawn("proxy", ["-n", namesrv, "--port", str(port), "tls.server.mode=enforcing",
                                       f"tlsCertPath={cert}", f"tlsKeyPath={key}", f"tls.server.keyPassword={password}"],
                             name="proxy")
        assert proxy.popen.wait(60) != 0
        assert "tls.server.keyPassword" in proxy.log_text()
