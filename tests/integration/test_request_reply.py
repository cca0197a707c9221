"""Request/reply over Remoting with a real NameServer and broker process.

A requester (orbitmq.client.request_reply.Requester over the project's MQClientAPI) sends a
request; a responder pulls it, builds the reply with create_reply_message and sends it with
SEND_REPLY_MESSAGE_V2; the broker pushes it to the requester's connection as
PUSH_REPLY_MESSAGE_TO_CLIENT, matched by CORRELATION_ID. Also: a request nobody answers times
out, and a reply to an unknown or disconnected client is answered SYSTEM_ERROR with upstream's
remark while the reply is still stored in <cluster>_REPLY_TOPIC (storeReplyMessageEnable).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from orbitmq.client import MQBrokerError, MQClientAPI
from orbitmq.client.errors import MQClientError
from orbitmq.client.request_reply import (
    Requester,
    RequestTimeoutError,
    create_reply_message,
    reply_topic,
)
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode

CLUSTER = "RRCluster"
BROKER = "broker-rr"
TOPIC = "RRTopic"
GROUP = "CG_RESPONDER"
REPLY_TOPIC = reply_topic(CLUSTER)


@pytest.fixture
async def broker(broker_cluster, mq_api: MQClientAPI):
    c = await broker_cluster(brokerClusterName=CLUSTER, brokerName=BROKER)
    await mq_api.create_topic(c.addr, TopicConfig(TOPIC, 1, 1))
    return c.addr, mq_api


async def _pull_from(api: MQClientAPI, addr: str, offset: int) -> tuple[list[MessageExt], int]:
    header = h.PullMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=offset,
                                        max_msg_nums=32, sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0,
                                        subscription="*", sub_version=0)
    result = await api.pull_message(addr, header)
    return result.messages, result.next_begin_offset if result.messages else offset


async def _reply_topic_offset(api: MQClientAPI, addr: str, expected: int) -> int:
    """The reply topic's max offset once it reaches ``expected`` (dispatch is asynchronous) or after 5 s."""
    deadline = time.monotonic() + 5
    while True:
        offset = await api.get_max_offset(addr, REPLY_TOPIC, 0)
        if offset >= expected or time.monotonic() > deadline:
            return offset
        await asyncio.sleep(0.05)


async def _responder(api: MQClientAPI, addr: str, answered: list[MessageExt]) -> None:
    """Pulls requests and answers each with "re: <body>" (a consumer that replies, as upstream's examples)."""
    offset = 0
    while True:
        requests, offset = await _pull_from(api, addr, offset)
        for request in requests:
            answered.append(request)
            reply = create_reply_message(request, b"re: " + request.body)
            result = await api.send_reply_message(addr, BROKER, reply, "PG_RESPONDER")
            assert result.status.value == "SEND_OK"
        await asyncio.sleep(0.02)


async def test_request_gets_its_reply_pushed_by_correlation_id(broker) -> None:
    addr, api = broker
    requester_api, responder_api = MQClientAPI(timeout=5.0), MQClientAPI(timeout=5.0)
    requester = Requester(requester_api, "PG_REQUESTER")
    answered: list[MessageExt] = []
    responder = asyncio.create_task(_responder(responder_api, addr, answered))
    try:
        replies = await asyncio.gather(*[
            requester.request(addr, BROKER, Message(TOPIC, f"question {i}".encode()), 0, timeout=10.0)
            for i in range(3)])
        assert sorted(r.body for r in replies) == [b"re: question 0", b"re: question 1", b"re: question 2"]
        by_correlation = {m.properties[MessageConst.CORRELATION_ID]: m for m in answered}
        for reply in replies:
            request = by_correlation[reply.properties[MessageConst.CORRELATION_ID]]
            assert reply.body == b"re: " + request.body  # each reply reached the request it answers
            assert reply.topic == REPLY_TOPIC
            assert reply.properties[MessageConst.MESSAGE_TYPE] == "reply"
            assert reply.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] == requester.client_id
            assert MessageConst.PUSH_REPLY_TIME in reply.properties
            assert MessageConst.REPLY_MESSAGE_ARRIVE_TIME in reply.properties
            # The broker stamped the request with its cluster; TTL is the request timeout.
            assert request.properties[MessageConst.CLUSTER] == CLUSTER
            assert request.properties[MessageConst.MESSAGE_TTL] == "10000"
        # storeReplyMessageEnable (default true): the replies are in the reply topic as well (each
        # stored after its push, as upstream).
        assert await _reply_topic_offset(api, addr, 3) == 3
    finally:
        responder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await responder
        await requester_api.close()
        await responder_api.close()


async def test_request_without_a_responder_times_out(broker) -> None:
    addr, _ = broker
    requester_api = MQClientAPI(timeout=5.0)
    requester = Requester(requester_api, "PG_REQUESTER")
    try:
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            await requester.request(addr, BROKER, Message(TOPIC, b"anyone?"), 0, timeout=1.0)
        assert 1.0 <= time.monotonic() - started < 3.0
        assert not requester._waiting  # nothing left behind for a late reply
    finally:
        await requester_api.close()


