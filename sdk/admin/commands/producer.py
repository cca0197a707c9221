"""mqadmin's producer command (org.apache.rocketmq.tools.command.producer): producer, every
producer group's instances on one broker.
"""

from __future__ import annotations

import argparse

from orbitmq.admin.admin_api import MQAdminExt
from orbitmq.admin.registry import Result, command


def _producer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--broker", dest="broker_addr", required=True, help="broker address")


@command("producer", "Query producer's instances, connection, status, etc.", _producer_options)
async def producer(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Every producer group's instances on one broker (GET_ALL_PRODUCER_INFO)."""
    table = await admin.all_producer_info(args.broker_addr.strip())
    lines = []
    for group, instances in table.items():
        if not instances:
            lines.append(f"producer group ({group}) instances are empty")
        for p in instances:
            lines.append(f"producer group ({group}) instance : clientId={p.get('clientId')},remoteIP="
                         f"{p.get('remoteIP')}, language={p.get('language')}, version={p.get('version')}, "
                         f"lastUpdateTimestamp={p.get('lastUpdateTimestamp')}")
    return Result(table, "\n".join(lines))
