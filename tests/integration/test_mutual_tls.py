"""Mutual TLS with TlsSystemConfig's keys (issue 16, item 3): servers asking for a client
certificate (tls.server.need.client.auth, tls.server.authClient, tls.server.trustCertPath) and
processes presenting one (tls.client.certPath / keyPath), on a NameServer's Remoting port, between
a broker and its NameServer, and on the proxy's gRPC port; the combinations OrbitMQ cannot serve
stop the process with a message naming the keys."""

from __future__ import annotations

import asyncio
import ssl
import sys
from pathlib import Path

import grpc
import pytest

from orbitmq import ClientConfig, Message
from orbitmq.producer import AsyncProducer
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.remoting import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.tls import client_ssl_context
from orbitmq.spark.options import parse_write
from tests.support import ProcessFailed, ProcessRunner, astart_broker, free_port
from tests.support.pki import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _require_client_certs(pki: Pki) -> list[str]:
    return ["tls.server.mode=enforcing", f"tls.server.certPath={pki.server_cert}",
            f"tls.server.keyPath={pki.server_key}", "tls.server.need.client.auth=require",
            "tls.server.authClient=true", f"tls.server.trustCertPath={pki.ca_cert}"]


def _client(cert: str | None = None, key: str | None = None, trust: str | None = None) -> RemotingClient:
    config = type("C", (), {"tls_enable": True, "tls_client_cert_path": cert or "", "tls_client_key_path": key or "",
                            "tls_client_auth_server": bool(trust), "tls_client_trust_cert_path": trust or ""})()
    client = RemotingClient()
    client.ssl_context = client_ssl_context(config)
    return client


async def _namesrv_config(client: RemotingClient, addr: str) -> int:
    try:
        response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG), 5)
        return response.code
    finally:
        await client.close()


async def test_a_nameserver_requiring_client_certificates(procs: ProcessRunner, tmp_path: Path, pki: Pki) -> None:
    ns_port, broker_port = free_port(), free_port()
    addr = f"127.0.0.1:{ns_port}"
    await procs.astart("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={tmp_path / 'kv.json'}",
                                   *_require_client_certs(pki)], ready_text="boot success", name="namesrv",
                       timeout=30)
    # signed by the trusted CA: served (the client checks the server too)
    assert await _namesrv_config(_client(pki.client_cert, pki.client_key, pki.ca_cert), addr) == ResponseCode.SUCCESS
    # no certificate, or one no trusted CA signed: the handshake fails
    for refused in (_client(), _client(pki.rogue_cert, pki.rogue_key)):
        with pytest.raises((RemotingError, ssl.SSLError, ConnectionError, TimeoutError)):
            await _namesrv_config(refused, addr)
    # a broker presenting the CA-signed certificate registers over mutual TLS
    await astart_broker(procs, tmp_path, addr, port=broker_port, brokerName="broker-mtls",
                        **{"tls.enable": "true", "tls.server.mode": "disabled", "tls.client.certPath": pki.client_cert,
                           "tls.client.keyPath": pki.client_key})
    client = _client(pki.client_cert, pki.client_key)
    try:
        response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        assert response.code == ResponseCode.SUCCESS
        assert b"broker-mtls" in response.body
    finally:
        await client.close()
    # the admin CLI: --tls with upstream's tls.config.file of tls.client.* keys
    props = tmp_path / "tls.properties"
    props.write_text(f"tls.client.certPath={pki.client_cert}\ntls.client.keyPath={pki.client_key}\n"
                     f"tls.client.authServer=true\ntls.client.trustCertPath={pki.ca_cert}\n", encoding="utf-8")
    code, out = await _admin("clusterList", "-n", addr, "--tls", "--tlsConfigFile", str(props))
    assert code == 0 and "broker-mtls" in out, out
    code, out = await _admin("clusterList", "-n", addr, "--tls")  # TLS without a certificate
    assert code == 1 and "no NameServer reachable" in out, out


