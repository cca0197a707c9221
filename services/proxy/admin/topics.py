"""DescribeTopicStatus, GetTopicRoute and AdminSendMessage: a topic's config, route and a test
message (mqadmin topicStatus / topicRoute / sendMessage)."""

from __future__ import annotations

import json
import socket
import time

from orbitmq.common.fastjson import message_queue_pairs
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.route import TopicRouteData
from orbitmq.common.topic_config import TopicConfig, TopicMessageType
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import errors
from orbitmq.proxy.admin.common import AdminParts, route_masters, route_of, to_timestamp, topic_name
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError

Code = pb.Code
_MESSAGE_TYPES = {TopicMessageType.NORMAL: pb.MessageType.NORMAL, TopicMessageType.FIFO: pb.MessageType.FIFO,
                  TopicMessageType.DELAY: pb.MessageType.DELAY,
                  TopicMessageType.TRANSACTION: pb.MessageType.TRANSACTION,
                  TopicMessageType.PRIORITY: pb.MessageType.PRIORITY}
ADMIN_CLIENT_ID = f"orbitmq-admin@{socket.gethostname()}"


async def topic_config(parts: AdminParts, topic: str, route: TopicRouteData) -> TopicConfig | None:
    """The topic's config from the first master of its route that holds it."""
    for _name, addr in route_masters(route):
        config = await parts.api.get_topic_config(addr, topic)
        if config is not None:
            return config
    return None


async def describe_topic_status(parts: AdminParts, request: apb.DescribeTopicStatusRequest
                                ) -> apb.DescribeTopicStatusResponse:
    """The message type (TopicConfig#getTopicMessageType), attributes and queue layout as tags,
    the newest store time among its queues (GET_TOPIC_STATS_INFO). TopicConfig keeps neither a
    description nor a creation time, so those optional fields stay unset."""
    topic = topic_name(request.topic)
    route = await route_of(parts, topic)
    config = await topic_config(parts, topic, route)
    if config is None:
        raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} is routed but no master holds its config")
    tags = dict(config.attributes)
    tags.update({"readQueueNums": str(config.read_queue_nums), "writeQueueNums": str(config.write_queue_nums),
                 "perm": str(config.perm), "order": str(config.order).lower(),
                 "brokerNames": ",".join(name for name, _addr in route_masters(route))})
    messages = 0
    last_update = 0
    for _name, addr in route_masters(route):
        stats = await parts.api.get_topic_stats(addr, topic)
        for _mq, value in message_queue_pairs(stats.get("offsetTable")):
            value = value or {}
            messages += max(int(value.get("maxOffset", 0)) - int(value.get("minOffset", 0)), 0)
            last_update = max(last_update, int(value.get("lastUpdateTimestamp", 0) or 0))
    tags["messages"] = str(messages)
    if last_update:
        tags["lastUpdateTimestamp"] = str(last_update)
    return apb.DescribeTopicStatusResponse(
        # MIXED accepts several types: no one MessageType names it (its message.type tag says MIXED)
        status=errors.ok(),
        topic_message_type=_MESSAGE_TYPES.get(config.message_type, pb.MessageType.MESSAGE_TYPE_UNSPECIFIED),
        tags=tags)


async def get_topic_route(parts: AdminParts, request: apb.GetTopicRouteRequest) -> apb.GetTopicRouteResponse:
    """TopicRouteData as the NameServers give it (RouteInfoManager#pickupTopicRouteData). With
    protocol_type "remoting" and the proxy's Remoting port open at a configured access address
    (remotingAccessAddr / localServeAddr), every broker set is named at that address, as the port's
    own GET_ROUTEINFO_BY_TOPIC answers; OrbitMQ brokers have one address, so network_type picks
    nothing else."""
    topic = topic_name(request.topic)
    route = await route_of(parts, topic)
    remoting = parts.remoting()
    if request.protocol_type.strip().lower() == "remoting" and remoting is not None:
        cfg = parts.config
        host = cfg.remoting_access_addr or cfg.local_serve_addr.rpartition(":")[0]
        if host:
            addr = f"{host}:{remoting.port}"
            route = TopicRouteData(queue_datas=list(route.queue_datas),
                                   broker_datas=[remoting._through_proxy(bd, addr) for bd in route.broker_datas],
                                   order_topic_conf=route.order_topic_conf)
    return apb.GetTopicRouteResponse(status=errors.ok(),
                                     topic_route_data=json.dumps(route.to_json_dict(), ensure_ascii=False))


async def admin_send_message(parts: AdminParts, request: apb.AdminSendMessageRequest
                             ) -> apb.AdminSendMessageResponse:
    """One message through the proxy's own send path (ProducerActivity: validation, queue choice,
    failover), as mqadmin sendMessage does through a producer. The message id is the request's
    system_properties.message_id, else a new one; ext_info carries nothing the send needs."""
    topic = topic_name(request.topic)
    await route_of(parts, topic)  # TOPIC_NOT_FOUND without creating it
    message = pb.Message(topic=request.topic, body=request.body, user_properties=dict(request.user_properties))
    if request.HasField("system_properties"):
        message.system_properties.CopyFrom(request.system_properties)
    props = message.system_properties
    if request.HasField("tag"):
        props.tag = request.tag
    if request.HasField("key"):
        props.keys.append(request.key)
    if not props.message_id:
        props.message_id = create_uniq_id()
    if not props.HasField("born_timestamp"):
        props.born_timestamp.CopyFrom(to_timestamp(int(time.time() * 1000)))
    if not props.born_host:
        props.born_host = socket.gethostname()
    if props.message_type == pb.MessageType.MESSAGE_TYPE_UNSPECIFIED:
        config = await parts.cluster.topic_config(topic)
        kind = config.message_type if config is not None else TopicMessageType.NORMAL
        props.message_type = _MESSAGE_TYPES.get(kind, pb.MessageType.NORMAL)
    ctx = ProxyContext(ADMIN_CLIENT_ID, "PYTHON", "", "", request.topic.resource_namespace, None)
    response: spb.SendMessageResponse = await parts.messaging.producer.send_message(
        ctx, spb.SendMessageRequest(messages=[message]))
    entry = response.entries[0] if response.entries else None
    status = entry.status if entry is not None and entry.status.code != Code.OK else response.status
    return apb.AdminSendMessageResponse(status=status, message_id=entry.message_id if entry is not None else "")
