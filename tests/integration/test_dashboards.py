"""The Grafana dashboard (deploy/grafana/) and the PrometheusRule alerts (deploy/k8s/components/
monitoring/) query only what a running cluster exports.

A controller-mode cluster (`orbitmq local --ha`: NameServer, proxy, three controllers, a broker set
of three replicas, one merged /metrics endpoint) is driven through the official Python client
and raw gRPC: sends, receives, acks, a retry and a DLQ move, a forward to the DLQ, a timer
message, a committed, a rolled back and an open transaction, a few unconsumed messages (lag).
Every panel target, template variable query and alert expression is then parsed with a small
PromQL tokenizer: each metric it names must be in the union of the scrapes, each label it
matches or groups by must be on that metric (or be a label Prometheus adds to a target), and its
selector, with template variables as match-all and negative matchers dropped, must select at
least one series. The JSON's structure is checked too (unique ids, grid, data source references,
variables defined), and that it is what deploy/grafana/build_dashboard.py generates.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, unique
from tests.support import free_port, running
from tests.support.prom import Scrape, scrape, wait_ready

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "orbitmq.json"
RULES = ROOT / "deploy" / "k8s" / "components" / "monitoring" / "prometheusrule.yaml"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

# Labels Prometheus (or the Prometheus Operator's ServiceMonitor) attaches to every scraped series.
TARGET_LABELS = {"instance", "job", "pod", "namespace", "service", "container", "endpoint"}
# `orbitmq local` adds `process` when it merges its children's endpoints; a deployment has none.
LOCAL_ONLY_LABELS = {"process"}
# Metrics of other exporters the alerts use (the kubelet's volume statistics).
EXTERNAL_METRICS = frozenset({"kubelet_volume_stats_used_bytes", "kubelet_volume_stats_capacity_bytes"})
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
                    "__from", "__to", "__dashboard", "__org", "__user", "__name", "timeFilter", "__all"}
# Exported metric families deliberately without a panel (none so far).
NOT_ON_DASHBOARD: set[str] = set()
PANEL_TYPES = {"row", "timeseries", "stat", "state-timeline", "gauge", "bargauge", "table", "text"}


# ---- a small PromQL tokenizer -------------------------------------------------------------------

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
            "offset", "inf", "nan", "start", "end"}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
AGGREGATORS = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
               "count_values", "group", "limitk", "limit_ratio"}
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


@dataclass
class Selector:
    metric: str
    matchers: list[tuple[str, str, str]] = field(default_factory=list)  # (label, op, value)


@dataclass
class Grouping:
    keyword: str
    labels: list[str]
    scope: str  # the sub-expression whose series the labels must come from


@dataclass
class Parsed:
    selectors: list[Selector]
    groupings: list[Grouping]


def _skip_string(expr: str, i: int) -> int:
    quote = expr[i]
    i += 1
    while i < len(expr) and expr[i] != quote:
        i += 2 if expr[i] == "\\" else 1
    return i + 1


def _balanced(expr: str, i: int, open_: str = "(", close: str = ")") -> int:
    """Index just past the bracket closing the one at ``i``."""
    depth = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {open_} in {expr!r}")


def _matchers(body: str) -> list[tuple[str, str, str]]:
    out = []
    pos = 0
    body = body.strip()
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        assert m, f"cannot parse matchers {body!r} at {pos}"
        out.append((m.group(1), m.group(2), m.group(3)))
        pos = m.end()
    return out


def _skip_ws(expr: str, i: int) -> int:
    while i < len(expr) and expr[i].isspace():
        i += 1
    return i


def parse_promql(expr: str) -> Parsed:
    """Metric selectors (identifiers not followed by '(' that are neither keywords nor inside a
    label list or matcher) and the label lists of by/without/on/ignoring/group_* with their scope."""
    selectors: list[Selector] = []
    groupings: list[Grouping] = []
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
        elif c == "[":
            i = _balanced(expr, i, "[", "]")  # a range or subquery duration, e.g. [$__rate_interval]
        elif c == "{":  # a selector without a metric name
            end = _balanced(expr, i, "{", "}")
            selectors.append(Selector("", _matchers(expr[i + 1:end - 1])))
            i = end
        elif c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            while i < n and (expr[i].isalnum() or expr[i] in "._"):
                i += 1  # numbers and durations: 0.99, 1e3, 5m
        elif c == "$":
            i += 1
            if i < n and expr[i] == "{":
                i = _balanced(expr, i, "{", "}")
            else:
                while i < n and (expr[i].isalnum() or expr[i] == "_"):
                    i += 1
        elif _IDENT.match(c):
            ident = _IDENT.match(expr, i).group(0)
            start, i = i, i + len(ident)
            j = _skip_ws(expr, i)
            follows_paren = j < n and expr[j] == "("
            next_word = _IDENT.match(expr, j) if j < n else None
            if ident in AGGREGATORS and next_word and next_word.group(0) in ("by", "without"):
                follows_paren = True  # sum by (x) (...)
            if ident in LABEL_LIST_KEYWORDS:
                if follows_paren:
                    end = _balanced(expr, j)
                    labels = [x.strip() for x in expr[j + 1:end - 1].split(",") if x.strip()]
                    groupings.append(Grouping(ident, labels, _scope(expr, ident, start, end)))
                    i = end
            elif ident in KEYWORDS or follows_paren:
                pass  # a keyword, or a function / aggregation name
            else:
                selector = Selector(ident)
                if j < n and expr[j] == "{":
                    end = _balanced(expr, j, "{", "}")
                    selector.matchers = _matchers(expr[j + 1:end - 1])
                    i = end
                selectors.append(selector)
        else:
            i += 1
    return Parsed(selectors, groupings)


def _scope(expr: str, keyword: str, start: int, end: int) -> str:
    """The aggregation argument a by/without list applies to (before or after it); the whole
    expression for vector matching (on, ignoring, group_*)."""
    if keyword not in ("by", "without"):
        return expr
    j = _skip_ws(expr, end)
    if j < len(expr) and expr[j] == "(":  # sum by (x) (expr)
        return expr[j:_balanced(expr, j)]
    k = start - 1  # sum (expr) by (x)
    while k >= 0 and expr[k].isspace():
        k -= 1
    assert k >= 0 and expr[k] == ")", f"no aggregation argument for {keyword} in {expr!r}"
    depth = 0
    while k >= 0:
        if expr[k] == ")":
            depth += 1
        elif expr[k] == "(":
            depth -= 1
            if depth == 0:
                return expr[k:start].rstrip()
        k -= 1
    raise AssertionError(f"unbalanced parentheses in {expr!r}")


def test_promql_tokenizer() -> None:
    p = parse_promql('histogram_quantile(0.99, sum by (le, method) (rate(x_bucket{cluster=~"$cluster", '
                     'code!~"OK|A\\"B"}[$__rate_interval]))) / on (cluster) group_left y offset 5m > 1e3')
    assert [s.metric for s in p.selectors] == ["x_bucket", "y"]
    assert p.selectors[0].matchers == [("cluster", "=~", "$cluster"), ("code", "!~", 'OK|A\\"B')]
    assert [(g.keyword, g.labels) for g in p.groupings] == [("by", ["le", "method"]), ("on", ["cluster"])]
    assert p.groupings[0].scope.startswith("(rate(x_bucket")
    p = parse_promql("sum(rate(a_total[5m])) by (topic) and absent(b == bool 1) unless sum without (x) (c{})")
    assert [s.metric for s in p.selectors] == ["a_total", "b", "c"]
    assert p.groupings[0].scope == "(rate(a_total[5m]))" and p.groupings[1].scope == "(c{})"


# ---- what the scrapes hold -------------------------------------------------------------------------


class Exported:
    """The union of scrapes: sample name -> label sets."""

    def __init__(self) -> None:
        self.series: dict[str, set[tuple[tuple[str, str], ...]]] = {}

    def add(self, s: Scrape) -> None:
        for family in s.families.values():
            for sample in family.samples:
                self.series.setdefault(sample.name, set()).add(tuple(sorted(sample.labels.items())))

    def labels(self, metric: str) -> set[str]:
        return {k for labels in self.series.get(metric, ()) for k, _ in labels}

    def selects(self, sel: Selector) -> bool:
        """Whether some series matches the selector's positive matchers ($variables match all)."""
        checks = []
        for label, op, value in sel.matchers:
            if op in ("!=", "!~") or label in TARGET_LABELS:
                continue
            pattern = ".*" if "$" in value else (value if op == "=~" else re.escape(value))
            checks.append((label, re.compile(pattern)))
        for labels in self.series.get(sel.metric, ()):
            d = dict(labels)
            if all(rx.fullmatch(d.get(label, "")) for label, rx in checks):
                return True
        return False


