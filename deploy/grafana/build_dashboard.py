"""Writes deploy/grafana/orbitmq.json, the Grafana dashboard of an OrbitMQ cluster.

The JSON is generated so that its ~60 panels share one layout and one style and stay easy to
review; edit this file and run it (``.venv/bin/python deploy/grafana/build_dashboard.py``), or
edit the JSON in Grafana and export it over orbitmq.json (then port the change here, because
tests/integration/test_dashboards.py checks that the two agree and that every metric and label
a panel queries exists in a live scrape of a running cluster).

Conventions of the queries (see docs/metrics.md for the metrics):
- every replica of a broker set reports under the same ``cluster``/``node_id`` (brokerName), as
  upstream; figures that replicas repeat (topic and group counts, lag) are taken with
  ``max by (..., node_id)`` before summing across broker sets; per-replica figures (storage, HA)
  are shown per scrape target (``instance``);
- counters are read with ``rate``/``increase`` over ``$__rate_interval``;
- histograms: ``histogram_quantile`` over ``_bucket`` rates ``by (le, ...)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("orbitmq.json")
DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
RI = "$__rate_interval"

CL = 'cluster=~"$cluster"'
BR = f'{CL}, node_id=~"$node"'
TP = f'{CL}, topic=~"$topic"'
GR = f'{CL}, consumer_group=~"$consumer_group"'

WIDTH = 24


class Layout:
    """Places panels left to right in rows of 24 units; ``row`` starts a new titled row."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.x = 0
        self.y = 0
        self.line_height = 0
        self.next_id = 1

    def _newline(self) -> None:
        if self.x:
            self.y += self.line_height
            self.x = 0
            self.line_height = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "id": self._id(), "title": title, "collapsed": False, "panels": [],
                            "gridPos": {"x": 0, "y": self.y, "w": WIDTH, "h": 1}})
        self.y += 1

    def add(self, panel: dict[str, Any], w: int, h: int) -> None:
        if self.x + w > WIDTH:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.panels.append(panel)
        self.x += w
        self.line_height = max(self.line_height, h)

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def _targets(queries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"datasource": DS, "editorMode": "code", "expr": expr, "legendFormat": legend, "range": True,
             "refId": chr(ord("A") + i)} for i, (expr, legend) in enumerate(queries)]


def timeseries(title: str, description: str, queries: list[tuple[str, str]], unit: str = "short",
               stack: bool = False, decimals: int | None = None) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "unit": unit, "min": 0, "color": {"mode": "palette-classic"},
        "custom": {"drawStyle": "line", "lineInterpolation": "linear", "lineWidth": 1,
                   "fillOpacity": 20 if stack else 8, "showPoints": "never", "spanNulls": False,
                   "axisPlacement": "auto", "axisLabel": "",
                   "stacking": {"mode": "normal" if stack else "none", "group": "A"}},
        "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]},
    }
    if decimals is not None:
        defaults["decimals"] = decimals
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                                   "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}},
            "targets": _targets(queries)}


def stat(title: str, description: str, queries: list[tuple[str, str]], unit: str = "short",
         thresholds: list[tuple[str, float | None]] | None = None, decimals: int | None = None,
         mappings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    steps = [{"color": color, "value": value} for color, value in (thresholds or [("green", None)])]
    defaults: dict[str, Any] = {"unit": unit, "color": {"mode": "thresholds"},
                                "thresholds": {"mode": "absolute", "steps": steps}, "mappings": mappings or []}
    if decimals is not None:
        defaults["decimals"] = decimals
    return {"type": "stat", "title": title, "description": description, "datasource": DS,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
                        "textMode": "auto", "showPercentChange": False, "wideLayout": True},
            "targets": _targets(queries)}


def states(title: str, description: str, queries: list[tuple[str, str]],
           names: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """A state timeline with value mappings (roles)."""
    mapping = {"type": "value", "options": {value: {"text": text, "color": color, "index": i}
                                            for i, (value, (text, color)) in enumerate(names.items())}}
    return {"type": "state-timeline", "title": title, "description": description, "datasource": DS,
            "fieldConfig": {"defaults": {"color": {"mode": "thresholds"}, "mappings": [mapping],
                                         "thresholds": {"mode": "absolute",
                                                        "steps": [{"color": "text", "value": None}]},
                                         "custom": {"fillOpacity": 80, "lineWidth": 0}},
                            "overrides": []},
            "options": {"mergeValues": True, "showValue": "auto", "alignValue": "left", "rowHeight": 0.9,
                        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "single", "sort": "none"}},
            "targets": _targets(queries)}


