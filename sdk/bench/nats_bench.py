"""`orbitmq bench nats`: the bench's loads against NATS JetStream, a peer measured on the same machine.

Needs the `nats-server` binary (Debian/Ubuntu package `nats-server`; `make bench` installs it) and
the `nats-py` client (`pip install -e '.[bench]'`); `available()` says why not otherwise and
`bench all` then skips NATS and prints so. The server runs with JetStream on file storage in a
temporary directory (its default fsync interval, like ASYNC_FLUSH). The loads mirror OrbitMQ's:
- single-message publishes awaited for their PubAck, N in flight;
- a drain of a stored backlog: pull consumer, fetches of 32, every message acked (nats-py sends an
  ack without waiting, so acks of a batch go out together in the client's write buffer);
- end to end at a fixed rate: an open-loop publisher (the same schedule as `bench producer -r`)
  and a pull consumer in a process of its own; latency = arrival - the publisher's timestamp.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from orbitmq.bench.drain import DrainResult
from orbitmq.bench.stats import Stats
from orbitmq.common.net import free_ports

STREAM = "ORBITBENCH"
READY = "nats consumer ready"


def available() -> str | None:
    """None when NATS can be benchmarked here, else why not."""
    if shutil.which("nats-server") is None:
        return "nats-server not installed (apt-get install nats-server)"
    try:
        import nats  # noqa: F401
    except ImportError:
        return "nats-py not installed (pip install -e '.[bench]')"
    return None


class NatsServer:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="orbitmq-bench-nats-")
        port = free_ports(1)[0]
        self.url = f"nats://127.0.0.1:{port}"
        self.proc = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nats-server did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


async def _connect(url: str):
    import nats
    nc = await nats.connect(url)
    js = nc.jetstream()
    try:
        await js.add_stream(name=STREAM, subjects=[f"{STREAM.lower()}.>"])
    except Exception:  # noqa: BLE001 -- it exists already
        pass
    return nc, js


async def publish_load(url: str, subject: str, concurrency: int, duration: float, size: int = 1024,
                       rate: float = 0.0) -> Stats:
    """Publish one message per request awaiting its PubAck (the shape of `bench producer -b 1`)."""
    stats = Stats()
    body = os.urandom(size)
    nc, js = await _connect(url)
    try:
        await js.publish(subject, body)
        stats.warmup_messages = 1
        loop = asyncio.get_running_loop()
        interval = 1 / rate if rate > 0 else 0.0
        slot = 0
        perf = time.perf_counter
        start = loop.time()
        end = start + duration

        async def worker() -> None:
            nonlocal slot
            while True:
                if interval:
                    due = start + slot * interval
                    slot += 1
                    if due >= end:
                        return
                    delay = due - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    stats.start_lags_ms.append((loop.time() - due) * 1000)
                elif loop.time() >= end:
                    return
                t0 = perf()
                try:
                    await js.publish(subject, body, headers={"born": repr(time.time() * 1000)}, timeout=10)
                except Exception as exc:  # noqa: BLE001 -- counted
                    stats.add_error(type(exc).__name__)
                else:
                    stats.messages += 1
                stats.latencies_ms.append((perf() - t0) * 1000)
                stats.requests += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        stats.elapsed_s = loop.time() - start
    finally:
        await nc.close()
    return stats


async def drain(url: str, messages: int, size: int = 1024, concurrency: int = 1, batch: int = 32) -> DrainResult:
    """Fill ``messages`` (64 publishes in flight), then fetch + ack them all; the rate excludes idle time."""
    import nats.errors
    subject = f"{STREAM.lower()}.drain"
    body = os.urandom(size)
    result = DrainResult()
    nc, js = await _connect(url)
    try:
        remaining = messages

        async def publisher() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await js.publish(subject, body, timeout=30)
                result.sent += 1

        await asyncio.gather(*(publisher() for _ in range(64)))
        sub = await js.pull_subscribe(subject, durable="drain")
        loop = asyncio.get_running_loop()
        start = last = loop.time()

        async def worker() -> None:
            nonlocal last
            while result.received < result.sent and loop.time() - last < 3:
                try:
                    msgs = await sub.fetch(batch, timeout=1)
                except nats.errors.TimeoutError:
                    continue
                for m in msgs:
                    result.ids[f"{m.metadata.sequence.stream}"] += 1
                    await m.ack()  # a publish without a reply wait: the batch's acks leave together
                result.received += len(msgs)
                last = loop.time()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        await nc.flush()
        result.elapsed_s = last - start
        result.missing = max(0, result.sent - len(result.ids))
    finally:
        await nc.close()
    return result


async def _consume(url: str, subject: str, duration: float, idle_stop: float) -> Stats:
    import nats.errors
    stats = Stats()
    nc, js = await _connect(url)
    try:
        sub = await js.pull_subscribe(subject, durable="e2e")
        print(READY, flush=True)
        loop = asyncio.get_running_loop()
        start = last = loop.time()
        while loop.time() - start < duration:
            if stats.messages and loop.time() - last > idle_stop:
                break
            try:
                msgs = await sub.fetch(32, timeout=1)
            except nats.errors.TimeoutError:
                continue
            now_ms = time.time() * 1000
            for m in msgs:
                born = (m.headers or {}).get("born")
                if born:
                    stats.latencies_ms.append(max(0.0, now_ms - float(born)))
                    stats.messages += 1
                await m.ack()
            stats.requests += 1
            last = loop.time()
        stats.elapsed_s = last - start
    finally:
        await nc.close()
    return stats


async def e2e(url: str, rate: float, duration: float, size: int = 1024) -> tuple[dict, dict]:
    """Publish at ``rate`` while a pull consumer (own process) receives; (produced, consumed) summaries."""
    subject = f"{STREAM.lower()}.e2e.{int(rate)}"
    consumer = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orbitmq", "bench", "nats", "--consume", url, "--subject", subject,
        "-d", str(duration + 15), stdout=asyncio.subprocess.PIPE)
    try:
        assert consumer.stdout is not None
        while (line := await asyncio.wait_for(consumer.stdout.readline(), 30)) and READY not in line.decode():
            pass
        produced = await publish_load(url, subject, 32, duration, size, rate)
        out, _ = await asyncio.wait_for(consumer.communicate(), duration + 30)
    except BaseException:
        if consumer.returncode is None:
            consumer.kill()
            await consumer.wait()
        raise
    return produced.summary(), json.loads(out.decode().strip().splitlines()[-1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orbitmq bench nats", description=__doc__)
    parser.add_argument("-w", "--concurrency", type=int, default=64)
    parser.add_argument("-d", "--duration", type=float, default=10.0)
    parser.add_argument("-s", "--size", type=int, default=1024)
    parser.add_argument("-n", "--messages", type=int, default=50_000, help="drain size")
    parser.add_argument("--consume", metavar="URL", help=argparse.SUPPRESS)  # internal: the e2e consumer
    parser.add_argument("--subject", help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv or []))
    if args.consume:
        print(json.dumps(asyncio.run(_consume(args.consume, args.subject, args.duration, 2.0)).summary()))
        return 0
    why = available()
    if why:
        print(f"NATS skipped: {why}")
        return 0
    server = NatsServer()
    try:
        from orbitmq.bench.drain import format_drain
        from orbitmq.bench.stats import format_summary
        pub = asyncio.run(publish_load(server.url, f"{STREAM.lower()}.pub", args.concurrency, args.duration,
                                       args.size)).summary()
        print(format_summary(f"nats publish, {args.concurrency} in flight", pub))
        print(format_drain("nats drain", asyncio.run(drain(server.url, args.messages, args.size)).summary()))
    finally:
        server.stop()
    return 0
