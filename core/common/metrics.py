"""Prometheus metrics of every OrbitMQ process: one hub per process, one HTTP endpoint per address.

Why a hub: ``orbitmq local`` runs a NameServer, a broker and a proxy (tests even several
brokers) on one event loop and must serve ONE endpoint for all of them. Each service adds
*sources* (callables yielding prometheus_client metric families, evaluated at scrape time) and
*readiness checks* to the process hub; the exporter merges families of the same name from every
source (two brokers in one process both export ``rocketmq_messages_in_total``), and can add the
families of other processes' endpoints (``add_remote``: the broker child of ``orbitmq local``).

Hot paths never touch prometheus_client: services bump plain ints in their own objects (one
dict lookup and a few additions, on the event loop, no lock) and the families are built from
them when Prometheus scrapes. prometheus_client renders the text format, so label values are
escaped by it.

The HTTP server is asyncio (``asyncio.start_server``) on the service's own loop: the sources
read service state that only the loop mutates, so a scrape never races a put. Paths:
``/metrics`` (also ``/``), ``/ready`` (200 when every readiness check passes, else 503 with the
reasons) and ``/live`` (200 while the process serves at all).

Config keys (RocketMQ's names, on broker, proxy, controller and NameServer configs):
``metricsExporterType`` (DISABLE, PROM or LOG; OTLP_GRPC is refused: no OTLP exporter here),
``metricsPromExporterHost``, ``metricsPromExporterPort`` (5557), ``metricsLabel`` (``k1:v1,k2:v2``,
extra constant labels) and ``metricLoggingExporterIntervalInMills`` (LOG: how often the families
are logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import sys
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import prometheus_client
from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger("orbitmq.metrics")

# Counters are exported without the ``_created`` companion series RocketMQ's exporter never had.
prometheus_client.disable_created_metrics()

EXPORTER_TYPES = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")  # MetricsExporterType, in ordinal order
DEFAULT_PROM_PORT = 5557
REMOTE_SCRAPE_TIMEOUT_SECONDS = 2.0
HTTP_HEADER_TIMEOUT_SECONDS = 5.0

Source = Callable[[], Iterable[Metric]]
Readiness = Callable[[], "bool | str"]

# Set by `orbitmq local` when it chose DEFAULT_PROM_PORT itself (nobody asked for it): if another
# process binds the port between its check and this process's bind, a free port is taken instead.
_default_port_fallback = False


def fall_back_from_default_port() -> None:
    """Let an exporter on DEFAULT_PROM_PORT take a free port when that one is taken."""
    global _default_port_fallback
    _default_port_fallback = True


# ---- config -------------------------------------------------------------------------------------


def exporter_type(config: Any) -> str:
    """metricsExporterType, upper-cased and checked; OTLP_GRPC is refused rather than ignored."""
    kind = str(getattr(config, "metrics_exporter_type", "DISABLE") or "DISABLE").strip().upper()
    if kind.isdigit() and int(kind) < len(EXPORTER_TYPES):
        kind = EXPORTER_TYPES[int(kind)]
    if kind not in EXPORTER_TYPES:
        raise ValueError(f"metricsExporterType={kind}: expected one of {', '.join(EXPORTER_TYPES)}")
    if kind == "OTLP_GRPC":
        raise ValueError("metricsExporterType=OTLP_GRPC is not supported by OrbitMQ; use PROM (or LOG)")
    return kind


def metrics_enabled(config: Any) -> bool:
    return exporter_type(config) != "DISABLE"


def parse_metrics_label(text: str) -> dict[str, str]:
    """metricsLabel ``k1:v1,k2:v2`` -> {k1: v1, k2: v2}; a malformed pair is refused."""
    labels: dict[str, str] = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        key, sep, value = pair.partition(":")
        key = key.strip()
        if not sep or not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ValueError(f"metricsLabel: bad pair {pair!r} (expected key:value)")
        labels[key] = value.strip()
    return labels


# ---- cheap hot-path instruments --------------------------------------------------------------


class Histo:
    """Bucket counts of one label set; ``observe`` is a bisect and two additions (no lock: the
    event loop is the only writer, a scrape reads a consistent snapshot on the same loop)."""

    __slots__ = ("bounds", "counts", "total", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += 1
        self.sum += value

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative (le, count) pairs in the text format's order, +Inf last."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            out.append((_fmt_bound(bound), running))
        out.append(("+Inf", self.total))
        return out


def _fmt_bound(bound: float) -> str:
    return str(float(bound))


def counter(name: str, doc: str, labels: Sequence[str]) -> Metric:
    """An empty counter family; ``name`` without ``_total`` (prometheus_client adds it back)."""
    return prometheus_client.core.CounterMetricFamily(name.removesuffix("_total"), doc, labels=list(labels))


def gauge(name: str, doc: str, labels: Sequence[str]) -> Metric:
    return prometheus_client.core.GaugeMetricFamily(name, doc, labels=list(labels))


def histogram(name: str, doc: str, labels: Sequence[str]) -> Metric:
    return prometheus_client.core.HistogramMetricFamily(name, doc, labels=list(labels))


def add_histo(family: Metric, values: Sequence[str], histo: Histo) -> None:
    family.add_metric(list(values), histo.buckets(), histo.sum)


# ---- the hub --------------------------------------------------------------------------------------


class MetricsHub:
    """Sources, readiness checks and remote endpoints of one process, merged at scrape time."""

    def __init__(self) -> None:
        self._sources: list[Source] = []
        self._readiness: dict[str, Readiness] = {}
        self._remotes: list[tuple[str, int, str]] = []
        self._servers: dict[tuple[str, int], _Exporter] = {}
        # id(config) -> the exporter it acquired, so a second release (shutdown after a failed
        # start) cannot take another service's share of a shared endpoint
        self._held: dict[int, _Exporter] = {}
        self._loggers: dict[int, asyncio.Task[None]] = {}

    # -- registration -----------------------------------------------------------------------

    def add_source(self, source: Source) -> None:
        self._sources.append(source)

    def remove_source(self, source: Source) -> None:
        with contextlib.suppress(ValueError):
            self._sources.remove(source)

    def add_readiness(self, name: str, check: Readiness) -> None:
        """``check()`` returns True when ready, else False or a reason shown by /ready."""
        self._readiness[name] = check

    def remove_readiness(self, name: str) -> None:
        self._readiness.pop(name, None)

    def add_remote(self, host: str, port: int, name: str = "") -> None:
        """Merge another process's /metrics into this endpoint (``orbitmq local``'s children).

        Its samples get the label ``process=<name>``: replicas of one broker set share cluster,
        node_type and node_id (brokerName), as upstream, where each is its own scrape target."""
        self._remotes.append((host, port, name or f"{host}:{port}"))

    def remove_remote(self, host: str, port: int) -> None:
        self._remotes = [r for r in self._remotes if (r[0], r[1]) != (host, port)]

    # -- reading ----------------------------------------------------------------------------

    def collect_local(self) -> list[Metric]:
        """Families of this process's sources; a failing source (mid start-up or shutdown) is
        skipped, so the scrape still answers."""
        families: list[Metric] = []
        for source in list(self._sources):
            try:
                families.extend(source())
            except Exception:
                log.debug("metrics source %r failed", source, exc_info=True)
        return families

    async def collect(self) -> list[Metric]:
        families = self.collect_local()
        if self._remotes:
            remotes = list(self._remotes)
            texts = await asyncio.gather(*(self._scrape_remote(h, p) for h, p, _ in remotes))
            for (_h, _p, name), text in zip(remotes, texts, strict=True):
                if text:
                    try:
                        families.extend(_labelled(f, name) for f in text_string_to_metric_families(text))
                    except Exception:
                        log.debug("unparsable remote metrics", exc_info=True)
        return merge_families(families)

    async def render(self) -> bytes:
        return generate_latest(_Families(await self.collect()))

    def readiness(self) -> tuple[bool, list[str]]:
        """(all ready, reasons of those that are not)."""
        reasons: list[str] = []
        for name, check in list(self._readiness.items()):
            try:
                verdict = check()
            except Exception as exc:
                verdict = f"{type(exc).__name__}: {exc}"
            if verdict is not True:
                reasons.append(f"{name}: {verdict if isinstance(verdict, str) else 'not ready'}")
        return not reasons and bool(self._readiness), reasons

    @staticmethod
    async def _scrape_remote(host: str, port: int) -> str:
        try:
            async with asyncio.timeout(REMOTE_SCRAPE_TIMEOUT_SECONDS):
                reader, writer = await asyncio.open_connection(host, port)
                try:
                    writer.write(f"GET /metrics HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
                    await writer.drain()
                    raw = await reader.read()
                finally:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()
        except (OSError, TimeoutError):
            return ""  # the child is starting or gone: its families are simply absent
        head, _, body = raw.partition(b"\r\n\r\n")
        return body.decode("utf-8", "replace") if head.startswith(b"HTTP/1.") and b" 200 " in head[:16] else ""

    # -- exporters ----------------------------------------------------------------------------

    async def acquire(self, config: Any, default_host: str = "0.0.0.0") -> int | None:
        """Start what ``config`` asks for (PROM: the HTTP endpoint, shared by every service of
        the process asking for the same address; LOG: a periodic log). Returns the PROM port."""
        kind = exporter_type(config)
        if kind == "LOG":
            interval = max(int(getattr(config, "metric_logging_exporter_interval_in_mills", 10_000)), 100) / 1000
            self._loggers[id(config)] = asyncio.create_task(self._log_loop(interval), name="MetricsLogExporter")
            return None
        if kind != "PROM":
            return None
        host = getattr(config, "metrics_prom_exporter_host", "") or default_host
        port = int(getattr(config, "metrics_prom_exporter_port", DEFAULT_PROM_PORT))
        key = (host, port)
        exporter = self._servers.get(key)
        if exporter is None and port == 0:
            # An ephemeral port: reuse any endpoint of this process already bound on the host.
            exporter = next((e for (h, _), e in self._servers.items() if h == host), None)
        if exporter is None:
            exporter = _Exporter(self, host, port)
            await exporter.start()
            self._servers[(host, exporter.port)] = exporter
            if port != exporter.port:
                self._servers[key] = exporter
            log.info("metrics endpoint http://%s:%d/metrics", host, exporter.port)
        if id(config) not in self._held:
            exporter.users += 1
            self._held[id(config)] = exporter
        if hasattr(config, "metrics_prom_exporter_port"):
            config.metrics_prom_exporter_port = exporter.port  # the port a 0 resolved to
        return exporter.port

    async def attach(self, config: Any, readiness_name: str, readiness: Readiness, source: Source | None = None,
                     default_host: str = "0.0.0.0") -> None:
        """A service's whole metrics start: its families, its readiness check, its exporter.
        ``detach`` undoes it; a failed exporter start undoes it at once."""
        if source is not None:
            self.add_source(source)
        self.add_readiness(readiness_name, readiness)
        try:
            await self.acquire(config, default_host=default_host)
        except BaseException:
            self.remove_readiness(readiness_name)
            if source is not None:
                self.remove_source(source)
            raise

    async def detach(self, config: Any, readiness_name: str, source: Source | None = None) -> None:
        """Undo ``attach``; never raises (a service stopping must reach its other steps)."""
        self.remove_readiness(readiness_name)
        if source is not None:
            self.remove_source(source)
        try:
            await self.release(config)
        except Exception:
            log.exception("stopping the metrics endpoint failed")

    async def release(self, config: Any) -> None:
        """Undo ``acquire(config)``; a no-op for a config that holds nothing."""
        task = self._loggers.pop(id(config), None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        exporter = self._held.pop(id(config), None)
        if exporter is None:
            return
        exporter.users -= 1
        if exporter.users <= 0:
            for key in [k for k, e in self._servers.items() if e is exporter]:
                del self._servers[key]
            await exporter.close()

    def endpoints(self) -> list[str]:
        return sorted({f"http://{e.host}:{e.port}/metrics" for e in self._servers.values()})

    async def _log_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                log.info("metrics:\n%s", (await self.render()).decode("utf-8", "replace"))
            except Exception:
                log.exception("metrics logging failed")


def _labelled(family: Metric, process: str) -> Metric:
    family.samples = [s._replace(labels={**s.labels, "process": process}) for s in family.samples]
    return family


class _Families:
    """What generate_latest needs of a registry: ``collect()``."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def merge_families(families: Iterable[Metric]) -> list[Metric]:
    """One family per name (first type and help win), samples of all sources in order."""
    merged: dict[str, Metric] = {}
    for family in families:
        into = merged.get(family.name)
        if into is None:
            copy = Metric(family.name, family.documentation, family.type, family.unit)
            copy.samples = list(family.samples)
            merged[family.name] = copy
        elif into.type == family.type:
            into.samples.extend(family.samples)
    return list(merged.values())


