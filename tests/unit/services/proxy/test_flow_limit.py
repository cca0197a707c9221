"""Per-family flow limits with upstream's pool keys (services/proxy/flow_limit.py): the call past
grpc<Family>ThreadPoolNums + grpc<Family>ThreadQueueCapacity gets TOO_MANY_REQUESTS "flow limit"
without running, other families are not affected, and a freed slot is taken again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from orbitmq.common.config import load_configs
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.config import PROCESSOR_NUMBER, ProxyConfig
from orbitmq.proxy.flow_limit import Family, family_limits
from orbitmq.proxy.service import MessagingService


class _Context:
    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", "client-1")]

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def time_remaining(self) -> float:
        return 30.0


class _Held:
    """Activities whose calls wait until released, counting the calls that ran."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.ran = 0

    async def _wait(self, response: Any) -> Any:
        self.ran += 1
        await self.release.wait()
        return response

    async def send_message(self, ctx: Any, request: Any) -> Any:
        return await self._wait(spb.SendMessageResponse(status=pb.Status(code=pb.Code.OK)))

    async def query_route(self, request: Any) -> Any:
        return await self._wait(spb.QueryRouteResponse(status=pb.Status(code=pb.Code.OK)))

    async def ack_message(self, ctx: Any, request: Any) -> Any:
        return await self._wait(spb.AckMessageResponse(status=pb.Status(code=pb.Code.OK)))


def test_defaults_and_keys_as_upstream() -> None:
    config = ProxyConfig()
    assert family_limits(config) == [PROCESSOR_NUMBER + 10_000] * len(Family)
    loaded = load_configs(None, {"grpcProducerThreadPoolNums": "2", "grpcProducerThreadQueueCapacity": "3",
                                 "grpcClientManagerThreadQueueCapacity": "0"}, ProxyConfig)
    limits = family_limits(loaded[0])
    assert limits[Family.PRODUCER] == 5
    assert limits[Family.CLIENT_MANAGER] == PROCESSOR_NUMBER
    assert not loaded.unknown_keys


def test_bad_pool_sizes_are_refused_naming_the_family() -> None:
    with pytest.raises(ValueError, match="producer"):
        family_limits(ProxyConfig(grpc_producer_thread_pool_nums=0))
    with pytest.raises(ValueError, match="route"):
        family_limits(ProxyConfig(grpc_route_thread_queue_capacity=-1))


async def test_the_call_past_the_limit_is_answered_flow_limit() -> None:
    held = _Held()
    config = ProxyConfig(grpc_producer_thread_pool_nums=1, grpc_producer_thread_queue_capacity=1)
    service = MessagingService(held, held, held, None, None, config)  # type: ignore[arg-type]
    running = [asyncio.create_task(service.SendMessage(spb.SendMessageRequest(), _Context())) for _ in range(2)]
    await asyncio.sleep(0.05)
    refused = await service.SendMessage(spb.SendMessageRequest(), _Context())
    assert (refused.status.code, refused.status.message) == (pb.Code.TOO_MANY_REQUESTS, "flow limit")
    assert held.ran == 2  # the refused call never reached the producer
    # Another family has its own limit: a route query and an ack still run.
    other = [asyncio.create_task(service.QueryRoute(spb.QueryRouteRequest(), _Context())),
             asyncio.create_task(service.AckMessage(spb.AckMessageRequest(), _Context()))]
    await asyncio.sleep(0.05)
    assert held.ran == 4
    held.release.set()
    answers = await asyncio.gather(*running, *other)
    assert all(a.status.code == pb.Code.OK for a in answers)
    assert service.in_flight == [0] * len(Family)
    again = await service.SendMessage(spb.SendMessageRequest(), _Context())
    assert again.status.code == pb.Code.OK
