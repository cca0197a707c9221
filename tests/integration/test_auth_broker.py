"""ACL 2.0 on the broker over real Remoting: signatures, NO_PERMISSION, the AUTH_* admin codes and
their error paths, the orbitmq admin commands, persistence across a restart and the slave copy."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from orbitmq.admin.cli import main as admin_main
from orbitmq.auth.client import install_signing
from orbitmq.broker.controller import BrokerController
from orbitmq.broker.ha.slave_synchronize import SlaveSynchronize
from orbitmq.client import MQBrokerError, MQClientAPI
from orbitmq.common.message import Message
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support.broker import in_process_broker

ADMIN = ("admin", "admin-secret")
INNER = ("inner", "inner-secret")
AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": ADMIN[0], "password": ADMIN[1]}),
        "innerClientAuthenticationCredentials": json.dumps({"accessKey": INNER[0], "secretKey": INNER[1]})}


def broker(root: Path, **extra: str) -> AbstractAsyncContextManager[BrokerController]:
    return in_process_broker(root, "AuthCluster", "b", **{**AUTH, **extra})


@asynccontextmanager
async def api(credentials: tuple[str, str] | None) -> AsyncIterator[MQClientAPI]:
    client = MQClientAPI(timeout=5)
    install_signing(client.remoting, credentials)
    try:
        yield client
    finally:
        await client.close()


async def call(client: MQClientAPI, addr: str, code: int, header: dict[str, str], body: object = None) -> object:
    response = await client.call(addr, code, header, b"" if body is None else json.dumps(body).encode())
    return json.loads(response.body) if response.body else None


def entry(resource: str, actions: list[str], decision: str = "Allow", ips: list[str] | None = None) -> dict:
    return {"resource": resource, "actions": actions, "decision": decision, "sourceIps": ips or []}


def acl_body(subject: str, *entries: dict) -> dict:
    return {"subject": subject, "policies": [{"policyType": "Custom", "entries": list(entries)}]}


async def send(client: MQClientAPI, addr: str, topic: str) -> None:
    await client.send_message(addr, "b", Message(topic, b"hello"), "PG", 0)


async def test_signatures_permissions_admin_codes_and_restart(tmp_path: Path) -> None:
    async with broker(tmp_path / "b") as b:
        addr = b.config.broker_addr
        async with api(None) as anon, api(ADMIN) as admin, api(("bob", "wrong")) as bad, \
                api(("bob", "bob-pw")) as bob:
            # no credentials / wrong secret / unknown user: NO_PERMISSION naming the reason
            for client, reason in ((anon, "username cannot be null"), (bad, "not found")):
                with pytest.raises(MQBrokerError) as refused:
                    await client.create_topic(addr, TopicConfig("orders-1", 1, 1))
                assert refused.value.code == ResponseCode.NO_PERMISSION and reason in str(refused.value)
            await admin.create_topic(addr, TopicConfig("orders-1", 1, 1))
            await admin.create_topic(addr, TopicConfig("payments", 1, 1))

            # users: create, duplicate, bad type, blank password
            await call(admin, addr, RequestCode.AUTH_CREATE_USER, {"username": "bob"},
                       {"username": "bob", "password": "bob-pw", "userType": "Normal"})
            for body, reason in (({"username": "bob", "password": "x"}, "The user is existed"),
                                 ({"username": "eve", "password": "x", "userType": "Root"}, "userType"),
                                 ({"username": "eve"}, "password")):
                with pytest.raises(MQBrokerError, match=reason):
                    await call(admin, addr, RequestCode.AUTH_CREATE_USER, {"username": body["username"]}, body)
            with pytest.raises(MQBrokerError, match="not exist"):
                await call(admin, addr, RequestCode.AUTH_UPDATE_USER, {"username": "eve"}, {"password": "p"})
            # a Normal user may not administer users (Cluster Update)
            with pytest.raises(MQBrokerError, match=r"User:bob has no permission.*Cluster:AuthCluster") as refused:
                await call(bob, addr, RequestCode.AUTH_LIST_USER, {})
            assert refused.value.code == ResponseCode.NO_PERMISSION

            # ACLs: unknown subject, bad resource, then Pub on Topic:orders-*
            with pytest.raises(MQBrokerError, match="not exist"):
                await call(admin, addr, RequestCode.AUTH_CREATE_ACL, {"subject": "User:ghost"},
                           acl_body("User:ghost", entry("Topic:x", ["Pub"])))
            with pytest.raises(MQBrokerError, match="resource"):
                await call(admin, addr, RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"},
                           acl_body("User:bob", entry("Queue:x", ["Pub"])))
            with pytest.raises(MQBrokerError) as no_acl:
                await send(bob, addr, "orders-1")
            assert no_acl.value.code == ResponseCode.NO_PERMISSION and "no matched policies" in str(no_acl.value)
            await call(admin, addr, RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob"},
                       acl_body("User:bob", entry("Topic:orders-*", ["Pub"])))
            await send(bob, addr, "orders-1")
            with pytest.raises(MQBrokerError, match=r"User:bob has no permission to access Topic:payments"):
                await send(bob, addr, "payments")
            with pytest.raises(MQBrokerError, match=r"Topic:orders-1.*Sub"):
                await bob.call(addr, RequestCode.PULL_MESSAGE, {
                    "consumerGroup": "G", "topic": "orders-1", "queueId": "0", "queueOffset": "0",
                    "maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
                    "subVersion": "0"})
            # Deny on the same resource replaces the entry (merge); a more specific Deny wins over the prefix
            await call(admin, addr, RequestCode.AUTH_UPDATE_ACL, {"subject": "User:bob"},
                       acl_body("User:bob", entry("Topic:orders-1", ["Pub"], "Deny")))
            with pytest.raises(MQBrokerError, match="Deny"):
                await send(bob, addr, "orders-1")
            got = await call(admin, addr, RequestCode.AUTH_GET_ACL, {"subject": "User:bob"})
            assert {e["resource"]: e["decision"] for e in got["policies"][0]["entries"]} == {
                "Topic:orders-*": "Allow", "Topic:orders-1": "Deny"}
            listed = await call(admin, addr, RequestCode.AUTH_LIST_ACL, {"resourceFilter": "orders-1"})
            assert [e["resource"] for e in listed[0]["policies"][0]["entries"]] == ["Topic:orders-1"]
            # disable bob: refused at authentication
            await call(admin, addr, RequestCode.AUTH_UPDATE_USER, {"username": "bob"}, {"userStatus": "disable"})
            with pytest.raises(MQBrokerError, match="disabled"):
                await send(bob, addr, "orders-2")
            await call(admin, addr, RequestCode.AUTH_UPDATE_USER, {"username": "bob"}, {"userStatus": "enable"})

    # restart on the same store: users and ACLs are back
    users_file = tmp_path / "b" / "config" / "users.json"
    assert "bob" in users_file.read_text()
    async with broker(tmp_path / "b") as b:
        addr = b.config.broker_addr
        async with api(ADMIN) as admin, api(("bob", "bob-pw")) as bob:
            users = await call(admin, addr, RequestCode.AUTH_LIST_USER, {})
            assert {u["username"]: u["userType"] for u in users} == {
                "admin": "Super", "inner": "Super", "bob": "Normal"}
            await admin.create_topic(addr, TopicConfig("orders-2", 1, 1))
            await send(bob, addr, "orders-2")
            with pytest.raises(MQBrokerError, match="Deny"):
                await send(bob, addr, "orders-1")
            await call(admin, addr, RequestCode.AUTH_DELETE_USER, {"username": "bob"})
            assert await call(admin, addr, RequestCode.AUTH_GET_ACL, {"subject": "User:bob"}) is None
            with pytest.raises(MQBrokerError, match="not exist"):
                await call(admin, addr, RequestCode.AUTH_DELETE_USER, {"username": "bob"})


async def test_source_ips_and_slave_copy(tmp_path: Path) -> None:
    async with broker(tmp_path / "m") as master, broker(tmp_path / "s") as slave:
        addr = master.config.broker_addr
        async with api(ADMIN) as admin, api(("carol", "pw")) as carol:
            await admin.create_topic(addr, TopicConfig("t-ip", 1, 1))
            await call(admin, addr, RequestCode.AUTH_CREATE_USER, {"username": "carol"},
                       {"username": "carol", "password": "pw"})
            await call(admin, addr, RequestCode.AUTH_CREATE_ACL, {"subject": "User:carol"},
                       acl_body("User:carol", entry("Topic:t-ip", ["Pub"], ips=["10.9.0.0/16"])))
            with pytest.raises(MQBrokerError, match="from 127.0.0.1"):
                await send(carol, addr, "t-ip")
            await call(admin, addr, RequestCode.AUTH_UPDATE_ACL, {"subject": "User:carol"},
                       acl_body("User:carol", entry("Topic:t-ip", ["Pub"], ips=["10.9.0.0/16", "127.0.0.0/8"])))
            await send(carol, addr, "t-ip")

        # the slave copies users and ACLs, signing with the inner credentials
        sync = SlaveSynchronize(slave)
        install_signing(sync.client, INNER)
        sync.master_addr = addr
        try:
            assert await sync.sync_all()
        finally:
            await sync.shutdown()
        assert slave.auth_store.get_user("carol") is not None
        assert slave.auth_store.get_acl("User:carol").policies[0].entries[0].source_ips == ("10.9.0.0/16",
                                                                                             "127.0.0.0/8")
        assert "carol" in (tmp_path / "s" / "config" / "acls.json").read_text()


def run_admin(*argv: str) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = admin_main(list(argv))
    return code, out.getvalue(), err.getvalue()


async def test_admin_cli_user_and_acl_commands(tmp_path: Path) -> None:
    async with broker(tmp_path / "b") as b:
        target = ["-n", "127.0.0.1:1", "-b", b.config.broker_addr]
        creds = ["--accessKey", ADMIN[0], "--secretKey", ADMIN[1]]

        def admin(*argv: str) -> tuple[int, str, str]:
            return run_admin(argv[0], *target, *creds, *argv[1:])

        def run(*argv: str) -> asyncio.Future[tuple[int, str, str]]:
            return asyncio.get_running_loop().run_in_executor(None, admin, *argv)

        code, _out, err = await asyncio.get_running_loop().run_in_executor(
            None, run_admin, "listUser", *target)  # no credentials
        assert code == 1 and "username cannot be null" in err and "code 16" in err
        assert (await run("createUser", "-u", "dave", "-p", "pw", "-t", "Normal"))[0] == 0
        code, _out, err = await run("createUser", "-u", "dave", "-p", "pw")
        assert code == 1 and "The user is existed" in err
        code, out, _err = await run("getUser", "-u", "dave")
        assert code == 0 and "dave" in out and "Normal" in out
        assert (await run("updateUser", "-u", "dave", "-s", "disable"))[0] == 0
        code, out, _ = await run("listUser", "-f", "dav", "--json")
        assert code == 0 and json.loads(out)[0]["userStatus"] == "disable"
        code, out, err = await run("createUser", "-u", "x", "-p", "pw", "-t", "Root")
        assert code == 2 and "userType" in err
        code, _out, err = await run("createAcl", "-s", "User:dave", "-r", "Topic:a*,Group:g1",
                                    "-a", "Pub,Sub", "-i", "10.0.0.0/8", "-d", "Allow")
        assert code == 0, err
        code, _out, err = await run("createAcl", "-s", "User:dave", "-r", "Topic:a", "-a", "Pub",
                                    "-i", "999.1.1.1", "-d", "Allow")
        assert code == 1 and "sourceIp" in err
        code, _out, err = await run("createAcl", "-s", "dave", "-r", "Topic:a", "-a", "Pub", "-d", "Allow")
        assert code == 1 and "subject" in err
        code, out, _err = await run("getAcl", "-s", "User:dave")
        assert code == 0 and "Topic:a*" in out and "Group:g1" in out and "10.0.0.0/8" in out
        assert (await run("updateAcl", "-s", "User:dave", "-r", "Group:g1", "-a", "Sub", "-d", "Deny"))[0] == 0
        code, out, _ = await run("listAcl", "-r", "Group", "--json")
        assert json.loads(out)[0]["policies"][0]["entries"][0]["decision"] == "Deny"
        assert (await run("deleteAcl", "-s", "User:dave", "-r", "Group:g1"))[0] == 0
        code, out, _ = await run("getAcl", "-s", "User:dave", "--json")
        assert [e["resource"] for e in json.loads(out)["policies"][0]["entries"]] == ["Topic:a*"]
        assert (await run("deleteUser", "-u", "dave"))[0] == 0
        code, _out, err = await run("getUser", "-u", "dave")
        assert code == 1 and "not found" in err


@pytest.mark.parametrize("authorization", [False, True])
async def test_namesrv_authenticates_its_own_super_users(tmp_path: Path, authorization: bool) -> None:
    from orbitmq.namesrv.config import NamesrvConfig
    from orbitmq.namesrv.controller import NamesrvController

    config = NamesrvConfig.from_mapping({
        "listenPort": "0", "bindAddress": "127.0.0.1", "kvConfigPath": str(tmp_path / "kv.json"),
        "authenticationEnabled": "true", "authorizationEnabled": str(authorization).lower(),
        "authenticationWhitelist": "105", "innerClientAuthenticationCredentials": AUTH[
            "innerClientAuthenticationCredentials"]})
    namesrv = NamesrvController(config)
    await namesrv.start()
    try:
        async with api(None) as anon, api(INNER) as inner, api(("inner", "bad")) as bad:
            with pytest.raises(MQBrokerError) as refused:
                await anon.call(namesrv.address, RequestCode.GET_BROKER_CLUSTER_INFO)
            assert refused.value.code == ResponseCode.NO_PERMISSION
            with pytest.raises(MQBrokerError, match="signature"):
                await bad.call(namesrv.address, RequestCode.GET_BROKER_CLUSTER_INFO)
            await inner.call(namesrv.address, RequestCode.GET_BROKER_CLUSTER_INFO)
            # 105 skips authentication; with authorization on, an anonymous caller is still refused
            response = await anon.invoke(namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
            expected = ResponseCode.NO_PERMISSION if authorization else ResponseCode.TOPIC_NOT_EXIST
            assert response.code == expected
            response = await inner.invoke(namesrv.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
            assert response.code == ResponseCode.TOPIC_NOT_EXIST
    finally:
        await namesrv.shutdown()


async def test_controller_authenticates_and_the_cli_signs(procs, tmp_path: Path) -> None:
    from tests.support.net import free_port

    port = free_port()
    await procs.astart("controller", [
        "controllerDLegerGroup=g", f"controllerDLegerPeers=n0-127.0.0.1:{free_port()}", "controllerDLegerSelfId=n0",
        f"listenPort={port}", f"controllerStorePath={tmp_path / 'store'}", "authenticationEnabled=true",
        f"innerClientAuthenticationCredentials={AUTH['innerClientAuthenticationCredentials']}"],
        ready_port=port, ready_text="The Controller boot success")
    addr = f"127.0.0.1:{port}"
    loop = asyncio.get_running_loop()
    code, _out, err = await loop.run_in_executor(None, run_admin, "getControllerMetaData", "-a", addr)
    assert code == 1 and "username cannot be null" in err
    code, out, err = await loop.run_in_executor(None, run_admin, "getControllerMetaData", "-a", addr,
                                                "--accessKey", INNER[0], "--secretKey", INNER[1])
    assert code == 0, err
    assert "g" in out