def check_expr(expr: str, exported: Exported, where: str, legend: str = "",
               external: frozenset[str] = frozenset()) -> list[str]:
    """Problems of one expression: unknown metrics, labels not on their metric, selectors that
    select nothing, groupings and legends naming labels the series cannot have. ``external``:
    metrics of other exporters, taken as they are."""
    problems: list[str] = []
    parsed = parse_promql(expr)
    if not parsed.selectors:
        problems.append(f"{where}: no metric in {expr!r}")
    allowed_everywhere = TARGET_LABELS | {"__name__"}
    for sel in parsed.selectors:
        if sel.metric in external:
            continue
        if not sel.metric:
            problems.append(f"{where}: a selector without a metric name in {expr!r}")
            continue
        if sel.metric not in exported.series:
            problems.append(f"{where}: {sel.metric} is exported by nothing")
            continue
        have = exported.labels(sel.metric) - LOCAL_ONLY_LABELS
        for label, _op, _value in sel.matchers:
            if label not in have | allowed_everywhere:
                problems.append(f"{where}: {sel.metric} has no label {label} (it has {sorted(have)})")
        if not exported.selects(sel):
            problems.append(f"{where}: {sel.metric}{{{sel.matchers}}} selects no series of the scrape")
    for grouping in parsed.groupings:
        inner = parse_promql(grouping.scope).selectors
        if any(s.metric in external for s in inner):
            continue
        have = set().union(*(exported.labels(s.metric) for s in inner)) - LOCAL_ONLY_LABELS if inner else set()
        for label in grouping.labels:
            if label not in have | allowed_everywhere:
                problems.append(f"{where}: {grouping.keyword} ({label}) but no series of {grouping.scope!r} has it")
    legend_labels = re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", legend)
    if legend_labels:
        by_labels = {x for g in parsed.groupings if g.keyword == "by" for x in g.labels}
        metric_labels = set().union(*(exported.labels(s.metric) for s in parsed.selectors)) - LOCAL_ONLY_LABELS
        possible = by_labels if by_labels else metric_labels | TARGET_LABELS
        for label in legend_labels:
            if label not in possible:
                problems.append(f"{where}: legend {{{{{label}}}}} is not a label of the result of {expr!r}")
    return problems