async def test_reply_to_unknown_or_disconnected_client_is_refused_as_upstream(broker) -> None:
    addr, api = broker

    def request_from(client_id: str | None) -> Message:
        props = {MessageConst.CLUSTER: CLUSTER, MessageConst.CORRELATION_ID: create_uniq_id()}
        if client_id is not None:
            props[MessageConst.MESSAGE_REPLY_TO_CLIENT] = client_id
        return Message(TOPIC, b"q", 0, props)

    stored = await api.get_max_offset(addr, REPLY_TOPIC, 0)
    with pytest.raises(MQBrokerError) as info:
        await api.send_reply_message(addr, BROKER, create_reply_message(request_from("nobody@1"), b"r"), "PG")
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == "push reply message fail, channel of <nobody@1> not found."

    # A requester that announced itself and then went away.
    gone_api = MQClientAPI(timeout=5.0)
    gone = Requester(gone_api, "PG_GONE")
    await gone.announce(addr)
    await gone_api.close()
    await asyncio.sleep(0.3)  # the broker sees the connection close
    with pytest.raises(MQBrokerError) as info:
        await api.send_reply_message(addr, BROKER, create_reply_message(request_from(gone.client_id), b"r"), "PG")
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == f"push reply message fail, channel of <{gone.client_id}> not found."

    # No REPLY_TO_CLIENT at all.
    response = await api.invoke(addr, RequestCode.SEND_REPLY_MESSAGE_V2, api._send_header(
        create_reply_message(request_from(None), b"r"), "PG", -1, 0, False, BROKER), b"r")
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "reply message properties[REPLY_TO_CLIENT] is null"
    # Each refused reply was still stored, as upstream does while storeReplyMessageEnable is on.
    assert await _reply_topic_offset(api, addr, stored + 3) == stored + 3

    # A reply that fails the send checks (an illegal topic name) is refused first: nothing is pushed
    # or stored. INVALID_PARAMETER: ReplyMessageProcessor runs AbstractSendMessageProcessor#msgCheck,
    # which answers a bad topic name so in 5.x (tests/compat/conformance).
    orphan = create_reply_message(request_from("nobody@1"), b"r")
    orphan.topic = "bad/topic"
    with pytest.raises(MQBrokerError) as info:
        await api.send_reply_message(addr, BROKER, orphan, "PG")
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    await asyncio.sleep(0.2)
    assert await api.get_max_offset(addr, REPLY_TOPIC, 0) == stored + 3


def test_create_reply_message_needs_the_cluster_property() -> None:
    with pytest.raises(MQClientError, match="CLUSTER"):
        create_reply_message(Message(TOPIC, b"q", 0, {MessageConst.CORRELATION_ID: "c"}), b"r")
    reply = create_reply_message(Message(TOPIC, b"q", 0, {
        MessageConst.CLUSTER: "C", MessageConst.CORRELATION_ID: "c", MessageConst.MESSAGE_REPLY_TO_CLIENT: "id",
        MessageConst.MESSAGE_TTL: "3000", "user": "not copied"}), b"r")
    assert reply.topic == "C_REPLY_TOPIC"
    assert {k: v for k, v in reply.properties.items() if k != MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX} == {
        "MSG_TYPE": "reply", "CORRELATION_ID": "c", "REPLY_TO_CLIENT": "id", "TTL": "3000"}


async def test_a_requester_that_fails_or_never_answers_the_push(broker) -> None:
    """The broker waits 10 s for the requester's answer to PUSH_REPLY_MESSAGE_TO_CLIENT (upstream's
    callClient timeout); a refusal or no answer is SYSTEM_ERROR "push reply message to <id>fail."."""
    addr, api = broker
    requester_api = MQClientAPI(timeout=5.0)
    requester = Requester(requester_api, "PG_REQUESTER")
    await requester.announce(addr)
    request = Message(TOPIC, b"q", 0, {MessageConst.CLUSTER: CLUSTER, MessageConst.CORRELATION_ID: "c",
                                       MessageConst.MESSAGE_REPLY_TO_CLIENT: requester.client_id})
    try:
        async def refuse(command, channel):
            return command.response_to(ResponseCode.SYSTEM_ERROR, "no thanks")

        requester_api.remoting.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, refuse)
        with pytest.raises(MQBrokerError) as info:
            await api.send_reply_message(addr, BROKER, create_reply_message(request, b"r"), "PG")
        assert (info.value.code, info.value.remark) == (ResponseCode.SYSTEM_ERROR,
                                                        f"push reply message to {requester.client_id}fail.")

        async def hang(command, channel):
            await asyncio.sleep(30)

        requester_api.remoting.register_processor(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, hang)
        started = time.monotonic()
        with pytest.raises(MQBrokerError) as info:
            await api.send_reply_message(addr, BROKER, create_reply_message(request, b"r"), "PG", timeout=15.0)
        assert 9.5 <= time.monotonic() - started < 14.0
        assert (info.value.code, info.value.remark) == (ResponseCode.SYSTEM_ERROR,
                                                        f"push reply message to {requester.client_id}fail.")
    finally:
        await requester_api.close()
