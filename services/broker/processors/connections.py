"""Who is connected: GET_CONSUMER_CONNECTION_LIST 203, GET_PRODUCER_CONNECTION_LIST 204,
GET_ALL_PRODUCER_INFO 328 and QUERY_TOPIC_CONSUME_BY_WHO 300 (AdminBrokerProcessor upstream), read
by mqadmin's consumerConnection / producerConnection / producer / consumerProgress."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orbitmq.broker.client.channel_info import ClientChannelInfo
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

from .base import Fields, RequestError, encode_json_body

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController


def connection_json(info: ClientChannelInfo, remote_addr: str) -> dict[str, Any]:
    """RocketMQ's Connection: clientId, clientAddr, language, version; plus clientProperties
    (a gRPC client's Settings.client_properties) when it declared any."""
    conn: dict[str, Any] = {"clientAddr": remote_addr, "clientId": info.client_id, "language": info.language,
                            "version": info.version}
    if info.properties:
        conn["clientProperties"] = dict(info.properties)
    return conn


class ConnectionsProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self) -> None:
        b = self.broker
        b.register_processor(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.consumer_connections)
        b.register_processor(RequestCode.GET_PRODUCER_CONNECTION_LIST, self.producer_connections)
        b.register_processor(RequestCode.GET_ALL_PRODUCER_INFO, self.all_producer_info)
        b.register_processor(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.topic_consumed_by_who)
        b.register_processor(RequestCode.QUERY_TOPICS_BY_CONSUMER, self.topics_by_consumer)
        b.register_processor(RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, self.subscription_by_consumer)

    async def consumer_connections(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        group = Fields(request.ext_fields).str("consumerGroup")
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        if info is None:
            raise RequestError(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = {
            "connectionSet": [connection_json(ci, self.broker.remote_addr(ci.channel))
                              for ci in info.channel_info_table.values()],
            "subscriptionTable": dict(info.subscription_table),
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "consumeFromWhere": info.consume_from_where,
        }
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(body))

    async def producer_connections(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        group = Fields(request.ext_fields).str("producerGroup")
        channels = self.broker.producer_manager.group_channel_table.get(group)
        if not channels:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = {"connectionSet": [connection_json(ci, self.broker.remote_addr(ci.channel))
                                  for ci in channels.values()]}
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(body))

    async def all_producer_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """ProducerTableInfo: every producer group's instances (clientId, remoteIP, language,
        version, lastUpdateTimestamp)."""
        data = {group: [{"clientId": ci.client_id, "remoteIP": self.broker.remote_addr(ci.channel),
                         "language": ci.language, "version": ci.version,
                         "lastUpdateTimestamp": ci.last_update_timestamp} for ci in channels.values()]
                for group, channels in sorted(self.broker.producer_manager.group_channel_table.items())}
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body({"data": data}))

    async def topic_consumed_by_who(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        topic = Fields(request.ext_fields).str("topic")
        groups = set(self.broker.consumer_manager.groups_subscribing(topic))
        groups |= self.broker.consumer_offset_manager.which_group_by_topic(topic)
        return request.response_to(ResponseCode.SUCCESS, None, None,
                                   encode_json_body({"groupList": sorted(groups)}))

    async def topics_by_consumer(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """QUERY_TOPICS_BY_CONSUMER (343, AdminBrokerProcessor#queryTopicsByConsumer): the topics
        the group has offsets of, as a TopicList with this broker's address."""
        group = Fields(request.ext_fields).str("group")
        topics = sorted(self.broker.consumer_offset_manager.which_topic_by_consumer(group))
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(
            {"topicList": topics, "brokerAddr": self.broker.config.broker_addr}))

    async def subscription_by_consumer(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """QUERY_SUBSCRIPTION_BY_CONSUMER (345, AdminBrokerProcessor#querySubscriptionByConsumer):
        the group's live subscription to the topic (none when no member subscribes to it)."""
        f = Fields(request.ext_fields)
        group, topic = f.str("group"), f.str("topic")
        body: dict[str, Any] = {"group": group, "topic": topic}
        subscription = self.broker.consumer_manager.find_subscription_data(group, topic)
        if subscription is not None:
            body["subscriptionData"] = subscription
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(body))
