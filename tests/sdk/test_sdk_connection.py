"""Connection features: signed requests (checked as the server checks them), TLS with a CA file,
failover between endpoints, server Settings applied, clean termination, errors with their Code."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import subprocess
from pathlib import Path

import grpc
import pytest

from orbitmq import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncSimpleConsumer,
    BadRequestError,
    ClientConfig,
    Credentials,
    Message,
    NotFoundError,
    Producer,
    TransportError,
)
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.interop import rawgrpc
from tests.interop.harness import unique
from tests.sdk.conftest import SdkEnv
from tests.support import free_port

Code = pb.Code


class RecordingService(sgrpc.MessagingServiceServicer):
    """Answers QueryRoute and remembers the metadata of each call."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    async def QueryRoute(self, request, context):
        self.metadata.append({k: v for k, v in context.invocation_metadata()})
        return spb.QueryRouteResponse(status=pb.Status(code=Code.OK), message_queues=[
            pb.MessageQueue(topic=request.topic, id=0, permission=pb.Permission.READ_WRITE,
                            broker=pb.Broker(name="broker-a"))])


async def start_fake(tls: tuple[bytes, bytes] | None = None) -> tuple[grpc.aio.Server, RecordingService, str]:
    server = grpc.aio.server()
    service = RecordingService()
    sgrpc.add_MessagingServiceServicer_to_server(service, server)
    port = free_port()
    if tls:
        server.add_secure_port(f"127.0.0.1:{port}", grpc.ssl_server_credentials([(tls[1], tls[0])]))
    else:
        server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, service, f"127.0.0.1:{port}"


async def test_requests_are_signed_as_the_server_verifies_them() -> None:
    server, service, endpoint = await start_fake()
    try:
        producer = AsyncProducer(ClientConfig(endpoint, Credentials("alice", "s3cret"), namespace="ns1"))
        queues = await producer.route("SignedTopic")
        await producer.rpc.close()
    finally:
        await server.stop(None)
    assert [q.broker.name for q in queues] == ["broker-a"]
    md = service.metadata[0]
    assert md["x-mq-client-id"] == producer.client_id and md["x-mq-namespace"] == "ns1"
    assert md["x-mq-language"] == "PYTHON" and md["x-mq-request-id"]
    # DefaultAuthenticationContextBuilder: split at the first space, then on ',' and '='.
    scheme, _, rest = md["authorization"].partition(" ")
    fields = dict(item.strip().split("=", 1) for item in rest.split(","))
    assert scheme == "MQv2-HMAC-SHA1"
    assert fields["Credential"].split("/")[0] == "alice" and fields["SignedHeaders"] == "x-mq-date-time"
    # DefaultAuthenticationHandler: base64(HmacSHA1(date-time, password)) == the hex signature re-encoded.
    expected = base64.b64encode(hmac.new(b"s3cret", md["x-mq-date-time"].encode(), hashlib.sha1).digest())
    assert base64.b64encode(binascii.unhexlify(fields["Signature"])) == expected
    assert len(md["x-mq-date-time"]) == 16 and md["x-mq-date-time"].endswith("Z")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "1", "-subj", "/CN=orbitmq-test",
                    "-addext", "subjectAltName=DNS:orbitmq-test,IP:127.0.0.1"], check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


