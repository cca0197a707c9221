"""Metadata at scale (issue 26 item 6), with real NameServer and broker processes on loopback.

- A topic created with UPDATE_AND_CREATE_TOPIC is routed by the NameServer when the create
  returns (an increment registration, BrokerController#registerIncrementBrokerData, with the
  periodic whole-table registration far away), and it is one journal line, not a rewrite of
  topics.json; after kill -9 every acknowledged create and delete of topics and groups is back.
- enableSplitRegistration / splitRegistrationSize: a NameServer that starts late learns the
  whole table from registrations of that many topics each.
- forceRegister=false: the periodic registration asks QUERY_DATA_VERSION first, and a
  NameServer that has no data for the broker gets the whole table.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from orbitmq.client import MQClientAPI
from orbitmq.common.route import parse_json
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.codes import RequestCode
from tests.support import BrokerCluster, ProcessRunner, free_port
from tests.support.services import NAMESRV_BOOT_TEXT

QUEUES = 8


async def _all_topics(api: MQClientAPI, broker: str) -> set[str]:
    response = await api.call(broker, RequestCode.GET_ALL_TOPIC_CONFIG)
    return set(parse_json(response.body)["topicConfigTable"])


async def _all_groups(api: MQClientAPI, broker: str) -> set[str]:
    response = await api.call(broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    return set(parse_json(response.body)["subscriptionGroupTable"])


async def _routed(api: MQClientAPI, namesrv: str, topic: str) -> bool:
    try:
        route = await api.get_topic_route(namesrv, topic)
    except Exception:
        return False
    return bool(route.queue_datas)


async def _wait_routed(api: MQClientAPI, namesrv: str, topics: list[str], timeout: float = 30.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    missing = list(topics)
    while missing:
        missing = [t for t in missing if not await _routed(api, namesrv, t)]
        if missing and time.monotonic() > deadline:
            raise AssertionError(f"{namesrv} does not route {missing[:5]} ({len(missing)} missing)")
        if missing:
            await asyncio.sleep(0.2)


async def test_creates_are_routed_on_return_journaled_and_survive_kill_9(
        procs: ProcessRunner, tmp_path: Path, broker_cluster, mq_api: MQClientAPI) -> None:
    cluster: BrokerCluster = await broker_cluster(registerNameServerPeriod=600_000)
    config_dir = tmp_path / "store" / "config"
    snapshot_before = (config_dir / "topics.json").read_bytes() if (config_dir / "topics.json").exists() else b""
    topics = [f"ScaleTopic-{i}" for i in range(40)]
    for topic in topics:
        await mq_api.create_topic(cluster.addr, TopicConfig(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES))
        # Routed already: the create answered after its increment registration.
        route = await mq_api.get_topic_route(cluster.namesrv, topic)
        assert [q.write_queue_nums for q in route.queue_datas] == [QUEUES]
    # A list create (UPDATE_AND_CREATE_TOPIC_LIST) is one increment too.
    listed = [TopicConfig(f"ListTopic-{i}", read_queue_nums=2, write_queue_nums=2) for i in range(5)]
    body = json.dumps({"topicConfigList": [tc.to_json_dict() for tc in listed]}).encode()
    await mq_api.call(cluster.addr, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, None, body)
    for tc in listed:
        assert await _routed(mq_api, cluster.namesrv, tc.topic_name)
    for i in range(10):
        await mq_api.create_subscription_group(cluster.addr, SubscriptionGroupConfig(f"ScaleGroup-{i}"))
    await mq_api.delete_topic_in_broker(cluster.addr, "ScaleTopic-3")
    await mq_api.delete_subscription_group(cluster.addr, "ScaleGroup-4")

    # One journal line per change; topics.json not rewritten for any of them.
    now = (config_dir / "topics.json").read_bytes() if (config_dir / "topics.json").exists() else b""
    assert now == snapshot_before
    lines = (config_dir / "topics.json.journal").read_text().splitlines()
    assert len(lines) == len(topics) + len(listed) + 1
    assert json.loads(lines[-1])["del"] == "ScaleTopic-3"

    assert cluster.broker is not None
    cluster.broker.kill()
    await cluster.start_broker()
    expected = (set(topics) - {"ScaleTopic-3"}) | {tc.topic_name for tc in listed}
    names = await _all_topics(mq_api, cluster.addr)
    assert expected <= names and "ScaleTopic-3" not in names
    groups = await _all_groups(mq_api, cluster.addr)
    assert {f"ScaleGroup-{i}" for i in range(10) if i != 4} <= groups and "ScaleGroup-4" not in groups

    # A clean stop compacts: the upstream files hold everything, no journal is left.
    await cluster.stop_broker()
    assert not (config_dir / "topics.json.journal").exists()
    assert not (config_dir / "subscriptionGroup.json.journal").exists()
    on_disk = json.loads((config_dir / "topics.json").read_text())
    assert expected <= set(on_disk["topicConfigTable"]) and "ScaleTopic-3" not in on_disk["topicConfigTable"]


async def _start_namesrv_on(procs: ProcessRunner, port: int) -> None:
    await procs.astart("namesrv", [f"listenPort={port}", "bindAddress=127.0.0.1",
                                   f"kvConfigPath={procs.workdir / f'namesrv-{port}' / 'kvConfig.json'}"],
                       ready_port=port, ready_text=NAMESRV_BOOT_TEXT)


async def test_split_registration_gives_a_late_namesrv_the_whole_table(
        procs: ProcessRunner, tmp_path: Path, broker_cluster, mq_api: MQClientAPI) -> None:
    late_port = free_port()
    late = f"127.0.0.1:{late_port}"
    cluster: BrokerCluster = await broker_cluster(enableSplitRegistration="true", splitRegistrationSize=4,
                                                  registerNameServerPeriod=1000)
    # namesrvAddr is the first NameServer only; the conf is rewritten with the late one added.
    text = cluster.conf.read_text().replace(f"namesrvAddr={cluster.namesrv}",
                                            f"namesrvAddr={cluster.namesrv};{late}")
    cluster.conf.write_text(text)
    await cluster.stop_broker()
    await cluster.start_broker()
    topics = [f"SplitTopic-{i}" for i in range(13)]
    for topic in topics:
        await mq_api.create_topic(cluster.addr, TopicConfig(topic, read_queue_nums=4, write_queue_nums=4))
    await _start_namesrv_on(procs, late_port)
    await _wait_routed(mq_api, late, [*topics, "TBW102"])
    assert cluster.broker is not None
    assert "chunks of 4 topics" in cluster.broker.log_text()


async def test_force_register_false_asks_the_data_version_first(
        procs: ProcessRunner, tmp_path: Path, broker_cluster, mq_api: MQClientAPI) -> None:
    late_port = free_port()
    late = f"127.0.0.1:{late_port}"
    cluster: BrokerCluster = await broker_cluster(forceRegister="false", registerNameServerPeriod=1000)
    text = cluster.conf.read_text().replace(f"namesrvAddr={cluster.namesrv}",
                                            f"namesrvAddr={cluster.namesrv};{late}")
    cluster.conf.write_text(text)
    await cluster.stop_broker()
    await cluster.start_broker()
    await mq_api.create_topic(cluster.addr, TopicConfig("AskFirst", read_queue_nums=2, write_queue_nums=2))
    assert await _routed(mq_api, cluster.namesrv, "AskFirst")
    # The late NameServer answers QUERY_DATA_VERSION "changed" (it knows nothing of the broker):
    # the next period sends it the whole table.
    await _start_namesrv_on(procs, late_port)
    await _wait_routed(mq_api, late, ["AskFirst", "TBW102"])


async def test_a_refused_increment_falls_back_to_the_whole_table(
        procs: ProcessRunner, tmp_path: Path, broker_cluster, mq_api: MQClientAPI) -> None:
    late_port = free_port()
    late = f"127.0.0.1:{late_port}"
    cluster: BrokerCluster = await broker_cluster(registerNameServerPeriod=600_000)
    text = cluster.conf.read_text().replace(f"namesrvAddr={cluster.namesrv}",
                                            f"namesrvAddr={cluster.namesrv};{late}")
    cluster.conf.write_text(text)
    await cluster.stop_broker()
    await cluster.start_broker()
    await mq_api.create_topic(cluster.addr, TopicConfig("Before", read_queue_nums=2, write_queue_nums=2))
    # The late NameServer has never seen the broker and no periodic registration comes: it
    # refuses the one-topic increment (RouteInfoManager#registerBroker), and the broker answers
    # that with the whole table at once.
    await _start_namesrv_on(procs, late_port)
    await mq_api.create_topic(cluster.addr, TopicConfig("Trigger", read_queue_nums=2, write_queue_nums=2))
    await _wait_routed(mq_api, late, ["Trigger", "Before", "TBW102"], timeout=15)


async def test_every_acknowledged_concurrent_create_survives_kill_9(
        procs: ProcessRunner, tmp_path: Path, broker_cluster) -> None:
    cluster: BrokerCluster = await broker_cluster(registerNameServerPeriod=600_000)
    acknowledged: list[str] = []
    enough = asyncio.Event()
    apis = [MQClientAPI(timeout=5.0) for _ in range(8)]

    async def creator(api: MQClientAPI, worker: int) -> None:
        for i in range(1000):
            name = f"Concurrent-{worker}-{i}"
            try:
                await api.create_topic(cluster.addr, TopicConfig(name, read_queue_nums=2, write_queue_nums=2))
            except Exception:
                return  # the broker died under it: not acknowledged
            acknowledged.append(name)
            if len(acknowledged) >= 300:
                enough.set()

    tasks = [asyncio.create_task(creator(api, w)) for w, api in enumerate(apis)]
    try:
        await asyncio.wait_for(enough.wait(), 60)
        assert cluster.broker is not None
        cluster.broker.kill()  # creates still in flight on the other connections
        await asyncio.gather(*tasks)
    finally:
        for api in apis:
            await api.close()
    await cluster.start_broker()
    api = MQClientAPI(timeout=5.0)
    try:
        names = await _all_topics(api, cluster.addr)
    finally:
        await api.close()
    lost = [name for name in acknowledged if name not in names]
    assert not lost, f"{len(lost)} acknowledged creates lost, e.g. {lost[:5]}"