async def _admin(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "orbitmq", "admin", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


@pytest.mark.parametrize(("keys", "message"), [
    (["tls.server.need.client.auth=require"], "needs tls.server.authClient=true"),
    (["tls.server.need.client.auth=sometimes"], "is not one of none, optional, require"),
])
async def test_a_nameserver_refuses_client_auth_it_cannot_serve(procs: ProcessRunner, tmp_path: Path,
                                                                keys: list[str], message: str) -> None:
    with pytest.raises(ProcessFailed) as failed:
        await procs.astart("namesrv", [f"listenPort={free_port()}", f"kvConfigPath={tmp_path / 'kv.json'}",
                                       "tls.test.mode.enable=true", *keys], ready_text="boot success",
                           name="namesrv", timeout=30)
    assert message in str(failed.value)


def _refused_credentials(pki: Pki) -> list[grpc.ChannelCredentials]:
    """TLS trusting the proxy, without a client certificate, and with one no trusted CA signed."""
    roots = Path(pki.ca_cert).read_bytes()
    rogue = Path(pki.rogue_key).read_bytes(), Path(pki.rogue_cert).read_bytes()
    return [grpc.ssl_channel_credentials(roots), grpc.ssl_channel_credentials(roots, *rogue)]


def _proxy_args(pki: Pki, namesrv: str, port: int, need: str = "require") -> list[str]:
    return ["-n", namesrv, "--port", str(port), "autoCreateTopicEnable=true", "tls.server.mode=permissive",
            f"tlsCertPath={pki.server_cert}", f"tlsKeyPath={pki.server_key}", f"tls.server.need.client.auth={need}",
            "tls.server.authClient=true", f"tls.server.trustCertPath={pki.ca_cert}"]


async def test_the_proxy_requiring_client_certificates(procs: ProcessRunner, tmp_path: Path, pki: Pki) -> None:
    ns_port, broker_port, proxy_port = free_port(), free_port(), free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    await procs.astart("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={tmp_path / 'kv.json'}"],
                       ready_port=ns_port, name="namesrv", timeout=30)
    await astart_broker(procs, tmp_path, namesrv, port=broker_port)
    await procs.astart("proxy", _proxy_args(pki, namesrv, proxy_port), ready_port=proxy_port, name="proxy",
                       timeout=30)
    endpoint = f"127.0.0.1:{proxy_port}"
    # the SDK with the CA-signed client certificate sends over mutual TLS
    config = ClientConfig(endpoint, ca_file=pki.ca_cert, cert_file=pki.client_cert, key_file=pki.client_key,
                          request_timeout=10)
    async with AsyncProducer(config, ["MutualTlsTopic"]) as producer:
        receipt = await producer.send(Message("MutualTlsTopic", b"over mutual TLS"))
    assert receipt.message_id
    # the Spark data source's options make the same client (tlsCaFile, tlsCertFile, tlsKeyFile)
    spark_conn = parse_write({"endpoints": endpoint, "topic": "MutualTlsTopic", "tlsCaFile": pki.ca_cert,
                              "tlsCertFile": pki.client_cert, "tlsKeyFile": pki.client_key}).conn
    async with AsyncProducer(spark_conn.client_config(), ["MutualTlsTopic"]) as producer:
        assert (await producer.send(Message("MutualTlsTopic", b"from spark's options"))).message_id
    # TLS without a certificate, or with one no trusted CA signed: refused at the handshake
    for creds in _refused_credentials(pki):
        async with grpc.aio.secure_channel(endpoint, creds) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await sgrpc.MessagingServiceStub(channel).QueryRoute(
                    spb.QueryRouteRequest(topic=pb.Resource(name="MutualTlsTopic")),
                    metadata=(("x-mq-client-id", "mtls-test"),), timeout=5)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    # permissive mode still serves plaintext clients on the same port, as upstream's permissive does
    async with grpc.aio.insecure_channel(endpoint) as plain:
        response = await sgrpc.MessagingServiceStub(plain).QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="MutualTlsTopic")),
            metadata=(("x-mq-client-id", "mtls-test"),), timeout=10)
        assert response.status.code == pb.Code.OK
    # grpcio cannot ask for a certificate without requiring it: optional stops the start
    with pytest.raises(ProcessFailed) as failed:
        await procs.astart("proxy", _proxy_args(pki, namesrv, free_port(), "optional"), ready_text="listening",
                           name="proxy-optional", timeout=30)
    assert "tls.server.need.client.auth=optional is not available" in str(failed.value)
