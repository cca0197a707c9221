"""ListSubscription, DescribeSubscription, DeleteSubscription and ListConsumerConnection: who
consumes what (mqadmin consumerConnection / consumer, QUERY_TOPIC_CONSUME_BY_WHO).

A relationship is online when the brokers list a connected consumer of the group subscribing the
topic (GET_CONSUMER_CONNECTION_LIST); it is also known offline from the group's committed
offsets (GET_CONSUME_STATS) and from the static subscriptions of its config
(SubscriptionGroupConfig#subscriptionDataSet). Each online client's own subscriptions come from
its running info (GET_CONSUMER_RUNNING_INFO without jstack, which a gRPC client's proxy answers
itself); a group is consistent when they all agree, as ConsumerStatusSubCommand judges it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from orbitmq.client import MQBrokerError
from orbitmq.common.constants import is_retry_topic
from orbitmq.common.extra_info import parse_normal_topic
from orbitmq.common.fastjson import loads
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy import errors
from orbitmq.proxy.admin.accumulation import consume_rows
from orbitmq.proxy.admin.clients import filter_expression, running_info
from orbitmq.proxy.admin.common import (
    AdminParts,
    group_name,
    masters,
    require_group,
    resource_of,
    route_masters,
    route_of,
    to_timestamp,
    topic_name,
)
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import RequestCode, ResponseCode

Code = pb.Code
_MODELS = {"CLUSTERING": apb.CLUSTERING, "BROADCASTING": apb.BROADCASTING}


async def connections(parts: AdminParts, group: str) -> dict[str, Any]:
    """The brokers' ConsumerConnection of the group, merged ({} when it has no consumer online)."""
    merged: dict[str, Any] = {"connectionSet": [], "subscriptionTable": {}}
    seen: set[str] = set()
    for _name, addr in await masters(parts):
        try:
            response = await parts.api.call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        except MQBrokerError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                continue
            raise
        body = loads(response.body) if response.body else {}
        for conn in body.get("connectionSet") or []:
            if str(conn.get("clientId")) not in seen:
                seen.add(str(conn.get("clientId")))
                merged["connectionSet"].append(conn)
        merged["subscriptionTable"].update(body.get("subscriptionTable") or {})
        merged.setdefault("messageModel", body.get("messageModel"))
        merged.setdefault("consumeType", body.get("consumeType"))
    return merged if merged["connectionSet"] else {}


def client_info(conn: dict[str, Any], model: int) -> apb.ClientInfo:
    client_id = str(conn.get("clientId", ""))
    addr = str(conn.get("clientAddr", ""))
    return apb.ClientInfo(client_id=client_id, version=str(conn.get("version", "")),
                          language=str(conn.get("language", "")), hostname=client_id.split("@", 1)[0],
                          egress_ip=addr.rpartition(":")[0] if ":" in addr else addr, message_model=model)


