"""Apache's Java Remoting client (rocketmq-client 4.9.8 and 5.5.0, unmodified) through the proxy's
Remoting port (RIP-55, issue 26 item 4): the proxy's Remoting address is the client's NameServer,
and no client ever dials a broker.

One cluster (NameServer, broker sets broker-a and broker-b, a proxy) and one JVM per version side by
side, each running orbitmq.remoting.ProxyMain (tests/interop/java/remoting4/src): sync sends and a
batch, a push consumer and a lite pull consumer receiving them and committing offsets, a
transaction committed at once and one committed by the broker's check-back; then Apache's mqadmin
(topicRoute, topicList) with the proxy as its NameServer. 5.5.0 names the broker set in every request (``bname``),
so its topics live on both sets; 4.9.8 names none, so its topics live on broker-a only (the one set
the proxy can tell it means). What the brokers hold afterwards (committed offsets, committed
transactions) is read from the brokers themselves.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orbitmq.client import MQClientAPI
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.interop.java.mqadmin.tools import fastjson_text, mqadmin
from tests.support import free_port, jvm, start_broker
from tests.support.process import running
from tests.support.services import start_namesrv

VERSIONS = {"4.9.8": "remoting4", "5.5.0": "remoting5"}
BROKER_KEYS = {"autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "true",
               "flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": 64 * 1024 * 1024,
               "transactionCheckInterval": 1000, "transactionTimeOut": 1000}
QUEUES = 2
MESSAGES = 11  # ProxyMain: 8 single sends and a batch of 3
JVM_TIMEOUT = 240
pytestmark = pytest.mark.timeout(600)


def _names(version: str) -> dict[str, str]:
    tag = version.replace(".", "")
    return {"id": tag, "topic": f"ProxyRemoting{tag}", "txTopic": f"ProxyRemotingTx{tag}",
            "group": f"GProxyRemoting{tag}"}


def _on(version: str) -> tuple[str, ...]:
    return ("broker-a", "broker-b") if version.startswith("5.") else ("broker-a",)


async def _prepare(namesrv: str, brokers: dict[str, str]) -> None:
    api = MQClientAPI(timeout=10)
    try:
        for version in VERSIONS:
            names = _names(version)
            for broker in _on(version):
                for topic in (names["topic"], names["txTopic"]):
                    await api.create_topic(brokers[broker], TopicConfig(topic, QUEUES, QUEUES))
        deadline = time.monotonic() + 20
        for version in VERSIONS:
            for topic in (_names(version)["topic"], _names(version)["txTopic"]):
                while True:
                    try:
                        if len((await api.get_topic_route(namesrv, topic)).queue_datas) == len(_on(version)):
                            break
                    except Exception:
                        pass
                    assert time.monotonic() < deadline, f"{topic} never routed"
                    await asyncio.sleep(0.2)
    finally:
        await api.close()


async def _after(brokers: dict[str, str]) -> dict[str, Any]:
    """Per version: the group's committed offsets and the transaction topic's messages, summed
    over every queue of every broker set the topics are on."""
    api = MQClientAPI(timeout=10)
    out: dict[str, Any] = {}
    try:
        for version in VERSIONS:
            names = _names(version)
            committed = {names["group"]: 0, names["group"] + "Lite": 0}
            stored = 0
            for broker in _on(version):
                addr = brokers[broker]
                for queue in range(QUEUES):
                    for group in committed:
                        response = await api.invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET,
                                                    h.QueryConsumerOffsetRequestHeader(
                                                        consumer_group=group, topic=names["topic"], queue_id=queue))
                        if response.code == ResponseCode.SUCCESS:
                            committed[group] += h.QueryConsumerOffsetResponseHeader.from_command(response).offset
                    stored += await api.get_max_offset(addr, names["txTopic"], queue)
            out[version] = {"committed": committed[names["group"]], "lite committed": committed[names["group"] + "Lite"],
                            "transactions": stored}
    finally:
        await api.close()
    return out


@pytest.fixture(scope="module")
def proxy_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workdir: Path = tmp_path_factory.mktemp("java-proxy-remoting")
    with running(workdir) as runner:
        _, namesrv = start_namesrv(runner, name="namesrv")
        brokers = {}
        for name in ("broker-a", "broker-b"):
            _, brokers[name] = start_broker(runner, workdir, namesrv, name, store=workdir / f"store-{name}",
                                            brokerName=name, **BROKER_KEYS)
        grpc_port, remoting_port = free_port(), free_port()
        runner.start("proxy", ["-n", namesrv, "--port", str(grpc_port), f"remotingListenPort={remoting_port}"],
                     ready_port=remoting_port, ready_text="The proxy boot success", name="proxy", timeout=30)
        asyncio.run(_prepare(namesrv, brokers))
        proxy = f"127.0.0.1:{remoting_port}"
        jvms: dict[str, subprocess.Popen[str]] = {}
        for version, suite in VERSIONS.items():
            logs = workdir / f"client-logs-{version}"
            flags = ["-Drocketmq.client.rebalance.waitInterval=1000", f"-Drocketmq.client.logRoot={logs}",
                     "-Drocketmq.client.logLevel=WARN", f"-Duser.home={logs}"]
            argv = [f"namesrv={proxy}", *(f"{k}={v}" for k, v in _names(version).items())]
            command = jvm.suite(suite).command("orbitmq.remoting.ProxyMain", *argv, jvm_flags=flags)
            jvms[version] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        result: dict[str, Any] = {}
        try:
            for version, popen in jvms.items():
                out, _ = popen.communicate(timeout=JVM_TIMEOUT)
                result[version] = {"lines": out.splitlines()}
        finally:
            for popen in jvms.values():
                if popen.poll() is None:  # only the JVMs this fixture started, by their handle
                    popen.kill()
                    popen.wait()
        # Apache's mqadmin with the proxy as its NameServer (one JVM for both commands).
        tag = _names("5.5.0")["topic"]
        result["mqadmin"] = mqadmin(workdir / "mqadmin", [["topicRoute", "-n", proxy, "-t", tag],
                                                          ["topicList", "-n", proxy]])
        result["proxy"] = proxy
        after = asyncio.run(_after(brokers))
        for version in VERSIONS:
            result[version]["after"] = after[version]
        yield result


@pytest.mark.parametrize("version", list(VERSIONS))
def test_java_client_sends_consumes_and_commits_through_the_proxy(proxy_run: dict[str, Any], version: str) -> None:
    run = proxy_run[version]
    lines = run["lines"]
    assert "PROXY OK" in lines, "\n".join(lines[-60:])
    sent = next(line for line in lines if line.startswith("SENT "))
    assert sent.startswith(f"SENT {MESSAGES} brokers={','.join(_on(version))}"), sent
    assert f"RECEIVED {MESSAGES}" in lines
    assert f"LITE {MESSAGES}" in lines
    assert any(line.startswith("CHECKED ") for line in lines)
    # The brokers hold what went through the proxy: every offset committed, both transactions.
    assert run["after"] == {"committed": MESSAGES, "lite committed": MESSAGES, "transactions": 2}, run["after"]


def test_mqadmin_sees_routes_and_topics_through_the_proxy(proxy_run: dict[str, Any]) -> None:
    route_run, list_run = proxy_run["mqadmin"]
    route = fastjson_text(route_run.ok())
    assert sorted(b["brokerName"] for b in route["brokerDatas"]) == ["broker-a", "broker-b"]
    assert all(b["brokerAddrs"] == {"0": proxy_run["proxy"]} for b in route["brokerDatas"])
    topics = set(list_run.ok().split())
    assert {_names(v)["topic"] for v in VERSIONS} <= topics
