"""MQAdminExt: cluster-wide admin operations built from MQClientAPI's single-server calls.

Resolves clusters, brokers and topics through the NameServers (trying each in turn), then
talks to the right masters, as RocketMQ's DefaultMQAdminExt does for mqadmin. Every failure
the operator should see becomes an AdminError with a one-line reason.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from orbitmq.client import MQBrokerError, MQClientAPI, MQClientError
from orbitmq.common.constants import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    MASTER_ID,
    TOOLS_CONSUMER_GROUP,
    is_sys_consumer_group,
)
from orbitmq.common.fastjson import loads, message_queue_pairs
from orbitmq.common.message import MessageExt
from orbitmq.common.message_codec import decode_records
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.route import BrokerData, ClusterInfo, TopicRouteData
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError

T = TypeVar("T")

ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
PULL_SYS_FLAG_SUBSCRIPTION = 0x4


class AdminError(Exception):
    """An admin operation failed; the message is the one-line reason shown to the operator."""


@dataclass
class QueueOffsetRow:
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


class MQAdminExt:
    def __init__(self, namesrv_addrs: list[str], *, timeout: float = 5.0) -> None:
        if not namesrv_addrs:
            raise AdminError("no NameServer address: pass -n host:port or set NAMESRV_ADDR")
        self.namesrv_addrs = namesrv_addrs
        self.api = MQClientAPI(timeout=timeout)

    async def close(self) -> None:
        await self.api.close()

    async def __aenter__(self) -> MQAdminExt:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- NameServer ---------------------------------------------------------------------------

    async def _on_namesrv(self, call: Callable[[str], Awaitable[T]]) -> T:
        """Run ``call`` against the first NameServer that answers."""
        last: Exception | None = None
        for addr in self.namesrv_addrs:
            try:
                return await call(addr)
            except RemotingError as exc:
                last = exc
        raise AdminError(f"no NameServer reachable ({'; '.join(self.namesrv_addrs)}): {last}")

    async def cluster_info(self) -> ClusterInfo:
        return await self._on_namesrv(self.api.get_cluster_info)

    async def topic_route(self, topic: str) -> TopicRouteData:
        async def get(addr: str) -> TopicRouteData:
            try:
                return await self.api.get_topic_route(addr, topic)
            except MQClientError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    raise AdminError(f"topic {topic} does not exist (no route info in the NameServer)") from None
                raise
        return await self._on_namesrv(get)

    async def topic_list(self) -> list[str]:
        return await self._on_namesrv(self.api.get_all_topic_list)

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        for addr in self.namesrv_addrs:
            await self.api.call(addr, RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None) -> None:
        for addr in self.namesrv_addrs:
            await self.api.delete_topic_in_namesrv(addr, topic, cluster)

    async def master_addrs(self, cluster: str) -> list[tuple[str, str]]:
        """(brokerName, master address) of every broker set in the cluster."""
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise AdminError(f"cluster {cluster} does not exist (known clusters: {known})")
        result = []
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            addr = data.broker_addrs.get(MASTER_ID) if data is not None else None
            if addr:
                result.append((name, addr))
        if not result:
            raise AdminError(f"cluster {cluster} has no master broker online")
        return result

    async def all_master_addrs(self) -> list[tuple[str, str]]:
        info = await self.cluster_info()
        return sorted((name, data.broker_addrs[MASTER_ID]) for name, data in info.broker_addr_table.items()
                      if MASTER_ID in data.broker_addrs)

    async def broker_addr_by_name(self, broker_name: str) -> str:
        info = await self.cluster_info()
        data = info.broker_addr_table.get(broker_name)
        addr = data.select_broker_addr() if data is not None else None
        if not addr:
            raise AdminError(f"broker {broker_name} is not registered in the NameServer")
        return addr

    async def targets(self, cluster: str | None, broker_addr: str | None) -> list[tuple[str, str]]:
        """-b wins over -c, as mqadmin reads them; returns (label, address) pairs."""
        if broker_addr:
            return [(broker_addr, broker_addr)]
        if cluster:
            return await self.master_addrs(cluster)
        raise AdminError("one of -b brokerAddr or -c clusterName is required")

    @staticmethod
    def route_masters(route: TopicRouteData) -> list[tuple[str, str]]:
        out = []
        for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
            addr = data.broker_addrs.get(MASTER_ID)
            if addr:
                out.append((data.broker_name, addr))
        return out

    # ---- topics and groups ----------------------------------------------------------------------

    async def create_topic(self, addr: str, config: TopicConfig, attributes: str | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC with mqadmin's attribute edits ("+k=v,-k2") passed as given:
        the broker applies them to the attributes the topic already has."""
        header = {"topic": config.topic_name, "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC,
                  "readQueueNums": str(config.read_queue_nums), "writeQueueNums": str(config.write_queue_nums),
                  "perm": str(config.perm), "topicFilterType": config.topic_filter_type,
                  "topicSysFlag": str(config.topic_sys_flag), "order": str(config.order).lower()}
        if attributes:
            header["attributes"] = attributes
        await self.api.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        await self.api.delete_topic_in_broker(addr, topic)

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        await self.api.create_subscription_group(addr, config)

    async def get_subscription_group(self, addr: str, group: str) -> SubscriptionGroupConfig | None:
        return await self.api.get_subscription_group_config(addr, group)

    async def delete_subscription_group(self, addr: str, group: str, clean_offset: bool) -> None:
        await self.api.delete_subscription_group(addr, group, clean_offset)

    async def all_subscription_groups(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        return await self.api.get_all_subscription_group_config(addr)

    async def _table(self, addr: str, code: int, header: dict[str, str | None]) -> dict[str, Any]:
        """A broker answer whose body is a fastjson table keyed by MessageQueue objects."""
        response = await self.api.call(addr, code, {k: v for k, v in header.items() if v is not None})
        if not response.body:
            return {}
        try:
            body = loads(response.body)
        except ValueError as exc:
            raise AdminError(f"broker {addr} answered a body that is not JSON: {exc}") from None
        return body if isinstance(body, dict) else {}

    # ---- stats ----------------------------------------------------------------------------------

    async def topic_status(self, topic: str) -> list[dict[str, Any]]:
        route = await self.topic_route(topic)
        rows: list[dict[str, Any]] = []
        for broker_name, addr in self.route_masters(route):
            stats = await self._table(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
            for mq, value in message_queue_pairs(stats.get("offsetTable")):
                value = value or {}
                rows.append({"brokerName": mq.get("brokerName", broker_name), "queueId": int(mq.get("queueId", 0)),
                             "minOffset": int(value.get("minOffset", 0)), "maxOffset": int(value.get("maxOffset", 0)),
                             "lastUpdateTimestamp": int(value.get("lastUpdateTimestamp", 0))})
        rows.sort(key=lambda r: (r["brokerName"], r["queueId"]))
        return rows

    async def consume_stats(self, group: str, topic: str | None) -> tuple[list[QueueOffsetRow], float]:
        brokers = self.route_masters(await self.topic_route(topic)) if topic else await self.all_master_addrs()
        rows: list[QueueOffsetRow] = []
        tps = 0.0
        for broker_name, addr in brokers:
            stats = await self._table(addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
            tps += float(stats.get("consumeTps", 0) or 0)
            for mq, value in message_queue_pairs(stats.get("offsetTable")):
                value = value or {}
                rows.append(QueueOffsetRow(
                    topic=str(mq.get("topic", topic or "")), broker_name=str(mq.get("brokerName", broker_name)),
                    queue_id=int(mq.get("queueId", 0)), broker_offset=int(value.get("brokerOffset", 0)),
                    consumer_offset=int(value.get("consumerOffset", 0)),
                    last_timestamp=int(value.get("lastTimestamp", 0))))
        rows.sort(key=lambda r: (r.topic, r.broker_name, r.queue_id))
        return rows, tps

    async def consumer_groups(self) -> list[str]:
        groups: set[str] = set()
        for _name, addr in await self.all_master_addrs():
            groups.update(g for g in await self.all_subscription_groups(addr) if not is_sys_consumer_group(g))
        return sorted(groups)

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        return await self.api.get_broker_runtime_info(addr)

    # ---- offsets ----------------------------------------------------------------------------------

    async def reset_offset_by_timestamp(self, topic: str, group: str, timestamp: int,
                                        force: bool) -> list[dict[str, Any]]:
        route = await self.topic_route(topic)
        rows: list[dict[str, Any]] = []
        for broker_name, addr in self.route_masters(route):
            body = await self._table(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
                "group": group, "topic": topic, "timestamp": str(timestamp), "isForce": "true" if force else "false"})
            for mq, offset in message_queue_pairs(body.get("offsetTable")):
                rows.append({"brokerName": mq.get("brokerName", broker_name), "queueId": int(mq.get("queueId", 0)),
                             "offset": int(offset or 0)})
        rows.sort(key=lambda r: (r["brokerName"], r["queueId"]))
        return rows

    # ---- messages -------------------------------------------------------------------------------

    async def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """With a topic, by unique key (UNIQ_KEY, what clients call the message id) first; then,
        or without a topic, by offset message id (which names the broker holding it)."""
        if topic is not None:
            found = await self.query_message(topic, msg_id, 32, 0, 2**63 - 1, unique_key=True)
            if found:
                return found[0]
        try:
            decode_offset_message_id(msg_id)
        except ValueError:
            where = f" in topic {topic}" if topic else "; give -t topic to look it up as a unique key"
            raise AdminError(f"message {msg_id} not found{where}") from None
        try:
            return await self.api.view_message_by_id(msg_id)
        except (MQBrokerError, RemotingError) as exc:
            reason = exc.remark if isinstance(exc, MQBrokerError) else str(exc)
            raise AdminError(f"message {msg_id} not found: {reason}") from None

    async def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int,
                            unique_key: bool = False) -> list[MessageExt]:
        route = await self.topic_route(topic)
        found: list[MessageExt] = []
        for _name, addr in self.route_masters(route):
            header = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
                      "endTimestamp": str(end)}
            if unique_key:
                header["_UNIQUE_KEY_QUERY"] = "true"
            response = await self.api.call(addr, RequestCode.QUERY_MESSAGE, header,
                                           ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            if response.code == ResponseCode.SUCCESS and response.body:
                for msg in decode_records(response.body, check_crc=False):
                    if unique_key and msg.uniq_key != key:
                        continue
                    found.append(msg)
        found.sort(key=lambda m: m.store_timestamp)
        return found[:max_num]

    async def message_at_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        """QueryMsgByOffset: pull exactly one message from that queue position."""
        addr = await self.broker_addr_by_name(broker_name)
        header = h.PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP, topic=topic, queue_id=queue_id, queue_offset=offset,
            max_msg_nums=1, sys_flag=PULL_SYS_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0,
            subscription="*", sub_version=int(time.time() * 1000))
        result = await self.api.pull_message(addr, header)
        if not result.messages or result.messages[0].queue_offset != offset:
            raise AdminError(f"no message at {topic} {broker_name} queue {queue_id} offset {offset} "
                             f"({result.status.value}; queue holds offsets {result.min_offset}..{result.max_offset - 1})")
        return result.messages[0]


def broker_names_of(route: TopicRouteData) -> list[BrokerData]:
    return sorted(route.broker_datas, key=lambda d: d.broker_name)
