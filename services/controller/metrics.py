"""ControllerMetrics: the controller's metrics as upstream names them (ControllerMetricsConstant).

Names carry no ``rocketmq_`` prefix, as upstream; units are appended as the OTel Prometheus
exporter does (``dledger_disk_usage_bytes``, ``request_latency_microseconds``). Labels on every
series: ``address`` (this node's Raft address), ``group`` (controllerDLegerGroup), ``peer_id``
(controllerDLegerSelfId), plus metricsLabel pairs.

- ``role``: 0 unknown, 1 candidate, 2 follower, 3 leader (upstream's role values);
- ``dledger_disk_usage_bytes``: bytes under the controller store path (journal + snapshot);
- ``active_broker_num{cluster,broker_set}``: replicas whose heartbeat has not timed out;
- ``request_total`` / ``request_latency_microseconds{request_type,request_handle_status}``;
- ``dledger_op_total`` / ``dledger_op_latency_microseconds{dledger_operation,dLedger_operation_status}``
  (every Raft append: a proposed event);
- ``election_total{election_result}``.

Counting is a dict lookup and additions on the event loop; gauges are read at scrape time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from orbitmq.common import metrics as m
from orbitmq.remoting.codes import RequestCode, ResponseCode

# 1, 3, 5 … µs up to 10 s, upstream's explicit view (values in microseconds)
LATENCY_BUCKETS_US = tuple(v * unit for unit in (1, 1000, 1_000_000) for v in (1, 3, 5, 10, 30, 50, 100, 300, 500)
                           if v * unit <= 10_000_000)
_ROLE_BY_STATE = {0: 2, 1: 1, 2: 3}  # pysyncobj follower, candidate, leader -> upstream role values
# RequestType's names (upstream exports the enum name as is)
_REQUEST_TYPES = {
    int(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET): "CONTROLLER_ALTER_SYNC_STATE_SET",
    int(RequestCode.CONTROLLER_ELECT_MASTER): "CONTROLLER_ELECT_MASTER",
    int(RequestCode.CONTROLLER_REGISTER_BROKER): "CONTROLLER_REGISTER_BROKER",
    int(RequestCode.CONTROLLER_GET_REPLICA_INFO): "CONTROLLER_GET_REPLICA_INFO",
    int(RequestCode.CONTROLLER_GET_METADATA_INFO): "CONTROLLER_GET_METADATA_INFO",
    int(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA): "CONTROLLER_GET_SYNC_STATE_DATA",
    int(RequestCode.BROKER_HEARTBEAT): "CONTROLLER_BROKER_HEARTBEAT",
    int(RequestCode.UPDATE_CONTROLLER_CONFIG): "CONTROLLER_UPDATE_CONTROLLER_CONFIG",
    int(RequestCode.GET_CONTROLLER_CONFIG): "CONTROLLER_GET_CONTROLLER_CONFIG",
    int(RequestCode.CLEAN_BROKER_DATA): "CONTROLLER_CLEAN_BROKER_DATA",
    int(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID): "CONTROLLER_GET_NEXT_BROKER_ID",
    int(RequestCode.CONTROLLER_APPLY_BROKER_ID): "CONTROLLER_APPLY_BROKER_ID",
}


class ControllerMetrics:
    def __init__(self, manager: Any) -> None:
        self.manager = manager
        cfg = manager.config
        extra = m.parse_metrics_label(cfg.metrics_label)
        self_id = cfg.controller_d_leger_self_id
        self.label_names = ("address", "group", "peer_id", *extra)
        self.common = (cfg.peers().get(self_id, ""), cfg.controller_d_leger_group, self_id, *extra.values())
        self._requests: dict[tuple[str, str], m.Histo] = {}
        self._ops: dict[str, m.Histo] = {}
        self._elections: dict[str, int] = {}

    # ---- hot path ---------------------------------------------------------------------------

    def timed_processor(self, processor: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
        """The Remoting processor, recording request_total / request_latency."""
        perf = time.perf_counter

        async def timed(request: Any, channel: Any) -> Any:
            start = perf()
            status = "failed"
            try:
                response = await processor(request, channel)
                if response is None or response.code == ResponseCode.SUCCESS:
                    status = "success"
                return response
            finally:
                kind = _REQUEST_TYPES.get(request.code)
                if kind is not None:  # unknown codes are answered NOT_SUPPORTED, not counted
                    self._observe(self._requests, (kind, status), perf() - start)

        return timed

    async def timed_append(self, propose: Awaitable[bool]) -> bool:
        """One Raft append (DLedger's APPEND): success, failed or timeout."""
        start = time.perf_counter()
        status = "failed"
        try:
            applied = await propose
            status = "success"
            return applied
        except Exception as exc:
            if "timed out" in str(exc).lower() or isinstance(exc, TimeoutError):
                status = "timeout"
            raise
        finally:
            self._observe(self._ops, status, time.perf_counter() - start)

    def on_election(self, code: int, ok: bool) -> None:
        if ok:
            result = "new_master_elected"
        elif code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
            result = "keep_current_master"
        else:
            result = "no_master_elected"
        self._elections[result] = self._elections.get(result, 0) + 1

    @staticmethod
    def _observe(table: dict[Any, m.Histo], key: Any, seconds: float) -> None:
        histo = table.get(key)
        if histo is None:
            histo = table[key] = m.Histo(LATENCY_BUCKETS_US)
        histo.observe(seconds * 1_000_000)

    # ---- scrape -----------------------------------------------------------------------------

    def collect(self) -> Iterable[m.Metric]:
        names, common = self.label_names, self.common
        raft = self.manager.raft
        role = m.gauge("role", "Role of this node: 0 unknown, 1 candidate, 2 follower, 3 leader.", names)
        state = None
        if raft is not None:
            state = (raft.status() or {}).get("state")
        role.add_metric(common, _ROLE_BY_STATE.get(int(state), 0) if state is not None else 0)
        disk = m.gauge("dledger_disk_usage_bytes", "Bytes of the controller's Raft store.", names)
        disk.add_metric(common, _dir_size(self.manager.config.store_path()))
        active = m.gauge("active_broker_num", "Brokers whose heartbeat is current.", names + ("cluster", "broker_set"))
        hb = self.manager.heartbeat_manager
        counts: dict[tuple[str, str], int] = {}
        for cluster, broker_name, broker_id in list(hb.broker_live_table):
            if hb.is_broker_active(cluster, broker_name, broker_id):
                counts[(cluster, broker_name)] = counts.get((cluster, broker_name), 0) + 1
        for (cluster, broker_set), count in sorted(counts.items()):
            active.add_metric((*common, cluster, broker_set), count)
        request_labels = names + ("request_type", "request_handle_status")
        requests = m.counter("request_total", "Controller requests handled.", request_labels)
        latency = m.histogram("request_latency_microseconds", "Controller request latency.", request_labels)
        for (kind, status), histo in list(self._requests.items()):
            requests.add_metric((*common, kind, status), histo.total)
            m.add_histo(latency, (*common, kind, status), histo)
        op_labels = names + ("dledger_operation", "dLedger_operation_status")
        ops = m.counter("dledger_op_total", "Raft appends.", op_labels)
        op_latency = m.histogram("dledger_op_latency_microseconds", "Raft append latency.", op_labels)
        for status, histo in list(self._ops.items()):
            ops.add_metric((*common, "append", status), histo.total)
            m.add_histo(op_latency, (*common, "append", status), histo)
        elections = m.counter("election_total", "Master elections by result.", names + ("election_result",))
        for result, count in sorted(self._elections.items()):
            elections.add_metric((*common, result), count)
        return [role, disk, active, requests, latency, ops, op_latency, elections]


def _dir_size(path: str) -> int:
    """UtilAll.calculateFileSizeInPath: the controller store is a journal and a snapshot, a few files."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total
