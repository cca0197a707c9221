"""KVConfigManager#printAllPeriodically and the address server URL of cluster-test mode."""

from __future__ import annotations

import logging

import pytest

from orbitmq.namesrv.cluster_test import address_server_url, ws_addr
from orbitmq.namesrv.kvconfig import KVConfigManager


def test_print_all_logs_every_entry(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    kv = KVConfigManager(str(tmp_path / "kvConfig.json"))
    kv.put_kv_config("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")
    kv.put_kv_config("ORDER_TOPIC_CONFIG", "TopicB", "broker-b:2")
    kv.put_kv_config("OTHER", "k", "v")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="orbitmq.namesrv"):
        kv.print_all_periodically()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "-" * 56
    assert lines[1] == "configTable SIZE: 2"  # namespaces, as upstream counts them
    assert sorted(lines[2:]) == [
        "configTable NS: ORDER_TOPIC_CONFIG Key: TopicA Value: broker-a:4",
        "configTable NS: ORDER_TOPIC_CONFIG Key: TopicB Value: broker-b:2",
        "configTable NS: OTHER Key: k Value: v",
    ]


def test_address_server_url_as_mixall_builds_it() -> None:
    assert ws_addr({}) == "http://jmenv.tbsite.net:8080/rocketmq/nsaddr"
    assert ws_addr({"ROCKETMQ_NAMESRV_DOMAIN": "lookup:80"}) == "http://lookup:80/rocketmq/nsaddr"
    env = {"ROCKETMQ_NAMESRV_DOMAIN": "lookup", "ROCKETMQ_NAMESRV_DOMAIN_SUBGROUP": "sub"}
    assert address_server_url("center", env) == "http://lookup:8080/rocketmq/sub-center?nofix=1"
    assert address_server_url(" ", env) == "http://lookup:8080/rocketmq/sub"