def _sel(metric: str, selector: str) -> str:
    return f"{metric}{{{selector}}}" if selector else metric


def rate(metric: str, selector: str, by: str) -> str:
    return f"sum by ({by}) (rate({_sel(metric, selector)}[{RI}]))"


def quantile(q: float, metric: str, selector: str, by: str) -> str:
    by = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({by}) (rate({_sel(metric + '_bucket', selector)}[{RI}])))"


def set_max(metric: str, selector: str, by: str) -> str:
    """Per broker set once (its replicas repeat the figure), then summed by ``by``."""
    inner = ", ".join(dict.fromkeys(["cluster", "node_id", *[x.strip() for x in by.split(",") if x.strip()]]))
    return f"sum by ({by}) (max by ({inner}) ({metric}{{{selector}}}))"


# ---- the panels -------------------------------------------------------------------------------


def overview(lay: Layout) -> None:
    lay.row("Cluster overview")
    lay.add(stat("Brokers", "Broker processes scraped (every replica of every broker set) and, of them, masters.",
                 [(f"count(rocketmq_broker_permission{{{CL}}})", "brokers"),
                  (f"sum(rocketmq_ha_master{{{CL}}})", "masters")]), 4, 4)
    lay.add(stat("Proxies", "Proxy processes up (rocketmq_proxy_up).",
                 [(f"sum(rocketmq_proxy_up{{{CL}}})", "proxies")], thresholds=[("red", None), ("green", 1)]), 3, 4)
    lay.add(stat("NameServers / controllers", "NameServers up; controllers (Raft peers) reporting a role.",
                 [("sum(rocketmq_namesrv_up)", "namesrv"), ("count(role)", "controllers")]), 4, 4)
    lay.add(stat("Topics", "Topics of the broker topic config tables (max over the brokers of a cluster, which "
                           "repeat most of them) and of the NameServers' route table.",
                 [(f"max by (cluster) (rocketmq_topic_number{{{CL}}})", "{{cluster}}"),
                  ("max(rocketmq_namesrv_topics)", "route table")]), 3, 4)
    lay.add(stat("Consumer groups", "Subscription groups (max over the brokers of a cluster).",
                 [(f"max by (cluster) (rocketmq_consumer_group_number{{{CL}}})", "{{cluster}}")]), 3, 4)
    lay.add(stat("Messages in / s", "Messages put to user topics.",
                 [(f'sum(rate(rocketmq_messages_in_total{{{CL}, is_system="false"}}[{RI}]))', "in")],
                 unit="ops", decimals=1), 3, 4)
    lay.add(stat("Proxy error ratio", "Share of gRPC calls answered with a Code other than OK "
                                      "(MESSAGE_NOT_FOUND, an empty long poll, is not an error).",
                 [(f'sum(rate(rocketmq_proxy_rpc_total{{{CL}, code!~"OK|MESSAGE_NOT_FOUND"}}[{RI}])) '
                   f"/ sum(rate(rocketmq_proxy_rpc_total{{{CL}}}[{RI}]))", "errors")],
                 unit="percentunit", decimals=2, thresholds=[("green", None), ("orange", 0.01), ("red", 0.05)]),
            4, 4)
    lay.add(timeseries("Messages in / out", "Messages put (in, every message type) and read by consumers (out), "
                                            "user topics.",
                       [(rate("rocketmq_messages_in_total", f'{CL}, is_system="false"', "cluster"), "in {{cluster}}"),
                        (rate("rocketmq_messages_out_total", f'{CL}, is_system="false"', "cluster"),
                         "out {{cluster}}")], unit="ops"), 8, 8)
    lay.add(timeseries("Throughput in / out", "Bytes put and read, as stored.",
                       [(rate("rocketmq_throughput_in_total", CL, "cluster"), "in {{cluster}}"),
                        (rate("rocketmq_throughput_out_total", CL, "cluster"), "out {{cluster}}")], unit="Bps"), 8, 8)
    lay.add(timeseries("Messages in by type", "normal, fifo, delay (timer) and transaction messages put.",
                       [(rate("rocketmq_messages_in_total", f'{CL}, is_system="false"', "message_type"),
                         "{{message_type}}")], unit="ops", stack=True), 8, 8)
    lay.add(timeseries("Proxy RPC rate by method", "gRPC calls of the MessagingService (Telemetry excluded).",
                       [(rate("rocketmq_proxy_rpc_total", CL, "method"), "{{method}}")], unit="reqps"), 8, 8)
    lay.add(timeseries("Proxy errors by Code", "gRPC calls answered with an apache.rocketmq.v2.Code other than OK "
                                              "and MESSAGE_NOT_FOUND, by method and Code.",
                       [(rate("rocketmq_proxy_rpc_total", f'{CL}, code!~"OK|MESSAGE_NOT_FOUND"', "method, code"),
                         "{{method}} {{code}}")], unit="reqps"), 8, 8)
    lay.add(timeseries("Proxy RPC latency p99", "99th percentile of the gRPC call latency by method (long polls "
                                                "included: ReceiveMessage waits for messages).",
                       [(quantile(0.99, "rocketmq_proxy_rpc_latency_milliseconds", CL, "method"), "{{method}}")],
                       unit="ms"), 8, 8)
    lay.add(timeseries("Proxy clients", "Connected gRPC clients by type (producer, simple_consumer, "
                                        "push_consumer...).",
                       [(f"sum by (client_type) (rocketmq_proxy_active_clients{{{CL}}})", "{{client_type}}")]), 8, 8)
    lay.add(timeseries("Live brokers per NameServer", "Broker registrations each NameServer holds, by cluster.",
                       [(f"rocketmq_namesrv_live_brokers{{{CL}}}", "{{node_id}} {{cluster}}")]), 8, 8)
    lay.add(timeseries("Proxy messages", "Messages sent, delivered (ReceiveMessage, PullMessage) and acknowledged "
                                         "through the proxies.",
                       [(rate("rocketmq_proxy_messages_sent_total", CL, "cluster"), "sent"),
                        (rate("rocketmq_proxy_messages_received_total", CL, "cluster"), "delivered"),
                        (rate("rocketmq_proxy_messages_acked_total", CL, "cluster"), "acked")], unit="ops"), 8, 8)


