"""Keys every Remoting server process shares (broker, NameServer): NettyServerConfig's limits on
abusive clients and TlsSystemConfig's TLS keys, read by orbitmq.remoting.server and .tls."""

from __future__ import annotations

from dataclasses import dataclass, field

from orbitmq.common.config import ConfigBase


@dataclass
class RemotingServerConfig(ConfigBase):
    # NettyServerConfig's limits on one Remoting server (issue 16, abusive clients):
    # serverChannelMaxIdleTimeSeconds drops a silent (half-open) peer; writeBufferHigh/LowWaterMark
    # (0: asyncio's 64 KiB / 16 KiB) stop reading requests from a peer that does not read its
    # answers. serverMaxConnections and remotingFrameReadTimeoutMillis are OrbitMQ's own (Netty
    # accepts without bound and has no frame deadline): connections beyond the first N are closed,
    # and a frame not whole this long after its first byte (a trickle) closes its connection.
    server_channel_max_idle_time_seconds: int = 120
    write_buffer_high_water_mark: int = 0
    write_buffer_low_water_mark: int = 0
    server_max_connections: int = 10000
    remoting_frame_read_timeout_millis: int = 30_000
    # NettyServerConfig's graceful shutdown: for shutdownWaitTimeSeconds before the port closes,
    # clients newer than 5.3.1 get GO_AWAY and move to a new connection (orbitmq.remoting.server).
    enable_shutdown_gracefully: bool = False
    shutdown_wait_time_seconds: int = 30
    # Remoting over TLS, TlsSystemConfig's keys (orbitmq.remoting.tls): tls.server.mode disabled |
    # permissive (plaintext and TLS on one port, upstream's default) | enforcing, with a pair from
    # tls.server.certPath/keyPath or self-signed (tls.test.mode.enable; false here, unlike
    # upstream, so plaintext-only stays the default). tls.enable: this process's own Remoting
    # connections use TLS; tls.client.authServer checks the server against tls.client.trustCertPath.
    # Mutual TLS: tls.server.need.client.auth none | optional | require asks peers for a certificate,
    # checked against tls.server.trustCertPath (tls.server.authClient=true; see orbitmq.remoting.tls
    # for why it must be); tls.client.certPath/keyPath is the one this process presents.
    tls_server_mode: str = field(default="permissive", metadata={"key": "tls.server.mode"})
    tls_test_mode_enable: bool = field(default=False, metadata={"key": "tls.test.mode.enable"})
    tls_server_cert_path: str = field(default="", metadata={"key": "tls.server.certPath"})
    tls_server_key_path: str = field(default="", metadata={"key": "tls.server.keyPath"})
    tls_enable: bool = field(default=False, metadata={"key": "tls.enable"})
    tls_client_auth_server: bool = field(default=False, metadata={"key": "tls.client.authServer"})
    tls_client_trust_cert_path: str = field(default="", metadata={"key": "tls.client.trustCertPath"})
    tls_server_need_client_auth: str = field(default="none", metadata={"key": "tls.server.need.client.auth"})
    tls_server_auth_client: bool = field(default=False, metadata={"key": "tls.server.authClient"})
    tls_server_trust_cert_path: str = field(default="", metadata={"key": "tls.server.trustCertPath"})
    tls_server_key_password: str = field(default="", metadata={"key": "tls.server.keyPassword"})
    tls_client_cert_path: str = field(default="", metadata={"key": "tls.client.certPath"})
    tls_client_key_path: str = field(default="", metadata={"key": "tls.client.keyPath"})
    tls_client_key_password: str = field(default="", metadata={"key": "tls.client.keyPassword"})
