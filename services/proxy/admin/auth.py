"""ACL 2.0 for the Admin RPCs: the (resource, action) each one needs, checked by the proxy's
ProxyAuthChecker before the call runs, as MessagingService's calls are.

Upstream authorizes the Remoting request each admin operation is made of by its @RocketMQAction
(DefaultAuthorizationContextBuilder#buildContextByAnnotation); each RPC here needs what its
Remoting twin needs: Get on the topic/group to read (GET_TOPIC_STATS_INFO, GET_CONSUME_STATS,
GET_CONSUMER_CONNECTION_LIST, GET_CONSUMER_RUNNING_INFO, QUERY_CONSUME_TIME_SPAN), Update to
reset offsets (INVOKE_BROKER_TO_RESET_OFFSET), Delete on the group to delete a subscription
(DELETE_SUBSCRIPTIONGROUP), Sub or Get on the topic to query messages (QUERY_MESSAGE), Sub to
consume one directly (CONSUME_MESSAGE_DIRECTLY), Pub to send, Pub/Sub/Get for a route
(GET_ROUTEINFO_BY_TOPIC); the proxy process itself (log level, stacks, runtime stats) is the
cluster's: Update to change it, Get to read it. Denials answer UNAUTHORIZED, as upstream's proxy
answers every ACL refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from orbitmq.auth.engine import Requirement
from orbitmq.auth.model import Action, AuthError, Resource
from orbitmq.common.namespace import wrap_namespace
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.admin.service import SERVICE
from orbitmq.proxy.errors import status

log = logging.getLogger("orbitmq.proxy.auth")

GET, UPDATE, DELETE = (Action.Get,), (Action.Update,), (Action.Delete,)
SUB, PUB = (Action.Sub,), (Action.Pub,)


def _topic(resource: Any) -> Resource:
    return Resource.topic(wrap_namespace(resource.resource_namespace, resource.name))


def _group(resource: Any) -> Resource:
    return Resource.group(wrap_namespace(resource.resource_namespace, resource.name))


def _optional(request: Any, actions: tuple[Action, ...]) -> list[Requirement]:
    out: list[Requirement] = []
    if request.HasField("group"):
        out.append((_group(request.group), actions))
    if request.HasField("topic"):
        out.append((_topic(request.topic), actions))
    return out


def requirements_table(cluster: str) -> dict[str, Callable[[Any], list[Requirement]]]:
    """RPC name -> what its request needs; ``cluster`` names the proxy's cluster resource."""
    whole = Resource.cluster(cluster)
    return {
        "ChangeLogLevel": lambda r: [(whole, UPDATE)],
        "GetProxyRuntimeStats": lambda r: [(whole, GET)],
        "DescribeTopicStatus": lambda r: [(_topic(r.topic), GET)],
        "GetTopicRoute": lambda r: [(_topic(r.topic), (Action.Pub, Action.Sub, Action.Get))],
        "AdminSendMessage": lambda r: [(_topic(r.topic), PUB)],
        "QueryMessage": lambda r: [(_topic(r.topic), (Action.Sub, Action.Get))],
        "ListSubscription": lambda r: _optional(r, GET),
        "DescribeSubscription": lambda r: _optional(r, GET),
        "DeleteSubscription": lambda r: [(_group(r.group), DELETE)],
        "ListConsumerConnection": lambda r: _optional(r, GET),
        "DescribeGroupAccumulation": lambda r: [(_group(r.group), GET), *((_topic(t), GET) for t in r.topics)],
        "QueryTimeSpan": lambda r: [(_group(r.group), GET), *((_topic(t), GET) for t in r.topics)],
        "ResetGroupOffset": lambda r: [(_group(r.group), UPDATE), (_topic(r.topic), UPDATE)],
        "GetConsumerRunningInfo": lambda r: [(_group(r.group), GET)],
        "PrintThreadStackTrace": lambda r: [(_group(r.group), GET)] if r.client_id.strip() else [(whole, GET)],
        "VerifyMessage": lambda r: [(_group(r.group), SUB), (_topic(r.topic), SUB)],
    }


def _refused_response(method: Any, text: str) -> Any:
    cls = getattr(apb, method.output_type.name)
    if "status" in method.output_type.fields_by_name:
        return cls(status=status(pb.Code.UNAUTHORIZED, text))
    return cls(remark=f"UNAUTHORIZED: {text}")  # ChangeLogLevelResponse: no Status to carry it


def instrument(checker: Any, servicer: Any, cluster: str) -> Any:
    """Wrap every Admin RPC of ``servicer`` with the checker's authentication and authorization
    (the request message's full name is the whitelist key, as for MessagingService)."""
    table = requirements_table(cluster)
    for method in SERVICE.methods:
        setattr(servicer, method.name, _wrap(checker, method, table[method.name], getattr(servicer, method.name)))
    return servicer


def _wrap(checker: Any, method: Any, needs: Callable[[Any], list[Requirement]],
          behavior: Callable[..., Any]) -> Callable[..., Any]:
    full_name = method.input_type.full_name

    async def wrapped(request: Any, context: Any) -> Any:
        md = {k.lower(): v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        try:
            await checker.check(full_name, md, needs(request), context.peer() or "")
        except AuthError as exc:
            log.info("Admin %s refused for %s: %s", method.name, context.peer(), exc)
            return _refused_response(method, str(exc))
        return await behavior(request, context)

    return wrapped

