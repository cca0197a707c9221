"""NameServer request headers that orbitmq.remoting.headers does not define (yet).

Same field names and CFNotNull rules as RocketMQ's remoting/protocol/header/namesrv classes.
Brokers and admin tools need these too; they belong in orbitmq.remoting.headers, and this module
only fills the gap until they are there.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.remoting.headers import CommandCustomHeader, b, i, s


@dataclass(kw_only=True)
class DeleteTopicFromNamesrvRequestHeader(CommandCustomHeader):
    topic: str = s("topic")
    cluster_name: str | None = s("clusterName", None)


@dataclass(kw_only=True)
class RegisterTopicRequestHeader(CommandCustomHeader):
    topic: str = s("topic")


@dataclass(kw_only=True)
class GetKVListByNamespaceRequestHeader(CommandCustomHeader):
    namespace: str = s("namespace")


@dataclass(kw_only=True)
class GetTopicsByClusterRequestHeader(CommandCustomHeader):
    cluster: str = s("cluster")


@dataclass(kw_only=True)
class BrokerHeartbeatRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName")
    broker_addr: str = s("brokerAddr")
    broker_name: str = s("brokerName")
    broker_id: int | None = i("brokerId", None)
    epoch: int | None = i("epoch", None)
    max_offset: int | None = i("maxOffset", None)
    confirm_offset: int | None = i("confirmOffset", None)
    heartbeat_timeout_mills: int | None = i("heartbeatTimeoutMills", None)
    election_priority: int | None = i("electionPriority", None)


@dataclass(kw_only=True)
class QueryDataVersionRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")
    broker_addr: str = s("brokerAddr")
    cluster_name: str = s("clusterName")
    broker_id: int = i("brokerId")


@dataclass(kw_only=True)
class QueryDataVersionResponseHeader(CommandCustomHeader):
    changed: bool = b("changed")


@dataclass(kw_only=True)
class WipeWritePermOfBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class WipeWritePermOfBrokerResponseHeader(CommandCustomHeader):
    wipe_topic_count: int = i("wipeTopicCount")


@dataclass(kw_only=True)
class AddWritePermOfBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class AddWritePermOfBrokerResponseHeader(CommandCustomHeader):
    add_topic_count: int = i("addTopicCount")


@dataclass(kw_only=True)
class GetBrokerMemberGroupRequestHeader(CommandCustomHeader):
    cluster_name: str = s("clusterName")
    broker_name: str = s("brokerName")


@dataclass(kw_only=True)
class NotifyMinBrokerIdChangeRequestHeader(CommandCustomHeader):
    min_broker_id: int | None = i("minBrokerId", None)
    broker_name: str | None = s("brokerName", None)
    min_broker_addr: str | None = s("minBrokerAddr", None)
    offline_broker_addr: str | None = s("offlineBrokerAddr", None)
    ha_broker_addr: str | None = s("haBrokerAddr", None)