# ---- the dashboard's structure (no cluster needed) -------------------------------------------------


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _panels(dashboard: dict) -> Iterator[dict]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def _targets(dashboard: dict) -> Iterator[tuple[str, dict]]:
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['id']} {panel['title']!r} target {target['refId']}", target


def _variable_queries(dashboard: dict) -> Iterator[tuple[str, str, str]]:
    """(variable, label_values selector, label) of every query variable."""
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query)
        assert m, f"variable {var['name']}: not a label_values query: {query!r}"
        yield var["name"], m.group(1), m.group(2)


def _rule_exprs() -> Iterator[tuple[str, str]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert doc["kind"] == "PrometheusRule"
    for group in doc["spec"]["groups"]:
        for rule in group["rules"]:
            yield f"rule {rule.get('alert') or rule.get('record')}", rule["expr"]


def test_dashboard_is_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("build_dashboard", GRAFANA / "build_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text(encoding="utf-8") == module.render(), \
        "deploy/grafana/orbitmq.json is stale: run .venv/bin/python deploy/grafana/build_dashboard.py"


def test_dashboard_structure() -> None:
    d = _dashboard()
    assert d["schemaVersion"] >= 38 and d["uid"] and d["title"]  # Grafana 10+
    assert d["templating"]["list"][0] == {**d["templating"]["list"][0], "name": "DS_PROMETHEUS",
                                          "type": "datasource", "query": "prometheus"}
    names = [v["name"] for v in d["templating"]["list"]]
    assert len(names) == len(set(names))
    assert {"cluster", "node", "topic", "consumer_group"} <= set(names)
    panels = list(_panels(d))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: dict[tuple[int, int], int] = {}
    rows = [p for p in d["panels"] if p["type"] == "row"]
    assert len(rows) >= 6
    for p in panels:
        assert p["type"] in PANEL_TYPES, p["type"]
        g = p["gridPos"]
        assert all(isinstance(g[k], int) and g[k] >= 0 for k in ("x", "y", "w", "h")), p
        assert g["w"] >= 1 and g["h"] >= 1 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"panel {p['id']} overlaps panel {cells[(x, y)]}"
                cells[(x, y)] = p["id"]
        if p["type"] == "row":
            continue
        assert p["title"] and p["datasource"] == DATASOURCE, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DATASOURCE and t["expr"].strip(), (p["title"], t)
    # every variable a query, legend or title uses is defined (or one of Grafana's)
    text = json.dumps([p for p in panels] + [v for v in d["templating"]["list"]])
    used = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text)) | set(re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", text))
    assert used - set(names) - GRAFANA_BUILTINS == set()
    for var in d["templating"]["list"][1:]:
        assert var["datasource"] == DATASOURCE
    # the file provider and the README exist
    provisioning = yaml.safe_load((GRAFANA / "provisioning" / "dashboards.yaml").read_text(encoding="utf-8"))
    assert provisioning["apiVersion"] == 1
    (provider,) = provisioning["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]
    assert "orbitmq.json" in (GRAFANA / "README.md").read_text(encoding="utf-8")


def test_every_dashboard_and_rule_expression_parses() -> None:
    d = _dashboard()
    count = 0
    for where, target in _targets(d):
        assert parse_promql(target["expr"]).selectors, where
        count += 1
    for where, expr in _rule_exprs():
        assert parse_promql(expr).selectors, where
    assert count >= 60


# ---- a live controller-mode cluster --------------------------------------------------------------


class _Checker(TransactionChecker):
    def check(self, message: Message) -> TransactionResolution:
        return TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED  # the open one stays open


def _message(topic: str, body: bytes, delivery_timestamp: int | None = None) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    if delivery_timestamp is not None:
        msg.delivery_timestamp = delivery_timestamp
    return msg


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def _drive(cluster: Cluster, endpoint: str, exported: Exported) -> None:
    """Sends, receives, acks, a retry and a DLQ move, a forward to the DLQ, a timer message,
    transactions, lag; scrapes while the clients are connected."""
    topic = cluster.create_topic(unique("DashT"), queues=2)
    timer_topic = cluster.create_topic(unique("DashTimer"), queues=1, message_type="DELAY")
    tx_topic = cluster.create_topic(unique("DashTx"), queues=1, message_type="TRANSACTION")
    group = cluster.create_group(unique("DashG"), retry_max_times=1, retry_next_ms=[1000, 1000])
    fwd_group = cluster.create_group(unique("DashFwd"))
    timer_group = cluster.create_group(unique("DashTimerG"))

    config = ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10)
    producer = Producer(config, (topic, timer_topic))
    tx_producer = Producer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=10), (tx_topic,),
                           _Checker())
    consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5), group,
                              {topic: FilterExpression()}, await_duration=1)
    timer_consumer = SimpleConsumer(ClientConfiguration(cluster.proxy, Credentials(), request_timeout=5),
                                    timer_group, {timer_topic: FilterExpression()}, await_duration=1)
    started = []
    try:
        for client in (producer, tx_producer, consumer, timer_consumer):
            client.startup()
            started.append(client)
        due = int(time.time()) + 2  # the Python client sends delivery_timestamp in seconds
        timer_id = producer.send(_message(timer_topic, b"timer", due)).message_id
        for i in range(6):
            producer.send(_message(topic, f"m{i}".encode() * 100))
        poison = producer.send(_message(topic, b"poison")).message_id

        # transactions: one committed, one rolled back, one left open (a half message)
        committed = tx_producer.begin_transaction()
        tx_producer.send(_message(tx_topic, b"commit"), committed)
        rolled = tx_producer.begin_transaction()
        tx_producer.send(_message(tx_topic, b"rollback"), rolled)
        tx_producer.send(_message(tx_topic, b"open"), tx_producer.begin_transaction())
        committed.commit()
        rolled.rollback()

        # receive and ack all but the poison message, which is retried once and dead-lettered
        acked = 0
        deliveries = 0

        def consumed() -> bool:
            nonlocal acked, deliveries
            for m in consumer.receive(32, 1):
                if m.message_id == poison:
                    deliveries += 1
                else:
                    consumer.ack(m)
                    acked += 1
            return acked >= 6 and deliveries >= 2

        _wait(consumed, 30, "six acks, the poison message delivered twice")

        # a client forwarding a message to the DLQ itself (ForwardMessageToDeadLetterQueue)
        channel, stub = cluster.stub()
        with channel:
            producer.send(_message(topic, b"forward-me"))
            got: list[pb.Message] = []
            deadline = time.monotonic() + 15
            while not got and time.monotonic() < deadline:
                _, got, _ = rawgrpc.receive(stub, topic, fwd_group, batch=32, polling_ms=1000)
            assert got
            m = got[0]
            response = stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
                group=pb.Resource(name=fwd_group), topic=pb.Resource(name=topic),
                receipt_handle=m.system_properties.receipt_handle, message_id=m.system_properties.message_id,
                delivery_attempt=1, max_delivery_attempts=1), metadata=rawgrpc.metadata(), timeout=10)
            assert response.status.code == pb.Code.OK, response
            rawgrpc.ack(stub, topic, fwd_group, *got[1:])

        timer_got = _wait(lambda: timer_consumer.receive(16, 5), 15, "the timer message")
        assert [x.message_id for x in timer_got] == [timer_id]
        timer_consumer.ack(timer_got[0])
        for i in range(3):
            producer.send(_message(topic, f"late{i}".encode()))  # never consumed: lag

        def dead_lettered() -> bool:
            s = scrape(endpoint)
            exported.add(s)
            return s.total("rocketmq_send_to_dlq_messages_total", consumer_group=group) >= 1 and \
                s.total("rocketmq_consumer_connections", consumer_group=group) >= 1

        _wait(dead_lettered, 20, "the DLQ move and the consumer connection on the brokers")
    finally:
        for client in started:
            client.shutdown()


