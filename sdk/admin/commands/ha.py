"""Broker-side replication commands of `orbitmq admin`: haStatus (907, upstream's
tools.command.ha.HAStatusSubCommand) and getBrokerEpoch (1007, its
tools.command.broker.GetBrokerEpochSubCommand; here for the replica listing and -i repeat both
use), plus the per-replica epoch clusterList shows. mqadmin's names, flags and output.

The controller-side commands (getSyncStateSet, electMaster, ...) live in controller.py.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.output import format_timestamp, render_table, to_json
from orbitmq.admin.registry import Result, command
from orbitmq.client import MQBrokerError
from orbitmq.common.constants import MASTER_ID
from orbitmq.common.fastjson import loads
from orbitmq.remoting.codes import RequestCode
from orbitmq.remoting.errors import RemotingError

LONG_MAX = 2**63 - 1


async def broker_epoch_cache(admin: MQAdminExt, addr: str) -> dict[str, Any]:
    """GET_BROKER_EPOCH_CACHE (1007): the replica's EpochEntryCache (clusterName, brokerName,
    brokerId, epochList [{epoch, startOffset, endOffset}], maxOffset)."""
    response = await admin.api.call(addr, RequestCode.GET_BROKER_EPOCH_CACHE)
    return loads((response.body or b"{}").decode("utf-8"))


async def broker_ha_status(admin: MQAdminExt, addr: str) -> dict[str, Any]:
    """GET_BROKER_HA_STATUS (907): the replica's HARuntimeInfo."""
    response = await admin.api.call(addr, RequestCode.GET_BROKER_HA_STATUS)
    return loads((response.body or b"{}").decode("utf-8"))


async def replica_epoch(admin: MQAdminExt, addr: str) -> int | None:
    """The replica's current master epoch (its last epoch entry); None outside controller mode or
    when the replica does not answer."""
    try:
        cache = await broker_epoch_cache(admin, addr)
    except (MQBrokerError, RemotingError, ValueError):
        return None
    epochs = cache.get("epochList") or []
    return int(epochs[-1]["epoch"]) if epochs else None


def role_of(broker_id: int) -> str:
    """The role a NameServer route implies: brokerId 0 is the master (controller mode registers a
    new master as 0), any other id a slave."""
    return "MASTER" if broker_id == MASTER_ID else "SLAVE"


async def _replicas(admin: MQAdminExt, broker_name: str | None, cluster: str | None) -> list[tuple[str, str, int, str]]:
    """(cluster, brokerName, brokerId, address) of every replica of a broker set or a cluster."""
    if bool(broker_name) == bool(cluster):
        raise AdminError("give either -b brokerName or -c clusterName")
    info = await admin.cluster_info()
    if cluster:
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            raise AdminError(f"cluster {cluster} does not exist")
    else:
        names = {broker_name} if broker_name in info.broker_addr_table else set()
        if not names:
            raise AdminError(f"broker {broker_name} is not found in the NameServer")
    out = []
    for name in sorted(names):
        data = info.broker_addr_table.get(name)
        if data is None:
            continue
        owner = data.cluster or cluster or ""
        out += [(owner, name, bid, addr) for bid, addr in sorted(data.broker_addrs.items())]
    return out


def _interval_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--interval", dest="interval", nargs="?", const="", default=None,
                   help="the interval(second) of get info: print again every so often (3 s if no value)")


async def _maybe_repeat(args: argparse.Namespace, once: Callable[[], Awaitable[Result]]) -> Result:
    """One report, or with -i the report again and again until interrupted (as upstream)."""
    if args.interval is None:
        return await once()
    try:
        seconds = int(args.interval) if args.interval.strip() else 3
    except ValueError:
        raise AdminError(f"-i expects a number of seconds, got {args.interval!r}") from None
    if seconds <= 0:
        raise AdminError(f"-i expects a positive number of seconds, got {seconds}")
    while True:
        result = await once()
        print(to_json(result.data) if args.json else result.text, flush=True)
        await asyncio.sleep(seconds)


