"""clusterTest=true: a test environment's NameServer answers unknown topics from the product environment.

Real NameServer processes; brokers are fake registrations over Remoting. The product environment
is found through NAMESRV_ADDR or, without it, through an address server (an HTTP server here).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from orbitmq.common.route import RegisterBrokerBody, TopicConfigAndMappingSerializeWrapper, TopicRouteData
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from orbitmq.remoting.headers import RegisterBrokerRequestHeader
from tests.support import astart_namesrv, free_port

NO_ROUTE = "No topic route info in name server for the topic: "


async def register(client: RemotingClient, namesrv: str, broker_name: str, *topics: str) -> str:
    """Register a broker master hosting ``topics``; returns its (fake) address."""
    addr = f"127.0.0.1:{free_port()}"
    table = {"TBW102": TopicConfig("TBW102", 8, 8, 7), **{t: TopicConfig(t, 4, 4) for t in topics}}
    header = RegisterBrokerRequestHeader(broker_name=broker_name, broker_addr=addr, cluster_name="DefaultCluster",
                                         ha_server_addr=addr, broker_id=0).to_ext_fields()
    body = RegisterBrokerBody(TopicConfigAndMappingSerializeWrapper(table), []).encode(False)
    resp = await client.invoke(namesrv, RemotingCommand.request(RequestCode.REGISTER_BROKER, header, body))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return addr


async def route(client: RemotingClient, namesrv: str, topic: str) -> RemotingCommand:
    return await client.invoke(namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))


def broker_addrs(resp: RemotingCommand) -> dict[str, dict[int, str]]:
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return {bd.broker_name: bd.broker_addrs for bd in TopicRouteData.decode(resp.body).broker_datas}


class AddressServer:
    """The address server of DefaultTopAddressing: GET /rocketmq/<subgroup>-<unit> -> "a:9876;b:9876"."""

    def __init__(self, lists: dict[str, str]) -> None:
        self.requests: list[str] = []
        server_self = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (BaseHTTPRequestHandler's name)
                server_self.requests.append(self.path)
                text = lists.get(self.path.split("?", 1)[0])
                self.send_response(200 if text is not None else 404)
                self.end_headers()
                if text is not None:
                    self.wfile.write(text.encode() + b"\n")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def address_server_factory() -> Iterator[list[AddressServer]]:
    servers: list[AddressServer] = []
    yield servers
    for server in servers:
        server.close()


async def test_unknown_topics_come_from_the_product_environment(procs, async_remoting_client) -> None:
    client = async_remoting_client
    _, product = await astart_namesrv(procs, name="ns-product")
    product_broker = await register(client, product, "broker-prod", "ProdTopic")
    _, test_env = await astart_namesrv(procs, "clusterTest=true", name="ns-test", env={"NAMESRV_ADDR": product})
    # Brokers still register with a cluster-test NameServer (see cluster_test.py on 5.x).
    test_broker = await register(client, test_env, "broker-test", "LocalTopic")

    assert broker_addrs(await route(client, test_env, "LocalTopic")) == {"broker-test": {0: test_broker}}
    assert broker_addrs(await route(client, test_env, "ProdTopic")) == {"broker-prod": {0: product_broker}}
    # The product environment does not see the test environment's topics.
    assert (await route(client, product, "LocalTopic")).code == ResponseCode.TOPIC_NOT_EXIST
    missing = await route(client, test_env, "NowhereTopic")
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark.startswith(NO_ROUTE + "NowhereTopic")


async def test_without_cluster_test_no_fallback(procs, async_remoting_client) -> None:
    client = async_remoting_client
    _, product = await astart_namesrv(procs, name="ns-product")
    await register(client, product, "broker-prod", "ProdTopic")
    _, plain = await astart_namesrv(procs, name="ns-plain", env={"NAMESRV_ADDR": product})
    assert (await route(client, plain, "ProdTopic")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_product_environment_found_by_address_server(procs, async_remoting_client,
                                                           address_server_factory) -> None:
    client = async_remoting_client
    _, product = await astart_namesrv(procs, name="ns-product")
    product_broker = await register(client, product, "broker-prod", "ProdTopic")
    server = AddressServer({"/rocketmq/nsaddr-prodenv": product})
    address_server_factory.append(server)
    env = {"NAMESRV_ADDR": "", "ROCKETMQ_NAMESRV_DOMAIN": server.address}
    _, test_env = await astart_namesrv(procs, "clusterTest=true", "productEnvName=prodenv", name="ns-test", env=env)

    assert broker_addrs(await route(client, test_env, "ProdTopic")) == {"broker-prod": {0: product_broker}}
    assert (await route(client, test_env, "NowhereTopic")).code == ResponseCode.TOPIC_NOT_EXIST
    # DefaultTopAddressing's URL: <wsAddr>-<unit>?nofix=1; the list is kept, not fetched per lookup.
    assert server.requests == ["/rocketmq/nsaddr-prodenv?nofix=1"]


async def test_address_server_down_answers_topic_not_exist(procs, async_remoting_client) -> None:
    client = async_remoting_client
    env = {"NAMESRV_ADDR": "", "ROCKETMQ_NAMESRV_DOMAIN": f"127.0.0.1:{free_port()}"}
    proc, test_env = await astart_namesrv(procs, "clusterTest=true", name="ns-test", env=env)
    resp = await route(client, test_env, "ProdTopic")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert proc.is_running()
