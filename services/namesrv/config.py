"""NamesrvConfig: namesrv.conf keys with Apache RocketMQ's names and defaults.

listenPort and bindAddress belong to NettyServerConfig upstream; they are read from the same
file there too, so they live here. brokerChannelExpiredTime is upstream's hard-coded
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME made configurable (a broker's own heartbeatTimeoutMillis
header still wins), so tests can shorten it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from orbitmq.auth.config import AuthConfig
from orbitmq.remoting.server_config import RemotingServerConfig

ROCKETMQ_HOME_ENV = "ROCKETMQ_HOME"
ROCKETMQ_HOME_PROPERTY = "rocketmq.home.dir"
DEFAULT_LISTEN_PORT = 9876
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 1000 * 60 * 2
# Config keys UPDATE_NAMESRV_CONFIG may never change (DefaultRequestProcessor.initConfigBlackList).
# ... and the ACL 2.0 keys, read at start-up only.
ALWAYS_BLACKLISTED = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}) | AuthConfig.config_keys()


def _home_path(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


@dataclass
class NamesrvConfig(AuthConfig, RemotingServerConfig):  # ACL 2.0 keys: orbitmq.auth.config
    rocketmq_home: str = field(default_factory=lambda: os.environ.get(ROCKETMQ_HOME_ENV, ""))
    kv_config_path: str = field(default_factory=lambda: _home_path("namesrv", "kvConfig.json"))
    config_store_path: str = field(default_factory=lambda: _home_path("namesrv", "namesrv.properties"))
    order_message_enable: bool = False
    return_order_topic_config_to_broker: bool = True
    scan_not_active_broker_interval: int = 5 * 1000
    broker_channel_expired_time: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    support_acting_master: bool = False
    notify_min_broker_id_changed: bool = False
    enable_all_topic_list: bool = True
    enable_topic_list: bool = True
    need_wait_for_service: bool = False
    wait_seconds_for_service: int = 45
    delete_topic_with_broker_registration: bool = False
    config_black_list: str = "configBlackList;configStorePath;kvConfigPath"
    # Cluster-test mode (services/namesrv/cluster_test.py): routes of topics unknown here come from
    # the NameServers of the product environment named productEnvName.
    cluster_test: bool = False
    product_env_name: str = "center"
    # run a ControllerManager in this process (its keys: orbitmq.controller.config.NamesrvControllerConfig)
    enable_controller_in_namesrv: bool = False
    # NettyServerConfig keys
    listen_port: int = DEFAULT_LISTEN_PORT
    bind_address: str = "0.0.0.0"
    # -- metrics (orbitmq.common.metrics; BrokerConfig's key names: upstream's NameServer has no metrics) --
    # PROM serves /metrics and /ready.
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5557
    metrics_label: str = ""
    metric_logging_exporter_interval_in_mills: int = 10_000

    def black_listed_keys(self) -> frozenset[str]:
        extra = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return ALWAYS_BLACKLISTED | extra
