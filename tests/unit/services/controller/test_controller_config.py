"""ControllerConfig: keys, defaults, validation."""

from __future__ import annotations

import pytest

from orbitmq.common.config import load_configs
from orbitmq.controller.config import ControllerConfig, ControllerConfigError

PEERS = "n0-127.0.0.1:9877;n1-127.0.0.1:9867;n2-127.0.0.1:9857"


def test_rocketmq_keys_and_defaults():
    d = ControllerConfig().to_dict()
    assert d["controllerType"] == "DLedger"
    assert d["scanNotActiveBrokerInterval"] == "5000" and d["scanInactiveMasterInterval"] == "5000"
    assert d["electMasterMaxRetryCount"] == "3" and d["enableElectUncleanMaster"] == "false"
    assert d["notifyBrokerRoleChanged"] == "true" and d["processReadEvent"] == "false"
    assert d["controllerThreadPoolNums"] == "16" and d["controllerRequestThreadPoolQueueCapacity"] == "50000"
    assert d["mappedFileSize"] == str(1024**3) and d["configBlackList"] == "configBlackList;configStorePath"
    assert d["listenPort"] == "9878"
    assert not any(key.startswith("jRaft") for key in d)  # no SOFA-JRaft: no jRaft* keys (issue 13)
    for key in ("controllerDLegerGroup", "controllerDLegerPeers", "controllerDLegerSelfId", "controllerStorePath",
                "configStorePath", "bindAddress"):
        assert key in d
    assert ControllerConfig().store_path().endswith("DLedgerController")
    # The metrics keys (issue 15), upstream's names and defaults.
    assert d["metricsExporterType"] == "DISABLE" and d["metricsPromExporterPort"] == "5557"
    assert d["metricsPromExporterHost"] == "" and d["metricsLabel"] == ""


def test_peers_and_validation(tmp_path):
    conf = tmp_path / "controller.conf"
    conf.write_text(f"controllerDLegerGroup=g\ncontrollerDLegerPeers={PEERS}\ncontrollerDLegerSelfId=n1\n")
    (config,) = load_configs(conf, {"listenPort": "19878"}, ControllerConfig)
    config.validate()
    assert config.peers() == {"n0": "127.0.0.1:9877", "n1": "127.0.0.1:9867", "n2": "127.0.0.1:9857"}
    assert config.listen_port == 19878


@pytest.mark.parametrize("overrides, message", [
    ({"controllerType": "jRaft"}, "jRaft is not supported"),
    ({"controllerType": "Zab"}, "unknown"),
    ({"controllerDLegerSelfId": "n9"}, "not in controllerDLegerPeers"),
    ({"controllerDLegerPeers": "n0:127.0.0.1"}, "bad entry"),
    ({"controllerDLegerPeers": ""}, "required"),
    ({"controllerDLegerGroup": ""}, "controllerDLegerGroup"),
    ({"scanNotActiveBrokerInterval": "0"}, "must be > 0"),
])
def test_refused_configs(overrides, message):
    values = {"controllerDLegerGroup": "g", "controllerDLegerPeers": PEERS, "controllerDLegerSelfId": "n0"}
    values.update(overrides)
    config = ControllerConfig.from_mapping(values)
    with pytest.raises(ControllerConfigError, match=message):
        config.validate()


def test_black_list_always_has_the_fixed_keys():
    config = ControllerConfig(config_black_list="listenPort")
    assert {"listenPort", "configBlackList", "configStorePath", "rocketmqHome"} <= config.black_listed_keys()
