"""ProxyConfig: the proxy's settings under RocketMQ's rmq-proxy.json / proxy.conf key names."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from orbitmq.auth.config import AuthConfig
from orbitmq.common.constants import DEFAULT_CLUSTER, NAMESRV_ADDR_ENV

MAX_MESSAGE_SIZE = 4 * 1024 * 1024
PROCESSOR_NUMBER = os.cpu_count() or 1  # upstream's PROCESSOR_NUMBER, the default pool sizes


def _default_namesrv() -> str:
    return os.environ.get(NAMESRV_ADDR_ENV, "127.0.0.1:9876")


@dataclass
class ProxyConfig(AuthConfig):  # ACL 2.0 keys (authenticationEnabled, ...): orbitmq.auth.config
    """Defaults are upstream ProxyConfig's, except where noted."""

    rocket_mq_cluster_name: str = field(default=DEFAULT_CLUSTER, metadata={"key": "rocketMQClusterName"})
    proxy_name: str = "DEFAULT_PROXY"
    namesrv_addr: str = field(default_factory=_default_namesrv)
    # cluster: brokers over Remoting; local (services/proxy/local.py): the broker of brokerConfigPath
    # runs in this process and is called directly (`orbitmq proxy -pm local -bc broker.conf`)
    proxy_mode: str = "cluster"
    broker_config_path: str = ""
    grpc_server_port: int = 8081
    # The Remoting port (RIP-55, services/proxy/remoting/): Remoting clients take it as their
    # NameServer; 0 = an ephemeral port. Routes name remotingAccessAddr (empty = localServeAddr's
    # host, else the address the client dialled) with this port.
    remoting_listen_port: int = 8080
    remoting_access_addr: str = ""
    # The address clients are told to dial (QueryRoute endpoints); empty = the host they used,
    # with grpcServerPort, or with the port they used too when useEndpointPortFromRequest is set
    # (for NodePorts and load balancers whose port is not the proxy's).
    local_serve_addr: str = ""
    use_endpoint_port_from_request: bool = False
    grpc_shutdown_time_seconds: int = 5
    # The Remoting port's graceful shutdown, NettyServerConfig's keys (upstream's proxy leaves them
    # at their defaults): GO_AWAY to Remoting clients for shutdownWaitTimeSeconds, while the gRPC
    # port drains for grpcShutdownTimeSeconds.
    enable_shutdown_gracefully: bool = False
    shutdown_wait_time_seconds: int = 30
    # A 4 MiB body plus headers must fit; upstream allows 130 MiB.
    grpc_max_inbound_message_size: int = 130 * 1024 * 1024
    # -- TLS (services/proxy/tls.py), upstream's keys: tls.server.mode is TlsSystemConfig's
    # (disabled | permissive: plaintext and TLS on one port | enforcing). Unlike upstream,
    # tlsTestModeEnable defaults to false: a self-signed pair on every start needs openssl, and
    # permissive mode splices every connection through a front (docs/benchmarks.md has the cost);
    # TLS is served once tlsTestModeEnable=true or tlsCertPath and tlsKeyPath are set. --
    tls_test_mode_enable: bool = False
    tls_key_path: str = ""
    tls_cert_path: str = ""
    # The password of an encrypted tlsKeyPath (PKCS#8 or traditional PEM), TlsSystemConfig's key as
    # upstream's Remoting port reads it; upstream's gRPC port takes no encrypted key, this one does.
    tls_server_key_password: str = field(default="", metadata={"key": "tls.server.keyPassword"})
    # How often the proxy looks for a new tlsCertPath/tlsKeyPath pair (rotated certificates).
    tls_cert_watch_interval_ms: int = 60 * 60 * 1000
    tls_server_mode: str = field(default="permissive", metadata={"key": "tls.server.mode"})
    # The proxy's Remoting connections to NameServers and brokers (orbitmq.remoting.tls).
    tls_enable: bool = field(default=False, metadata={"key": "tls.enable"})
    tls_client_auth_server: bool = field(default=False, metadata={"key": "tls.client.authServer"})
    tls_client_trust_cert_path: str = field(default="", metadata={"key": "tls.client.trustCertPath"})
    # Mutual TLS (TlsSystemConfig's keys, as upstream's proxy reads them): the gRPC port asks clients
    # for a certificate with tls.server.need.client.auth=require, verified against
    # tls.server.trustCertPath; the Remoting connections present tls.client.certPath/keyPath.
    # grpcio's server can only require a client certificate or not ask: optional is refused.
    tls_server_need_client_auth: str = field(default="none", metadata={"key": "tls.server.need.client.auth"})
    tls_server_auth_client: bool = field(default=False, metadata={"key": "tls.server.authClient"})
    tls_server_trust_cert_path: str = field(default="", metadata={"key": "tls.server.trustCertPath"})
    tls_client_cert_path: str = field(default="", metadata={"key": "tls.client.certPath"})
    tls_client_key_path: str = field(default="", metadata={"key": "tls.client.keyPath"})
    tls_client_key_password: str = field(default="", metadata={"key": "tls.client.keyPassword"})
    # -- abusive clients (issue 16; OrbitMQ's own keys, upstream leaves these to Netty/executors) --
    # HTTP/2 streams one connection may have open (SETTINGS_MAX_CONCURRENT_STREAMS: clients queue).
    grpc_max_concurrent_streams_per_connection: int = 4096
    # Telemetry streams open at once over all clients (one per client id: a new one replaces the
    # old); beyond it a stream is answered TOO_MANY_REQUESTS and closed.
    grpc_max_telemetry_streams: int = 20_000
    # ReceiveMessage long polls held at once; beyond it TOO_MANY_REQUESTS (the client backs off).
    grpc_max_long_polling_requests: int = 20_000
    # Server keepalive pings reap half-open connections: a ping unanswered this long closes it.
    grpc_keepalive_time_millis: int = 60_000
    grpc_keepalive_timeout_millis: int = 20_000
    max_message_size: int = MAX_MESSAGE_SIZE
    enable_message_body_empty_check: bool = True
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    # The longest lite topic name a consumer may subscribe, told to consumers in their Settings
    # (GrpcClientSettingsManager#mergeSubscriptionData); this proxy serves no lite topics yet.
    max_lite_topic_size: int = 64
    default_invisible_time_mills: int = 60_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600 * 1000
    max_delay_time_mills: int = 24 * 3600 * 1000
    enable_topic_message_type_check: bool = True
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1000
    grpc_client_producer_backoff_multiplier: int = 2
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    grpc_client_consumer_long_polling_batch_size: int = 32
    long_polling_reserve_time_in_millis: int = 100
    # Remoting calls to brokers and NameServers.
    remoting_timeout_millis: int = 3_000
    topic_route_service_cache_refresh_seconds: int = 20
    # Failover (not upstream keys: RocketMQ's proxy leaves this to the client's retries). After a
    # connection failure to a master, a request re-resolves the broker set's route from the
    # NameServers for up to this long (bounded by the client's deadline) and is sent again.
    broker_failover_wait_millis: int = 10_000
    # Resends of one SendMessage after an unknown outcome (reset, timeout) or a refusal; refused
    # connects (nothing sent) only use up the wait above. DefaultMQProducer's key and default.
    retry_times_when_send_failed: int = 2
    # Topic and group configs fetched from brokers are reused this long.
    metadata_cache_expired_millis: int = 3_000
    # How often gRPC clients are re-announced to brokers (HEART_BEAT on their behalf).
    heartbeat_interval_millis: int = 10_000
    # A gRPC client silent this long is unregistered from brokers, and a connection with no RPC
    # this long is closed with GOAWAY (GrpcServerBuilder's maxConnectionIdle; clients reconnect).
    grpc_client_idle_time_mills: int = 120_000
    # Calls in flight per RPC family: pool size + queue capacity, upstream's executor keys
    # (services/proxy/flow_limit.py); past it TOO_MANY_REQUESTS "flow limit".
    grpc_route_thread_pool_nums: int = PROCESSOR_NUMBER
    grpc_route_thread_queue_capacity: int = 10_000
    grpc_producer_thread_pool_nums: int = PROCESSOR_NUMBER
    grpc_producer_thread_queue_capacity: int = 10_000
    grpc_consumer_thread_pool_nums: int = PROCESSOR_NUMBER
    grpc_consumer_thread_queue_capacity: int = 10_000
    grpc_client_manager_thread_pool_nums: int = PROCESSOR_NUMBER
    grpc_client_manager_thread_queue_capacity: int = 10_000
    grpc_transaction_thread_pool_nums: int = PROCESSOR_NUMBER
    grpc_transaction_thread_queue_capacity: int = 10_000
    # HeartbeatSyncer (services/proxy/heartbeat_syncer.py): the proxies tell each other their
    # subscribed PullConsumers through this topic (one queue on every master of the cluster named
    # here; empty = rocketMQClusterName), every heartbeatIntervalMillis and on every change.
    heartbeat_syncer_topic_name: str = "DefaultHeartBeatSyncerTopic"
    heartbeat_syncer_topic_cluster_name: str = ""
    # Create a missing topic on every master of the cluster when a client first names it (the
    # proxy counterpart of a broker's autoCreateTopicEnable; on for `orbitmq local`).
    auto_create_topic_enable: bool = False
    default_topic_queue_nums: int = 4
    # How long a broker's request relayed to a gRPC client (consumerStatus -s, queryMsgById -g -d)
    # waits for the client's answer on its Telemetry stream.
    grpc_proxy_relay_request_timeout_in_seconds: int = 5
    # Auto-renewed receipt handles (ReceiveMessage with auto_renew), upstream's names.
    renew_ahead_time_millis: int = 10_000
    renew_schedule_period_millis: int = 5_000
    renew_max_time_millis: int = 3 * 3600 * 1000
    max_renew_retry_times: int = 3
    invisible_time_millis_when_clear: int = 1_000
    # Off (upstream's default): delivery_timestamp travels as TIMER_DELIVER_MS to the broker's
    # timer wheel. On: the message also gets the first delay level longer than its wait, which
    # wins on the broker (ScheduleMessageService; the longest level is 2 h by default).
    use_delay_level: bool = False
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    # -- message trace for gRPC clients (services/proxy/trace.py; not upstream keys: RocketMQ's
    # proxy writes no trace). The trace topic must exist (broker traceTopicEnable=true). --
    trace_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    trace_msg_batch_num: int = 10  # records per trace message (upstream's client default, max 20)
    trace_queue_capacity: int = 2048  # records waiting to be sent; beyond it they are dropped and counted
    # -- metrics (orbitmq.common.metrics; ProxyConfig's metrics keys): PROM serves /metrics and /ready --
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5557
    metrics_label: str = ""
    metric_logging_exporter_interval_in_mills: int = 10_000

    def delay_levels_millis(self) -> list[int]:
        """The delay level table in milliseconds, level 1 first."""
        units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        levels = []
        for item in self.message_delay_level.split():
            levels.append(int(item[:-1]) * units[item[-1]])
        return levels

    def compute_delay_level(self, deliver_ms: int, now_ms: int) -> int:
        """ProxyConfig.computeDelayLevel: the first level longer than the wait (0 when already due)."""
        delay = deliver_ms - now_ms
        if delay <= 0:
            return 0
        levels = self.delay_levels_millis()
        for index, level_ms in enumerate(levels, 1):
            if level_ms > delay:
                return index
        return len(levels)
