"""The Admin service's pieces that need no cluster: the revive-log in-flight count, the ACL table,
the metrics wrapping, the log level and the proxy's own stacks."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

from orbitmq.auth.model import Action, Resource
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy.admin import auth as admin_auth
from orbitmq.proxy.admin import runtime
from orbitmq.proxy.admin.revive import InFlight
from orbitmq.proxy.admin.service import SERVICE, AdminService, instrument_metrics
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.metrics import ProxyMetrics


def _ck(group: str, topic: str, start: int, n: int, diff: list[int] | None = None) -> bytes:
    return json.dumps({"so": start, "pt": 1000, "it": 60000, "bm": 0, "n": n, "q": 0, "t": topic, "c": group,
                       "ro": 0, "d": diff if diff is not None else list(range(n)), "bn": "broker-a"}).encode()


def _ack(group: str, topic: str, start: int, offset: int) -> bytes:
    return json.dumps({"ao": offset, "so": start, "c": group, "t": topic, "q": 0, "pt": 1000,
                       "bn": "broker-a"}).encode()


def _batch_ack(group: str, topic: str, start: int, offsets: list[int]) -> bytes:
    return json.dumps({"aol": offsets, "ao": -1, "so": start, "c": group, "t": topic, "q": 0, "pt": 1000,
                       "bn": "broker-a"}).encode()


def test_in_flight_counts_checkpoints_minus_acks_of_the_group_only() -> None:
    counter = InFlight("G")
    counter.feed("ck", _ck("G", "T", 10, 5, [0, 1, 2, 4, 6]))
    counter.feed("ck", _ck("Other", "T", 10, 3))
    counter.feed("ack", _ack("G", "T", 10, 11))
    counter.feed("bAck", _batch_ack("G", "T", 10, [12, 16, 99]))
    counter.feed("ack", _ack("G", "T", 500, 500))  # a late ack: its checkpoint was revived already
    counter.feed("ck", _ck("G", "%RETRY%G_T", 0, 2))  # redeliveries count for their topic
    counter.feed("ck", b"not json")
    counter.feed(None, _ck("G", "T", 40, 9))  # not a revive-log record
    assert counter.by_topic() == {"T": 2 + 2}
    counter.feed("bAck", _batch_ack("G", "T", 10, [10, 14]))
    counter.feed("bAck", _batch_ack("G", "%RETRY%G_T", 0, [0, 1]))
    assert counter.by_topic() == {}


def test_every_admin_rpc_has_an_acl_requirement() -> None:
    table = admin_auth.requirements_table("C")
    assert set(table) == {m.name for m in SERVICE.methods}
    cluster = Resource.cluster("C")
    r = pb.Resource
    assert table["ResetGroupOffset"](apb.ResetGroupOffsetRequest(group=r(name="G"), topic=r(name="T"))) == [
        (Resource.group("G"), (Action.Update,)), (Resource.topic("T"), (Action.Update,))]
    assert table["DescribeGroupAccumulation"](apb.DescribeGroupAccumulationRequest(
        group=r(resource_namespace="ns", name="G"), topics=[r(name="T")])) == [
        (Resource.group("ns%G"), (Action.Get,)), (Resource.topic("T"), (Action.Get,))]
    assert table["ListSubscription"](apb.ListSubscriptionRequest(topic=r(name="T"))) == [
        (Resource.topic("T"), (Action.Get,))]
    assert table["ChangeLogLevel"](apb.ChangeLogLevelRequest()) == [(cluster, (Action.Update,))]
    assert table["PrintThreadStackTrace"](apb.PrintThreadStackTraceRequest()) == [(cluster, (Action.Get,))]
    assert table["PrintThreadStackTrace"](apb.PrintThreadStackTraceRequest(client_id="c", group=r(name="G"))) == [
        (Resource.group("G"), (Action.Get,))]
    assert table["QueryMessage"](apb.ListMessageRequest(topic=r(name="T"))) == [
        (Resource.topic("T"), (Action.Sub, Action.Get))]


async def test_admin_calls_are_counted_by_method_and_code() -> None:
    metrics = ProxyMetrics(ProxyConfig(), lambda: None)
    parts: Any = SimpleNamespace(started_at=0.0)
    service = instrument_metrics(metrics, AdminService(parts))
    answer = await service.DescribeTopicStatus(apb.DescribeTopicStatusRequest(), None)
    assert answer.status.code == pb.Code.ILLEGAL_TOPIC  # no topic: refused before any broker call
    assert ("DescribeTopicStatus", pb.Code.ILLEGAL_TOPIC) in metrics._rpc
    assert not any(name == "ChangeLogLevel" for name, _code in metrics._rpc)


def test_change_log_level_and_proxy_stacks() -> None:
    logger = logging.getLogger(runtime.PROCESS_LOGGER)
    before = logger.level
    try:
        answer = runtime.change_log_level(apb.ChangeLogLevelRequest(level=apb.ChangeLogLevelRequest.TRACE))
        assert logger.level == runtime.TRACE and answer.remark.endswith("to TRACE")
        refused = runtime.change_log_level(apb.ChangeLogLevelRequest(level=17))
        assert logger.level == runtime.TRACE and "unknown log level 17" in refused.remark
    finally:
        logger.setLevel(before)
    assert '"MainThread"' in runtime.proxy_stacks()
