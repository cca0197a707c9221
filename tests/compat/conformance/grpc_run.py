"""Start Apache RocketMQ's and OrbitMQ's NameServer, broker and proxy side by side, set both up
alike, send every gRPC corpus request (grpc_corpus.py) to both proxies and print the differences
(``make compat`` runs it after the Remoting half, run.py).

``python -m tests.compat.conformance.grpc_run [--keep DIR] [--show CASE]``; exit status 1 when a
difference is not a recorded deviation (grpc_corpus.DEVIATIONS).
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from orbitmq.client import MQClientAPI
from orbitmq.clientcore.signing import request_metadata
from orbitmq.common.message import Message
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc
from tests.compat.conformance import grpc_compare, report
from tests.compat.conformance.grpc_compare import Answer, differences
from tests.compat.conformance.grpc_corpus import (
    BROKER,
    CASES,
    DEVIATIONS,
    FIFO_GROUP,
    GROUP,
    MESSAGES,
    NO_CLIENT,
    SESSIONS,
    TOPIC,
    TOPICS,
    GCase,
    State,
)
from tests.compat.conformance.report import Row
from tests.support import ProcessRunner, free_port, start_broker, start_namesrv
from tests.support.apache import Apache, wait_proxy, wait_registered

# BrokerConfig's names, the same on both sides: topics and groups exist only as prepared (so
# TOPIC_NOT_FOUND and CONSUMER_GROUP_NOT_FOUND show), SQL92 filters and recall on.
BROKER_KEYS = {"autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "false",
               "enablePropertyFilter": "true", "recallMessageEnable": "true"}
# ProxyConfig's names, the same on both sides: shorter long-polling and invisibility floors than
# the defaults (5 s, 10 s) keep receives quick.
PROXY_KEYS = {"grpcClientConsumerMinLongPollingTimeoutMillis": 1000,
              "grpcClientConsumerMaxLongPollingTimeoutMillis": 3000, "minInvisibleTimeMillsForRecv": 1000}
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
                   ("grpc.max_send_message_length", 64 * 1024 * 1024)]


@dataclass(frozen=True)
class Side:
    kind: str  # "apache" | "orbitmq"
    namesrv: str
    broker: str
    proxy: str


def start_sides(runner: ProcessRunner) -> tuple[Side, Side]:
    """Both clusters started together, prepared (:func:`prepare`) while their proxies boot."""
    apache = Apache(runner)
    _, apache_ns = apache.namesrv()
    apache_broker = apache.broker(apache_ns, broker_name=BROKER, wait=False, **BROKER_KEYS)
    _, orbit_ns = start_namesrv(runner, name="orbit-namesrv")
    _, orbit_broker = start_broker(runner, runner.workdir, orbit_ns, "orbit-broker", brokerName=BROKER,
                                   mappedFileSizeCommitLog=64 * 1024 * 1024, **BROKER_KEYS)
    port = free_port()
    orbit_proxy = runner.spawn("proxy", ["-n", orbit_ns, "--port", str(port),
                                         *(f"{k}={v}" for k, v in PROXY_KEYS.items())], name="orbit-proxy")
    apache.wait_broker(apache_broker, apache_ns)
    wait_registered(orbit_ns, BROKER, orbit_broker)
    # Apache's proxy creates its system topics on the cluster as it starts: it comes after the broker.
    a_proxy, apache_grpc, _ = apache.proxy(apache_ns, wait=False, **PROXY_KEYS)
    sides = (Side("apache", apache_ns, apache_broker.addr, apache_grpc),
             Side("orbitmq", orbit_ns, orbit_broker, f"127.0.0.1:{port}"))

    async def both() -> None:
        await asyncio.gather(*(prepare(s) for s in sides))

    asyncio.run(both())
    orbit_proxy.wait_ready(("127.0.0.1", port), None, 30)
    wait_proxy(a_proxy, apache_grpc)
    return sides


async def prepare(side: Side) -> None:
    """The state every case assumes (grpc_corpus.py's docstring)."""
    api = MQClientAPI(timeout=10)
    try:
        for name, message_type in TOPICS.items():
            await api.create_topic(side.broker, TopicConfig(name, 4, 4, attributes={"message.type": message_type}))
        await api.create_subscription_group(side.broker, SubscriptionGroupConfig(GROUP))
        await api.create_subscription_group(side.broker,
                                            SubscriptionGroupConfig(FIFO_GROUP, consume_message_orderly=True))
        for i in range(MESSAGES):
            msg = Message(TOPIC, f"gconf-{i}".encode(), properties={"KEYS": f"gconf-{i}", "TAGS": "conf"})
            await api.send_message(side.broker, BROKER, msg, "GConfPreload", 0)
        deadline = time.monotonic() + 30
        for name in TOPICS:  # the routes reach the NameServer with the broker's registration
            while True:
                try:
                    if (await api.get_topic_route(side.namesrv, name)).queue_datas:
                        break
                except Exception:  # noqa: BLE001 -- not routed yet
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{side.kind}: {name} never routed")
                await asyncio.sleep(0.3)
        while await api.get_max_offset(side.broker, TOPIC, 0) < MESSAGES:  # dispatched to the ConsumeQueue
            if time.monotonic() > deadline:
                raise RuntimeError(f"{side.kind}: messages never dispatched")
            await asyncio.sleep(0.2)
    finally:
        await api.close()


def metadata(client_id: str) -> list[tuple[str, str]]:
    """The headers the SDK sends (orbitmq.clientcore.signing); none naming a client for NO_CLIENT."""
    md = request_metadata(client_id or "unused", "", None)
    return [(k, v) for k, v in md if client_id != NO_CLIENT or k != "x-mq-client-id"]


class Session:
    """A client's Telemetry stream, its Settings sent first and the stream kept open (and read)
    until :meth:`close`."""

    def __init__(self, stub: sgrpc.MessagingServiceStub, client_id: str, settings: Any) -> None:
        self.outbox: queue.Queue = queue.Queue()
        self.outbox.put(spb.TelemetryCommand(settings=settings))
        self.stream = stub.Telemetry(self._commands(), metadata=metadata(client_id))
        self.first = next(self.stream)
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _commands(self):
        while (item := self.outbox.get()) is not None:
            yield item

    def _drain(self) -> None:
        try:
            for _ in self.stream:
                pass
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self.outbox.put(None)
        self.stream.cancel()


def call(stub: sgrpc.MessagingServiceStub, case: GCase, state: State) -> Answer:
    """One case's request to one side; an Answer of kind NOT_SENT when it cannot be built (what it
    needs from an earlier case is missing on this side)."""
    try:
        request = case.request(state)
    except (KeyError, IndexError, AttributeError) as e:
        return Answer("NOT_SENT", f"request not built: {type(e).__name__} {e}")
    md = metadata(case.client)
    method = getattr(stub, case.rpc)
    responses: list[Any] = []
    if case.rpc == "Telemetry":
        return _telemetry(method, request, md, case.timeout)
    if case.rpc in ("ReceiveMessage", "PullMessage"):
        stream = method(request, metadata=md, timeout=case.timeout)
        try:
            responses.extend(stream)
        except grpc.RpcError as e:
            return grpc_compare.of_error(e, responses)
        return grpc_compare.of_call(stream, responses)
    try:
        response, unary = method.with_call(request, metadata=md, timeout=case.timeout)
    except grpc.RpcError as e:
        return grpc_compare.of_error(e, [])
    return grpc_compare.of_call(unary, [response])


def _telemetry(method: Any, commands: list[Any], md: list[tuple[str, str]], timeout: float) -> Answer:
    """Send the commands, read as many replies (or until the stream ends), then close it."""
    done = threading.Event()

    def requests():
        yield from commands
        done.wait(max(timeout - 1.5, 0.5))  # then half-close, before the deadline: a silent side ends OK

    stream = method(requests(), metadata=md, timeout=timeout)
    responses: list[Any] = []
    try:
        for reply in stream:
            responses.append(reply)
            if len(responses) >= len(commands):
                break
    except grpc.RpcError as e:
        done.set()
        return grpc_compare.of_error(e, responses)
    done.set()
    stream.cancel()
    return grpc_compare.of_call(stream, responses)


def compare_all(apache: Side, orbit: Side, cases: list[GCase] = CASES) -> list[Row]:
    states = [State(apache.kind, apache.proxy), State(orbit.kind, orbit.proxy)]
    channels = [grpc.insecure_channel(s.proxy, options=CHANNEL_OPTIONS) for s in (apache, orbit)]
    stubs = [sgrpc.MessagingServiceStub(c) for c in channels]
    sessions = [Session(stub, client, settings) for stub in stubs for client, settings in SESSIONS.items()]
    try:
        for session in sessions:
            if session.first.status.code != 20000:
                print(f"warning: {session.first.status}", file=sys.stderr)
        rows = []
        for case in cases:
            a, o = (call(stub, case, state) for stub, state in zip(stubs, states, strict=True))
            for state, answer in zip(states, (a, o), strict=True):
                if case.keep is not None and answer.grpc_code == "OK":
                    case.keep(state, answer)
            rows.append(Row(case, differences(a, o, depth=case.depth, values=case.values, count=case.count), a, o,
                            DEVIATIONS))
        return rows
    finally:
        for session in sessions:
            session.close()
        for channel in channels:
            channel.close()


def table(rows: list[Row]) -> str:
    return report.table(rows, "gRPC requests", lambda case: f"{case.rpc:32}")


unexpected = report.unexpected


def stop(runner: ProcessRunner) -> None:
    """Every server shuts down at once (the JVMs' shutdown hooks take seconds), then each is waited for."""
    for proc in runner.processes:
        try:
            proc.signal(signal.SIGTERM)
        except Exception:  # noqa: BLE001 -- already gone
            pass
    runner.stop_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make compat", description=__doc__)
    parser.add_argument("--keep", type=Path, help="work directory to keep (logs, stores)")
    parser.add_argument("--show", action="append", default=[], metavar="CASE",
                        help="also print both answers of this case (repeatable; 'all' for every case)")
    args = parser.parse_args(argv)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="orbitmq-grpc-compat-"))
    runner = ProcessRunner(workdir)
    started = time.monotonic()
    try:
        apache, orbit = start_sides(runner)
        up = time.monotonic()
        rows = compare_all(apache, orbit)
        print(f"started in {up - started:.1f}s, compared in {time.monotonic() - up:.1f}s", file=sys.stderr)
    finally:
        stop(runner)
    print(table(rows))
    for row in rows:
        if row.case.name in args.show or "all" in args.show:
            for kind, answer in (("Apache", row.apache), ("OrbitMQ", row.orbit)):
                print(f"\n{row.case.name} / {kind}: {answer}")
    return 1 if unexpected(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
