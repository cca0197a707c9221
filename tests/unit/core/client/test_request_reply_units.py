"""Request/reply pieces without a broker: the producer channel table by client id and the push decoder."""

from __future__ import annotations

import zlib

from orbitmq.broker.client.channel_info import ClientChannelInfo
from orbitmq.broker.client.producer_manager import ProducerManager
from orbitmq.client.request_reply import decode_push_reply
from orbitmq.common.message import MessageConst, properties_to_string
from orbitmq.common.sysflag import COMPRESSED_FLAG
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting.protocol import RemotingCommand


class FakeChannel:
    def __init__(self) -> None:
        self.is_active = True


def test_find_channel_follows_heartbeats_closes_and_expiry() -> None:
    manager = ProducerManager(channel_expired_millis=1000)
    first, second = FakeChannel(), FakeChannel()
    manager.register_producer("PG", ClientChannelInfo(first, "client-1"))
    assert manager.find_channel("client-1") is first
    assert manager.find_channel("client-2") is None
    # A reconnect under the same client id: replies go to the newest connection.
    manager.register_producer("PG", ClientChannelInfo(second, "client-1"))
    assert manager.find_channel("client-1") is second
    manager.do_channel_close_event(second)
    assert manager.find_channel("client-1") is None
    # A channel that died without its close event yet is not handed out.
    manager.register_producer("PG", ClientChannelInfo(first, "client-1"))
    first.is_active = False
    assert manager.find_channel("client-1") is None
    # Expired by the housekeeping scan.
    third = FakeChannel()
    manager.register_producer("PG2", ClientChannelInfo(third, "client-3", last_update_timestamp=0))
    assert manager.find_channel("client-3") is third
    assert third in manager.scan_not_active_channel()
    assert manager.find_channel("client-3") is None


def test_push_reply_decodes_header_properties_and_compressed_body() -> None:
    props = {MessageConst.CORRELATION_ID: "c-1", MessageConst.MESSAGE_REPLY_TO_CLIENT: "me", "k": "v"}
    fields = {"producerGroup": "PG", "topic": "C_REPLY_TOPIC", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
              "queueId": "0", "sysFlag": str(COMPRESSED_FLAG), "bornTimestamp": "5", "flag": "0",
              "properties": properties_to_string(props), "reconsumeTimes": "0", "unitMode": "false",
              "bornHost": "127.0.0.1:1", "storeHost": "127.0.0.1:2", "storeTimestamp": "7"}
    request = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, fields, zlib.compress(b"answer"))
    reply = decode_push_reply(request)
    assert reply.body == b"answer"
    assert reply.topic == "C_REPLY_TOPIC" and reply.store_timestamp == 7 and reply.born_host == "127.0.0.1:1"
    assert reply.properties["CORRELATION_ID"] == "c-1" and reply.properties["k"] == "v"
    assert int(reply.properties[MessageConst.REPLY_MESSAGE_ARRIVE_TIME]) > 0


def test_acl_requirements_of_reply_and_recall_are_pub_on_the_topic() -> None:
    from orbitmq.auth.engine import PUB, remoting_requirements
    from orbitmq.auth.model import Resource

    assert remoting_requirements(370, {"topic": "T", "recallHandle": "h"}, b"", "C") == [(Resource.topic("T"), PUB)]
    assert remoting_requirements(325, {"b": "C_REPLY_TOPIC"}, b"", "C") == [(Resource.topic("C_REPLY_TOPIC"), PUB)]
    assert remoting_requirements(324, {"topic": "C_REPLY_TOPIC"}, b"", "C") == [(Resource.topic("C_REPLY_TOPIC"), PUB)]
