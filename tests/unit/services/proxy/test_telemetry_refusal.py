"""Refused Settings on a Telemetry stream: no command, the stream ends with INVALID_ARGUMENT
(ClientActivity#processTelemetryException), so an official client still starting fails at once
(the Java client's settingsInitFuture fails) instead of waiting for its startup to time out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import grpc
import pytest

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.service import MessagingService, telemetry_refusal


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self) -> None:
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", "refused-client")]

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def time_remaining(self) -> float:
        return 30.0

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise _Aborted


async def _commands(*commands: spb.TelemetryCommand) -> AsyncIterator[spb.TelemetryCommand]:
    for command in commands:
        yield command


async def test_refused_settings_end_the_stream_with_no_command() -> None:
    clients = ClientManager(ProxyConfig(), SimpleNamespace())  # type: ignore[arg-type]
    service = MessagingService(None, None, None, None, clients)  # type: ignore[arg-type]
    settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER,
                           subscription=pb.Subscription(group=pb.Resource(name="g" * 256)))
    context = _Context()
    replies = []
    with pytest.raises(_Aborted):
        async for reply in service.Telemetry(_commands(spb.TelemetryCommand(settings=settings)), context):
            replies.append(reply)
    assert replies == []
    assert context.aborted is not None
    code, details = context.aborted
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "process client telemetryCommand failed. The specified group is longer than group max length 255."
    assert clients.telemetry_streams == 0


def test_refusal_status_follows_the_code_class() -> None:
    assert telemetry_refusal(pb.Status(code=pb.Code.BAD_REQUEST, message="m"))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert telemetry_refusal(pb.Status(code=pb.Code.TOO_MANY_REQUESTS))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert telemetry_refusal(pb.Status(code=pb.Code.INTERNAL_ERROR))[0] == grpc.StatusCode.INTERNAL
    assert telemetry_refusal(pb.Status(code=pb.Code.PROXY_TIMEOUT))[0] == grpc.StatusCode.INTERNAL