def topics(lay: Layout) -> None:
    lay.row("Topics ($topic)")
    lay.add(timeseries("Messages in by topic", "Messages put, by topic.",
                       [(rate("rocketmq_messages_in_total", TP, "topic"), "{{topic}}")], unit="ops"), 8, 8)
    lay.add(timeseries("Messages out by topic and group", "Messages read by each consumer group.",
                       [(rate("rocketmq_messages_out_total", TP, "topic, consumer_group"),
                         "{{topic}} / {{consumer_group}}")], unit="ops"), 8, 8)
    lay.add(timeseries("Bytes in / out by topic", "Throughput, as stored.",
                       [(rate("rocketmq_throughput_in_total", TP, "topic"), "in {{topic}}"),
                        (rate("rocketmq_throughput_out_total", TP, "topic"), "out {{topic}}")], unit="Bps"), 8, 8)
    lay.add(timeseries("Message size percentiles", "p50, p95 and p99 of the message size (RocketMQ's buckets: 1 KiB, "
                                                   "4 KiB, 512 KiB, 1, 2, 4 MiB, so values are interpolated).",
                       [(quantile(q, "rocketmq_message_size_bytes", TP, "topic"), f"p{int(q * 100)} {{{{topic}}}}")
                        for q in (0.5, 0.95, 0.99)], unit="bytes"), 8, 8)
    lay.add(timeseries("Average message size", "Bytes per message put.",
                       [(f"{rate('rocketmq_message_size_bytes_sum', TP, 'topic')} / "
                         f"{rate('rocketmq_message_size_bytes_count', TP, 'topic')}", "{{topic}}")],
                       unit="bytes"), 8, 8)
    lay.add(timeseries("Proxy sends by topic", "Messages and serialized bytes sent through the proxies.",
                       [(rate("rocketmq_proxy_messages_sent_total", TP, "topic"), "messages {{topic}}"),
                        (rate("rocketmq_proxy_sent_bytes_total", TP, "topic"), "bytes {{topic}}")], unit="short"), 8, 8)
    lay.add(timeseries("Proxy deliveries by topic", "Messages and serialized bytes delivered through the proxies "
                                                    "(ReceiveMessage, PullMessage), by topic and group.",
                       [(rate("rocketmq_proxy_messages_received_total", TP, "topic, consumer_group"),
                         "messages {{topic}} / {{consumer_group}}"),
                        (rate("rocketmq_proxy_received_bytes_total", TP, "topic, consumer_group"),
                         "bytes {{topic}} / {{consumer_group}}")], unit="short"), 24, 8)