@dataclass
class Live:
    exported: Exported
    endpoint: str


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    workdir = tmp_path_factory.mktemp("dashboards")
    with running(workdir) as runner:
        controller_ports = [free_port() for _ in range(3)]
        raft_ports = [free_port() for _ in range(3)]
        broker_ports = [free_port() for _ in range(3)]
        namesrv_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
        proc = runner.start("local", [
            "--ha", "--data-dir", str(workdir / "data"), "--namesrv-port", str(namesrv_port),
            "--proxy-port", str(proxy_port), "--controller-ports", ",".join(map(str, controller_ports)),
            "--raft-ports", ",".join(map(str, raft_ports)), "--broker-ports", ",".join(map(str, broker_ports)),
            f"metricsPromExporterPort={metrics_port}", "minInvisibleTimeMillsForRecv=1000",
            "grpcClientConsumerMinLongPollingTimeoutMillis=1000", "grpcClientConsumerMaxLongPollingTimeoutMillis=3000"],
            ready_text="Press Ctrl-C", ready_port=proxy_port, timeout=90, name="local-ha")
        endpoint = f"127.0.0.1:{metrics_port}"
        wait_ready(endpoint)
        master = re.search(r"Broker master: (\S+)", proc.log_text()).group(1)
        cluster = Cluster(runner, f"127.0.0.1:{namesrv_port}", master, [f"127.0.0.1:{proxy_port}"])
        exported = Exported()
        exported.add(scrape(endpoint))
        _drive(cluster, endpoint, exported)
        yield Live(exported, endpoint)


