"""SDK credentials against a cluster with ACL 2.0 authentication on (NameServer, broker, proxy):
the right AccessKey/SecretKey is accepted, a wrong secret fails with UNAUTHORIZED (40100)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orbitmq import AsyncProducer, AsyncSimpleConsumer, ClientConfig, Credentials, Message
from orbitmq.clientcore.errors import UnauthorizedError
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from tests.interop.harness import CLUSTER_BROKER_KEYS, Cluster, unique
from tests.support import free_port, running, start_broker

ADMIN = ("sdk-admin", "sdk-admin-secret")


@pytest.fixture(scope="module")
def auth_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from orbitmq.auth.client import install_signing  # the ACL helper's signing of Remoting calls

    workdir: Path = tmp_path_factory.mktemp("sdk-auth")
    init_user = json.dumps({"username": ADMIN[0], "password": ADMIN[1]})
    inner = json.dumps({"accessKey": "inner", "secretKey": "inner-secret"})
    ns_port, proxy_port = free_port(), free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    with running(workdir) as runner:
        runner.start("namesrv", [f"listenPort={ns_port}", "authenticationEnabled=true",
                                 f"initAuthenticationUser={init_user}", f"innerClientAuthenticationCredentials={inner}"],
                     ready_port=ns_port, name="namesrv")
        _broker, broker = start_broker(runner, workdir, namesrv, **CLUSTER_BROKER_KEYS, authenticationEnabled="true",
                                       initAuthenticationUser=init_user, innerClientAuthenticationCredentials=inner)
        runner.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "authenticationEnabled=true",
                               f"innerClientAuthenticationCredentials={inner}",
                               "grpcClientConsumerMaxLongPollingTimeoutMillis=3000"],
                     ready_port=proxy_port, name="proxy")
        cluster = Cluster(runner, namesrv, broker, [f"127.0.0.1:{proxy_port}"])
        original = cluster.api_call

        def signed_call(fn):
            async def with_signing(api):
                install_signing(api.remoting, ADMIN)
                return await fn(api)
            return original(with_signing)

        cluster.api_call = signed_call  # type: ignore[method-assign]
        yield cluster


async def test_credentials_accepted_and_wrong_secret_refused(auth_cluster: Cluster) -> None:
    from orbitmq.common.subscription_group import SubscriptionGroupConfig
    from orbitmq.common.topic_config import TopicConfig

    topic, group = unique("SdkAuth"), unique("SdkAuthG")
    auth_cluster.api_call(lambda api: api.create_topic(auth_cluster.broker, TopicConfig(topic, 1, 1)))
    auth_cluster.api_call(lambda api: api.create_subscription_group(auth_cluster.broker,
                                                                    SubscriptionGroupConfig(group)))
    good = ClientConfig(auth_cluster.proxy, Credentials(*ADMIN))
    async with AsyncProducer(good, [topic]) as producer:
        receipt = await producer.send(Message(topic, b"signed"))
    async with AsyncSimpleConsumer(good, group, {topic: "*"}, long_polling_timeout=1) as consumer:
        got = []
        for _ in range(10):
            got += await consumer.receive(4, 10)
            if got:
                break
        await consumer.ack_many(got)
    assert [m.message_id for m in got] == [receipt.message_id]
    for bad in (Credentials(ADMIN[0], "wrong-secret"), None):
        with pytest.raises(UnauthorizedError) as info:
            await AsyncProducer(ClientConfig(auth_cluster.proxy, bad, request_timeout=3), [topic]).start()
        assert info.value.code == pb.Code.UNAUTHORIZED
