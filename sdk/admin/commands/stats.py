"""mqadmin's stats command (org.apache.rocketmq.tools.command.stats): statsAll, one progress line
per topic on stderr, so stdout stays the command's output.
"""

from __future__ import annotations

import argparse
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.output import progress, render_table
from orbitmq.admin.registry import Result, command
from orbitmq.client import MQBrokerError
from orbitmq.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from orbitmq.remoting.errors import RemotingError


def _sum_24h(data: dict[str, Any] | None) -> int:
    """StatsAllSubCommand.compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for window in ("statsDay", "statsHour", "statsMinute"):
        total = int(((data or {}).get(window) or {}).get("sum", 0) or 0)
        if total:
            return total
    return 0


def _minute_tps(data: dict[str, Any] | None) -> float:
    return float(((data or {}).get("statsMinute") or {}).get("tps", 0) or 0)


async def _topic_stats_rows(admin: MQAdminExt, topic: str, active_only: bool) -> list[dict[str, Any]]:
    route = await admin.topic_route(topic)
    masters = admin.route_masters(route)
    in_tps, in_today = 0.0, 0
    for _name, addr in masters:
        data = await admin.broker_stats_data(addr, "TOPIC_PUT_NUMS", topic)
        in_tps += _minute_tps(data)
        in_today += _sum_24h(data)
    groups = await admin.topic_consumed_by(topic)
    rows = []
    for group in groups:
        out_tps, out_today = 0.0, 0
        for _name, addr in masters:
            data = await admin.broker_stats_data(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
            out_tps += _minute_tps(data)
            out_today += _sum_24h(data)
        offsets, _tps = await admin.consume_stats(group, topic)
        accumulation = max(sum(r.broker_offset - r.consumer_offset for r in offsets), 0)
        if not active_only or in_today > 0 or out_today > 0:
            rows.append({"topic": topic, "consumerGroup": group, "accumulation": accumulation, "inTps": in_tps,
                         "outTps": out_tps, "inMsg24Hour": in_today, "outMsg24Hour": out_today})
    if not groups and (not active_only or in_today > 0):
        rows.append({"topic": topic, "consumerGroup": "", "accumulation": 0, "inTps": in_tps, "outTps": None,
                     "inMsg24Hour": in_today, "outMsg24Hour": None})
    return rows


def _stats_all_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--activeTopic", dest="active", action="store_true", help="print active topic only")
    p.add_argument("-t", "--topic", help="print select topic only")


@command("statsAll", "Topic and Consumer tps stats.", _stats_all_options)
async def stats_all(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Per topic and consuming group: accumulation, in/out TPS of the last minute and in/out
    messages of the last 24 hours, from every master's VIEW_BROKER_STATS_DATA."""
    topics = [t for t in await admin.topic_list() if not t.startswith((RETRY_GROUP_TOPIC_PREFIX,
                                                                          DLQ_GROUP_TOPIC_PREFIX))]
    if args.topic:
        topics = [t for t in topics if t == args.topic.strip()]
        if not topics:
            raise AdminError(f"topic {args.topic} does not exist")
    rows: list[dict[str, Any]] = []
    for i, topic in enumerate(topics, 1):
        progress(f"[{i}/{len(topics)}] {topic}")
        try:
            rows += await _topic_stats_rows(admin, topic, args.active)
        except (AdminError, MQBrokerError, RemotingError) as exc:
            progress(f"  {topic}: {exc}")  # upstream skips a topic it cannot read
    text = render_table(
        ["#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"],
        [[r["topic"], r["consumerGroup"], r["accumulation"], f"{r['inTps']:.2f}",
          "" if r["outTps"] is None else f"{r['outTps']:.2f}", r["inMsg24Hour"],
          "NO_CONSUMER" if r["outMsg24Hour"] is None else r["outMsg24Hour"]] for r in rows])
    return Result(rows, text)