def _settle(live: Live, exprs: list[tuple[str, str, str]], external: frozenset[str] = frozenset()) -> list[str]:
    """Problems left once gauges that lag behind (timer, half messages) had a few scrapes to show."""
    deadline = time.monotonic() + 15
    while True:
        problems = [p for where, expr, legend in exprs
                    for p in check_expr(expr, live.exported, where, legend, external)]
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.5)
        live.exported.add(scrape(live.endpoint))


def test_every_dashboard_query_is_exported(live: Live) -> None:
    d = _dashboard()
    exprs = [(where, t["expr"], t.get("legendFormat", "")) for where, t in _targets(d)]
    exprs += [(f"variable {name}", selector, "") for name, selector, _ in _variable_queries(d)]
    assert _settle(live, exprs) == []
    for name, selector, label in _variable_queries(d):
        (sel,) = parse_promql(selector).selectors
        assert label in live.exported.labels(sel.metric), (name, label)


def test_every_exported_metric_has_a_panel(live: Live) -> None:
    """The other way round: a metric family added to the code gets a panel (build_dashboard.py)
    or is named in NOT_ON_DASHBOARD with the reason."""
    queried = {s.metric for _, t in _targets(_dashboard()) for s in parse_promql(t["expr"]).selectors}
    families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in live.exported.series}
    queried_families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in queried}
    assert families - queried_families - NOT_ON_DASHBOARD == set()


