"""mqadmin's controller commands (org.apache.rocketmq.tools.command.controller):
getControllerMetaData, getControllerConfig, updateControllerConfig, electMaster
(ReElectMasterSubCommand) and cleanBrokerMetadata (CleanControllerBrokerMetaSubCommand), plus
getSyncStateSet, which upstream files under its ha package but which asks the controllers too.

They talk to the controllers given with ``-a`` and need no NameServer, except
``getSyncStateSet -c`` which lists the cluster's broker names from the NameServer (``-n``), as
upstream does. Commands that need the Raft leader ask ``-a`` for it (GET_METADATA_INFO) first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.output import to_json
from orbitmq.admin.registry import Result, command, without_namesrv
from orbitmq.auth.client import install_signing
from orbitmq.client import MQBrokerError, resolve_namesrv_addr
from orbitmq.common import fastjson
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting.tls import tool_ssl_context


def _client(args: argparse.Namespace) -> RemotingClient:
    """A client that signs with --accessKey/--secretKey when given (ACL 2.0 on the controllers)."""
    client = RemotingClient()
    client.ssl_context = tool_ssl_context(getattr(args, "tls", False), getattr(args, "tls_config_file", None))
    if getattr(args, "access_key", None):
        install_signing(client, (args.access_key, args.secret_key or ""))
    return client


def _addresses(text: str) -> list[str]:
    addrs = [a.strip() for a in text.split(";") if a.strip()]
    if not addrs:
        raise AdminError("no controller address: pass -a host:port[;host:port]")
    return addrs


async def _invoke(client: RemotingClient, addr: str, code: int, fields: dict[str, str] | None = None,
                  body: bytes = b"", timeout: float = 5.0) -> RemotingCommand:  # noqa: ASYNC109
    response = await client.invoke(addr, RemotingCommand.request(code, fields or {}, body), timeout)
    if response.code != ResponseCode.SUCCESS:
        raise MQBrokerError(response.code, response.remark, addr)
    return response


async def _metadata(client: RemotingClient, addr: str, timeout: float) -> dict[str, str]:  # noqa: ASYNC109
    return dict((await _invoke(client, addr, RequestCode.CONTROLLER_GET_METADATA_INFO, timeout=timeout)).ext_fields)


async def _leader(client: RemotingClient, controllers: str, timeout: float) -> str:  # noqa: ASYNC109
    """The leader's Remoting address, from the first of ``controllers`` that knows it."""
    last: Exception | None = None
    for addr in _addresses(controllers):
        try:
            meta = await _metadata(client, addr, timeout)
        except Exception as exc:  # try the next controller
            last = exc
            continue
        if meta.get("controllerLeaderAddress"):
            return meta["controllerLeaderAddress"]
        last = AdminError(f"controller {addr} knows no leader")
    raise AdminError(f"no controller leader found via {controllers}: {last}")


def _a_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--controllerAddress", dest="controller", required=True,
                   help="controller address(es), host:port[;host:port]")


# ---- getControllerMetaData ------------------------------------------------------------------------

@command("getControllerMetaData", "Get controller cluster's metadata", _a_option)
@without_namesrv
async def get_controller_metadata(_admin: Any, args: argparse.Namespace) -> Result:
    async with _client(args) as client:
        meta = await _metadata(client, _addresses(args.controller)[0], args.timeout)
    data = {"group": meta.get("group"), "controllerLeaderId": meta.get("controllerLeaderId"),
            "controllerLeaderAddress": meta.get("controllerLeaderAddress"),
            "isLeader": meta.get("isLeader") == "true",
            "peers": [p for p in (meta.get("peers") or "").split(";") if p]}
    # mqadmin's layout: "#Name\tvalue" lines, Java's "null" for a missing value
    lines = [f"\n#ControllerGroup\t{_java(data['group'])}", f"#ControllerLeaderId\t{_java(data['controllerLeaderId'])}",
             f"#ControllerLeaderAddress\t{_java(data['controllerLeaderAddress'])}"]
    lines += [f"#Peer:\t{peer}" for peer in data["peers"]]
    return Result(data, "\n".join(lines))


# ---- getSyncStateSet -----------------------------------------------------------------------------