class _Exporter:
    """A tiny HTTP/1.x server on the event loop: GET /metrics, /ready, /live; one request per
    connection (Prometheus and probes open a connection per scrape anyway)."""

    def __init__(self, hub: MetricsHub, host: str, port: int) -> None:
        self.hub = hub
        self.host = host
        self.port = port
        self.users = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or self.port != DEFAULT_PROM_PORT or not _default_port_fallback:
                raise
            print(f"orbitmq local: port {DEFAULT_PROM_PORT} is in use, metrics go to a free port", file=sys.stderr)
            self._server = await asyncio.start_server(self._serve, self.host, 0, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._handlers):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            try:
                async with asyncio.timeout(HTTP_HEADER_TIMEOUT_SECONDS):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
                return
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1", "replace").split()
            method = request_line[0] if request_line else ""
            path = request_line[1].split("?", 1)[0] if len(request_line) > 1 else "/"
            status, ctype, body = await self._respond(method, path)
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         "Connection: close\r\n\r\n".encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._handlers.discard(task)
            writer.close()

    async def _respond(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"only GET\n"
        if path in ("/metrics", "/"):
            try:
                return "200 OK", CONTENT_TYPE_LATEST, await self.hub.render()
            except Exception as exc:  # never leave a scrape unanswered
                log.exception("metrics rendering failed")
                return "500 Internal Server Error", "text/plain", f"{type(exc).__name__}\n".encode()
        if path in ("/ready", "/readyz"):
            ok, reasons = self.hub.readiness()
            if ok:
                return "200 OK", "text/plain", b"ready\n"
            return "503 Service Unavailable", "text/plain", ("\n".join(reasons) or "starting").encode() + b"\n"
        if path in ("/live", "/livez", "/healthz"):
            return "200 OK", "text/plain", b"live\n"
        return "404 Not Found", "text/plain", b"try /metrics, /ready or /live\n"


_HUB = MetricsHub()


def hub() -> MetricsHub:
    """The process's hub (all services of ``orbitmq local`` share it)."""
    return _HUB


def now_ms() -> int:
    return time.time_ns() // 1_000_000

