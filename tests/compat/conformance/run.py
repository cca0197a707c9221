"""Start Apache RocketMQ's and OrbitMQ's NameServer and broker side by side, set both up alike,
send every corpus request to both and print the differences (``make compat``).

``python -m tests.compat.conformance.run [--keep DIR]``; exit status 1 when a difference is not
a recorded deviation (corpus.DEVIATIONS).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orbitmq.client import MQClientAPI
from orbitmq.common.message import Message
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.protocol import RemotingCommand
from tests.compat.conformance import report
from tests.compat.conformance.compare import Answer, differences
from tests.compat.conformance.corpus import BROKER, CASES, COMMITTED, DEVIATIONS, GROUP, MESSAGES, TOPIC, Case
from tests.compat.conformance.report import Row
from tests.support import ProcessRunner, start_broker, start_namesrv
from tests.support.apache import Apache, wait_registered

BROKER_KEYS = {"autoCreateTopicEnable": "false", "autoCreateSubscriptionGroup": "true", "brokerName": BROKER}


@dataclass(frozen=True)
class Side:
    kind: str  # "apache" | "orbitmq"
    namesrv: str
    broker: str


def start_sides(runner: ProcessRunner) -> tuple[Side, Side]:
    """Apache's and OrbitMQ's NameServer and broker, each pair its own cluster, started together."""
    apache = Apache(runner)
    _, apache_ns = apache.namesrv()
    # enablePropertyFilter is true by default on OrbitMQ's broker (docs/compatibility.md), false on
    # Apache's: set alike so SQL92 requests compare.
    apache_broker = apache.broker(apache_ns, broker_name=BROKER, wait=False, autoCreateTopicEnable="false",
                                  autoCreateSubscriptionGroup="true", enablePropertyFilter="true")
    _, orbit_ns = start_namesrv(runner, name="orbit-namesrv")
    _, orbit_broker = start_broker(runner, runner.workdir, orbit_ns, "orbit-broker", **BROKER_KEYS)
    apache.wait_broker(apache_broker, apache_ns)
    wait_registered(orbit_ns, BROKER, orbit_broker)
    return Side("apache", apache_ns, apache_broker.addr), Side("orbitmq", orbit_ns, orbit_broker)


async def prepare(side: Side) -> None:
    """The state every case assumes (corpus.py's docstring)."""
    api = MQClientAPI(timeout=10)
    try:
        await api.create_topic(side.broker, TopicConfig(TOPIC, 4, 4))
        await api.create_subscription_group(side.broker, SubscriptionGroupConfig(GROUP))
        for i in range(MESSAGES):
            msg = Message(TOPIC, f"conf-{i}".encode(), properties={"KEYS": f"conf-{i}", "TAGS": "conf"})
            await api.send_message(side.broker, BROKER, msg, "ConfProducer", 0)
        await api.update_consumer_offset(side.broker, GROUP, TOPIC, 0, COMMITTED)
        deadline = time.monotonic() + 30
        while True:  # the route reaches the NameServer with the broker's next registration
            try:
                if (await api.get_topic_route(side.namesrv, TOPIC)).queue_datas:
                    break
            except Exception:  # noqa: BLE001 -- not routed yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{side.kind}: {TOPIC} never routed")
            await asyncio.sleep(0.5)
        deadline = time.monotonic() + 30
        while await api.get_max_offset(side.broker, TOPIC, 0) < MESSAGES:  # dispatched to the ConsumeQueue
            if time.monotonic() > deadline:
                raise RuntimeError(f"{side.kind}: messages never dispatched")
            await asyncio.sleep(0.2)
    finally:
        await api.close()


def _fill(value: str, side: Side) -> str:
    return value.replace("{broker_addr}", side.broker).replace("{now}", str(int(time.time() * 1000)))


async def ask(client: RemotingClient, side: Side, case: Case) -> Answer:
    addr = side.namesrv if case.target == "namesrv" else side.broker
    fields = {k: _fill(v, side) for k, v in case.fields.items()}
    deadline = time.monotonic() + case.settle_seconds
    while True:
        response = await client.invoke(addr, RemotingCommand.request(case.code, fields, case.body), timeout=10)
        if response.code != ResponseCode.SYSTEM_ERROR or time.monotonic() >= deadline:
            return Answer.of(response)
        await asyncio.sleep(0.5)


async def compare_all(apache: Side, orbit: Side, cases: list[Case] = CASES) -> list[Row]:
    rows = []
    async with RemotingClient() as client:
        for case in cases:
            a = await ask(client, apache, case)
            o = await ask(client, orbit, case)
            rows.append(Row(case, differences(a, o, body_depth=case.body_depth, values=case.values,
                                              ignore_fields=case.ignore_fields), a, o, DEVIATIONS))
    return rows


def table(rows: list[Row]) -> str:
    return report.table(rows, "requests", lambda case: f"{case.target:7}")


unexpected = report.unexpected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make compat", description=__doc__)
    parser.add_argument("--keep", type=Path, help="work directory to keep (logs, stores)")
    parser.add_argument("--show", action="append", default=[], metavar="CASE",
                        help="also print both answers of this case (repeatable)")
    args = parser.parse_args(argv)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="orbitmq-compat-"))
    runner = ProcessRunner(workdir)
    try:
        apache, orbit = start_sides(runner)
        asyncio.run(prepare(apache))
        asyncio.run(prepare(orbit))
        rows = asyncio.run(compare_all(apache, orbit))
    finally:
        runner.stop_all()
    print(table(rows))
    for row in rows:
        if row.case.name in args.show:
            for kind, answer in (("Apache", row.apache), ("OrbitMQ", row.orbit)):
                print(f"\n{row.case.name} / {kind}: {answer}")
    return 1 if unexpected(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
