"""MQAdminExt: cluster-wide admin operations built from MQClientAPI's single-server calls.

Resolves clusters, brokers and topics through the NameServers (trying each in turn), then
talks to the right masters, as RocketMQ's DefaultMQAdminExt does for mqadmin. Every failure
the operator should see becomes an AdminError with a one-line reason.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from orbitmq.client import MQBrokerError, MQClientAPI, MQClientError, SendResult
from orbitmq.client.results import PullResult
from orbitmq.common.config import parse_properties_text
from orbitmq.common.constants import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    MASTER_ID,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    TOOLS_CONSUMER_GROUP,
    is_sys_consumer_group,
)
from orbitmq.common.fastjson import dumps, loads, message_queue_pairs
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.message_codec import decode_records
from orbitmq.common.message_id import create_uniq_id, decode_offset_message_id
from orbitmq.common.route import BrokerData, ClusterInfo, TopicRouteData
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.common.validators import is_system_group, is_system_topic
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand

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
        return (await self._answer(addr, code, header))[0]

    async def _answer(self, addr: str, code: int, header: dict[str, str | None]) -> tuple[dict[str, Any], RemotingCommand]:
        """(the JSON object of the body, {} when there is none; the response itself)."""
        response = await self.api.call(addr, code, {k: v for k, v in header.items() if v is not None})
        if not response.body:
            return {}, response
        try:
            body = loads(response.body)
        except ValueError as exc:
            raise AdminError(f"broker {addr} answered a body that is not JSON: {exc}") from None
        return (body if isinstance(body, dict) else {}), response

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

    async def reset_offset_by_timestamp(self, topic: str, group: str, timestamp: int, force: bool,
                                        broker_names: set[str] | None = None) -> list[dict[str, Any]]:
        """``broker_names``: only these broker sets (skipAccumulatedMessage -c cluster)."""
        route = await self.topic_route(topic)
        rows: list[dict[str, Any]] = []
        for broker_name, addr in self.route_masters(route):
            if broker_names is not None and broker_name not in broker_names:
                continue
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

    async def resume_check_half_message(self, topic: str, msg_id: str) -> None:
        """MQAdminExt.resumeCheckHalfMessage: a transaction message discarded after
        transactionCheckMax checks goes back under the check (RESUME_CHECK_HALF_MESSAGE to the
        broker storing it, by its offset message id). ``msg_id`` is a unique key of ``topic`` or
        the offset id of the discarded record."""
        try:
            decode_offset_message_id(msg_id)
            msg = await self.view_message(msg_id)
        except (ValueError, AdminError):
            kept = [m for m in await self.query_message(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, msg_id, 32, 0, 2**63 - 1,
                                                        unique_key=True)
                    if m.properties.get(MessageConst.REAL_TOPIC) == topic]
            if not kept:
                raise AdminError(f"no discarded half message {msg_id} of topic {topic} in "
                                 f"{RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC}") from None
            msg = kept[-1]  # the newest discard
        if not msg.store_host:
            raise AdminError(f"message {msg_id}: no store host to send the resume to")
        try:
            await self.api.call(msg.store_host, RequestCode.RESUME_CHECK_HALF_MESSAGE,
                                {"topic": topic, "msgId": msg.msg_id})
        except (MQBrokerError, RemotingError) as exc:
            reason = exc.remark if isinstance(exc, MQBrokerError) else str(exc)
            raise AdminError(f"resume of half message {msg_id} failed: {reason}") from None

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

    # ---- operator commands (topicClusterList, perms, configs, connections, messages) -----------

    async def topic_clusters(self, topic: str) -> list[str]:
        """getTopicClusterList: the clusters whose brokers serve the topic."""
        route = await self.topic_route(topic)
        info = await self.cluster_info()
        cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
        clusters = {d.cluster or cluster_of.get(d.broker_name, "") for d in route.broker_datas}
        return sorted(c for c in clusters if c)

    async def write_perm_of_broker(self, namesrv_addr: str, broker_name: str, wipe: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER on one NameServer: topics changed."""
        code = RequestCode.WIPE_WRITE_PERM_OF_BROKER if wipe else RequestCode.ADD_WRITE_PERM_OF_BROKER
        response = await self.api.call(namesrv_addr, code, {"brokerName": broker_name})
        field = "wipeTopicCount" if wipe else "addTopicCount"
        try:
            return int(response.ext_fields.get(field, "0") or 0)
        except ValueError:
            raise AdminError(f"NameServer {namesrv_addr} answered a bad {field}: "
                             f"{response.ext_fields.get(field)!r}") from None

    async def namesrv_config(self, addr: str) -> dict[str, str]:
        """GET_NAMESRV_CONFIG: the NameServer's properties, in its order."""
        response = await self.api.call(addr, RequestCode.GET_NAMESRV_CONFIG)
        return parse_properties_text((response.body or b"").decode("utf-8"))

    async def update_namesrv_config(self, addr: str, values: dict[str, str]) -> None:
        body = "".join(f"{k}={v}\n" for k, v in values.items()).encode("utf-8")
        await self.api.call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, body)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        for addr in self.namesrv_addrs:
            await self.api.call(addr, RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        async def get(addr: str) -> str | None:
            response = await self.api.call(addr, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key},
                                           ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
            return response.ext_fields.get("value") if response.code == ResponseCode.SUCCESS else None
        return await self._on_namesrv(get)

    async def broker_config(self, addr: str) -> dict[str, str]:
        return await self.api.get_broker_config(addr)

    async def update_broker_config(self, addr: str, values: dict[str, str]) -> None:
        await self.api.update_broker_config(addr, values)

    async def cluster_broker_addrs(self, cluster: str, with_slaves: bool) -> list[tuple[str, str, list[str]]]:
        """(brokerName, master address or "", slave addresses) of every broker set in the cluster."""
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise AdminError(f"cluster {cluster} does not exist (known clusters: {known})")
        out = []
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            addrs = data.broker_addrs if data is not None else {}
            slaves = [a for i, a in sorted(addrs.items()) if i != MASTER_ID] if with_slaves else []
            out.append((name, addrs.get(MASTER_ID, ""), slaves))
        return out

    async def consumer_connection(self, group: str, addr: str | None = None) -> tuple[str, dict[str, Any]]:
        """GET_CONSUMER_CONNECTION_LIST from ``addr`` or the first master that knows the group online."""
        addrs = [addr] if addr else [a for _n, a in await self.all_master_addrs()]
        last: MQBrokerError | None = None
        for broker in addrs:
            try:
                response = await self.api.call(broker, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                               {"consumerGroup": group})
            except MQBrokerError as exc:
                last = exc
                continue
            return broker, loads(response.body) if response.body else {}
        if last is not None and last.code == ResponseCode.CONSUMER_NOT_ONLINE:
            raise AdminError(f"consumer group {group} is not online")
        if last is not None:
            raise last
        raise AdminError("no master broker online")

    async def producer_connection(self, group: str, topic: str) -> dict[str, Any]:
        """GET_PRODUCER_CONNECTION_LIST on the masters serving ``topic``, merged."""
        route = await self.topic_route(topic)
        connections: dict[str, dict[str, Any]] = {}
        for _name, addr in self.route_masters(route):
            response = await self.api.call(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group},
                                           ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
            if response.code != ResponseCode.SUCCESS or not response.body:
                continue
            for conn in loads(response.body).get("connectionSet", []):
                connections.setdefault(str(conn.get("clientId")), conn)
        if not connections:
            raise AdminError(f"producer group {group} has no connection on the brokers of topic {topic}")
        return {"connectionSet": list(connections.values())}

    async def broker_consume_stats(self, addr: str, is_order: bool) -> dict[str, Any]:
        """GET_BROKER_CONSUME_STATS: the broker's ConsumeStatsList."""
        return await self._table(addr, RequestCode.GET_BROKER_CONSUME_STATS,
                                 {"isOrder": "true" if is_order else "false"})

    async def delete_expired_commit_log(self, addr: str) -> None:
        await self.api.call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG)

    async def user_topic_configs(self, addr: str, special_topic: bool) -> dict[str, TopicConfig]:
        """getUserTopicConfig: the broker's topics without its own system topics (nor %RETRY% and
        %DLQ% ones unless ``special_topic``), nor ones whose perm is not valid."""
        topics = await self.api.get_all_topic_config(addr)
        response = await self.api.call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        system = set(loads(response.body).get("topicList") or []) if response.body else set()
        return {name: tc for name, tc in sorted(topics.items())
                if name not in system and not is_system_topic(name)
                and (special_topic or not name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)))
                and tc.perm & ~(PERM_READ | PERM_WRITE | PERM_INHERIT) == 0}

    async def user_subscription_groups(self, addr: str) -> dict[str, SubscriptionGroupConfig]:
        """getUserSubscriptionGroup: the broker's groups without the system and predefined ones."""
        groups = await self.api.get_all_subscription_group_config(addr)
        return {name: g for name, g in sorted(groups.items()) if not is_system_group(name)}

    async def update_topic_list(self, addr: str, configs: list[TopicConfig]) -> None:
        body = dumps({"topicConfigList": [c.to_json_dict() for c in configs]}).encode("utf-8")
        await self.api.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, body=body)

    async def update_subscription_group_list(self, addr: str, configs: list[SubscriptionGroupConfig]) -> None:
        body = dumps({"groupConfigList": [c.to_json_dict() for c in configs]}).encode("utf-8")
        await self.api.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, body=body)

    async def clean_expired_consume_queue(self, addr: str) -> None:
        await self.api.call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)

    async def clean_unused_topic(self, addr: str) -> None:
        await self.api.call(addr, RequestCode.CLEAN_UNUSED_TOPIC)

    async def query_consume_queue(self, addr: str, topic: str, queue_id: int, index: int, count: int,
                                  group: str | None) -> tuple[dict[str, Any], str | None]:
        """QUERY_CONSUME_QUEUE: (QueryConsumeQueueResponseBody, the broker's remark)."""
        body, response = await self._answer(addr, RequestCode.QUERY_CONSUME_QUEUE, {
            "topic": topic, "queueId": str(queue_id), "index": str(index), "count": str(count), "consumerGroup": group})
        return body, response.remark

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO on the topic's masters, merged."""
        groups: set[str] = set()
        for _name, addr in self.route_masters(await self.topic_route(topic)):
            body = await self._table(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            groups.update(str(g) for g in body.get("groupList", []))
        return sorted(groups)

    async def consumer_status(self, topic: str, group: str, client_id: str) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """getConsumeStatus: each online client's own offsets for ``topic`` (client id -> (queue,
        offset) pairs), asked through the first broker of the topic's route (INVOKE_BROKER_TO_GET_CONSUMER_STATUS)."""
        route = await self.topic_route(topic)
        addrs = [d.select_broker_addr() for d in sorted(route.broker_datas, key=lambda d: d.broker_name)]
        addrs = [a for a in addrs if a]
        if not addrs:
            raise AdminError(f"topic {topic} has no broker online")
        body = await self._table(addrs[0], RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                 {"topic": topic, "group": group, "clientAddr": client_id or None})
        table = body.get("consumerTable") or {}
        return {str(cid): message_queue_pairs(mqs) for cid, mqs in sorted(table.items())} if isinstance(table, dict) else {}

    async def all_producer_info(self, addr: str) -> dict[str, list[dict[str, Any]]]:
        """GET_ALL_PRODUCER_INFO: ProducerTableInfo's data, group -> instances."""
        body = await self._table(addr, RequestCode.GET_ALL_PRODUCER_INFO, {})
        data = body.get("data") or {}
        return {str(g): list(v or []) for g, v in data.items()} if isinstance(data, dict) else {}

    async def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        await self.api.update_consumer_offset(addr, group, topic, queue_id, offset)

    async def queue_bounds(self, addr: str, topic: str, queue_id: int) -> tuple[int, int]:
        return (await self.api.get_min_offset(addr, topic, queue_id),
                await self.api.get_max_offset(addr, topic, queue_id))

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        return await self.api.search_offset(addr, topic, queue_id, timestamp)

    async def pull(self, addr: str, topic: str, queue_id: int, offset: int, max_nums: int,
                   subscription: str = "*", group: str = TOOLS_CONSUMER_GROUP) -> PullResult:
        """One PULL_MESSAGE with an explicit subscription and no offset commit (DefaultMQPullConsumer.pull)."""
        header = h.PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=max_nums,
            sys_flag=PULL_SYS_FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0,
            subscription=subscription, sub_version=int(time.time() * 1000), expression_type="TAG")
        return await self.api.pull_message(addr, header)

    async def send(self, msg: Message, producer_group: str, broker_name: str | None = None,
                   queue_id: int | None = None, route_topic: str | None = None) -> SendResult:
        """SEND_MESSAGE_V2 to a writable queue of the topic (or the one given), as a producer would.

        ``route_topic``: pick the broker from this topic's route instead (a retry topic the
        brokers create on its first message, which has no route yet)."""
        route = await self.topic_route(route_topic or msg.topic)
        masters = dict(self.route_masters(route))
        if broker_name is not None:
            if broker_name not in masters:
                raise AdminError(f"broker {broker_name} has no master serving topic {msg.topic}")
            candidates = [q for q in route.queue_datas if q.broker_name == broker_name]
        else:
            candidates = [q for q in route.queue_datas if q.broker_name in masters and q.perm & PERM_WRITE]
        if not candidates:
            raise AdminError(f"topic {msg.topic} has no writable queue")
        data = min(candidates, key=lambda q: q.broker_name) if broker_name else random.choice(candidates)
        if queue_id is None:
            queue_id = random.randrange(max(data.write_queue_nums, 1))
        elif not 0 <= queue_id < data.write_queue_nums:
            raise AdminError(f"queue {queue_id} does not exist on broker {data.broker_name} "
                             f"(topic {msg.topic} has {data.write_queue_nums} write queues there)")
        if not msg.uniq_key:
            msg.put_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, create_uniq_id())
        return await self.api.send_message(masters[data.broker_name], data.broker_name, msg, producer_group,
                                           queue_id)

    async def consumer_running_info(self, addr: str, group: str, client_id: str, jstack: bool) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO through the broker ``addr``, which asks the client itself."""
        return await self._table(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, {
            "consumerGroup": group, "clientId": client_id, "jstackEnable": "true" if jstack else "false"})

    async def consume_message_directly(self, group: str, client_id: str, msg: MessageExt) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY to the broker storing ``msg``: the client consumes it and answers
        a ConsumeMessageDirectlyResult."""
        host, port, _offset = decode_offset_message_id(msg.msg_id)
        return await self._table(f"{host}:{port}", RequestCode.CONSUME_MESSAGE_DIRECTLY, {
            "consumerGroup": group, "clientId": client_id, "msgId": msg.msg_id, "topic": msg.topic})

    async def broker_stats_data(self, addr: str, stats_name: str, stats_key: str) -> dict[str, Any] | None:
        """VIEW_BROKER_STATS_DATA; None when the broker has no such item (never counted)."""
        response = await self.api.call(addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                       {"statsName": stats_name, "statsKey": stats_key},
                                       ok=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
        if response.code != ResponseCode.SUCCESS:
            if "not exist" in (response.remark or ""):
                return None
            raise MQBrokerError(response.code, response.remark, addr)
        return loads(response.body) if response.body else None


def broker_names_of(route: TopicRouteData) -> list[BrokerData]:
    return sorted(route.broker_datas, key=lambda d: d.broker_name)