async def _per_client(parts: AdminParts, group: str, conns: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """client id -> {topic: SubscriptionData} each online client reports (unanswered ones left out)."""
    async def one(client_id: str) -> tuple[str, dict[str, Any] | None]:
        try:
            info = await running_info(parts, group, client_id)
        except ProxyError:
            return client_id, None
        return client_id, {str(sd.get("topic")): sd for sd in info.get("subscriptionSet") or []
                           if isinstance(sd, dict) and not is_retry_topic(str(sd.get("topic", "")))}
    answers = await asyncio.gather(*(one(str(c.get("clientId"))) for c in conns))
    return {cid: subs for cid, subs in answers if subs is not None}


def _static(parts_config: Any) -> dict[str, dict[str, Any]]:
    """topic -> SimpleSubscriptionData of a group config's subscriptionDataSet."""
    entries = (parts_config.extra.get("subscriptionDataSet") or []) if parts_config is not None else []
    return {str(e.get("topic")): e for e in entries if isinstance(e, dict) and e.get("topic")}


async def _group_config(parts: AdminParts, group: str) -> Any:
    for _name, addr in await masters(parts):
        config = await parts.api.get_subscription_group_config(addr, group)
        if config is not None:
            return config
    return None


async def _relationships(parts: AdminParts, group: str, topic: str | None
                         ) -> tuple[list[apb.SubscriptionInfo], dict[str, Any], dict[str, dict[str, Any]]]:
    """(one SubscriptionInfo per topic of the group, its connections, each client's subscriptions)."""
    conn = await connections(parts, group)
    model = _MODELS.get(str(conn.get("messageModel", "")), apb.CLUSTERING)
    clients = await _per_client(parts, group, conn.get("connectionSet", [])) if conn else {}
    online: dict[str, dict[str, Any]] = {t: sd for t, sd in (conn.get("subscriptionTable") or {}).items()
                                         if not is_retry_topic(t)}
    static = _static(await _group_config(parts, group))
    consumed = {parse_normal_topic(r.topic, group) for r in await consume_rows(parts, group, None)}
    topics = set(online) | set(static) | {t for t in consumed if not is_retry_topic(t)}
    out = []
    for name in sorted(topics):
        if topic is not None and name != topic:
            continue
        sd = online.get(name)
        info = apb.SubscriptionInfo(group=resource_of(group), topic=resource_of(name), online=sd is not None,
                                    message_model=model)
        if sd is not None:
            info.expression.CopyFrom(filter_expression(sd))
            if sd.get("subVersion"):
                info.last_update_timestamp.CopyFrom(to_timestamp(int(sd["subVersion"])))
            reported = [subs.get(name) for subs in clients.values()]
            info.subscription_consistency = all(
                r is not None and str(r.get("subString")) == str(sd.get("subString")) for r in reported)
        elif name in static:
            entry = static[name]
            info.expression.CopyFrom(filter_expression({"expressionType": entry.get("expressionType"),
                                                        "subString": entry.get("expression")}))
            info.subscription_consistency = True
        else:
            info.subscription_consistency = True
        out.append(info)
    return out, conn, clients


async def _groups_of_topic(parts: AdminParts, topic: str) -> list[str]:
    groups: set[str] = set()
    for _name, addr in route_masters(await route_of(parts, topic)):
        response = await parts.api.call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        body = loads(response.body) if response.body else {}
        groups.update(str(g) for g in body.get("groupList") or [])
    return sorted(groups)


async def _filters(parts: AdminParts, request: Any) -> tuple[str | None, str | None]:
    group = group_name(request.group) if request.HasField("group") else None
    topic = topic_name(request.topic) if request.HasField("topic") else None
    if group is None and topic is None:
        raise ProxyError(Code.BAD_REQUEST, "at least one of topic and group is required")
    if topic is not None:
        await route_of(parts, topic)
    if group is not None:
        await require_group(parts, group)
    return group, topic


async def list_subscription(parts: AdminParts, request: apb.ListSubscriptionRequest) -> apb.ListSubscriptionResponse:
    group, topic = await _filters(parts, request)
    groups = [group] if group is not None else await _groups_of_topic(parts, topic or "")
    response = apb.ListSubscriptionResponse(status=errors.ok())
    for name in groups:
        infos, _conn, _clients = await _relationships(parts, name, topic)
        response.subscription_info.extend(infos)
    return response


async def describe_subscription(parts: AdminParts, request: apb.DescribeSubscriptionRequest
                                ) -> apb.DescribeSubscriptionResponse:
    group, topic = await _filters(parts, request)
    groups = [group] if group is not None else await _groups_of_topic(parts, topic or "")
    Entry = apb.DescribeSubscriptionResponse.ClientSubscriptionInfo
    response = apb.DescribeSubscriptionResponse(status=errors.ok())
    for name in groups:
        conn = await connections(parts, name)
        if not conn:
            continue
        model = _MODELS.get(str(conn.get("messageModel", "")), apb.CLUSTERING)
        clients = await _per_client(parts, name, conn["connectionSet"])
        merged = conn.get("subscriptionTable") or {}
        for c in conn["connectionSet"]:
            subs = clients.get(str(c.get("clientId")), {})
            for t, sd in sorted(subs.items()):
                if topic is not None and t != topic:
                    continue
                group_sd = merged.get(t)
                info = apb.SubscriptionInfo(group=resource_of(name), topic=resource_of(t), online=True,
                                            expression=filter_expression(sd), message_model=model,
                                            subscription_consistency=group_sd is not None and str(
                                                group_sd.get("subString")) == str(sd.get("subString")))
                if sd.get("subVersion"):
                    info.last_update_timestamp.CopyFrom(to_timestamp(int(sd["subVersion"])))
                response.client_subscription_info.append(Entry(client_info=client_info(c, model),
                                                               subscription_info=info))
    return response


async def delete_subscription(parts: AdminParts, request: apb.DeleteSubscriptionRequest
                              ) -> apb.DeleteSubscriptionResponse:
    """Drops the (topic, expression) entry of the group's stored subscriptions on every master
    (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with the edited config). A relationship a consumer online
    still reports is refused (its next heartbeat would bring it back); one known only from committed
    offsets has nothing stored to delete (deleteSubGroup -r removes a group's offsets)."""
    group = group_name(request.group)
    topic = topic_name(request.topic)
    await route_of(parts, topic)
    await require_group(parts, group)
    wanted = request.expression.expression if request.HasField("expression") else ""
    conn = await connections(parts, group)
    if topic in (conn.get("subscriptionTable") or {}):
        raise ProxyError(Code.PRECONDITION_FAILED, f"consumers of group {group} online still subscribe topic {topic}; "
                                                   "stop them first")
    removed = 0
    for _name, addr in await masters(parts):
        config = await parts.api.get_subscription_group_config(addr, group)
        entries = (config.extra.get("subscriptionDataSet") or []) if config is not None else []
        keep = [e for e in entries if not (isinstance(e, dict) and e.get("topic") == topic
                                           and (not wanted or e.get("expression") == wanted))]
        if config is None or len(keep) == len(entries):
            continue
        config.extra["subscriptionDataSet"] = keep
        await parts.api.create_subscription_group(addr, config)
        removed += len(entries) - len(keep)
    if not removed:
        raise ProxyError(Code.NOT_FOUND, f"group {group} has no stored subscription to topic {topic}"
                                         + (f" with expression {wanted!r}" if wanted else ""))
    return apb.DeleteSubscriptionResponse(status=errors.status(Code.OK, f"OK: {removed} subscription(s) deleted"))


async def list_consumer_connection(parts: AdminParts, request: apb.ListConsumerConnectionRequest
                                   ) -> apb.ListConsumerConnectionResponse:
    """The group's online consumers (consumerConnection -g); with a topic, those subscribing it."""
    group = group_name(request.group)
    topic = topic_name(request.topic) if request.HasField("topic") else None
    if topic is not None:
        await route_of(parts, topic)
    await require_group(parts, group)
    response = apb.ListConsumerConnectionResponse(status=errors.ok())
    conn = await connections(parts, group)
    if not conn or request.HasField("liteTopic"):  # OrbitMQ serves no lite topics: nobody subscribes one
        return response
    model = _MODELS.get(str(conn.get("messageModel", "")), apb.CLUSTERING)
    conns = conn["connectionSet"]
    if topic is not None:
        if topic not in (conn.get("subscriptionTable") or {}):
            return response
        clients = await _per_client(parts, group, conns)
        conns = [c for c in conns if topic in clients.get(str(c.get("clientId")), {topic: None})]
    for c in sorted(conns, key=lambda c: str(c.get("clientId"))):
        response.client_info.append(client_info(c, model))
    return response