async def test_tls_channel_with_a_ca_file(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server, service, endpoint = await start_fake((cert.read_bytes(), key.read_bytes()))
    try:
        trusting = AsyncProducer(ClientConfig(endpoint, ca_file=str(cert), request_timeout=3))
        assert trusting.config.tls
        assert [q.id for q in await trusting.route("TlsTopic")] == [0]
        await trusting.rpc.close()
        # The system roots do not know the self-signed certificate: the handshake fails.
        untrusting = AsyncProducer(ClientConfig(endpoint, tls=True, request_timeout=3))
        with pytest.raises(TransportError) as info:
            await untrusting.route("TlsTopic")
        assert info.value.endpoints == [endpoint]
        await untrusting.rpc.close()
    finally:
        await server.stop(None)
    assert len(service.metadata) == 1


async def test_fails_over_from_a_dead_endpoint(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkFailover"), queues=1)
    group = env.cluster.create_group(unique("SdkFailoverG"))
    config = ClientConfig(f"127.0.0.1:{free_port()};{env.endpoints}", request_timeout=3)
    async with AsyncProducer(config, [topic]) as producer:
        receipts = await producer.send_many([Message(topic, b"via another proxy")] * 3)
    assert len({r.message_id for r in receipts}) == 3
    async with AsyncSimpleConsumer(config, group, {topic: "*"}, long_polling_timeout=1) as consumer:
        got = []
        for _ in range(10):
            got += await consumer.receive(8, 10)
            if len(got) >= 3:
                break
        await consumer.ack_many(got)
    assert sorted(m.message_id for m in got) == sorted(r.message_id for r in receipts)


async def test_unreachable_endpoints_are_named_in_the_error() -> None:
    dead = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    producer = AsyncProducer(ClientConfig(";".join(dead), request_timeout=2), ["AnyTopic"])
    with pytest.raises(TransportError) as info:
        await producer.start()
    assert info.value.endpoints == dead
    assert all(d in str(info.value) for d in dead)


async def test_server_settings_applied_and_termination_notified(env: SdkEnv) -> None:
    topic = env.cluster.create_topic(unique("SdkSettings"), queues=1)
    group = env.cluster.create_group(unique("SdkSettingsG"), retry_max_times=4)
    config = ClientConfig(env.endpoints)
    producer = AsyncProducer(config, [topic])
    await producer.start()
    assert producer.server_settings is not None
    assert producer.max_body_size == producer.server_settings.publishing.max_body_size == 4 * 1024 * 1024
    assert producer.retry_policy.max_attempts == producer.server_settings.backoff_policy.max_attempts
    channel, stub = env.cluster.stub(env.cluster.proxies[-1])
    md = [(k, v) for k, v in rawgrpc.metadata() if k != "x-mq-client-id"] + [("x-mq-client-id", producer.client_id)]
    with channel:
        beat = spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)
        assert stub.Heartbeat(beat, metadata=md).status.code == Code.OK
        await producer.shutdown()
        # NotifyClientTermination reached every proxy: this one no longer knows the client.
        assert stub.Heartbeat(beat, metadata=md).status.code == Code.UNRECOGNIZED_CLIENT_TYPE
    async with AsyncSimpleConsumer(config, group, {topic: "*"}) as consumer:
        assert consumer.max_delivery_attempts == 5
        assert consumer.polling_timeout == 3.0  # the proxy's max long-polling timeout (3000 ms here)
        assert consumer.receive_batch_size > 0


async def test_bad_inputs_raise_clear_errors(env: SdkEnv) -> None:
    config = ClientConfig(env.endpoints)
    missing = unique("NoSuchTopic")
    # `orbitmq local` creates topics and groups on first use; the two-proxy cluster does not.
    auto_create = env.name == "local"
    if not auto_create:
        with pytest.raises(NotFoundError) as info:
            await AsyncProducer(config, [missing]).start()
        assert info.value.code == Code.TOPIC_NOT_FOUND and info.value.code_name == "TOPIC_NOT_FOUND"
    topic = env.cluster.create_topic(unique("SdkBad"), queues=1)
    async with AsyncProducer(config, [topic]) as producer:
        if not auto_create:
            with pytest.raises(NotFoundError) as info:
                await producer.send(Message(missing, b"x"))
            assert info.value.code == Code.TOPIC_NOT_FOUND
        with pytest.raises(BadRequestError) as bad:
            await producer.send(Message("bad topic!", b"x"))
        assert bad.value.code == Code.ILLEGAL_TOPIC
        with pytest.raises(TypeError, match="body must be bytes"):
            await producer.send(Message(topic, 123))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="orbitmq.Message"):
            await producer.send("not a message")  # type: ignore[arg-type]
        with pytest.raises(BadRequestError) as bad:
            await producer.send(Message(topic, b"x", message_group="g", delivery_timestamp=1.0))
        assert bad.value.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    if not auto_create:
        no_group = unique("NoSuchGroup")
        async with AsyncSimpleConsumer(config, no_group, {topic: "*"}, long_polling_timeout=1) as consumer:
            with pytest.raises(NotFoundError) as info:
                await consumer.receive(1, 10)
            assert info.value.code == Code.CONSUMER_GROUP_NOT_FOUND
    with pytest.raises(BadRequestError) as bad:
        AsyncSimpleConsumer(config, "  ")
    assert bad.value.code == Code.ILLEGAL_CONSUMER_GROUP
    with pytest.raises(TypeError):
        ClientConfig(8081)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="host:port"):
        ClientConfig("localhost")
    with pytest.raises(TypeError):
        Producer(config, [1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="batch_size"):
        AsyncPullConsumer(config, "g", batch_size=100)
    with pytest.raises(ValueError, match="linger"):
        AsyncProducer(config, linger=-1)
