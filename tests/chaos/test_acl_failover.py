"""ACL 2.0 across a failover: users and ACLs created on the master reach the slaves (their
metadata sync), so the promoted slave authenticates and authorizes exactly as the old master did."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import grpc

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.interop import rawgrpc
from tests.interop.test_auth import entry, signed
from tests.support import ProcessRunner
from tests.support.ha_cluster import HACluster

ADMIN = ("admin", "admin-secret")
INNER = {"accessKey": "inner", "secretKey": "inner-secret"}


async def _auth_call(cluster: HACluster, addr: str, code: int, header: dict[str, str], body: dict) -> None:
    response = await cluster.api.invoke(addr, code, header, json.dumps(body).encode())
    assert response.code == ResponseCode.SUCCESS, (code, response.code, response.remark)


def _send(endpoint: str, topic: str, creds: tuple[str, str]) -> int:
    with grpc.insecure_channel(endpoint) as channel:
        return rawgrpc.send(sgrpc.MessagingServiceStub(channel), rawgrpc.message(topic), md=signed(*creds)).status.code


async def _wait_send(endpoint: str, topic: str, creds: tuple[str, str], expect: int, timeout: float = 40) -> None:  # noqa: ASYNC109
    """Until a signed send answers ``expect`` (the proxy moves to the new master meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        code = await asyncio.to_thread(_send, endpoint, topic, creds)
        if code == expect:
            return
        assert time.monotonic() < deadline, f"send as {creds[0]} to {topic} answers {pb.Code.Name(code)}"
        await asyncio.sleep(0.5)


async def test_users_and_acls_survive_a_failover(procs: ProcessRunner, tmp_path: Path) -> None:
    auth = {"authenticationEnabled": "true", "authorizationEnabled": "true",
            "initAuthenticationUser": json.dumps({"username": ADMIN[0], "password": ADMIN[1]}),
            "innerClientAuthenticationCredentials": json.dumps(INNER)}
    cluster = HACluster(procs, tmp_path / "ha", extra_broker=auth, admin_credentials=ADMIN,
                        extra_proxy=["authenticationEnabled=true", "authorizationEnabled=true",
                                     f"innerClientAuthenticationCredentials={json.dumps(INNER)}",
                                     "userCacheRefreshSecond=1", "aclCacheRefreshSecond=1"])
    try:
        await cluster.start()
        allowed, other = "AclFailoverOrders", "AclFailoverOther"
        for topic in (allowed, other):
            await cluster.create_topic(topic)
            await cluster.wait_topic_routed(topic)
        master = await cluster.wait_master()
        # Created on the master only: the slaves must copy them.
        await _auth_call(cluster, master, RequestCode.AUTH_CREATE_USER, {"username": "ulla"},
                         {"username": "ulla", "password": "ulla-pw", "userType": "Normal"})
        await _auth_call(cluster, master, RequestCode.AUTH_CREATE_ACL, {"subject": "User:ulla"},
                         {"subject": "User:ulla",
                          "policies": [{"policyType": "Custom", "entries": [entry(f"Topic:{allowed}", ["Pub"])]}]})
        await _wait_send(cluster.endpoint, allowed, ("ulla", "ulla-pw"), pb.Code.OK)
        assert await asyncio.to_thread(_send, cluster.endpoint, other, ("ulla", "ulla-pw")) == pb.Code.UNAUTHORIZED

        slaves = [r for r in cluster.replicas if r.addr != master]
        deadline = time.monotonic() + 30
        while True:  # every slave has the user (AUTH_GET_USER answers it)
            have = []
            for r in slaves:
                response = await cluster.api.invoke(r.addr, RequestCode.AUTH_GET_USER, {"username": "ulla"})
                have.append(response.code == ResponseCode.SUCCESS and b"ulla" in (response.body or b""))
            if all(have):
                break
            assert time.monotonic() < deadline, f"slaves never copied the user: {have}"
            await asyncio.sleep(0.5)

        await cluster.wait_all_in_sync()
        await cluster.kill(cluster.replica_at(master))
        new = await cluster.wait_master(timeout=40, not_addr=master)
        assert new != master
        # The new master decides alike: ulla may publish to one topic and not the other, and a
        # wrong password is still refused.
        await _wait_send(cluster.endpoint, allowed, ("ulla", "ulla-pw"), pb.Code.OK)
        assert await asyncio.to_thread(_send, cluster.endpoint, other, ("ulla", "ulla-pw")) == pb.Code.UNAUTHORIZED
        assert await asyncio.to_thread(_send, cluster.endpoint, allowed, ("ulla", "wrong")) == pb.Code.UNAUTHORIZED
        response = await cluster.api.invoke(new, RequestCode.AUTH_GET_ACL, {"subject": "User:ulla"})
        assert response.code == ResponseCode.SUCCESS and allowed.encode() in (response.body or b"")
    finally:
        await cluster.close()
