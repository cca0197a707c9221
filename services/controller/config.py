"""ControllerConfig: controller.conf keys with RocketMQ's names and defaults (ControllerConfig.java).

OrbitMQ runs the DLedger flavour of the controller on pysyncobj: ``controllerDLegerPeers`` lists
each node's Raft transport address (``n0-127.0.0.1:9877;n1-...``) and ``controllerDLegerSelfId``
picks this node's entry. Requests are served on a separate Remoting port, ``listenPort`` (9878),
as JRaft does upstream; every node's Remoting address travels through Raft (see raft.py).

``controllerType=jRaft`` is refused at start-up (:meth:`ControllerConfig.validate`): there is no
SOFA-JRaft here, so the ``jRaft*`` keys are not config keys either (a Java controller.conf naming
them gets the unknown-key warning instead of having them accepted and ignored).

``mappedFileSize`` bounds the Raft journal file: past it the log is compacted into a snapshot.
``controllerThreadPoolNums`` bounds the requests processed at once and
``controllerRequestThreadPoolQueueCapacity`` the requests waiting per connection (SYSTEM_BUSY past it).
``controllerLogCompactionMinEntries``/``controllerLogCompactionMinTimeSecs`` are OrbitMQ's: how often
pysyncobj writes a full snapshot and cuts the journal, so a restart never replays a long log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from orbitmq.auth.config import AuthConfig
from orbitmq.remoting.server_config import RemotingServerConfig

DEFAULT_LISTEN_PORT = 9878
CONTROLLER_TYPE_DLEDGER = "DLedger"
CONTROLLER_TYPE_JRAFT = "jRaft"
# Keys UPDATE_CONTROLLER_CONFIG may never change, whatever configBlackList says.
# ... and the ACL 2.0 keys, read at start-up only.
ALWAYS_BLACKLISTED = frozenset({"configBlackList", "configStorePath", "rocketmqHome"}) | AuthConfig.config_keys()


def _home_path(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


class ControllerConfigError(ValueError):
    """The configuration cannot start a controller (wrong type, bad peers, unknown self id)."""


@dataclass
class ControllerConfig(AuthConfig, RemotingServerConfig):  # ACL 2.0 keys; Remoting limits and TLS keys
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    config_store_path: str = field(default_factory=lambda: _home_path("controller", "controller.properties"))
    controller_type: str = CONTROLLER_TYPE_DLEDGER
    scan_not_active_broker_interval: int = 5 * 1000
    controller_thread_pool_nums: int = 16
    controller_request_thread_pool_queue_capacity: int = 50000
    mapped_file_size: int = 1024 * 1024 * 1024
    # "" means ~/<controllerType>Controller, resolved by store_path()
    controller_store_path: str = ""
    enable_elect_unclean_master: bool = False
    is_process_read_event: bool = field(default=False, metadata={"key": "processReadEvent"})
    notify_broker_role_changed: bool = True
    scan_inactive_master_interval: int = 5 * 1000
    elect_master_max_retry_count: int = 3
    config_black_list: str = "configBlackList;configStorePath"
    controller_d_leger_group: str = ""
    controller_d_leger_peers: str = ""
    controller_d_leger_self_id: str = ""
    # OrbitMQ: pysyncobj log compaction
    controller_log_compaction_min_entries: int = 5000
    controller_log_compaction_min_time_secs: int = 3600
    # NettyServerConfig keys
    listen_port: int = DEFAULT_LISTEN_PORT
    bind_address: str = "0.0.0.0"
    # -- metrics (orbitmq.common.metrics; ControllerConfig's metrics keys): PROM serves /metrics and /ready --
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5557
    metrics_label: str = ""
    metric_logging_exporter_interval_in_mills: int = 10_000

    def black_listed_keys(self) -> frozenset[str]:
        extra = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return ALWAYS_BLACKLISTED | extra

    def store_path(self) -> str:
        """controllerStorePath, defaulting like upstream to ~/<controllerType>Controller."""
        return self.controller_store_path or _home_path(f"{self.controller_type}Controller")

    def peers(self) -> dict[str, str]:
        """controllerDLegerPeers as node id -> Raft address, in the order written."""
        result: dict[str, str] = {}
        for item in self.controller_d_leger_peers.split(";"):
            item = item.strip()
            if not item:
                continue
            node_id, sep, addr = item.partition("-")
            if not sep or not node_id or ":" not in addr:
                raise ControllerConfigError(
                    f"controllerDLegerPeers: bad entry {item!r}, expected id-host:port (n0-127.0.0.1:9877)")
            result[node_id.strip()] = addr.strip()
        return result

    def validate(self) -> None:
        """Refuse what this build cannot run, with the reason an operator can act on."""
        if self.controller_type == CONTROLLER_TYPE_JRAFT:
            raise ControllerConfigError(
                "controllerType=jRaft is not supported by OrbitMQ (no SOFA-JRaft); "
                "use controllerType=DLedger with controllerDLegerGroup/Peers/SelfId")
        if self.controller_type != CONTROLLER_TYPE_DLEDGER:
            raise ControllerConfigError(
                f"controllerType={self.controller_type!r} is unknown; only DLedger is supported")
        peers = self.peers()
        if not peers:
            raise ControllerConfigError("controllerDLegerPeers is required (n0-127.0.0.1:9877;n1-...)")
        if self.controller_d_leger_self_id not in peers:
            raise ControllerConfigError(
                f"controllerDLegerSelfId={self.controller_d_leger_self_id!r} is not in controllerDLegerPeers")
        if not self.controller_d_leger_group:
            raise ControllerConfigError("controllerDLegerGroup is required")
        for key, value in (("scanNotActiveBrokerInterval", self.scan_not_active_broker_interval),
                           ("scanInactiveMasterInterval", self.scan_inactive_master_interval),
                           ("controllerThreadPoolNums", self.controller_thread_pool_nums),
                           ("controllerRequestThreadPoolQueueCapacity",
                            self.controller_request_thread_pool_queue_capacity),
                           ("mappedFileSize", self.mapped_file_size)):
            if value <= 0:
                raise ControllerConfigError(f"{key} must be > 0, got {value}")


@dataclass
class NamesrvControllerConfig(ControllerConfig):
    """The controller keys of a namesrv.conf with ``enableControllerInNamesrv=true``.

    The NameServer owns ``listenPort``, ``bindAddress`` and ``configStorePath`` in that file, so
    the embedded controller reads its own as ``controllerListenPort`` (9878),
    ``controllerBindAddress`` and ``controllerConfigStorePath``; every other key is the same.
    """

    config_store_path: str = field(default_factory=lambda: _home_path("controller", "controller.properties"),
                                   metadata={"key": "controllerConfigStorePath"})
    listen_port: int = field(default=DEFAULT_LISTEN_PORT, metadata={"key": "controllerListenPort"})
    bind_address: str = field(default="0.0.0.0", metadata={"key": "controllerBindAddress"})
