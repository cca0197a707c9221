"""Remoting over TLS (issue 16, item 3) with TlsSystemConfig's keys: a NameServer and a broker in
tls.server.mode=permissive serve plaintext and TLS on one port; a broker and a proxy with
tls.enable=true register, route and send over TLS; an enforcing server refuses plaintext; a
controller in enforcing mode elects a broker that talks to it over TLS."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer

from orbitmq.remoting import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.tls import client_ssl_context
from tests.integration.test_broker_controller_mode import (
    BROKER_NAME,
    BROKER_TIMINGS,
    CLUSTER,
    eventually,
    route_members,
)
from tests.support import ProcessRunner, astart_broker, free_port, start_broker, write_properties

TLS_SERVER = ["tls.test.mode.enable=true", "tls.server.mode=permissive"]


def _tls_client() -> RemotingClient:
    client = RemotingClient()
    client.ssl_context = client_ssl_context(type("C", (), {"tls_enable": True})())
    return client


async def _config(client: RemotingClient, addr: str) -> None:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG), 10)
    assert response.code == ResponseCode.SUCCESS


async def test_permissive_nameserver_broker_and_proxy_over_tls(procs: ProcessRunner, tmp_path: Path) -> None:
    ns_port, broker_port, proxy_port = free_port(), free_port(), free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    procs.start("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={tmp_path / 'kv.json'}", *TLS_SERVER],
                ready_port=ns_port, name="namesrv", timeout=30)
    for client in (_tls_client(), RemotingClient()):  # TLS and plaintext on one port
        try:
            await _config(client, namesrv)
        finally:
            await client.close()
    start_broker(procs, tmp_path, namesrv, port=broker_port,
                 **{"tls.enable": "true", "tls.test.mode.enable": "true", "tls.server.mode": "permissive"})
    procs.start("proxy", ["-n", namesrv, "--port", str(proxy_port), "autoCreateTopicEnable=true", "tls.enable=true"],
                ready_port=proxy_port, name="proxy", timeout=30)
    producer = Producer(ClientConfiguration(f"127.0.0.1:{proxy_port}", Credentials(), request_timeout=10),
                        ("RemotingTlsTopic",))
    producer.startup()
    try:
        msg = Message()
        msg.topic = "RemotingTlsTopic"
        msg.body = b"through TLS Remoting"
        assert producer.send(msg).message_id
    finally:
        producer.shutdown()


async def test_enforcing_refuses_plaintext(procs: ProcessRunner, tmp_path: Path) -> None:
    ns_port = free_port()
    addr = f"127.0.0.1:{ns_port}"
    procs.start("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={tmp_path / 'kv.json'}",
                            "tls.test.mode.enable=true", "tls.server.mode=enforcing"],
                ready_text="boot success", name="namesrv", timeout=30)
    tls_client = _tls_client()
    try:
        await _config(tls_client, addr)
    finally:
        await tls_client.close()
    plain = RemotingClient()
    try:
        with pytest.raises((RemotingError, ssl.SSLError, ConnectionError)):
            await _config(plain, addr)
    finally:
        await plain.close()


async def test_controller_in_enforcing_mode_elects_a_broker_over_tls(procs: ProcessRunner, tmp_path: Path) -> None:
    """The controller's Remoting port takes the same TLS keys as every Remoting server (upstream's
    TlsSystemConfig is process-wide), and the broker's controller client honours tls.enable."""
    raft_port, ctl_port, ns_port, broker_port = free_port(), free_port(), free_port(), free_port()
    ctl_conf = write_properties(tmp_path / "controller.conf", {
        "controllerDLegerGroup": "G", "controllerDLegerPeers": f"n0-127.0.0.1:{raft_port}",
        "controllerDLegerSelfId": "n0", "listenPort": ctl_port, "controllerStorePath": tmp_path / "ctl-store",
        "tls.test.mode.enable": "true", "tls.server.mode": "enforcing"})
    await procs.astart("controller", ["-c", str(ctl_conf)], ready_text="boot success", timeout=30, name="controller")
    controller = f"127.0.0.1:{ctl_port}"
    plain = RemotingClient()
    try:
        with pytest.raises((RemotingError, ssl.SSLError, ConnectionError, TimeoutError)):
            await plain.invoke(controller, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO), 5)
    finally:
        await plain.close()
    await procs.astart("namesrv", [f"listenPort={ns_port}", f"kvConfigPath={tmp_path / 'kv.json'}", *TLS_SERVER],
                       ready_port=ns_port, name="namesrv", timeout=30)
    namesrv = f"127.0.0.1:{ns_port}"
    await astart_broker(procs, tmp_path, namesrv, port=broker_port, brokerClusterName=CLUSTER,
                        brokerName=BROKER_NAME, brokerId=-1, brokerRole="SLAVE", haListenPort=free_port(),
                        enableControllerMode="true", controllerAddr=controller,
                        **{"tls.enable": "true"}, **BROKER_TIMINGS)
    tls_client = _tls_client()
    try:
        async def elected() -> bool:
            return (await route_members(tls_client, namesrv)).get(0) == f"127.0.0.1:{broker_port}"
        await eventually(elected, "the broker elected master by the TLS-only controller")
        response = await tls_client.invoke(controller, RemotingCommand.request(
            RequestCode.CONTROLLER_GET_METADATA_INFO), 5)
        assert response.code == ResponseCode.SUCCESS, response.remark
    finally:
        await tls_client.close()
