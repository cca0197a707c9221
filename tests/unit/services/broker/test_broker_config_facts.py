"""Broker start-up facts of issue 22: the warning that a SYNC_MASTER with inSyncReplicas=1 waits
for no slave, and no osPageCacheBusyTimeOutMills key (appends run on the event loop)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.controller import BrokerController, sync_master_ack_warning
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.common.config import load_configs


def configs(**keys: str) -> tuple[BrokerConfig, MessageStoreConfig]:
    return BrokerConfig.from_mapping(keys), MessageStoreConfig.from_mapping(keys)


def test_sync_master_with_one_in_sync_replica_is_warned_about() -> None:
    warning = sync_master_ack_warning(*configs(brokerRole="SYNC_MASTER"))
    assert warning and "inSyncReplicas=1 waits for no slave" in warning
    assert sync_master_ack_warning(*configs(brokerRole="SYNC_MASTER", inSyncReplicas="2")) is None
    assert sync_master_ack_warning(*configs(brokerRole="ASYNC_MASTER")) is None
    assert sync_master_ack_warning(*configs(brokerRole="SLAVE", brokerId="1")) is None


def test_controller_mode_master_without_all_ack_is_warned_about() -> None:
    keys = {"enableControllerMode": "true", "controllerAddr": "127.0.0.1:9878", "brokerRole": "SLAVE"}
    warning = sync_master_ack_warning(*configs(**keys))
    assert warning and "allAckInSyncStateSet=false" in warning
    assert sync_master_ack_warning(*configs(**keys, allAckInSyncStateSet="true")) is None
    assert sync_master_ack_warning(*configs(**keys, inSyncReplicas="2")) is None


def test_the_warning_is_logged_when_the_broker_checks_its_config(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    broker_config, store_config = configs(brokerRole="SYNC_MASTER", storePathRootDir=str(tmp_path), namesrvAddr="")
    controller = BrokerController(broker_config, store_config)
    with caplog.at_level(logging.WARNING, logger="orbitmq.broker"):
        controller._check_replication_config()
    assert any("waits for no slave" in r.getMessage() for r in caplog.records)


def test_os_page_cache_busy_timeout_is_not_a_store_key(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("osPageCacheBusyTimeOutMills=500\noffsetCheckInSlave=true\n")
    loaded = load_configs(conf, None, BrokerConfig, MessageStoreConfig)
    assert loaded.unknown_keys == ("osPageCacheBusyTimeOutMills",)
    assert loaded[1].offset_check_in_slave is True