def _sync_state_options(p: argparse.ArgumentParser) -> None:
    _a_option(p)
    p.add_argument("-b", "--brokerName", dest="broker_name", help="which broker to fetch")
    p.add_argument("-c", "--clusterName", dest="cluster", help="which cluster (its broker sets, via -n)")
    p.add_argument("-i", "--interval", dest="interval", nargs="?", const="", default=None,
                   help="the interval(second) of get info: print again every so often (3 s if no value)")


async def _cluster_broker_names(args: argparse.Namespace) -> list[str]:
    async with MQAdminExt(resolve_namesrv_addr(args.namesrv), timeout=args.timeout) as admin:
        info = await admin.cluster_info()
    names = sorted(info.cluster_addr_table.get(args.cluster, ()))
    if not names:
        raise AdminError(f"cluster {args.cluster} does not exist")
    return names


@command("getSyncStateSet", "Fetch syncStateSet for target brokers", _sync_state_options)
@without_namesrv
async def get_sync_state_set(_admin: Any, args: argparse.Namespace) -> Result:
    """-b wins over -c, as upstream; with -i the report repeats until interrupted."""
    if not args.broker_name and not args.cluster:
        raise AdminError("one of -b brokerName or -c clusterName is required")
    if args.interval is None:
        return await _sync_state_once(args)
    seconds = int(args.interval) if args.interval.strip() else 3
    while True:
        result = await _sync_state_once(args)
        print(to_json(result.data) if args.json else result.text, flush=True)
        await asyncio.sleep(seconds)


def _replica_identity(m: dict[str, Any]) -> str:
    """BrokerReplicasInfo.ReplicaIdentity.toString()."""
    return (f"ReplicaIdentity{{brokerName='{_java(m.get('brokerName'))}', brokerId={_java(m.get('brokerId'))}, "
            f"brokerAddress='{_java(m.get('brokerAddress'))}', alive={_java(m.get('alive'))}}}")


async def _sync_state_once(args: argparse.Namespace) -> Result:
    names = [args.broker_name] if args.broker_name else await _cluster_broker_names(args)
    async with _client(args) as client:
        leader = await _leader(client, args.controller, args.timeout)
        response = await _invoke(client, leader, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                 body=json.dumps(names).encode(), timeout=args.timeout)
    table = (fastjson.loads(response.body) or {}).get("replicasInfoTable") or {}
    parts = []
    for name, entry in table.items():
        in_sync = entry.get("inSyncReplicas") or []
        text = (f"\n#brokerName\t{name}\n#MasterBrokerId\t{_java(entry.get('masterBrokerId'))}\n"
                f"#MasterAddr\t{_java(entry.get('masterAddress'))}\n#MasterEpoch\t{_java(entry.get('masterEpoch'))}\n"
                f"#SyncStateSetEpoch\t{_java(entry.get('syncStateSetEpoch'))}\n#SyncStateSetNums\t{len(in_sync)}\n")
        text += "".join(f"\nInSyncReplica:\t{_replica_identity(m)}\n" for m in in_sync)
        text += "".join(f"\nNotInSyncReplica:\t{_replica_identity(m)}\n"
                        for m in entry.get("notInSyncReplicas") or [])
        parts.append(text)
    return Result(table, "".join(parts).rstrip("\n"))


# ---- getControllerConfig / updateControllerConfig -------------------------------------------------

def _parse_properties(text: str) -> dict[str, str]:
    result = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            result[key.strip()] = value.strip()
    return result


@command("getControllerConfig", "Get controller config", _a_option)
@without_namesrv
async def get_controller_config(_admin: Any, args: argparse.Namespace) -> Result:
    configs: dict[str, dict[str, str]] = {}
    async with _client(args) as client:
        for addr in _addresses(args.controller):
            response = await _invoke(client, addr, RequestCode.GET_CONTROLLER_CONFIG, timeout=args.timeout)
            configs[addr] = _parse_properties(bytes(response.body).decode("utf-8"))
    # mqadmin: "============addr============" then "%-50s=  %s" per key
    text = "\n".join(f"============{addr}============\n" + "\n".join(f"{k:<50}=  {v}" for k, v in cfg.items())
                     for addr, cfg in configs.items())
    return Result(configs, text)


