"""Remoting over TLS (issue 16, item 3) with TlsSystemConfig's keys: a NameServer and a broker in
tls.server.mode=permissive serve plaintext and TLS on one port; a broker and a proxy with
tls.enable=true register, route and send over TLS; an enforcing server refuses plaintext."""

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
from tests.support import ProcessRunner, free_port

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
    conf = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerIP1": "127.0.0.1",
            "listenPort": broker_port, "storePathRootDir": str(tmp_path / "store"), "namesrvAddr": namesrv,
            "mappedFileSizeCommitLog": 4 * 1024 * 1024, "tls.enable": "true",
            "tls.test.mode.enable": "true", "tls.server.mode": "permissive"}
    conf_path = tmp_path / "broker.conf"
    conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()), encoding="utf-8")
    procs.start("broker", ["-c", str(conf_path)], ready_port=broker_port, ready_text="boot success",
                name="broker", timeout=30)
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
