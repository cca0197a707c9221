"""RemotingClientConfig: RocketMQ's ClientConfig for the Remoting client (names upstream users know).

One config is shared by every producer and consumer of one MQClientInstance (one client id).
Intervals are seconds here (upstream's are milliseconds); the defaults are upstream's.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from dataclasses import dataclass, field

from orbitmq.client.namesrv_addr import resolve_namesrv_addr
from orbitmq.common.namespace import without_namespace, wrap_namespace
from orbitmq.remoting.tls import client_ssl_context

DEFAULT_INSTANCE_NAME = "DEFAULT"  # ClientConfig#instanceName's default (rocketmq.client.name)


def local_address() -> str:
    """NetworkUtil.getLocalAddress: this host's outward IPv4 address, 127.0.0.1 without a route."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # picks a route; nothing is sent
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


@dataclass
class RemotingClientConfig:
    """ClientConfig: where the NameServers are, who this client is, how often it talks to brokers."""

    namesrv_addr: str | None = None  # "host:port;host:port"; NAMESRV_ADDR when unset
    instance_name: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_CLIENT_NAME", DEFAULT_INSTANCE_NAME))
    client_ip: str = field(default_factory=local_address)
    unit_name: str | None = None
    namespace: str | None = None
    poll_name_server_interval: float = 30.0  # pollNameServerInterval
    heartbeat_broker_interval: float = 30.0  # heartbeatBrokerInterval
    persist_consumer_offset_interval: float = 5.0  # persistConsumerOffsetInterval
    rebalance_interval: float = 20.0  # RebalanceService's rocketmq.client.rebalance.waitInterval
    mq_client_api_timeout: float = 3.0  # mqClientApiTimeout
    vip_channel_enabled: bool = False  # vipChannelEnabled: sends go to the broker's listenPort - 2
    send_latency_enable: bool = False  # sendLatencyEnable (MQFaultStrategy#sendLatencyFaultEnable)
    # ACL 2.0 credentials (AclClientRPCHook): every request is signed when access_key is set
    access_key: str | None = None
    secret_key: str | None = None
    security_token: str | None = None
    # TlsSystemConfig's client keys (tls.enable, tls.client.*)
    tls_enable: bool = False
    tls_client_auth_server: bool = False
    tls_client_trust_cert_path: str = ""
    tls_client_cert_path: str = ""
    tls_client_key_path: str = ""
    tls_client_key_password: str = ""
    # NettyClientConfig#enableReconnectForGoAway: a server shutting down gracefully answers
    # GO_AWAY; the request is retried once on a new connection (a load balancer's next server).
    enable_reconnect_for_go_away: bool = True
    # ClientConfig#useHeartbeatV2 (-Dcom.rocketmq.heartbeat.v2, default false): once a broker says it
    # takes them, heartbeats whose groups and subscriptions are unchanged carry a fingerprint only.
    use_heartbeat_v2: bool = field(
        default_factory=lambda: os.environ.get("ROCKETMQ_HEARTBEAT_V2", "false").lower() == "true")

    def namesrv_addrs(self) -> list[str]:
        return resolve_namesrv_addr(self.namesrv_addr)

    def change_instance_name_to_pid(self) -> None:
        """ClientConfig#changeInstanceNameToPID: "DEFAULT" becomes pid#nanos, so two clients of one
        process that never named themselves still get one instance, and two processes differ."""
        if self.instance_name == DEFAULT_INSTANCE_NAME:
            self.instance_name = f"{os.getpid()}#{time.monotonic_ns()}"

    def build_mq_client_id(self) -> str:
        """ClientConfig#buildMQClientId: clientIP@instanceName[@unitName]."""
        client_id = f"{self.client_ip}@{self.instance_name}"
        if self.unit_name:
            client_id += f"@{self.unit_name}"
        return client_id

    def credentials(self) -> tuple[str, str] | None:
        if not self.access_key:
            return None
        if not self.secret_key:
            raise ValueError("access_key is set but secret_key is empty: ACL 2.0 signing needs both")
        return self.access_key, self.secret_key

    def ssl_context(self) -> ssl.SSLContext | None:
        """The Remoting connections' TLS context (orbitmq.remoting.tls.client_ssl_context); None: plaintext."""
        return client_ssl_context(self)

    # ClientConfig#withNamespace / withoutNamespace
    def with_namespace(self, resource: str) -> str:
        return wrap_namespace(self.namespace, resource) if self.namespace else resource

    def without_namespace(self, resource: str) -> str:
        return without_namespace(resource, self.namespace) if self.namespace else resource