def groups(lay: Layout) -> None:
    lay.row("Consumer groups ($consumer_group)")
    lay.add(timeseries("Lag (messages)", "Messages stored but not yet consumed (what consumerProgress calls Diff), "
                                         "by group and topic; %RETRY% topics included.",
                       [(set_max("rocketmq_consumer_lag_messages", GR, "consumer_group, topic"),
                         "{{consumer_group}} {{topic}}")]), 12, 8)
    lay.add(timeseries("Lag latency", "Age of the oldest message not yet consumed.",
                       [(f"max by (consumer_group, topic) (rocketmq_consumer_lag_latency_milliseconds{{{GR}}})",
                         "{{consumer_group}} {{topic}}")], unit="ms"), 12, 8)
    lay.add(timeseries("Inflight", "Messages pulled but not yet committed (pull consumers).",
                       [(set_max("rocketmq_consumer_inflight_messages", GR, "consumer_group, topic"),
                         "{{consumer_group}} {{topic}}")]), 8, 8)
    lay.add(timeseries("Ready", "Messages not yet pulled.",
                       [(set_max("rocketmq_consumer_ready_messages", GR, "consumer_group, topic"),
                         "{{consumer_group}} {{topic}}")]), 8, 8)
    lay.add(timeseries("Queueing latency", "Age of the oldest message not yet pulled.",
                       [(f"max by (consumer_group, topic) (rocketmq_consumer_queueing_latency_milliseconds{{{GR}}})",
                         "{{consumer_group}} {{topic}}")], unit="ms"), 8, 8)
    lay.add(timeseries("Consumed by group", "Messages read by the brokers for each group, and delivered and "
                                            "acknowledged by the proxies.",
                       [(rate("rocketmq_messages_out_total", GR, "consumer_group"), "read {{consumer_group}}"),
                        (rate("rocketmq_proxy_messages_received_total", GR, "consumer_group"),
                         "delivered {{consumer_group}}"),
                        (rate("rocketmq_proxy_messages_acked_total", GR, "consumer_group"),
                         "acked {{consumer_group}}")], unit="ops"), 8, 8)
    lay.add(timeseries("Sent to DLQ", "Messages moved to %DLQ%<group> (retries exhausted, or forwarded by the "
                                      "client), by group and original topic.",
                       [(f"sum by (consumer_group, topic) (increase(rocketmq_send_to_dlq_messages_total{{{GR}}}[{RI}]))",
                         "{{consumer_group}} {{topic}}"),
                        (f"sum by (consumer_group, topic) (increase("
                         f"rocketmq_proxy_messages_forwarded_to_dlq_total{{{GR}}}[{RI}]))",
                         "forwarded by clients {{consumer_group}} {{topic}}")]), 8, 8)
    lay.add(timeseries("Consumer connections", "Consumer connections the brokers know, by group and consume mode "
                                               "(clients of the proxies are counted once per proxy).",
                       [(f"max by (cluster, consumer_group, consume_mode) (rocketmq_consumer_connections{{{GR}}})",
                         "{{consumer_group}} {{consume_mode}}")]), 8, 8)
    lay.add(timeseries("POP revive log", "Checkpoints (CK) and acks (ACK) written to the revive log and read "
                                         "back by the revive service, and un-acked messages it re-put (to the "
                                         "retry topic or the DLQ), by put status.",
                       [(rate("rocketmq_pop_revive_in_message_total", GR, "consumer_group, revive_message_type, "
                              "put_status"), "in {{consumer_group}} {{revive_message_type}} {{put_status}}"),
                        (rate("rocketmq_pop_revive_out_message_total", GR, "consumer_group, revive_message_type"),
                         "out {{consumer_group}} {{revive_message_type}}"),
                        (rate("rocketmq_pop_revive_retry_messages_total", GR, "consumer_group, put_status"),
                         "re-put {{consumer_group}} {{put_status}}")], unit="ops"), 12, 8)
    lay.add(timeseries("POP revive progress", "Per revive queue of each broker: records not yet processed, and "
                                              "how far the oldest pending checkpoint is past its revive time "
                                              "(un-acked messages come back that much later).",
                       [(f"max by (node_id, queue_id) (rocketmq_pop_revive_lag{{{BR}}})",
                         "records behind {{node_id}} q{{queue_id}}"),
                        (f"max by (node_id, queue_id) (rocketmq_pop_revive_latency_milliseconds{{{BR}}})",
                         "ms late {{node_id}} q{{queue_id}}")]), 12, 8)


