"""`orbitmq local --ha` writes configs every service loads: RocketMQ's keys, one Raft group."""

from __future__ import annotations

from pathlib import Path

from orbitmq.broker.config import BrokerConfig
from orbitmq.broker.store.config import MessageStoreConfig
from orbitmq.common.config import load_configs
from orbitmq.controller.config import ControllerConfig
from orbitmq.local_ha import HA_BROKER_SETTINGS, HALocalCluster


def test_controller_and_broker_configs_load_and_agree(tmp_path: Path) -> None:
    cluster = HALocalCluster(tmp_path, controller_ports=(1001, 1002, 1003), raft_ports=(2001, 2002, 2003),
                             broker_ports=(3001, 3011, 3021), overrides={"maxMessageSize": "1024", "nope": "x"})
    peers = set()
    for i in range(3):
        (config,) = load_configs(None, cluster.controller_values(i), ControllerConfig)
        config.validate()
        assert config.listen_port == 1001 + i and config.controller_d_leger_self_id == f"n{i}"
        peers.add(config.controller_d_leger_peers)
    assert peers == {"n0-127.0.0.1:2001;n1-127.0.0.1:2002;n2-127.0.0.1:2003"}
    ports = set()
    for i in range(3):
        broker, store = load_configs(None, cluster.broker_values(i), BrokerConfig, MessageStoreConfig)
        assert broker.enable_controller_mode and broker.broker_id == -1 and broker.broker_name == "broker-a"
        assert broker.controller_addr == "127.0.0.1:1001;127.0.0.1:1002;127.0.0.1:1003"
        assert store.all_ack_in_sync_state_set and store.min_in_sync_replicas == 1
        assert store.max_message_size == 1024  # a broker override reaches every replica
        broker.resolve_defaults()  # haListenPort: listenPort + 1 by default, as the broker resolves it
        ports.add((broker.listen_port, broker.ha_listen_port))
    assert ports == {(3001, 3002), (3011, 3012), (3021, 3022)}
    assert HA_BROKER_SETTINGS["allAckInSyncStateSet"] == "true"
