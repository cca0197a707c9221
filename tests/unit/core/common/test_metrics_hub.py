"""orbitmq.common.metrics: the per-process hub, its HTTP endpoint, escaping and config checks;
the broker's message-type rule; a scrape during a broker's start-up and shutdown."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from orbitmq.broker.metrics.manager import message_type
from orbitmq.common import metrics as m
from tests.support.prom import get
from tests.support.services import broker_conf


def _config(**values) -> SimpleNamespace:
    base = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_host": "127.0.0.1",
            "metrics_prom_exporter_port": 0, "metrics_label": "", "metric_logging_exporter_interval_in_mills": 100}
    base.update(values)
    return SimpleNamespace(**base)


async def _get(url: str) -> tuple[int, str]:
    return await asyncio.to_thread(get, url)


def test_histo_buckets_are_cumulative_and_le_inclusive() -> None:
    h = m.Histo((1, 10))
    for v in (0.5, 1, 5, 10, 11):
        h.observe(v)
    assert h.buckets() == [("1.0", 2), ("10.0", 4), ("+Inf", 5)]
    assert h.sum == 27.5


def test_exporter_type_and_metrics_label_checks() -> None:
    assert m.exporter_type(_config(metrics_exporter_type="prom")) == "PROM"
    assert m.exporter_type(_config(metrics_exporter_type="2")) == "PROM"
    assert not m.metrics_enabled(_config(metrics_exporter_type="DISABLE"))
    with pytest.raises(ValueError, match="OTLP_GRPC is not supported"):
        m.exporter_type(_config(metrics_exporter_type="OTLP_GRPC"))
    with pytest.raises(ValueError, match="expected one of"):
        m.exporter_type(_config(metrics_exporter_type="STATSD"))
    assert m.parse_metrics_label("env:prod, zone : a") == {"env": "prod", "zone": "a"}
    with pytest.raises(ValueError):
        m.parse_metrics_label("novalue")
    with pytest.raises(ValueError):
        m.parse_metrics_label("bad-key:v")


def test_message_type_rule() -> None:
    assert message_type(None) == "normal"
    assert message_type({"TRAN_MSG": "true", "__SHARDINGKEY": "g"}) == "transaction"
    assert message_type({}, sys_flag=0x4) == "transaction"
    assert message_type({"__SHARDINGKEY": "g", "DELAY": "3"}) == "fifo"
    assert message_type({"DELAY": "3"}) == "delay"
    assert message_type({"TIMER_DELIVER_MS": "1"}) == "delay"
    assert message_type({"KEYS": "k"}) == "normal"


async def test_odd_label_values_are_escaped_and_sources_merge_by_name() -> None:
    hub = m.MetricsHub()
    odd = 'we"ird\\value\nnext line'

    def one():
        g = m.gauge("orbit_test_gauge", "help", ["who"])
        g.add_metric([odd], 1)
        return [g]

    def two():
        g = m.gauge("orbit_test_gauge", "help", ["who"])
        g.add_metric(["plain"], 2)
        return [g]

    def broken():
        raise RuntimeError("torn down")

    for source in (one, broken, two):
        hub.add_source(source)
    hub.add_readiness("x", lambda: True)
    cfg = _config()
    port = await hub.acquire(cfg)
    try:
        status, text = await _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert 'who="we\\"ird\\\\value\\nnext line"' in text  # escaped by prometheus_client
        assert text.count("# TYPE orbit_test_gauge gauge") == 1  # two sources, one family
        (family,) = [f for f in text_string_to_metric_families(text) if f.name == "orbit_test_gauge"]
        assert sorted((s.labels["who"], s.value) for s in family.samples) == sorted([(odd, 1.0), ("plain", 2.0)])
        assert await _get(f"http://127.0.0.1:{port}/ready") == (200, "ready\n")
        hub.add_readiness("y", lambda: "store recovering")
        status, body = await _get(f"http://127.0.0.1:{port}/ready")
        assert status == 503 and "y: store recovering" in body
    finally:
        await hub.release(cfg)
        await hub.release(cfg)  # a second release is a no-op
    assert hub.endpoints() == []


async def test_services_of_one_process_share_one_endpoint_and_remotes_merge() -> None:
    child = m.MetricsHub()

    def child_source():
        c = m.counter("orbit_child_total", "help", ["n"])
        c.add_metric(["c"], 7)
        return [c]

    child.add_source(child_source)
    child_cfg = _config()
    child_port = await child.acquire(child_cfg)
    parent = m.MetricsHub()
    first, second = _config(), _config()
    port = await parent.acquire(first)
    assert await parent.acquire(second) == port  # port 0 joins the endpoint already bound on the host
    parent.add_remote("127.0.0.1", child_port, "child")
    parent.add_remote("127.0.0.1", 1)  # nobody there: skipped, the scrape still answers
    try:
        status, text = await _get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and 'orbit_child_total{n="c",process="child"} 7.0' in text
        await parent.release(first)
        await parent.release(first)  # idempotent: does not take the second user's share
        assert (await _get(f"http://127.0.0.1:{port}/metrics"))[0] == 200  # still one user
    finally:
        await parent.release(second)
        await child.release(child_cfg)
    with pytest.raises(OSError):
        await _get(f"http://127.0.0.1:{port}/metrics")


async def test_log_exporter_logs_the_families(caplog: pytest.LogCaptureFixture) -> None:
    hub = m.MetricsHub()

    def source():
        g = m.gauge("orbit_logged", "help", [])
        g.add_metric([], 3)
        return [g]

    hub.add_source(source)
    cfg = _config(metrics_exporter_type="LOG")
    caplog.set_level("INFO", logger="orbitmq.metrics")
    assert await hub.acquire(cfg) is None
    try:
        for _ in range(50):
            if "orbit_logged 3.0" in caplog.text:
                break
            await asyncio.sleep(0.05)
        assert "orbit_logged 3.0" in caplog.text
    finally:
        await hub.release(cfg)


async def test_broker_scrape_answers_during_start_up_and_shutdown(tmp_path) -> None:
    from orbitmq.broker.config import BrokerConfig
    from orbitmq.broker.controller import BrokerController
    from orbitmq.broker.store.config import MessageStoreConfig
    from orbitmq.common.config import load_configs

    broker_cfg, store_cfg = load_configs(None, broker_conf(
        0, tmp_path / "store", brokerName="b-startup", brokerClusterName=None, mappedFileSizeCommitLog=4 * 1024 * 1024,
        metricsExporterType="PROM", metricsPromExporterPort=0), BrokerConfig, MessageStoreConfig)
    broker = BrokerController(broker_cfg, store_cfg, listen_host="127.0.0.1")
    statuses: list[int] = []
    stop = threading.Event()
    port_known = threading.Event()

    def scraper() -> None:
        port_known.wait(10)
        while not stop.is_set():
            try:
                statuses.append(get(f"http://127.0.0.1:{broker_cfg.metrics_prom_exporter_port}/metrics", 2)[0])
            except OSError:
                statuses.append(-1)  # not listening (before the bind, after the release)

    thread = threading.Thread(target=scraper, daemon=True)
    thread.start()
    # the endpoint comes first: /ready says 503 until the store is recovered
    await broker._start_metrics()
    port_known.set()
    status, body = await _get(f"http://127.0.0.1:{broker_cfg.metrics_prom_exporter_port}/ready")
    assert status == 503 and "store recovering" in body
    assert (await _get(f"http://127.0.0.1:{broker_cfg.metrics_prom_exporter_port}/metrics"))[0] == 200
    await broker._stop_metrics()
    await broker.start()
    assert (await _get(f"http://127.0.0.1:{broker_cfg.metrics_prom_exporter_port}/ready"))[0] == 200
    await asyncio.sleep(0.3)
    await broker.shutdown()
    stop.set()
    thread.join(10)
    answered = [s for s in statuses if s != -1]
    assert answered and set(answered) == {200}, statuses


async def test_the_default_port_falls_back_only_when_orbitmq_local_chose_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """`orbitmq local` checks 5557 is free and then binds it; another process can take it in
    between. Only then (fall_back_from_default_port) does the exporter take a free port."""
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    monkeypatch.setattr(m, "DEFAULT_PROM_PORT", taken)
    monkeypatch.setattr(m, "_default_port_fallback", False)
    try:
        with pytest.raises(OSError):
            await m.MetricsHub().acquire(_config(metrics_prom_exporter_port=taken))
        m.fall_back_from_default_port()
        hub, config = m.MetricsHub(), _config(metrics_prom_exporter_port=taken)
        port = await hub.acquire(config)
        assert port not in (taken, 0) and config.metrics_prom_exporter_port == port
        assert (await _get(f"http://127.0.0.1:{port}/metrics"))[0] == 200
        await hub.release(config)
        other = socket.socket()  # a port that is not the default: still refused loudly
        other.bind(("127.0.0.1", 0))
        other.listen()
        try:
            with pytest.raises(OSError):
                await m.MetricsHub().acquire(_config(metrics_prom_exporter_port=other.getsockname()[1]))
        finally:
            other.close()
    finally:
        holder.close()