def _epoch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", help="which broker set to fetch")
    p.add_argument("-c", "--clusterName", dest="cluster", help="every broker set of this cluster")
    _interval_option(p)


def _epoch_text(cache: dict[str, Any], addr: str) -> str:
    lines = [f"#clusterName\t{cache.get('clusterName', '')}", f"#brokerName\t{cache.get('brokerName', '')}",
             f"#brokerAddr\t{addr}", f"#brokerId\t{cache.get('brokerId', '')}"]
    for e in cache.get("epochList") or []:
        lines.append(f"#Epoch: EpochEntry{{epoch={e.get('epoch')}, startOffset={e.get('startOffset')}, "
                     f"endOffset={e.get('endOffset', LONG_MAX)}}}")
    if "maxOffset" in cache:
        lines.append(f"#maxOffset\t{cache['maxOffset']}")
    return "\n".join(lines)


@command("getBrokerEpoch", "Fetch broker epoch entries", _epoch_options)
async def get_broker_epoch(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return await _maybe_repeat(args, lambda: _broker_epoch_once(admin, args))


async def _broker_epoch_once(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    docs, texts = [], []
    for _cluster, _name, _bid, addr in await _replicas(admin, args.broker_name, args.cluster):
        cache = await broker_epoch_cache(admin, addr)
        docs.append({"brokerAddr": addr, **cache})
        texts.append(_epoch_text(cache, addr))
    return Result(docs, "\n\n".join(texts))


def _ha_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="which broker to fetch (ip:port)")
    p.add_argument("-c", "--clusterName", dest="cluster", help="every broker of this cluster")
    _interval_option(p)


def _ha_text(info: dict[str, Any], addr: str) -> str:
    if info.get("master"):
        connections = info.get("haConnectionInfo") or []
        head = [f"#MasterAddr\t{addr}", f"#MasterCommitLogMaxOffset\t{info.get('masterCommitLogMaxOffset', '')}",
                f"#SlaveNum\t{len(connections)}", f"#InSyncSlaveNum\t{info.get('inSyncSlaveNums', '')}"]
        rows = [[c.get("addr", ""), c.get("slaveAckOffset", ""), c.get("diff", ""),
                 f"{float(c.get('transferredByteInSecond', 0)) / 1024:.2f}",
                 "OK" if c.get("inSync") else "Fall Behind", c.get("transferFromWhere", "")] for c in connections]
        table = render_table(["#SlaveAddr", "#SlaveAckOffset", "#Diff", "#TransferSpeed(KB/s)", "#Status",
                              "#TransferFromWhere"], rows)
        return "\n".join(head) + "\n\n" + table
    client = info.get("haClientRuntimeInfo") or {}
    return "\n".join([
        f"#MasterAddr\t{client.get('masterAddr', '')}",
        f"#TransferSpeed(KB/s)\t{float(client.get('transferredByteInSecond', 0)) / 1024:.2f}",
        f"#LastReadTime\t{format_timestamp(int(client.get('lastReadTimestamp', 0) or 0))}",
        f"#LastWriteTime\t{format_timestamp(int(client.get('lastWriteTimestamp', 0) or 0))}",
        f"#MasterFlushOffset\t{client.get('masterFlushOffset', '')}",
    ])


@command("haStatus", "Fetch ha runtime status data", _ha_options)
async def ha_status(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if bool(args.broker_addr) == bool(args.cluster):
        raise AdminError("give either -b brokerAddr or -c clusterName")
    return await _maybe_repeat(args, lambda: _ha_status_once(admin, args))


async def _ha_status_once(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.broker_addr:
        addrs = [args.broker_addr]
    else:
        addrs = [addr for _c, _n, _bid, addr in await _replicas(admin, None, args.cluster)]
    docs, texts = [], []
    for addr in addrs:
        info = await broker_ha_status(admin, addr)
        docs.append({"brokerAddr": addr, **info})
        texts.append(_ha_text(info, addr))
    return Result(docs, "\n\n".join(texts))
