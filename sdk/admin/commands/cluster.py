"""mqadmin's cluster commands (org.apache.rocketmq.tools.command.cluster): clusterList and
clusterRT, with upstream's names, flags and output.

clusterRT takes -r rounds (OrbitMQ's: upstream runs until interrupted, which stays the default),
so a script can take one measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import time
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.commands.broker import timed_send
from orbitmq.admin.commands.ha import replica_epoch, role_of
from orbitmq.admin.options import bool_type
from orbitmq.admin.output import render_table
from orbitmq.admin.registry import Result, UsageError, command
from orbitmq.client import MQBrokerError
from orbitmq.remoting.errors import RemotingError


def _cluster_list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")
    p.add_argument("-m", "--moreStats", dest="more_stats", action="store_true",
                   help="message totals of yesterday and today instead of the base info")


def _first_tps(value: str | None) -> float | None:
    """mqadmin's reading of "putTps"/"getTransferedTps": the first (10 s) of the three rates."""
    if not value:
        return None
    try:
        return float(value.split()[0])
    except (IndexError, ValueError):
        return None


def _total_diff(info: dict[str, str], later: str, earlier: str) -> int | None:
    try:
        return int(info[later]) - int(info[earlier])
    except (KeyError, ValueError):
        return None


def _dash(value: Any, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def _ratio(info: dict[str, str], key: str) -> str:
    try:
        return f"{float(info[key]) * 100:.2f}%"
    except (KeyError, ValueError):
        return "-"


@command("clusterList", "List cluster infos", _cluster_list_options)
async def cluster_list(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    info = await admin.cluster_info()
    rows = []
    for cluster in sorted(info.cluster_addr_table):
        if args.cluster and cluster != args.cluster:
            continue
        for name in sorted(info.cluster_addr_table[cluster]):
            data = info.broker_addr_table.get(name)
            for broker_id, addr in sorted((data.broker_addrs if data else {}).items()):
                try:
                    runtime = await admin.broker_runtime_info(addr)
                except (MQBrokerError, RemotingError):
                    runtime = {}
                earliest = int(runtime.get("earliestMessageTimeStamp", "-1") or -1)
                hours = f"{(time.time() * 1000 - earliest) / 3_600_000:.2f}" if earliest > 0 else "-"
                transferred = runtime.get("getTransferedTps", runtime.get("getTransferredTps"))
                rows.append({"clusterName": cluster, "brokerName": name, "brokerId": broker_id, "brokerAddr": addr,
                             "version": runtime.get("brokerVersionDesc", "-"),
                             "inTps": _first_tps(runtime.get("putTps")), "outTps": _first_tps(transferred),
                             "putTps": runtime.get("putTps", "-"), "getTransferredTps": transferred or "-",
                             "inTotalYest": _total_diff(runtime, "msgPutTotalTodayMorning",
                                                        "msgPutTotalYesterdayMorning"),
                             "outTotalYest": _total_diff(runtime, "msgGetTotalTodayMorning",
                                                         "msgGetTotalYesterdayMorning"),
                             "inTotalToday": _total_diff(runtime, "msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
                             "outTotalToday": _total_diff(runtime, "msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
                             "pageCacheLockTimeMills": runtime.get("pageCacheLockTimeMills", "-"),
                             "hour": hours, "space": _ratio(runtime, "commitLogDiskRatio"),
                             "reachable": bool(runtime), "role": role_of(broker_id),
                             "epoch": await replica_epoch(admin, addr) if runtime else None})
    if args.cluster and not rows:
        raise AdminError(f"cluster {args.cluster} does not exist")
    if args.more_stats:
        text = render_table(["#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday",
                             "#OutTotalToday"],
                            [[r["clusterName"], r["brokerName"], _dash(r["inTotalYest"]), _dash(r["outTotalYest"]),
                              _dash(r["inTotalToday"]), _dash(r["outTotalToday"])] for r in rows])
        return Result(rows, text)
    text = render_table(["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS", "#OutTPS",
                         "#PCWait(ms)", "#Hour", "#SPACE", "#Role", "#Epoch"],
                        [[r["clusterName"], r["brokerName"], r["brokerId"], r["brokerAddr"], r["version"],
                          _dash(r["inTps"], "{:.2f}"), _dash(r["outTps"], "{:.2f}"), r["pageCacheLockTimeMills"],
                          r["hour"], r["space"], r["role"], _dash(r["epoch"])]
                         for r in rows])
    return Result(rows, text)


def _cluster_rt_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--amount", type=int, default=100, help="message amount | default 100")
    p.add_argument("-s", "--size", type=int, default=128, help="message size | default 128 Byte")
    p.add_argument("-c", "--cluster", help="cluster name | default display all cluster")
    p.add_argument("-p", "--printLog", dest="tlog", type=bool_type, default=False, help="print as tlog | default false")
    p.add_argument("-m", "--machineRoom", dest="room", default="noname", help="machine room name | default noname")
    p.add_argument("-i", "--interval", type=int, default=10, help="print interval | default 10 seconds")
    p.add_argument("-r", "--rounds", type=int, default=0,
                   help="OrbitMQ: stop after this many rounds (default 0: until interrupted, as upstream)")


@command("clusterRT", "List All clusters Message Send RT", _cluster_rt_options)
async def cluster_rt(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Every -i seconds, -a sends of -s bytes to each broker's own topic, per cluster: the average
    round trip (the first send left out) and the success and failure counts. Lines are printed as
    they are measured; with --json, once the -r rounds are done."""
    if args.amount < 2 or args.size <= 0 or args.interval <= 0 or args.rounds < 0:
        raise UsageError("-a amount must be at least 2, -s size and -i interval positive, -r rounds >= 0")
    if args.json and not args.rounds:
        raise UsageError("--json needs -r rounds: without it clusterRT runs until interrupted")
    info = await admin.cluster_info()
    clusters = [args.cluster.strip()] if args.cluster else sorted(info.cluster_addr_table)
    emit = (lambda line: None) if args.json else (lambda line: print(line, flush=True))
    if not args.tlog:
        emit(f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<4}  {'#successCount':<8}  {'#failCount':<8}")
    rows: list[dict[str, Any]] = []
    done = 0
    while True:
        for cluster in clusters:
            names = info.cluster_addr_table.get(cluster)
            if names is None:
                raise AdminError(f"cluster [{cluster}] not exist")
            for broker_name in sorted(names):
                ok_count = failed = elapsed = 0
                for i in range(args.amount):
                    ok, rt = await timed_send(admin, broker_name, args.size, broker_name)
                    ok_count += ok
                    failed += not ok
                    if i:
                        elapsed += rt
                rt = elapsed / (args.amount - 1)
                rows.append({"cluster": cluster, "brokerName": broker_name, "rt": round(rt, 2),
                             "successCount": ok_count, "failCount": failed})
                if args.tlog:
                    stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
                    emit(f"{stamp}|{args.room}|{cluster}|{broker_name}|{round(rt)}")
                else:
                    emit(f"{cluster:<24}  {broker_name:<24}  {rt:<8.2f}  {ok_count:<16}  {failed:<16}".rstrip())
        done += 1
        if args.rounds and done >= args.rounds:
            return Result(rows, None)
        await asyncio.sleep(args.interval)
