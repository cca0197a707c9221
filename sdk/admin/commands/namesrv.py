"""mqadmin's NameServer commands (org.apache.rocketmq.tools.command.namesrv): wipeWritePerm,
addWritePerm, getNamesrvConfig, updateNamesrvConfig, updateKvConfig and deleteKvConfig, each sent
to every NameServer of -n, with upstream's names, flags and output.
"""

from __future__ import annotations

import argparse

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.output import config_lines
from orbitmq.admin.registry import Result, UsageError, command
from orbitmq.client import MQBrokerError
from orbitmq.remoting.errors import RemotingError


def _broker_name_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")


async def _write_perm(admin: MQAdminExt, broker_name: str, wipe: bool) -> Result:
    verb = "wipe" if wipe else "add"
    lines, rows, failures = [], [], []
    for addr in admin.namesrv_addrs:
        try:
            count = await admin.write_perm_of_broker(addr, broker_name, wipe)
        except (AdminError, MQBrokerError, RemotingError) as exc:
            lines.append(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] Failed")
            failures.append(f"{addr}: {exc}")
            continue
        lines.append(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] OK, {count}")
        rows.append({"namesrvAddr": addr, "topicCount": count})
    if failures:
        raise AdminError(f"{verb} write perm of broker[{broker_name}] failed on {'; '.join(failures)}"
                         + (f" (done on {', '.join(r['namesrvAddr'] for r in rows)})" if rows else ""))
    return Result({"brokerName": broker_name, "namesrvs": rows}, "\n".join(lines))


@command("wipeWritePerm", "Wipe write perm of broker in all name server you defined in the -n param.",
         _broker_name_options)
async def wipe_write_perm(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return await _write_perm(admin, args.broker_name.strip(), wipe=True)


@command("addWritePerm", "Add write perm of broker in all name server you defined in the -n param.",
         _broker_name_options)
async def add_write_perm(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    return await _write_perm(admin, args.broker_name.strip(), wipe=False)


def _no_options(p: argparse.ArgumentParser) -> None:
    pass


@command("getNamesrvConfig", "Get configs of name server.", _no_options)
async def get_namesrv_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    data: dict[str, dict[str, str]] = {}
    lines: list[str] = []
    for addr in admin.namesrv_addrs:
        props = await admin.namesrv_config(addr)
        data[addr] = props
        lines.append(f"============{addr}============")
        lines += config_lines(props)
    return Result(data, "\n".join(lines))


def _key_value_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


@command("updateNamesrvConfig", "Update configs of name server.", _key_value_options)
async def update_namesrv_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    key, value = args.key.strip(), args.value.strip()
    if not key:
        raise UsageError("-k key must not be empty")
    for addr in admin.namesrv_addrs:
        await admin.update_namesrv_config(addr, {key: value})
    servers = "[" + ", ".join(admin.namesrv_addrs) + "]"
    return Result({"namesrvs": admin.namesrv_addrs, "key": key, "value": value},
                  f"update name server config success!{servers}\n{key} : {value}")


def _delete_kv_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--namespace", required=True, help="set the namespace")
    p.add_argument("-k", "--key", required=True, help="set the key name")


def _update_kv_options(p: argparse.ArgumentParser) -> None:
    _delete_kv_options(p)
    p.add_argument("-v", "--value", required=True, help="set the key value")


@command("updateKvConfig", "Create or update KV config.", _update_kv_options)
async def update_kv_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    namespace, key, value = args.namespace.strip(), args.key.strip(), args.value.strip()
    if not namespace or not key:
        raise UsageError("-s namespace and -k key must not be empty")
    await admin.put_kv_config(namespace, key, value)
    return Result({"namespace": namespace, "key": key, "value": value},
                  "create or update kv config to namespace success.")


@command("deleteKvConfig", "Delete KV config.", _delete_kv_options)
async def delete_kv_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    namespace, key = args.namespace.strip(), args.key.strip()
    await admin.delete_kv_config(namespace, key)
    return Result({"namespace": namespace, "key": key, "deleted": True}, "delete kv config from namespace success.")