def test_every_alert_rule_query_is_exported(live: Live) -> None:
    exprs = [(where, expr, "") for where, expr in _rule_exprs()]
    assert _settle(live, exprs, EXTERNAL_METRICS) == []


def test_the_checks_catch_a_panel_pointing_at_nothing(live: Live) -> None:
    e = live.exported
    assert check_expr("rate(rocketmq_no_such_metric_total[5m])", e, "x")
    assert check_expr('sum by (nope) (rocketmq_messages_in_total{cluster=~"$cluster"})', e, "x")
    assert check_expr('rocketmq_messages_in_total{consumer_group="g"}', e, "x")  # not a label of it
    assert check_expr('rocketmq_messages_in_total{message_type="no-such-type"}', e, "x")  # selects nothing
    assert check_expr("rocketmq_messages_in_total", e, "x", legend="{{process}}")  # local-only label
    assert check_expr("sum by (topic) (rocketmq_messages_in_total)", e, "x", legend="{{node_id}}")
    assert check_expr("kubelet_volume_stats_used_bytes", e, "x")  # only the alerts may use the kubelet's
    assert check_expr("rocketmq_messages_in_total", e, "x") == []
    assert check_expr("sum by (pod) (rocketmq_proxy_up)", e, "x", legend="{{pod}}") == []
