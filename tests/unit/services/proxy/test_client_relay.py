"""The proxy's relay of broker -> gRPC client requests (services/proxy/client_relay.py): answers
matched by nonce and client, timeouts, refusals and bad input in RocketMQ's response codes."""

from __future__ import annotations

import asyncio
import json

from orbitmq.common.message_codec import encode_record
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.client_manager import ClientManager, GrpcClient
from orbitmq.proxy.client_relay import ClientRequestRelay
from orbitmq.proxy.config import ProxyConfig
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

Code = pb.Code


class _Cluster:
    async def group_config(self, group: str) -> None:
        return None


def _relay(timeout_s: int = 1) -> tuple[ClientRequestRelay, ClientManager, GrpcClient]:
    config = ProxyConfig(grpc_proxy_relay_request_timeout_in_seconds=timeout_s)
    clients = ClientManager(config, _Cluster())  # type: ignore[arg-type]
    settings = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="G"), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name="T"), expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="a||b"))]))
    client = GrpcClient("c1", "PYTHON", "5.0.0", settings=settings, outbox=asyncio.Queue(16))
    clients.clients["c1"] = client
    return ClientRequestRelay(config, _Cluster(), clients), clients, client  # type: ignore[arg-type]


def _request(code: int, body: bytes = b"", **fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, {"consumerGroup": "G", "clientId": "c1", **fields}, body)


def _record() -> bytes:
    return encode_record(topic="T", queue_id=0, body=b"hello", properties={"UNIQ_KEY": "ABC"})


async def _answer(relay: ClientRequestRelay, client: GrpcClient, reply) -> None:
    """Play the client: read the command off its outbox and answer with reply(command)."""
    command = await client.outbox.get()
    answer = reply(command)
    if answer is not None:
        relay.on_client_answer(client.client_id, answer)


async def test_running_info_without_jstack_never_asks_the_client() -> None:
    relay, _, client = _relay()
    response = await relay.on_running_info(_request(RequestCode.GET_CONSUMER_RUNNING_INFO, jstackEnable="false"), None)
    assert response.code == ResponseCode.SUCCESS
    info = json.loads(response.body)
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info["subscriptionSet"][0]["tagsSet"] == ["a", "b"]
    assert "jstack" not in info and client.outbox.empty()


async def test_jstack_comes_from_the_client_matched_by_nonce() -> None:
    relay, _, client = _relay()

    def reply(command: spb.TelemetryCommand) -> spb.TelemetryCommand:
        nonce = command.print_thread_stack_trace_command.nonce
        # a stray answer (unknown nonce) and another client's are ignored first
        relay.on_client_answer("c1", spb.TelemetryCommand(thread_stack_trace=spb.ThreadStackTrace(nonce="999")))
        relay.on_client_answer("c2", spb.TelemetryCommand(thread_stack_trace=spb.ThreadStackTrace(
            nonce=nonce, thread_stack_trace="not yours")))
        return spb.TelemetryCommand(status=pb.Status(code=Code.OK),
                                    thread_stack_trace=spb.ThreadStackTrace(nonce=nonce, thread_stack_trace="stacks"))

    request = _request(RequestCode.GET_CONSUMER_RUNNING_INFO, jstackEnable="true")
    response, _ = await asyncio.gather(relay.on_running_info(request, None), _answer(relay, client, reply))
    assert response.code == ResponseCode.SUCCESS
    assert json.loads(response.body)["jstack"] == "stacks"
    assert relay._pending == {}


async def test_a_silent_client_times_out_as_system_busy() -> None:
    relay, _, client = _relay(timeout_s=1)
    request = _request(RequestCode.GET_CONSUMER_RUNNING_INFO, jstackEnable="true")
    response = await relay.on_running_info(request, None)
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
    assert relay._pending == {}
    client.outbox = None  # no stream at all: refused at once
    response = await relay.on_running_info(request, None)
    assert response.code == ResponseCode.SYSTEM_ERROR and "telemetry stream" in response.remark


async def test_unknown_client_or_other_group_is_not_online() -> None:
    relay, _, _ = _relay()
    for fields in ({"clientId": "nobody"}, {"consumerGroup": "other"}):
        for code, handler in ((RequestCode.GET_CONSUMER_RUNNING_INFO, relay.on_running_info),
                              (RequestCode.CONSUME_MESSAGE_DIRECTLY, relay.on_consume_directly)):
            response = await handler(_request(code, **fields), None)
            assert response.code == ResponseCode.SYSTEM_ERROR and "not online" in response.remark


async def test_consume_directly_maps_the_clients_status() -> None:
    cases = [(Code.OK, ResponseCode.SUCCESS, "CR_SUCCESS"), (Code.FAILED_TO_CONSUME_MESSAGE, ResponseCode.SUCCESS,
             "CR_LATER"), (Code.MESSAGE_CORRUPTED, ResponseCode.SUCCESS, "CR_RETURN_NULL"),
             (Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED, ResponseCode.NO_PERMISSION, None),
             (Code.NOT_IMPLEMENTED, ResponseCode.SYSTEM_ERROR, None)]
    for status, code, result in cases:
        relay, _, client = _relay()
        seen: list[pb.Message] = []

        def reply(command: spb.TelemetryCommand, status: int = status,
                  seen: list[pb.Message] = seen) -> spb.TelemetryCommand:
            seen.append(command.verify_message_command.message)
            return spb.TelemetryCommand(status=pb.Status(code=status), verify_message_result=spb.VerifyMessageResult(
                nonce=command.verify_message_command.nonce))

        response, _ = await asyncio.gather(
            relay.on_consume_directly(_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, _record()), None),
            _answer(relay, client, reply))
        assert response.code == code, (status, response.remark)
        assert seen[0].body == b"hello" and seen[0].system_properties.message_id == "ABC"
        if result is not None:
            assert json.loads(response.body)["consumeResult"] == result


async def test_consume_directly_of_an_undecodable_body() -> None:
    relay, _, client = _relay()
    response = await relay.on_consume_directly(_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, b"\x00\x01garbage"), None)
    assert response.code == ResponseCode.SYSTEM_ERROR and "does not decode" in response.remark
    assert client.outbox.empty()


async def test_a_stream_that_cannot_take_the_command_is_a_system_error() -> None:
    relay, _, client = _relay()
    client.outbox = asyncio.Queue(1)
    client.outbox.put_nowait(spb.TelemetryCommand())  # a client that does not read: the outbox is full
    response = await relay.on_running_info(_request(RequestCode.GET_CONSUMER_RUNNING_INFO, jstackEnable="true"), None)
    assert response.code == ResponseCode.SYSTEM_ERROR and "lost its telemetry stream" in response.remark
    assert relay._pending == {}