def _update_options(p: argparse.ArgumentParser) -> None:
    _a_option(p)
    p.add_argument("-k", "--key", dest="key", required=True, help="config key")
    p.add_argument("-v", "--value", dest="value", required=True, help="config value")


@command("updateControllerConfig", "Update controller config", _update_options)
@without_namesrv
async def update_controller_config(_admin: Any, args: argparse.Namespace) -> Result:
    body = f"{args.key}={args.value}\n".encode()
    done = []
    async with _client(args) as client:
        for addr in _addresses(args.controller):
            await _invoke(client, addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=body, timeout=args.timeout)
            done.append(addr)
    text = f"update controller config success![{', '.join(done)}]\n{args.key} : {args.value}"
    return Result({"key": args.key, "value": args.value, "controllers": done}, text)


# ---- electMaster ---------------------------------------------------------------------------------

def _elect_options(p: argparse.ArgumentParser) -> None:
    _a_option(p)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True)
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-b", "--brokerId", dest="broker_id", type=int, required=True)


@command("electMaster", "Re-elect the specified broker as master", _elect_options)
@without_namesrv
async def elect_master(_admin: Any, args: argparse.Namespace) -> Result:
    async with _client(args) as client:
        leader = await _leader(client, args.controller, args.timeout)
        response = await _invoke(client, leader, RequestCode.CONTROLLER_ELECT_MASTER, {
            "clusterName": args.cluster, "brokerName": args.broker_name, "brokerId": str(args.broker_id),
            "designateElect": "true", "invokeTime": str(int(time.time() * 1000))}, timeout=args.timeout)
    fields = response.ext_fields or {}
    body = fastjson.loads(response.body) if response.body else {}
    group = body.get("brokerMemberGroup") or {}
    data = {"masterBrokerId": _int(fields.get("masterBrokerId")), "masterAddress": fields.get("masterAddress"),
            "masterEpoch": _int(fields.get("masterEpoch")), "syncStateSetEpoch": _int(fields.get("syncStateSetEpoch")),
            "brokerAddrs": {str(k): v for k, v in (group.get("brokerAddrs") or {}).items()},
            "syncStateSet": body.get("syncStateSet")}
    text = (f"\n#ClusterName\t{args.cluster}\n#BrokerName\t{args.broker_name}\n"
            f"#BrokerMasterAddr\t{_java(data['masterAddress'])}\n#MasterEpoch\t{_java(data['masterEpoch'])}\n"
            f"#SyncStateSetEpoch\t{_java(data['syncStateSetEpoch'])}\n")
    text += "".join(f"\t#Broker\t{bid}\t{addr}\n" for bid, addr in data["brokerAddrs"].items())
    return Result(data, text.rstrip("\n"))


def _java(value: Any) -> str:
    """A value as Java's printf shows it: null, true/false."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)


# ---- cleanBrokerMetadata -------------------------------------------------------------------------

def _clean_options(p: argparse.ArgumentParser) -> None:
    _a_option(p)
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-b", "--brokerControllerIdsToClean", dest="ids", help='broker controller ids, "1;2"')
    p.add_argument("-c", "--clusterName", dest="cluster")
    p.add_argument("-l", "--cleanLivingBroker", dest="clean_living", action="store_true",
                   help="also clean brokers that are still alive")


@command("cleanBrokerMetadata", "Clean metadata of broker on controller", _clean_options)
@without_namesrv
async def clean_broker_metadata(_admin: Any, args: argparse.Namespace) -> Result:
    if not args.clean_living and not args.cluster:
        raise AdminError("cleanLivingBroker option is false, clusterName option can not be empty.")
    fields = {"brokerName": args.broker_name, "isCleanLivingBroker": "true" if args.clean_living else "false",
              "invokeTime": str(int(time.time() * 1000))}
    if args.cluster:
        fields["clusterName"] = args.cluster
    if args.ids:
        fields["brokerControllerIdsToClean"] = args.ids
    async with _client(args) as client:
        leader = await _leader(client, args.controller, args.timeout)
        await _invoke(client, leader, RequestCode.CLEAN_BROKER_DATA, fields, timeout=args.timeout)
    return Result({"brokerName": args.broker_name, "cleaned": args.ids or "all"},
                  f"clear broker {args.broker_name} metadata from controller success! ")