def brokers(lay: Layout) -> None:
    lay.row("Brokers ($node)")
    per_replica = "{{node_id}} {{instance}}"
    lay.add(timeseries("Store size", "CommitLog bytes held (max - min offset), per replica.",
                       [(f"rocketmq_storage_size_bytes{{{BR}}}", per_replica)], unit="bytes"), 8, 8)
    lay.add(timeseries("Flush behind", "CommitLog bytes written but not yet flushed to disk.",
                       [(f"rocketmq_storage_flush_behind_bytes{{{BR}}}", per_replica)], unit="bytes"), 8, 8)
    lay.add(timeseries("Dispatch behind", "CommitLog bytes not yet dispatched to the consume queues and index.",
                       [(f"rocketmq_storage_dispatch_behind_bytes{{{BR}}}", per_replica)], unit="bytes"), 8, 8)
    lay.add(timeseries("Remoting latency p99 by request and response code", "rocketmq_rpc_latency: every Remoting "
                                                                             "request, timed around its processor.",
                       [(quantile(0.99, "rocketmq_rpc_latency_milliseconds", BR, "request_code, response_code"),
                         "{{request_code}} {{response_code}}")], unit="ms"), 12, 8)
    lay.add(timeseries("Remoting requests by response code", "Requests per second by request and response code.",
                       [(f"sum by (request_code, response_code) (rate(rocketmq_rpc_latency_milliseconds_count"
                         f"{{{BR}}}[{RI}]))", "{{request_code}} {{response_code}}")], unit="reqps"), 12, 8)
    lay.add(timeseries("Remoting requests failed", "Requests whose processor failed (result other than success and "
                                                   "oneway).",
                       [(f"sum by (node_id, request_code, result) (rate(rocketmq_rpc_latency_milliseconds_count"
                         f'{{{BR}, result!~"success|oneway"}}[{RI}]))', "{{node_id}} {{request_code}} {{result}}")],
                       unit="reqps"), 8, 8)
    lay.add(timeseries("Processor watermark", "Requests queued for a processor (the send queue).",
                       [(f"max by (node_id, processor) (rocketmq_processor_watermark{{{BR}}})",
                         "{{node_id}} {{processor}}")]), 8, 8)
    lay.add(timeseries("Connections", "Producer and consumer Remoting connections (proxies included) and HA "
                                      "connections of each replica.",
                       [(f"sum by (node_id, instance) (rocketmq_producer_connections{{{BR}}})",
                         "producers {{node_id}} {{instance}}"),
                        (f"sum by (node_id, instance) (rocketmq_consumer_connections{{{BR}}})",
                         "consumers {{node_id}} {{instance}}"),
                        (f"rocketmq_ha_connections{{{BR}}}", "HA {{node_id}} {{instance}}")]), 8, 8)
    lay.add(timeseries("Oldest message age", "Age of the oldest stored message (retention at work).",
                       [(f"rocketmq_storage_message_reserve_time_milliseconds{{{BR}}}", per_replica)], unit="ms"),
            8, 8)
    lay.add(timeseries("Broker permission", "brokerPermission: 6 read and write, 4 read only (wipeWritePerm), "
                                            "2 write only.",
                       [(f"rocketmq_broker_permission{{{BR}}}", per_replica)], decimals=0), 8, 8)
    lay.add(timeseries("Topic / group creation p99", "UPDATE_AND_CREATE_TOPIC and _SUBSCRIPTIONGROUP time.",
                       [(quantile(0.99, "rocketmq_topic_create_execution_time_milliseconds", BR, "invocation_status"),
                         "topic {{invocation_status}}"),
                        (quantile(0.99, "rocketmq_consumer_group_create_execution_time_milliseconds", BR,
                                  "invocation_status"), "group {{invocation_status}}")], unit="ms"), 8, 8)


