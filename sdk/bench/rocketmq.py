"""`orbitmq bench rocketmq`: the same loads against Apache RocketMQ and OrbitMQ, in one run.

Each side is the same topology of separate processes on free 127.0.0.1 ports with temporary
stores: a NameServer, one broker, one proxy (Apache's in cluster mode, its JVMs launched by
tests/support/apache.py with that launcher's small heaps and a serial GC, C2 on). Apache's side
runs first and is stopped before OrbitMQ's starts, so the two never share the cores. Per side:

- start-up: from launching the NameServer to the first acknowledged SendMessage through the
  proxy (the three started one after the other, each waited for, the topic created between);
- idle memory: the RSS of all the cluster's processes a few seconds after start-up;
- ``sends``: 1 KiB single-message sends through the proxy with ``--window`` in flight, from the
  official Python client (Producer.send_async) and from OrbitMQ's grpc.aio load generator;
- ``java_grpc_sends``: the same sends from the official Java gRPC client (rocketmq-client-java,
  Producer.sendAsync with ``--window`` in flight; tests/interop/java/grpc, SendLoad);
- ``remoting``: sends straight to the broker with the Remoting producer (single messages,
  ``--window`` in flight, then SEND_BATCH_MESSAGE batches of ``--batch``);
- ``java_remoting``: the same two from Apache's Java Remoting producer (rocketmq-client 5.5.0
  DefaultMQProducer: asynchronous sends bounded to ``--window``, then send(Collection) batches of
  ``--batch`` from 4 threads; tests/interop/java/remoting5, SendLoad). Each Java load is one JVM
  that warms up ``--client-warmup`` seconds before it is timed; its start-up and warm-up are not
  in the figures, nor in the CPU per message;
- ``drain``: ``--drain`` messages stored, then received + acked through the proxy;
- ``latency``: end-to-end (born -> received) p50/p99 at each fixed ``--rates`` rate;
- ``replicas3``: after the single broker, a 3-replica controller-mode broker set of the same
  kind (a controller, three brokers with allAckInSyncStateSet, a proxy; bench/rocketmq_replicas.py):
  its start-up, grpc.aio sends through its proxy and Remoting single sends to its master;
- ``disk``: store growth (allocated blocks) per 1 KiB message over the drain's fill;
- memory under load: the highest RSS sampled while the loads ran;
- server CPU per message of each process (utime + stime from /proc) for every load: where the
  time goes, proxy against broker, on both sides.

Prints one table: Apache, OrbitMQ and the ratio OrbitMQ / Apache, each row saying which way is
better; ``--json`` also prints the figures as one JSON line. Loads that are not built print
"not measured: <why>" (the Java ones when `make clients` has not built their suite). Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orbitmq.bench import scenario
from orbitmq.bench.drain import drain, fill
from orbitmq.bench.load import LoadOptions, run_send_load
from orbitmq.bench.memory import tree_rss_mib
from orbitmq.bench.proxy_client import ProxyClient
from orbitmq.bench.remoting_producer import _rate
from orbitmq.bench.sdk_producer import official_async

LOADS = ("sends", "java_grpc_sends", "remoting", "java_remoting", "drain", "latency", "replicas3")
# Both sides' proxies take the same ProxyConfig keys: short long-polling floors keep the drain's
# receives quick (Apache's defaults hold a receive 5 s after the backlog is gone).
PROXY_KEYS = {"grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
              "grpcClientConsumerMaxLongPollingTimeoutMillis": 3000, "minInvisibleTimeMillsForRecv": 1000}
QUEUES = 8
TOPICS = ("BenchSend", "BenchRemoting", "BenchDrain", "OrbitBenchE2E")
BATCH_SENDERS = 4  # batches in flight (threads of the Java producer, coroutines of the Python one)
# The Java load generators: load -> (suite of tests/interop/java built by `make clients`, main class).
JAVA_MAINS = {"java_grpc_sends": ("grpc", "orbitmq.interop.SendLoad"),
              "java_remoting": ("remoting5", "orbitmq.remoting.SendLoad")}
# JIT of each generator, chosen by its own CPU per message (the "client" figure), since on a 2-core
# machine the generator's CPU is taken from the servers being measured and pulls the ratio towards
# 1. tests/support/jvm.py stops client JVMs at C1. The Remoting producer gets C2 back (the last -XX
# flag wins): 14-16 us/msg against 23-32 at C1 on single sends. The gRPC client stays at C1: C2
# still compiles its gRPC/Netty/protobuf stack through a bench-length run (230-680 us/msg after
# 3-10 s of warm-up, against 66 at C1). Heap and GC stay jvm.py's (32-256 MiB, serial).
JAVA_LOAD_FLAGS = {"java_grpc_sends": [], "java_remoting": ["-XX:TieredStopAtLevel=4"]}
# The processes whose CPU per message is printed, in this order ("slaves": a 3-replica set's two).
CPU_COLUMNS = ("proxy", "broker", "slaves", "controller", "namesrv", "client")
NOT_MEASURED = {
    "sync_flush": "this run flushes asynchronously; run again with --sync-flush (both brokers SYNC_FLUSH)",
    "profile": "run with --profile for the py-spy / JFR capture of the slowest path (the grpc.aio sends); "
               "per-process CPU per message is printed instead",
}


def _repo_on_path() -> None:
    """tests/support (the Apache launcher, the OrbitMQ process starters) lives at the repo root."""
    try:
        import tests.support.apache  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


# ---- process figures -------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (and its reaped children) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(v) for v in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def _rss(pids: dict[str, int], field: str = "VmRSS") -> float:
    """MiB of ``field`` (VmRSS; RssAnon: heaps, without the store's mapped pages) of all processes."""
    return sum(tree_rss_mib(pid, field) or 0.0 for pid in pids.values())


def _disk_bytes(path: Path) -> int:
    """Allocated bytes (st_blocks) under ``path``: a preallocated, unwritten mapped file counts
    what was written, not its length."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


class Sampler:
    """The highest cluster RSS, read every ``interval`` seconds in a thread."""

    def __init__(self, pids: dict[str, int], interval: float = 0.5) -> None:
        self.pids, self.interval, self.peak, self.peak_anon = pids, interval, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, _rss(self.pids))
            self.peak_anon = max(self.peak_anon, _rss(self.pids, "RssAnon"))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _with_cpu(pids: dict[str, int], out: dict[str, Any], name: str, fn: Callable[..., tuple[float, int]], *,
              marked: bool = False) -> None:
    """Run ``fn`` (-> (msgs/s, messages)); store the rate and each process's CPU us per message.
    A ``marked`` fn is given a callable to call when its timed part starts: the CPU is counted
    from there (a JVM load generator's start-up and warm-up are left out)."""
    before = {k: _cpu_seconds(p) for k, p in pids.items()}

    def mark() -> None:
        before.update({k: _cpu_seconds(p) for k, p in pids.items()})
    rate, messages = fn(mark) if marked else fn()
    out[name] = rate
    for k, p in pids.items():
        out[f"{name}_cpu_us_{k}"] = (_cpu_seconds(p) - before[k]) * 1e6 / messages if messages else None
    print(f"  {name}: {rate:,.0f} msgs/s", flush=True)


# ---- one side --------------------------------------------------------------------------------

class Side:
    """One cluster: NameServer + broker + proxy of ``kind`` ("apache" or "orbitmq")."""

    def __init__(self, kind: str, workdir: Path, broker_keys: dict[str, object]) -> None:
        from tests.support.process import ProcessRunner
        self.kind = kind
        self.runner = ProcessRunner(workdir)
        self.broker_keys = broker_keys
        self.pids: dict[str, int] = {}
        self.store = workdir / "store"
        self.namesrv = self.broker = self.endpoint = ""

    def start(self) -> None:
        if self.kind == "apache":
            from tests.support.apache import Apache
            apache = Apache(self.runner, fast_start=False)
            ns_proc, self.namesrv = apache.namesrv()
            broker = apache.broker(self.namesrv, store=self.store, **self.broker_keys)
            proxy_proc, self.endpoint, _ = apache.proxy(self.namesrv, **PROXY_KEYS)
            self.broker = broker.addr
            self.pids = {"namesrv": ns_proc.pid, "broker": broker.process.pid, "proxy": proxy_proc.pid}
            return
        from tests.support.apache import wait_registered
        from tests.support.net import free_port
        from tests.support.services import start_broker, start_namesrv
        ns_proc, self.namesrv = start_namesrv(self.runner, name="orbit-namesrv")
        broker_proc, self.broker = start_broker(self.runner, self.runner.workdir, self.namesrv, name="orbit-broker",
                                                store=self.store, brokerName="orbit-a",
                                                mappedFileSizeCommitLog=64 * 1024 * 1024, **self.broker_keys)
        wait_registered(self.namesrv, "orbit-a", self.broker)
        port = free_port()
        proxy_proc = self.runner.start("proxy", ["-n", self.namesrv, "--port", str(port),
                                                 *(f"{k}={v}" for k, v in PROXY_KEYS.items())],
                                       ready_port=port, name="orbit-proxy")
        self.endpoint = f"127.0.0.1:{port}"
        self.pids = {"namesrv": ns_proc.pid, "broker": broker_proc.pid, "proxy": proxy_proc.pid}

    async def create_topics(self) -> None:
        from orbitmq.client import MQClientAPI
        from orbitmq.common.topic_config import TopicConfig
        api = MQClientAPI(timeout=10)
        try:
            for topic in TOPICS:
                await api.create_topic(self.broker, TopicConfig(topic, QUEUES, QUEUES))
        finally:
            await api.close()

    async def first_ack(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Until one SendMessage through the proxy is acknowledged (routes reach the proxy late)."""
        deadline = time.monotonic() + timeout
        async with ProxyClient(self.endpoint, request_timeout=5) as client:
            while True:
                outcome = await client.send(TOPICS[0], "first")
                if outcome.message_id is not None:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.kind}: no acknowledged send within {timeout:.0f}s: {outcome.error}")
                await asyncio.sleep(0.1)

    def stop(self) -> None:
        import signal
        for proc in self.runner.processes:  # all at once: the JVMs' shutdown hooks take seconds
            proc.signal(signal.SIGTERM)
        self.runner.stop_all()


def measure_side(kind: str, args: argparse.Namespace, broker_keys: dict[str, object]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    body = b"x" * args.size
    with tempfile.TemporaryDirectory(prefix=f"orbitmq-bench-rocketmq-{kind}-") as tmp:
        side = Side(kind, Path(tmp), broker_keys)
        print(f"== {kind}: starting NameServer, broker, proxy", flush=True)
        started = time.monotonic()
        try:
            side.start()
            asyncio.run(side.create_topics())
            asyncio.run(side.first_ack())
            out["startup_s"] = time.monotonic() - started
            print(f"  start-up to the first acknowledged send: {out['startup_s']:.1f} s", flush=True)
            time.sleep(args.settle)
            out["idle_mib"] = _rss(side.pids)
            out["idle_anon_mib"] = _rss(side.pids, "RssAnon")
            print(f"  idle RSS: {out['idle_mib']:.0f} MiB", flush=True)
            if args.warmup > 0:  # the JVMs' JIT (and both sides' caches) before anything is timed
                asyncio.run(run_send_load(LoadOptions(endpoint=side.endpoint, topic=TOPICS[0], size=args.size,
                                                      concurrency=args.window, duration=args.warmup)))
            with Sampler(side.pids) as sampler:
                _run_loads(side, args, body, out)
            out["load_mib"] = max(sampler.peak, _rss(side.pids))
            out["load_anon_mib"] = max(sampler.peak_anon, _rss(side.pids, "RssAnon"))
            print(f"  peak RSS under load: {out['load_mib']:.0f} MiB ({out['load_anon_mib']:.0f} MiB anonymous)",
                  flush=True)
        except Exception:
            print(side.runner.report()[-6000:], file=sys.stderr)
            raise
        finally:
            side.stop()
    if "replicas3" in args.only:
        from orbitmq.bench.rocketmq_replicas import measure_replicas
        out.update(measure_replicas(kind, args, broker_keys))
    return out


def _run_loads(side: Side, args: argparse.Namespace, body: bytes, out: dict[str, Any]) -> None:
    pids, endpoint = side.pids, side.endpoint
    if "sends" in args.only:
        def official() -> tuple[float, int]:
            rate = official_async(endpoint, TOPICS[0], body, args.duration, args.window)
            return rate, int(rate * args.duration)
        _with_cpu(pids, out, "official_python_sends", official)

        def grpc_load() -> tuple[float, int]:
            s = asyncio.run(run_send_load(LoadOptions(endpoint=endpoint, topic=TOPICS[0], size=args.size,
                                                      concurrency=args.window, duration=args.duration)))
            out["grpc_sends_errors"] = s.errors
            return s.summary()["tps"], s.messages
        _with_cpu(pids, out, "grpc_sends", grpc_load)
        if args.profile:  # the slowest path once more, untimed, under the profilers (issue 24)
            from orbitmq.bench.rocketmq_profile import profile_load

            def profiled() -> float:
                s = asyncio.run(run_send_load(LoadOptions(endpoint=endpoint, topic=TOPICS[0], size=args.size,
                                                          concurrency=args.window, duration=args.profile_seconds)))
                return s.summary()["tps"]
            out["profile"] = profile_load(side.kind, {k: pids[k] for k in ("proxy", "broker")}, profiled,
                                          args.profile_seconds, side.runner.workdir / "profile", args.profile_native)
    if _java_selected(args, "java_grpc_sends"):
        def java_grpc(mark: Callable[[], None]) -> tuple[float, int]:
            return _java_load(side, args, "java_grpc_sends", "java_grpc_sends",
                              [f"endpoints={endpoint}", f"topic={TOPICS[0]}", f"window={args.window}"], mark, out)
        _with_cpu(pids, out, "java_grpc_sends", java_grpc, marked=True)
    if "remoting" in args.only:
        _remoting(side, args, body, out)
    if _java_selected(args, "java_remoting"):
        for mode, name in (("single", "java_remoting_sends"), ("batch", f"java_remoting_batches_of_{args.batch}")):
            def java_remoting(mark: Callable[[], None], mode: str = mode, name: str = name) -> tuple[float, int]:
                return _java_load(side, args, "java_remoting", name,
                                  [f"ns={side.namesrv}", f"topic={TOPICS[1]}", f"mode={mode}", f"window={args.window}",
                                   f"batch={args.batch}", f"threads={BATCH_SENDERS}"], mark, out)
            _with_cpu(pids, out, name, java_remoting, marked=True)
    if "drain" in args.only:
        before = _disk_bytes(side.store)

        def filled() -> tuple[float, int]:
            t0 = time.monotonic()
            # fill raises unless every SendMessage is OK. Apache's proxy answers a batch with fewer
            # entries than messages (SendMessageActivity#convertToSendMessageResponse), so the count
            # is of messages sent, and the entries are only recorded.
            out["fill_entries"] = len(asyncio.run(fill(endpoint, TOPICS[2], args.drain, args.size)))
            return args.drain / (time.monotonic() - t0), args.drain
        _with_cpu(pids, out, "fill_batches_of_32", filled)
        time.sleep(1.5)  # ASYNC_FLUSH: let both stores write their pages
        out["disk_bytes_per_msg"] = (_disk_bytes(side.store) - before) / args.drain

        def drained() -> tuple[float, int]:
            r = asyncio.run(drain(endpoint, TOPICS[2], "BenchDrainGroup", args.drain))
            out["drain_received"], out["drain_errors"] = r.received, r.errors
            return r.tps, r.received
        _with_cpu(pids, out, "drain", drained)
    if "latency" in args.only:
        for rate in args.rates:
            produced, consumed = asyncio.run(scenario._e2e(endpoint, args.latency_duration, rate, args.size))
            held = scenario.held(rate, produced, consumed)
            out[f"e2e_{rate:g}_p50_ms"] = consumed["p50_ms"]
            out[f"e2e_{rate:g}_p99_ms"] = consumed["p99_ms"]
            out[f"e2e_{rate:g}_held"] = held
            print(f"  end-to-end at {rate:g} msgs/s: p50 {consumed['p50_ms']:.2f} ms, p99 {consumed['p99_ms']:.2f} ms"
                  f"{'' if held else ' (rate not held)'}", flush=True)


def _remoting(side: Side, args: argparse.Namespace, body: bytes, out: dict[str, Any],
              modes: Sequence[tuple[str, str]] | None = None) -> None:
    """The Remoting producer's loads straight to ``side``'s broker: ``modes`` are (mode, figure
    name) pairs, "single" or "batch" (default: both, as remoting_sends and remoting_batches_of_N)."""
    from orbitmq.common.message import Message
    from orbitmq.remoting_client.config import RemotingClientConfig
    from orbitmq.remoting_client.producer import AsyncDefaultMQProducer
    results: dict[str, tuple[float, int]] = {}

    async def run(mode: str, name: str) -> None:
        producer = AsyncDefaultMQProducer("BenchRemotingProducer", RemotingClientConfig(
            namesrv_addr=side.namesrv, client_ip="127.0.0.1", instance_name=f"bench-{mode}"), send_msg_timeout=10)
        await producer.start()
        try:
            topic = TOPICS[1]
            await _rate(lambda: producer.send(Message(topic, body)), 0.5, 1)  # route cached, connection warm
            if mode == "single":
                rate, errors = await _rate(lambda: producer.send(Message(topic, body)), args.duration, args.window)
            else:
                rate, errors = await _rate(lambda: producer.send_batch([Message(topic, body)
                                                                        for _ in range(args.batch)]),
                                           args.duration, BATCH_SENDERS, args.batch)
            results[mode] = (rate, int(rate * args.duration))
            out[f"{name}_errors"] = errors
        finally:
            await producer.shutdown()

    for mode, name in modes or (("single", "remoting_sends"), ("batch", f"remoting_batches_of_{args.batch}")):
        def once(mode: str = mode, name: str = name) -> tuple[float, int]:
            asyncio.run(run(mode, name))
            return results[mode]
        _with_cpu(side.pids, out, name, once)


def _java_selected(args: argparse.Namespace, load: str) -> bool:
    return load in args.only and load not in NOT_MEASURED


def _java_load(side: Side, args: argparse.Namespace, load: str, name: str, argv: list[str],
               mark: Callable[[], None], out: dict[str, Any]) -> tuple[float, int]:
    """Run the JVM load generator of ``load`` against ``side`` -> (msgs/s, messages); its failed
    sends go to ``out[name_errors]``, its own CPU per message to ``out[name_cpu_us_client]``.

    Its SendLoad main prints "TIMED <mode>" when the warm-up is over (``mark`` is called then) and
    "RESULT mode=M msgs=N seconds=S errors=E cpu=C" at the end; stdout and stderr are read together."""
    from tests.support import jvm
    suite_name, main_class = JAVA_MAINS[load]
    logs = side.runner.workdir / "java-logs"  # the clients' own logs, not under ~/logs
    flags = [*JAVA_LOAD_FLAGS[load], f"-Drocketmq.log.root={logs}", f"-Drocketmq.client.logRoot={logs}"]
    command = jvm.suite(suite_name).command(main_class, *argv, f"seconds={args.duration}",
                                            f"warmup={args.client_warmup}", f"size={args.size}", jvm_flags=flags)
    tail: deque[str] = deque(maxlen=40)
    result: dict[str, str] | None = None
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        killer = threading.Timer(args.duration + args.client_warmup + 120, proc.kill)
        killer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail.append(line.rstrip())
                if line.startswith("TIMED"):
                    mark()
                elif line.startswith("RESULT "):
                    result = dict(field.split("=", 1) for field in line.split()[1:])
        except BaseException:
            proc.kill()
            raise
        finally:
            killer.cancel()
        code = proc.wait()
    if code != 0 or result is None:
        raise RuntimeError(f"{side.kind}: {main_class} {' '.join(argv)} exited {code} without a result:\n"
                           + "\n".join(tail))
    messages, seconds, errors = int(result["msgs"]), float(result["seconds"]), int(result["errors"])
    out[f"{name}_errors"] = errors
    out[f"{name}_cpu_us_client"] = float(result["cpu"]) * 1e6 / messages if messages else None
    if errors:
        print(f"  {name}: {errors} failed sends", flush=True)
    return (messages / seconds if seconds > 0 else 0.0), messages


# ---- the table -------------------------------------------------------------------------------

def rows(args: argparse.Namespace) -> list[tuple[str, str, str, str]]:
    """(key, label, unit, better): "higher" or "lower" is better."""
    out = [("startup_s", "start-up to first acknowledged send", "s", "lower"),
           ("idle_mib", "idle RSS, whole cluster", "MiB", "lower"),
           ("idle_anon_mib", "idle anonymous RSS (heaps), whole cluster", "MiB", "lower"),
           ("load_mib", "peak RSS under load, whole cluster", "MiB", "lower"),
           ("load_anon_mib", "peak anonymous RSS under load (no mapped store)", "MiB", "lower")]
    if "sends" in args.only:
        out += [("official_python_sends", f"proxy sends, official Python client, {args.window} in flight",
                 "msgs/s", "higher"),
                ("grpc_sends", f"proxy sends, grpc.aio generator, {args.window} in flight", "msgs/s", "higher")]
    if _java_selected(args, "java_grpc_sends"):
        out += [("java_grpc_sends", f"proxy sends, Java gRPC client, {args.window} in flight", "msgs/s", "higher")]
    if "remoting" in args.only:
        out += [("remoting_sends", f"broker sends, Remoting producer, {args.window} in flight", "msgs/s", "higher"),
                (f"remoting_batches_of_{args.batch}", f"broker sends, Remoting batches of {args.batch}",
                 "msgs/s", "higher")]
    if _java_selected(args, "java_remoting"):
        out += [("java_remoting_sends", f"broker sends, Java Remoting producer, {args.window} in flight",
                 "msgs/s", "higher"),
                (f"java_remoting_batches_of_{args.batch}",
                 f"broker sends, Java Remoting batches of {args.batch}, {BATCH_SENDERS} threads", "msgs/s", "higher")]
    if "drain" in args.only:
        out += [("fill_batches_of_32", "proxy sends, batches of 32 (the drain's fill)", "msgs/s", "higher"),
                ("drain", f"drain of {args.drain:,} (receive + ack) through the proxy", "msgs/s", "higher"),
                ("disk_bytes_per_msg", f"store growth per {args.size} B message", "B", "lower")]
    if "replicas3" in args.only:
        out += [("replicas3_startup_s", "3-replica set: start-up to first acknowledged send", "s", "lower"),
                ("replicas3_grpc_sends", f"3-replica set: proxy sends, grpc.aio, {args.window} in flight",
                 "msgs/s", "higher"),
                ("replicas3_remoting_sends", f"3-replica set: master sends, Remoting, {args.window} in flight",
                 "msgs/s", "higher")]
    if "latency" in args.only:
        for rate in args.rates:
            out += [(f"e2e_{rate:g}_p50_ms", f"end-to-end p50 at {rate:g} msgs/s", "ms", "lower"),
                    (f"e2e_{rate:g}_p99_ms", f"end-to-end p99 at {rate:g} msgs/s", "ms", "lower")]
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"


def print_table(args: argparse.Namespace, apache: dict[str, Any], orbit: dict[str, Any]) -> dict[str, Any]:
    ratios: dict[str, Any] = {}
    print(f"\n{'figure':<58} {'unit':>7} {'Apache':>10} {'OrbitMQ':>10} {'Orbit/Apache':>13}  better")
    for key, label, unit, better in rows(args):
        a, o = apache.get(key), orbit.get(key)
        ratio = o / a if a and o is not None else None
        ratios[key] = ratio
        print(f"{label:<58} {unit:>7} {_fmt(a):>10} {_fmt(o):>10} "
              f"{'-' if ratio is None else f'{ratio:.3f} x':>13}  {better}")
    print("\nserver CPU per message (us), per process (and the Java load generator's own, client):")
    loads = [k for k, _l, unit, _b in rows(args) if unit == "msgs/s"]
    for load in loads:
        parts = []
        for name, side in (("Apache", apache), ("OrbitMQ", orbit)):
            cpu = [f"{p} {side[f'{load}_cpu_us_{p}']:.0f}" for p in CPU_COLUMNS
                   if side.get(f"{load}_cpu_us_{p}") is not None]
            parts.append(f"{name}: " + ", ".join(cpu))
        print(f"  {load:<28} " + "; ".join(parts))
    for key, why in NOT_MEASURED.items():
        print(f"{key}: not measured: {why}")
    goals = [("idle_mib", 0.1), ("startup_s", 0.2)]
    for key, goal in goals:
        if ratios.get(key) is not None:
            print(f"goal {key} <= {goal} x Apache: {ratios[key]:.3f} x "
                  f"({'met' if ratios[key] <= goal else 'not met'})")
    return ratios


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orbitmq bench rocketmq", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(LOADS),
                   help=f"comma-separated loads to run, of {','.join(LOADS)} (start-up and memory always)")
    p.add_argument("--quick", action="store_true", help="seconds-long preset: short loads, small drain, one rate")
    p.add_argument("--side", choices=("both", "apache", "orbitmq"), default="both",
                   help="measure one side only (its column; no ratios)")
    p.add_argument("-s", "--size", type=int, default=1024, help="message body bytes")
    p.add_argument("-d", "--duration", type=float, default=10.0, help="seconds per throughput load")
    p.add_argument("--window", type=int, default=64, help="sends in flight")
    p.add_argument("--batch", type=int, default=32, help="messages a Remoting batch")
    p.add_argument("--drain", type=int, default=100_000, help="messages stored, then drained")
    p.add_argument("--rates", default="1000,5000", help="comma-separated fixed rates of the latency load")
    p.add_argument("--latency-duration", type=float, default=10.0, help="seconds per fixed rate")
    p.add_argument("--warmup", type=float, default=10.0,
                   help="seconds of proxy sends after idle RSS is read and before the timed loads")
    p.add_argument("--client-warmup", type=float, default=3.0,
                   help="seconds each Java load generator sends, untimed, before its timed load (its JIT)")
    p.add_argument("--settle", type=float, default=3.0, help="seconds after start-up before idle RSS is read")
    p.add_argument("--sync-flush", action="store_true", help="both brokers with flushDiskType=SYNC_FLUSH")
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    p.add_argument("--profile", action="store_true",
                   help="after the timed grpc.aio sends, run them again untimed while the proxy and broker are "
                        "sampled (py-spy for OrbitMQ's, JFR for Apache's) and print their self time")
    p.add_argument("--profile-seconds", type=float, default=None,
                   help="seconds of the profiled run (default: --duration)")
    p.add_argument("--profile-native", action="store_true",
                   help="py-spy --native for OrbitMQ's processes: C frames too, each sample pausing the process")
    args = p.parse_args(list(argv or []))
    if args.quick:
        args.duration, args.drain, args.latency_duration, args.settle = 2.0, 2_000, 3.0, 1.0
        args.warmup, args.client_warmup = 0.0, 1.0
        if args.rates == p.get_default("rates"):
            args.rates = "500"
    if args.profile_seconds is None:
        args.profile_seconds = args.duration
    args.only = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = [x for x in args.only if x not in LOADS]
    if unknown:
        p.error(f"unknown loads {unknown}: pick from {','.join(LOADS)}")
    if args.profile and "sends" not in args.only:
        p.error("--profile profiles the grpc.aio sends: --only must include sends")
    args.rates = [float(r) for r in args.rates.split(",") if r.strip()]
    _repo_on_path()
    from tests.support import jvm
    for load, (suite_name, _main) in JAVA_MAINS.items():
        if load in args.only:
            try:
                jvm.suite(suite_name)
            except AssertionError as e:  # not built: its rows are left out, the reason printed
                NOT_MEASURED[load] = str(e)
    broker_keys: dict[str, object] = {"flushDiskType": "SYNC_FLUSH"} if args.sync_flush else {}
    if args.sync_flush:
        NOT_MEASURED.pop("sync_flush", None)
    if args.profile:
        NOT_MEASURED.pop("profile", None)
    print(f"== Apache RocketMQ vs OrbitMQ: {args.size} B messages, loads {','.join(args.only)}, "
          f"{args.duration:g} s per throughput load{', SYNC_FLUSH' if args.sync_flush else ''}", flush=True)
    apache = measure_side("apache", args, broker_keys) if args.side in ("both", "apache") else {}
    orbit = measure_side("orbitmq", args, broker_keys) if args.side in ("both", "orbitmq") else {}
    ratios = print_table(args, apache, orbit)
    if args.json:
        print(json.dumps({"apache": apache, "orbitmq": orbit, "ratio_orbitmq_over_apache": ratios,
                          "not_measured": NOT_MEASURED}))
    return 0
