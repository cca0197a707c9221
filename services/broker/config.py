"""BrokerConfig: the broker.conf keys of the broker service itself, with RocketMQ's defaults.

Attribute names are snake_case; the keys in broker.conf are RocketMQ's camelCase names
(``brokerClusterName``, ``listenPort``, ``autoCreateTopicEnable`` …). The storage keys of the
same file belong to MessageStoreConfig (brokerRole and osPageCacheBusyTimeOutMills among them,
as upstream); ``load_configs`` fills both from one file.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from orbitmq.auth.config import AuthConfig
from orbitmq.common.constants import DEFAULT_CLUSTER, NAMESRV_ADDR_ENV, PERM_READ, PERM_WRITE
from orbitmq.remoting.server_config import RemotingServerConfig


def _local_ip() -> str:
    """The address peers should use for this broker, like RemotingUtil.getLocalAddress."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            ip = probe.getsockname()[0]
            if ip and not ip.startswith("0."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"


def _default_broker_name() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


@dataclass
class BrokerConfig(AuthConfig, RemotingServerConfig):  # ACL 2.0 keys (authenticationEnabled, ...): orbitmq.auth.config
    broker_cluster_name: str = DEFAULT_CLUSTER
    broker_name: str = ""
    broker_id: int = 0
    # Empty means "detect"; resolved by resolve_defaults().
    broker_ip1: str = field(default="", metadata={"key": "brokerIP1"})
    broker_ip2: str = field(default="", metadata={"key": "brokerIP2"})
    namesrv_addr: str = ""
    listen_port: int = 10911
    # 0 or less: listenPort + 1 (10912 by default), as RocketMQ releases derive it; with an
    # ephemeral listenPort (0) the HA port is ephemeral too (the HA service reports the port).
    ha_listen_port: int = 0
    region_id: str = "DefaultRegion"
    broker_permission: int = PERM_READ | PERM_WRITE
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    # Queues of the TBW102 template; a producer's 4 wins when smaller (min(4, 8) = 4).
    default_topic_queue_nums: int = 8
    register_broker_timeout_mills: int = 24000
    register_name_server_period: int = 30000
    # The periodic registration sends the whole table even when every NameServer already has
    # this dataVersion; false asks first (QUERY_DATA_VERSION), as BrokerController#needRegister.
    force_register: bool = True
    # Whole-table registrations in REGISTER_BROKERs of splitRegistrationSize topics each (a
    # broker with very many topics); off as upstream.
    enable_split_registration: bool = False
    split_registration_size: int = 800
    long_polling_enable: bool = True
    # LITE_PULL_MESSAGE (DefaultLitePullConsumer) is served; false answers NO_PERMISSION, as upstream
    lite_pull_message_enable: bool = True
    short_polling_time_mills: int = 1000
    # How often PullRequestHoldService re-checks parked pulls when long polling is on.
    pull_request_hold_check_interval_mills: int = 5000
    wait_time_mills_in_send_queue: int = 200
    broker_fast_failure_enable: bool = True
    send_message_thread_pool_nums: int = 1
    send_thread_pool_queue_capacity: int = 10000
    pull_thread_pool_queue_capacity: int = 100000
    flush_consumer_offset_interval: int = 5000
    reject_transaction_message: bool = False
    # -- transactions (services/broker/transaction): check-back of half messages --
    # A half message younger than this (ms since born) is not checked yet.
    transaction_time_out: int = 6000
    # Checks per half message before it is discarded to TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = 15
    # Period of the check scan (ms).
    transaction_check_interval: int = 30_000
    # -- RecallMessage (services/broker/recall): off unless enabled, as upstream --
    recall_message_enable: bool = False
    allow_recall_when_broker_not_writeable: bool = True
    # -- request/reply (services/broker/processors/reply.py): also store replies in <cluster>_REPLY_TOPIC --
    store_reply_message_enable: bool = True
    trace_topic_enable: bool = False
    # Echoed to producers as the TRACE_ON ext field of send responses.
    trace_on: bool = True
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    slave_read_enable: bool = False
    # SQL92 filtering on pulls. Upstream defaults to false; OrbitMQ serves SQL92 subscriptions
    # (proxy, SDK) out of the box, so it defaults to true. Set false to refuse them as upstream.
    enable_property_filter: bool = True
    # -- SQL92 bloom filters (services/broker/filter; upstream BrokerConfig keys and defaults) --
    # Compute each message's filter bit map at dispatch for the SQL92 filters consumers
    # registered (needs enableConsumeQueueExt in the store to be kept and used on pulls).
    enable_calc_filter_bit_map: bool = False
    # The bloom filter: expected filters and error rate in percent (m and k follow from them).
    expect_consumer_num_use_filter: int = 32
    max_error_rate_of_bloom_filter: int = 20
    # How long a dead consumer filter is kept (ms).
    filter_data_clean_time_span: int = 24 * 3600 * 1000
    # A retry topic's messages are filtered by the expression the group gave for their real topic.
    filter_support_retry: bool = False
    start_accept_send_request_time_stamp: int = 0
    channel_expired_timeout: int = 120_000
    client_channel_scan_interval: int = 10_000
    # How long a subscription a pull carried is remembered (ConsumerManager's compensation table).
    subscription_expired_timeout: int = 600_000
    # RebalanceLockManager's max lock life (rocketmq.broker.rebalance.lockMaxLiveTime upstream).
    rebalance_lock_max_live_time: int = 60_000
    # Test knob (not in RocketMQ): each send worker sleeps this long before storing a message,
    # so tests can make the send queue back up past waitTimeMillsInSendQueue.
    send_message_test_delay_mills: int = 0
    # POP (services/broker/pop): queues of rmq_sys_REVIVE_LOG_<cluster>, revive scan period,
    # percent of pops served from the retry topic first, parked POP requests allowed.
    revive_queue_num: int = 8
    revive_interval: int = 1000
    pop_from_retry_probability: int = 20
    # RIP-80 (PRIORITY topics): percent of priority-order pops served from the retry topic
    # first (0: retries come last), and whether a higher queue id is a higher priority.
    pop_from_retry_probability_for_priority: int = 0
    priority_order_asc: bool = True
    # A POP retry topic with as many queues as its topic, a revived message put in the queue it
    # came from (so a priority keeps its rank among retries); off as upstream's default.
    use_separate_retry_queue: bool = False
    max_pop_polling_size: int = 100_000
    # A new POP group starts at a queue's first message only while it is still in memory
    # (PopMessageProcessor#getInitOffset); otherwise at the last one.
    init_pop_offset_by_check_msg_in_mem: bool = True
    # PopBufferMergeService (services/broker/pop/buffer_merge.py): hold non-orderly checkpoints
    # in memory and match acks there, so a batch acked in time never touches the revive topic;
    # the pop offset is committed only once every earlier checkpoint is acked or stored. Off, as upstream.
    enable_pop_buffer_merge: bool = False
    # A buffered checkpoint is written to the revive topic this long after its pop (ms) ...
    pop_ck_stay_buffer_time: int = 10_000
    # ... or when its revive time is this close (ms); a pop this close to it is not buffered.
    pop_ck_stay_buffer_time_out: int = 3_000
    # Checkpoints held at once; past it a pop's checkpoint is written at once.
    pop_ck_max_buffer_size: int = 200_000
    # Uncommitted checkpoints per topic@group@queueId before new ones are written at once.
    pop_ck_offset_max_queue_size: int = 20_000
    # The buffered acks of a flushed checkpoint are written as one BatchAckMsg instead of one AckMsg each.
    enable_pop_batch_ack: bool = False
    # Log every buffered checkpoint, ack, flush and offset commit at INFO (the POP buffer only).
    enable_pop_log: bool = False
    # -- Slave Acting Master (services/broker/failover; classic master/slave, no controller) --
    # The slave with the smallest brokerId serves what needs no new write leader while the master is
    # gone: delay and timer delivery, POP revive, transaction check-back (BrokerController
    # #changeSpecialServiceStatus); its writes escape to another broker set with enableRemoteEscape.
    enable_slave_acting_master: bool = False
    enable_remote_escape: bool = False
    # Start without BrokerPreOnlineService (a master then skips the reverse metadata sync).
    skip_pre_online: bool = False
    sync_broker_member_group_period: int = 1000
    # The registration's heartbeatTimeoutMillis while acting master is on (NameServer scans it out).
    broker_not_active_timeout_millis: int = 10_000
    send_heartbeat_timeout_millis: int = 1000
    # Heartbeats and member-group lookups the 4.x way (QUERY_DATA_VERSION, a route lookup).
    compatible_with_old_name_srv: bool = True
    # -- controller mode (services/broker/ha/replicas_manager.py; upstream's BrokerConfig keys) --
    enable_controller_mode: bool = False
    # "a:p;b:p", or "domain:port" resolved to every address when fetchControllerAddrByDnsLookup.
    controller_addr: str = ""
    fetch_controller_addr_by_dns_lookup: bool = False
    sync_broker_metadata_period: int = 5000
    check_sync_state_set_period: int = 5000
    sync_controller_metadata_period: int = 10_000
    controller_heart_beat_timeout_mills: int = 10_000
    broker_heartbeat_interval: int = 1000
    # Lower is preferred by the controller's election; Integer.MAX_VALUE = no preference.
    broker_election_priority: int = 2**31 - 1
    # Empty means <storePathRootDir>/brokerIdentity (see broker_identity_path()).
    store_path_broker_identity: str = ""
    # The -c file (upstream's brokerConfigPath): updateBrokerConfig writes its changes back there.
    broker_config_path: str = ""
    # OrbitMQ has no DLedger CommitLog: true refuses to start (and always with controller mode,
    # as upstream), rather than being accepted and ignored.
    enable_d_leger_commit_log: bool = field(default=False, metadata={"key": "enableDLegerCommitLog"})
    # -- metrics (orbitmq.common.metrics; BrokerConfig#metricsExporterType): PROM serves /metrics, /ready --
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5557
    metrics_label: str = ""
    metric_logging_exporter_interval_in_mills: int = 10_000

    def resolve_defaults(self) -> None:
        """Fills values RocketMQ derives from the environment (host name, IP, NAMESRV_ADDR)."""
        if not self.broker_name:
            self.broker_name = _default_broker_name()
        if not self.broker_ip1:
            self.broker_ip1 = _local_ip()
        if not self.broker_ip2:
            self.broker_ip2 = self.broker_ip1
        if not self.namesrv_addr:
            self.namesrv_addr = os.environ.get(NAMESRV_ADDR_ENV, "")
        if self.ha_listen_port <= 0:
            self.ha_listen_port = self.listen_port + 1 if self.listen_port > 0 else 0
            self.ha_listen_port_derived = True

    # Set by resolve_defaults when haListenPort was not configured (listenPort + 1).
    ha_listen_port_derived = False

    def broker_identity_path(self, store_path_root_dir: str) -> str:
        """storePathBrokerIdentity, defaulting to <storePathRootDir>/brokerIdentity."""
        return self.store_path_broker_identity or os.path.join(store_path_root_dir, "brokerIdentity")

    def controller_addr_list(self) -> list[str]:
        return [a.strip() for a in self.controller_addr.split(";") if a.strip()]

    def namesrv_addr_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2}:{self.ha_listen_port}"