def ha(lay: Layout) -> None:
    lay.row("HA and controllers")
    lay.add(states("Broker role", "Each replica: MASTER (writable) or SLAVE.",
                   [(f"rocketmq_ha_master{{{BR}}}", "{{node_id}} {{instance}}")],
                   {"0": ("SLAVE", "blue"), "1": ("MASTER", "green")}), 8, 8)
    lay.add(timeseries("Master epoch", "The controller's master epoch of each broker set (controller mode); "
                                       "it rises with every election.",
                       [(f"max by (cluster, node_id) (rocketmq_ha_master_epoch{{{BR}}})", "{{node_id}}")],
                       decimals=0), 8, 8)
    lay.add(timeseries("SyncStateSet and in-sync replicas", "SyncStateSet size of each broker set (controller "
                                                            "mode) and the replicas the master counts in sync.",
                       [(f"max by (cluster, node_id) (rocketmq_ha_sync_state_set_size{{{BR}}})",
                         "SyncStateSet {{node_id}}"),
                        (f"max by (cluster, node_id) (rocketmq_ha_in_sync_replicas{{{BR}}})",
                         "in sync {{node_id}}")], decimals=0), 8, 8)
    lay.add(timeseries("HA confirm behind", "CommitLog bytes the replicas a send waits for have not confirmed.",
                       [(f"rocketmq_ha_confirm_behind_bytes{{{BR}}}", "{{node_id}} {{instance}}")], unit="bytes"), 8, 8)
    lay.add(timeseries("Active brokers per set", "Replicas whose heartbeat the controllers consider current.",
                       [(f"max by (cluster, broker_set) (active_broker_num{{{CL}}})", "{{cluster}} {{broker_set}}")],
                       decimals=0), 8, 8)
    lay.add(states("Controller role", "Raft role of each controller: leader, follower, candidate.",
                   [("role", "{{peer_id}} {{address}}")],
                   {"0": ("unknown", "red"), "1": ("candidate", "orange"), "2": ("follower", "blue"),
                    "3": ("leader", "green")}), 8, 8)
    lay.add(timeseries("Elections", "Master elections by result (on the controller leader).",
                       [(f"sum by (election_result) (increase(election_total[{RI}]))", "{{election_result}}")],
                       decimals=0), 8, 8)
    lay.add(timeseries("Controller requests", "Requests handled by the controllers, by type and status.",
                       [(rate("request_total", "", "request_type, request_handle_status"),
                         "{{request_type}} {{request_handle_status}}")], unit="reqps"), 8, 8)
    lay.add(timeseries("Controller request latency p99", "By request type.",
                       [(quantile(0.99, "request_latency_microseconds", "", "request_type"), "{{request_type}}")],
                       unit="µs"), 8, 8)
    lay.add(timeseries("Raft appends", "Raft log appends (one per controller event) and their p99 latency.",
                       [(rate("dledger_op_total", "", "peer_id, dLedger_operation_status"),
                         "{{peer_id}} {{dLedger_operation_status}}")], unit="ops"), 8, 8)
    lay.add(timeseries("Raft append latency p99", "",
                       [(quantile(0.99, "dledger_op_latency_microseconds", "", "peer_id"), "{{peer_id}}")],
                       unit="µs"), 8, 8)
    lay.add(timeseries("Controller store size", "Bytes of each controller's Raft journal and snapshots.",
                       [("dledger_disk_usage_bytes", "{{peer_id}} {{address}}")], unit="bytes"), 8, 8)


