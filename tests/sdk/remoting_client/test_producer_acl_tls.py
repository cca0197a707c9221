"""The Remoting producer against an ACL 2.0 broker over TLS: requests signed as AclClientRPCHook
signs them (allowed, refused with NO_PERMISSION, wrong secret), every connection TLS
(tls.enable), a plaintext client refused by the enforcing servers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from orbitmq.client import MQClientAPI, MQClientError, SendStatus
from orbitmq.common.message import Message
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.instance import NOT_FOUND_TOPIC_EXCEPTION
from orbitmq.remoting_client.producer import AsyncDefaultMQProducer
from tests.sdk.remoting_client.cluster import RemotingCluster, start_remoting_cluster, unique

ADMIN = ("admin", "admin-secret")
BOB = ("bob", "bob-secret")
TLS = {"tls.test.mode.enable": "true", "tls.server.mode": "enforcing"}
AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": ADMIN[0], "password": ADMIN[1]}),
        "innerClientAuthenticationCredentials": json.dumps({"accessKey": "inner", "secretKey": "inner-secret"})}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemotingCluster]:
    c = start_remoting_cluster(tmp_path_factory.mktemp("remoting-acl"), brokers=("broker-a",),
                               namesrv_args=tuple(f"{k}={v}" for k, v in TLS.items()),
                               **TLS, **{"tls.enable": "true"}, **AUTH)
    c.credentials, c.tls = ADMIN, True
    try:
        yield c
    finally:
        c.runner.stop_all()


def user_with_pub_on(cluster: RemotingCluster, topic: str) -> None:
    async def go(api: MQClientAPI) -> None:
        addr = cluster.brokers["broker-a"]
        await api.call(addr, RequestCode.AUTH_CREATE_USER, {"username": BOB[0]},
                       json.dumps({"username": BOB[0], "password": BOB[1], "userType": "Normal"}).encode())
        await api.call(addr, RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{BOB[0]}"}, json.dumps(
            {"subject": f"User:{BOB[0]}", "policies": [{"policyType": "Custom", "entries": [
                {"resource": f"Topic:{topic}", "actions": ["Pub"], "decision": "Allow", "sourceIps": []}]}]}).encode())
    cluster.api_call(go)


def cfg(cluster: RemotingCluster, credentials: tuple[str, str] | None, tls: bool = True) -> RemotingClientConfig:
    ak, sk = credentials or (None, None)
    return RemotingClientConfig(namesrv_addr=cluster.namesrv, client_ip="127.0.0.1", access_key=ak, secret_key=sk,
                                tls_enable=tls, mq_client_api_timeout=2.0)


async def test_signed_sends_over_tls(cluster: RemotingCluster) -> None:
    allowed = cluster.create_topic(unique("RcAcl"), queues=2)
    other = cluster.create_topic(unique("RcAclOther"), queues=2)
    user_with_pub_on(cluster, allowed)
    async with AsyncDefaultMQProducer(unique("PG"), cfg(cluster, ADMIN)) as admin:
        assert (await admin.send(Message(other, b"by admin"))).status == SendStatus.SEND_OK
    async with AsyncDefaultMQProducer(unique("PG"), cfg(cluster, BOB)) as bob:
        assert (await bob.send(Message(allowed, b"by bob"))).status == SendStatus.SEND_OK
        with pytest.raises(MQClientError) as refused:
            await bob.send(Message(other, b"not bob's"))
        assert refused.value.code == ResponseCode.NO_PERMISSION
        assert "has no permission" in str(refused.value)
    async with AsyncDefaultMQProducer(unique("PG"), cfg(cluster, (BOB[0], "wrong"))) as wrong:
        with pytest.raises(MQClientError) as bad_secret:
            await wrong.send(Message(allowed, b"x"))
        assert bad_secret.value.code == ResponseCode.NO_PERMISSION
    async with AsyncDefaultMQProducer(unique("PG"), cfg(cluster, None)) as anonymous:
        with pytest.raises(MQClientError) as unsigned:
            await anonymous.send(Message(allowed, b"x"))
        assert unsigned.value.code == ResponseCode.NO_PERMISSION


async def test_plaintext_client_cannot_reach_enforcing_servers(cluster: RemotingCluster) -> None:
    topic = cluster.create_topic(unique("RcTls"), queues=1)
    async with AsyncDefaultMQProducer(unique("PG"), cfg(cluster, ADMIN, tls=False)) as plain:
        with pytest.raises(MQClientError) as no_route:
            await plain.send(Message(topic, b"x"))
        assert no_route.value.code == NOT_FOUND_TOPIC_EXCEPTION
        assert "NameServers" in str(no_route.value)  # the reason: the servers never answered in plaintext
