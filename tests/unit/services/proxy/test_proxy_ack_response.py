"""AckMessage's response (entries added in place) equals the one built from copied entries."""

from __future__ import annotations

import asyncio
import time

from orbitmq.client.api import MQClientAPI
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import errors
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.consumer import ConsumerActivity
from orbitmq.proxy.context import ProxyContext
from orbitmq.remoting.codes import ResponseCode

Code = pb.Code


class _Response:
    code = ResponseCode.SUCCESS
    remark = None


class _Api(MQClientAPI):
    def __init__(self) -> None:
        self.codes: list[int] = []

    async def invoke(self, addr, code, header=None, body=None, timeout=None):  # type: ignore[override]  # noqa: ASYNC109
        self.codes.append(code)
        return _Response()


class _Cluster:
    def __init__(self) -> None:
        self.api = _Api()

    async def group_config(self, group: str) -> None:
        return None

    async def broker_addr(self, name: str, topic: str) -> str:
        return "addr"


def _reference(request: spb.AckMessageRequest, statuses: list[pb.Status]) -> spb.AckMessageResponse:
    entries = [spb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st)
               for e, st in zip(request.entries, statuses, strict=True)]
    codes = {e.status.code for e in entries}
    code = codes.pop() if len(codes) == 1 else Code.MULTIPLE_RESULTS
    return spb.AckMessageResponse(status=errors.status(code, Code.Name(code)), entries=entries)


def _request(handles: list[str]) -> spb.AckMessageRequest:
    request = spb.AckMessageRequest()
    request.group.name = "G"
    request.topic.name = "T"
    for i, handle in enumerate(handles):
        request.entries.add(message_id=f"id{i}", receipt_handle=handle)
    return request


def test_ack_responses_match_reference() -> None:
    now = int(time.time() * 1000)
    good = [f"100 {now} 60000 0 0 broker-a 3 {100 + i} {5000 + i}" for i in range(4)]
    expired = f"100 {now - 120000} 60000 0 0 broker-a 3 104 5004"

    async def run() -> None:
        cfg = ProxyConfig()
        cluster = _Cluster()
        consumer = ConsumerActivity(cfg, cluster, ClientManager(cfg, cluster))  # type: ignore[arg-type]
        ctx = ProxyContext("c1", "PYTHON", "5.0.0", "127.0.0.1:1", "", 20.0)

        request = _request(good)
        response = await consumer.ack_message(ctx, request)
        ok = errors.ok()
        assert response == _reference(request, [ok] * 4)
        assert response.SerializeToString(deterministic=True) == _reference(
            request, [ok] * 4).SerializeToString(deterministic=True)

        request = _request([good[0], "garbage", expired])
        response = await consumer.ack_message(ctx, request)
        bad = errors.status(Code.INVALID_RECEIPT_HANDLE, "receipt handle is invalid: Parse failed, dataList size 1")
        gone = errors.status(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        assert response == _reference(request, [ok, bad, gone])
        assert response.status.code == Code.MULTIPLE_RESULTS
        assert response.status.message == "MULTIPLE_RESULTS"

    asyncio.run(run())