def timer_and_transactions(lay: Layout) -> None:
    lay.row("Timer and transactions")
    lay.add(timeseries("Timer wheel in / out", "Timer (and delay) messages filed into the wheel and delivered, "
                                               "by topic. Every replica of a set files them into its own wheel, "
                                               "the master alone delivers.",
                       [(f"sum by (topic) (max by (cluster, node_id, topic) (rate(rocketmq_timer_enqueue_total{{{TP}}}"
                         f"[{RI}])))", "in {{topic}}"),
                        (rate("rocketmq_timer_dequeue_total", TP, "topic"), "out {{topic}}")], unit="ops"), 8, 8)
    lay.add(timeseries("Timer messages waiting", "Messages in the wheel, by topic.",
                       [(set_max("rocketmq_timing_messages", TP, "topic"), "{{topic}}")]), 8, 8)
    lay.add(timeseries("Timer enqueue lag", "Timer queue entries not yet filed into the wheel.",
                       [(f"rocketmq_timer_enqueue_lag{{{BR}}}", "{{node_id}} {{instance}}")]), 8, 8)
    lay.add(timeseries("Timer latencies", "Enqueue: now - store time of the last message filed (ms); dequeue: how "
                                          "far the wheel's read time is behind now (seconds, converted).",
                       [(f"max by (node_id) (rocketmq_timer_enqueue_latency{{{BR}}})", "enqueue {{node_id}}"),
                        (f"max by (node_id) (rocketmq_timer_dequeue_latency{{{BR}}}) * 1000", "dequeue {{node_id}}")],
                       unit="ms"), 8, 8)
    lay.add(timeseries("Timer dequeue lag", "Messages in the whole wheel from its read time on, not yet delivered "
                                            "(a scan at most 5 s old).",
                       [(f"rocketmq_timer_dequeue_lag{{{BR}}}", "{{node_id}} {{instance}}")]), 8, 8)
    lay.add(timeseries("Timer messages by horizon", "Messages due within each bound from now, from the previous "
                                                    "bound up to it (the next 24 h).",
                       [(f"max by (timer_bound_s) (rocketmq_timer_message_snapshot{{{BR}}})",
                         "up to {{timer_bound_s}} s")]), 8, 8)
    lay.add(timeseries("Scheduled delay", "p50 and p99 of the delay timer messages asked for (delivery time - born "
                                          "time).",
                       [(quantile(q, "rocketmq_delay_message_latency_seconds", BR, ""), f"p{int(q * 100)}")
                        for q in (0.5, 0.99)], unit="s"), 8, 8)
    lay.add(timeseries("Transactions committed / rolled back", "END_TRANSACTION resolutions by topic (client and "
                                                               "check-back).",
                       [(rate("rocketmq_commit_messages_total", TP, "topic"), "commit {{topic}}"),
                        (rate("rocketmq_rollback_messages_total", TP, "topic"), "rollback {{topic}}")], unit="ops"), 8, 8)
    lay.add(timeseries("Half messages", "Open transactions (half messages not yet committed or rolled back).",
                       [(set_max("rocketmq_half_messages", TP, "topic"), "{{topic}}")]), 8, 8)
    lay.add(timeseries("Transaction finish latency p99", "Born to commit or rollback (RocketMQ records seconds; "
                                                         "buckets 5 s ... 1 day).",
                       [(quantile(0.99, "rocketmq_finish_message_latency", TP, "topic"), "{{topic}}")], unit="s"),
            16, 8)


# ---- variables and the dashboard ----------------------------------------------------------------


def query_var(name: str, label: str, query: str, multi: bool = True) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "query", "datasource": DS, "definition": query,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "refresh": 2, "sort": 1, "regex": "", "hide": 0, "multi": multi, "includeAll": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": []}


def dashboard() -> dict[str, Any]:
    lay = Layout()
    overview(lay)
    topics(lay)
    groups(lay)
    brokers(lay)
    ha(lay)
    timer_and_transactions(lay)
    variables = [
        {"name": "DS_PROMETHEUS", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "includeAll": False, "multi": False, "options": []},
        query_var("cluster", "Cluster", "label_values(rocketmq_broker_permission, cluster)"),
        query_var("node", "Broker set", 'label_values(rocketmq_broker_permission{cluster=~"$cluster"}, node_id)'),
        query_var("topic", "Topic",
                  'label_values(rocketmq_messages_in_total{cluster=~"$cluster", is_system="false"}, topic)'),
        query_var("consumer_group", "Consumer group",
                  'label_values(rocketmq_consumer_lag_messages{cluster=~"$cluster", is_system="false"}, '
                  "consumer_group)"),
    ]
    return {
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
            {"type": "panel", "id": "stat", "name": "Stat", "version": ""},
            {"type": "panel", "id": "state-timeline", "name": "State timeline", "version": ""},
        ],
        "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                                  "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                                  "name": "Annotations & Alerts", "type": "dashboard"}]},
        "description": "OrbitMQ (RocketMQ 5 compatible): brokers, proxies, consumer groups, HA and controllers, "
                       "from RocketMQ 5's metric names (docs/metrics.md).",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "links": [],
        "liveNow": False,
        "panels": lay.panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["orbitmq", "rocketmq"],
        "templating": {"list": variables},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "OrbitMQ",
        "uid": "orbitmq-cluster",
        "version": 1,
        "weekStart": "",
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
