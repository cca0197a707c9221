"""mqadmin's operator commands: topic perms and clusters, broker/NameServer/KV config, client
connections, broker-wide consume stats, offsets (clone, skip), and messages (send, print, consume)
and the store's manual CommitLog delete.

Names, flags and output layouts follow Apache RocketMQ's tools SubCommands; each command
registers itself with ``cli.command`` on import. Commands that walk many queues or brokers write
one progress line per step on stderr, so stdout stays the command's output.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from orbitmq.admin import trace_commands
from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.cli import Result, UsageError, _bool, _timestamp, command
from orbitmq.admin.output import format_timestamp, render_table
from orbitmq.client import MQBrokerError
from orbitmq.client.results import PullStatus
from orbitmq.common.constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_READ,
    RETRY_GROUP_TOPIC_PREFIX,
    TOOLS_CONSUMER_GROUP,
)
from orbitmq.common.fastjson import message_queue_pairs
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.remoting.errors import RemotingError

# MQVersion.Version: from V4_0_0_SNAPSHOT (ordinal 212) on, every x.y.z has a SNAPSHOT then a
# release entry, up to V5_9_9; HIGHER_VERSION follows.
_V4_0_0_SNAPSHOT = 212
_HIGHER_VERSION = _V4_0_0_SNAPSHOT + 200 * 2


def version_desc(value: int) -> str:
    """MQVersion.getVersionDesc for 4.x and 5.x clients; older ordinals are shown as numbers."""
    if value >= _HIGHER_VERSION:
        return "HIGHER_VERSION"
    if value < _V4_0_0_SNAPSHOT:
        return str(value)
    index, release = divmod(value - _V4_0_0_SNAPSHOT, 2)
    major, rest = divmod(index, 100)
    name = f"V{major + 4}_{rest // 10}_{rest % 10}"
    return name if release else f"{name}_SNAPSHOT"


def progress(text: str) -> None:
    """One progress line for a long-running command (stderr: stdout is its output)."""
    print(text, file=sys.stderr, flush=True)


def _config_lines(props: dict[str, str]) -> list[str]:
    return [f"{k:<50}=  {v}" for k, v in props.items()]


def _perm(text: str) -> int:
    value = text.strip()
    if value not in ("2", "4", "6"):
        raise argparse.ArgumentTypeError(f"perm must be 2 (W), 4 (R) or 6 (RW), got {text!r}")
    return int(value)


def charset_type(text: str) -> str:
    try:
        return codecs.lookup(text.strip()).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset {text!r}") from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


# ---- topics ---------------------------------------------------------------------------------------

def _topic_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


@command("topicClusterList", "Get cluster info for topic.", _topic_cluster_options)
async def topic_cluster_list(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    clusters = await admin.topic_clusters(args.topic.strip())
    return Result(clusters, "\n".join(clusters))


def _update_topic_perm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="update the topic on this master broker")
    p.add_argument("-c", "--clusterName", dest="cluster", help="update the topic on every master of this cluster")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-p", "--perm", type=_perm, required=True,
                   help="set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]")


@command("updateTopicPerm", "Update topic perm.", _update_topic_perm_options)
async def update_topic_perm(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Only the permission changes: the rest is each broker's own current TopicConfig."""
    if not args.broker_addr and not args.cluster:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    topic = args.topic.strip()
    route = await admin.topic_route(topic)
    masters = admin.route_masters(route)
    if args.broker_addr:
        named = [(name, addr) for name, addr in masters if addr == args.broker_addr.strip()]
        if not named:
            raise AdminError(f"updateTopicPerm error broker not exit or broker is not master! "
                             f"({args.broker_addr} serves no queue of topic {topic} as a master)")
        targets = named
    elif args.cluster:
        in_cluster = {name for name, _addr in await admin.master_addrs(args.cluster.strip())}
        targets = [(name, addr) for name, addr in masters if name in in_cluster]
        if not targets:
            raise AdminError(f"topic {topic} has no queue on cluster {args.cluster}")
    lines: list[str] = []
    changed: list[dict[str, Any]] = []
    for _name, addr in targets:
        config = await admin.api.get_topic_config(addr, topic)
        if config is None:
            raise AdminError(f"topic {topic} does not exist on broker {addr}")
        old = config.perm
        if old == args.perm and args.broker_addr:
            lines.append("new perm equals to the old one!")
            changed.append({"brokerAddr": addr, "oldPerm": old, "perm": old, "changed": False})
            continue
        config.perm = args.perm
        await admin.create_topic(addr, config)
        lines.append(f"update topic perm from {old} to {args.perm} in {addr} success.")
        changed.append({"brokerAddr": addr, "oldPerm": old, "perm": args.perm, "changed": old != args.perm})
        if args.broker_addr:
            lines.append(json.dumps(config.to_json_dict(), ensure_ascii=False) + ".")
    return Result({"topic": topic, "brokers": changed}, "\n".join(lines))


async def _topic_list_rows(admin: MQAdminExt) -> list[dict[str, str]]:
    """One row per (topic, consuming group); a topic nobody consumes gets one row, group ""."""
    info = await admin.cluster_info()
    cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    out: list[dict[str, str]] = []
    for topic in await admin.topic_list():
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        cluster, groups = "", [""]
        try:
            route = await admin.topic_route(topic)
            if route.broker_datas:
                first = route.broker_datas[0]
                cluster = first.cluster or cluster_of.get(first.broker_name, "")
            groups = await admin.topic_consumed_by(topic) or [""]
        except (AdminError, MQBrokerError, RemotingError):
            pass  # deleted meanwhile, or a broker not answering: shown without groups
        out.extend({"clusterName": cluster, "topic": topic, "consumerGroup": g} for g in groups)
    return out


async def topic_list_cluster_model(admin: MQAdminExt) -> Result:
    """topicList -c: "#Cluster Name  #Topic  #Consumer Group", retry and DLQ topics left out."""
    rows = await _topic_list_rows(admin)
    text = render_table(["#Cluster Name", "#Topic", "#Consumer Group"],
                        [[r["clusterName"], r["topic"], r["consumerGroup"]] for r in rows])
    return Result(rows, text)


# ---- NameServer: write perm, config, KV ------------------------------------------------------------

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
        lines += _config_lines(props)
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


def _update_kv_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--namespace", required=True, help="set the namespace")
    p.add_argument("-k", "--key", required=True, help="set the key name")
    p.add_argument("-v", "--value", required=True, help="set the key value")


@command("updateKvConfig", "Create or update KV config.", _update_kv_options)
async def update_kv_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    namespace, key, value = args.namespace.strip(), args.key.strip(), args.value.strip()
    if not namespace or not key:
        raise UsageError("-s namespace and -k key must not be empty")
    await admin.put_kv_config(namespace, key, value)
    return Result({"namespace": namespace, "key": key, "value": value},
                  "create or update kv config to namespace success.")


def _delete_kv_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--namespace", required=True, help="set the namespace")
    p.add_argument("-k", "--key", required=True, help="set the key name")


@command("deleteKvConfig", "Delete KV config.", _delete_kv_options)
async def delete_kv_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    namespace, key = args.namespace.strip(), args.key.strip()
    await admin.delete_kv_config(namespace, key)
    return Result({"namespace": namespace, "key": key, "deleted": True}, "delete kv config from namespace success.")


# ---- broker config ---------------------------------------------------------------------------------

def _get_broker_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="get which broker")
    p.add_argument("-c", "--clusterName", dest="cluster", help="get which cluster")


@command("getBrokerConfig", "Get broker config by cluster or special broker.", _get_broker_config_options)
async def get_broker_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    sections: list[tuple[str, str]] = []
    if args.broker_addr:
        addr = args.broker_addr.strip()
        sections.append((f"============{addr}============", addr))
    elif args.cluster:
        for _name, master, slaves in await admin.cluster_broker_addrs(args.cluster.strip(), with_slaves=True):
            if master:
                sections.append((f"============Master: {master}============", master))
            for slave in slaves:
                sections.append((f"============My Master: {master or 'NO_MASTER'}=====Slave: {slave}============",
                                 slave))
    else:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    data: dict[str, dict[str, str]] = {}
    lines: list[str] = []
    for title, addr in sections:
        props = await admin.broker_config(addr)
        data[addr] = props
        lines.append(title)
        lines += _config_lines(props) if props else [f"Broker[{addr}] has no config property!"]
        lines.append("")
    return Result(data, "\n".join(lines).rstrip("\n"))


def _update_broker_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="update which broker")
    p.add_argument("-c", "--clusterName", dest="cluster", help="update which cluster")
    p.add_argument("-a", "--updateAllBroker", dest="all_brokers", type=_bool, default=False,
                   help="true: with -c, update the slaves too")
    p.add_argument("-k", "--key", required=True, help="config key")
    p.add_argument("-v", "--value", required=True, help="config value")


@command("updateBrokerConfig", "Update broker's config.", _update_broker_config_options)
async def update_broker_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Every target is checked to know the key before any is changed; the broker type-checks the
    value and applies nothing when it is refused (it changes the running broker, as upstream)."""
    key, value = args.key.strip(), args.value.strip()
    if not key:
        raise UsageError("-k key must not be empty")
    if args.broker_addr:
        targets = [args.broker_addr.strip()]
    elif args.cluster:
        targets = []
        for _name, master, slaves in await admin.cluster_broker_addrs(args.cluster.strip(), args.all_brokers):
            targets += ([master] if master else []) + slaves
        if not targets:
            raise AdminError(f"cluster {args.cluster} has no broker online")
    else:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    for addr in targets:
        if key not in await admin.broker_config(addr):
            raise AdminError(f"unknown broker config key {key} (broker {addr}); nothing was changed")
    lines = []
    for addr in targets:
        await admin.update_broker_config(addr, {key: value})
        lines.append(f"update broker config success, {addr}")
    return Result({"brokers": targets, "key": key, "value": value}, "\n".join(lines))


# ---- connections and consume stats -------------------------------------------------------------------

def _consumer_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address")


@command("consumerConnection", "Query consumer's socket connection, client version and subscription.",
         _consumer_connection_options)
async def consumer_connection(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    _addr, cc = await admin.consumer_connection(args.group.strip(), args.broker_addr)
    conns = sorted(cc.get("connectionSet", []), key=lambda c: str(c.get("clientId")))
    rows = [[c.get("clientId"), c.get("clientAddr"), c.get("language"), version_desc(int(c.get("version") or 0))]
            for c in conns]
    subs = [(str(sd.get("topic", topic)), str(sd.get("subString", "")))
            for topic, sd in sorted((cc.get("subscriptionTable") or {}).items())]
    text = "\n".join([
        render_table(["#ClientId", "#ClientAddr", "#Language", "#Version"], rows), "",
        "Below is subscription:", render_table(["#Topic", "#SubExpression"], subs), "",
        f"ConsumeType: {cc.get('consumeType')}", f"MessageModel: {cc.get('messageModel')}",
        f"ConsumeFromWhere: {cc.get('consumeFromWhere')}"])
    return Result(cc, text)


def _producer_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True, help="producer group name")
    p.add_argument("-t", "--topic", required=True, help="topic name")


@command("producerConnection", "Query producer's socket connection and client version.",
         _producer_connection_options)
async def producer_connection(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    pc = await admin.producer_connection(args.group.strip(), args.topic.strip())
    conns = sorted(pc["connectionSet"], key=lambda c: str(c.get("clientId")))
    lines = [f"{i:04d}  {str(c.get('clientId')):<32} {str(c.get('clientAddr')):<22} {str(c.get('language')):<8} "
             f"{version_desc(int(c.get('version') or 0))}" for i, c in enumerate(conns, 1)]
    return Result(pc, "\n".join(lines))


PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"  # ConsumerRunningInfo property names
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


def format_running_info(info: dict[str, Any]) -> str:
    """ConsumerRunningInfo.formatString: properties, subscriptions, offsets, queues, RT and TPS."""
    out = ["#Consumer Properties#"]
    out += [f"{str(k):<40}: {v}" for k, v in (info.get("properties") or {}).items()]
    out += ["", "", "#Consumer Subscription#"]
    for i, sd in enumerate(info.get("subscriptionSet") or [], 1):
        out.append(f"{i:03d} Topic: {str(sd.get('topic')):<40} ClassFilter: {str(bool(sd.get('classFilterMode'))).lower():<8} "
                   f"SubExpression: {sd.get('subString')}")
    queues = sorted(message_queue_pairs(info.get("mqTable")),
                    key=lambda p: (str(p[0].get("topic")), str(p[0].get("brokerName")), int(p[0].get("queueId", 0))))
    out += ["", "", "#Consumer Offset#", f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Consumer Offset':<20}"]
    out += [f"{str(mq.get('topic')):<32}  {str(mq.get('brokerName')):<32}  {int(mq.get('queueId', 0)):<4}  "
            f"{int((pq or {}).get('commitOffset', 0)):<20}" for mq, pq in queues]
    out += ["", "", "#Consumer MQ Detail#", f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  #ProcessQueueInfo"]
    out += [f"{str(mq.get('topic')):<64}  {str(mq.get('brokerName')):<32}  {int(mq.get('queueId', 0)):<4}  "
            f"{json.dumps(pq, ensure_ascii=False, sort_keys=True)}" for mq, pq in queues]
    out += ["", "", "#Consumer RT&TPS#",
            f"{'#Topic':<64}  {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} {'#ConsumeOK TPS':>14} "
            f"{'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}"]
    for topic, st in sorted((info.get("statusTable") or {}).items()):
        st = st or {}
        out.append(f"{topic:<32}  {float(st.get('pullRT', 0)):14.2f} {float(st.get('pullTPS', 0)):14.2f} "
                   f"{float(st.get('consumeRT', 0)):14.2f} {float(st.get('consumeOKTPS', 0)):14.2f} "
                   f"{float(st.get('consumeFailedTPS', 0)):18.2f} {int(st.get('consumeFailedMsgs', 0)):25d}")
    if info.get("userConsumerInfo"):
        out += ["", "", "#User Consume Info#"]
        out += [f"{str(k):<40}: {v}" for k, v in info["userConsumerInfo"].items()]
    if info.get("jstack"):
        out += ["", "", "#Consumer jstack#", str(info["jstack"])]
    return "\n".join(out)


def running_info_json(info: dict[str, Any]) -> dict[str, Any]:
    """The running info for --json: its MessageQueue-keyed tables as lists of queue entries."""
    doc = dict(info)
    for table in ("mqTable", "mqPopTable"):
        if table in doc:
            doc[table] = [{**mq, **(value or {})} for mq, value in message_queue_pairs(doc[table])]
    return doc


def _subscriptions(info: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((str(sd.get("topic")), str(sd.get("subString"))) for sd in info.get("subscriptionSet") or [])


def _consumer_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-i", "--clientId", dest="client_id", help="The consumer's client id")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="broker address")
    p.add_argument("-s", "--jstack", action="store_true", help="Run jstack command in the consumer progress")


@command("consumerStatus", "Query consumer's internal data structure.", _consumer_status_options)
async def consumer_status(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Each online client's ConsumerRunningInfo, asked through the broker; without -i each one is
    written to <now>/<clientId> and the group's subscriptions are compared, as upstream."""
    group = args.group.strip()
    addr, cc = await admin.consumer_connection(group, args.broker_addr)
    if args.client_id:
        info = await admin.consumer_running_info(addr, group, args.client_id.strip(), args.jstack)
        return Result(running_info_json(info), format_running_info(info))
    now = int(time.time() * 1000)
    rows, infos, lines = [], {}, []
    conns = sorted(cc.get("connectionSet", []), key=lambda c: str(c.get("clientId")))
    for i, conn in enumerate(conns, 1):
        client_id = str(conn.get("clientId"))
        progress(f"[{i}/{len(conns)}] {client_id}")
        try:
            info = await admin.consumer_running_info(addr, group, client_id, args.jstack)
        except (AdminError, MQBrokerError, RemotingError) as exc:
            lines.append(f"{client_id}: {exc}")
            continue
        path = write_file(os.path.join(str(now), client_id), format_running_info(info).encode("utf-8"))
        infos[client_id] = running_info_json(info)
        rows.append({"index": len(rows) + 1, "clientId": client_id,
                     "version": version_desc(int(conn.get("version") or 0)), "file": path})
    text = render_table(["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"],
                        [[r["index"], r["clientId"], r["version"], r["file"]] for r in rows])
    same = len({tuple(_subscriptions(i)) for i in infos.values()}) <= 1
    if infos:
        text += ("\n\nSame subscription in the same group of consumer" if same
                 else "\n\nWARN: Different subscription in the same group of consumer!!!")
    if lines:
        text += "\n\n" + "\n".join(lines)
    if not infos:
        raise AdminError(f"no client of consumer group {group} answered: {'; '.join(lines)}")
    return Result({"clients": rows, "sameSubscription": same, "runningInfo": infos}, text)


def is_push_type(info: dict[str, Any]) -> bool:
    return (info.get("properties") or {}).get(PROP_CONSUME_TYPE) == "CONSUME_PASSIVELY"


async def consume_directly(admin: MQAdminExt, group: str, client_id: str, msg: MessageExt) -> dict[str, Any]:
    """queryMsgById -g -d: a push consumer client consumes the message now (e.g. a dead letter)."""
    addr, _cc = await admin.consumer_connection(group)
    info = await admin.consumer_running_info(addr, group, client_id, False)
    if not is_push_type(info):
        raise AdminError(f"this {client_id} client is not push consumer ,not support direct push")
    return await admin.consume_message_directly(group, client_id, msg)


def directly_result_string(result: dict[str, Any]) -> str:
    """ConsumeMessageDirectlyResult.toString."""
    def text(value: Any) -> str:
        return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return (f"ConsumeMessageDirectlyResult [order={text(result.get('order', False))}, "
            f"autoCommit={text(result.get('autoCommit', True))}, consumeResult={text(result.get('consumeResult'))}, "
            f"remark={text(result.get('remark'))}, spentTimeMills={text(result.get('spentTimeMills', 0))}]")

def _broker_consume_stats_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="Broker address")
    p.add_argument("-t", "--timeoutMillis", dest="timeout_millis", type=_positive, default=50000,
                   help="request timeout Millis")
    p.add_argument("-l", "--level", type=int, default=0, help="threshold of print diff")
    p.add_argument("-o", "--order", type=_bool, default=False, help="order topic")


@command("brokerConsumeStats", "Fetch broker consume stats data.", _broker_consume_stats_options)
async def broker_consume_stats(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    admin.api.timeout = args.timeout_millis / 1000
    stats = await admin.broker_consume_stats(args.broker_addr.strip(), args.order)
    rows: list[dict[str, Any]] = []
    for entry in stats.get("consumeStatsList") or []:
        for group, per_topic in (entry or {}).items():
            for consume_stats in per_topic or []:
                pairs = message_queue_pairs((consume_stats or {}).get("offsetTable"))
                for mq, wrapper in sorted(pairs, key=lambda p: (p[0].get("topic", ""), p[0].get("brokerName", ""),
                                                                int(p[0].get("queueId", 0)))):
                    wrapper = wrapper or {}
                    broker_offset, consumer_offset = int(wrapper.get("brokerOffset", 0)), int(
                        wrapper.get("consumerOffset", 0))
                    diff = broker_offset - consumer_offset
                    last = int(wrapper.get("lastTimestamp", 0))
                    # Upstream prints a queue only once it was consumed (lastTimestamp > 0).
                    if diff < args.level or last <= 0:
                        continue
                    rows.append({"topic": mq.get("topic"), "group": group, "brokerName": mq.get("brokerName"),
                                 "queueId": int(mq.get("queueId", 0)), "brokerOffset": broker_offset,
                                 "consumerOffset": consumer_offset, "diff": diff, "lastTimestamp": last})
    total = int(stats.get("totalDiff", 0) or 0)
    table = render_table(["#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                          "#LastTime"],
                         [[r["topic"], r["group"], r["brokerName"], r["queueId"], r["brokerOffset"],
                           r["consumerOffset"], r["diff"], format_timestamp(r["lastTimestamp"])] for r in rows])
    return Result({"brokerAddr": stats.get("brokerAddr"), "totalDiff": total, "offsets": rows},
                  f"{table}\n\nDiff Total: {total}")


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

# ---- offsets ------------------------------------------------------------------------------------------

def _clone_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--srcGroup", dest="src", required=True, help="set source consumer group")
    p.add_argument("-d", "--destGroup", dest="dest", required=True, help="set destination consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument("-o", "--offline", type=_bool, default=False,
                   help="the group or the topic is offline (true: no warning about online consumers)")


@command("cloneGroupOffset", "Clone offset from other group.", _clone_offset_options)
async def clone_group_offset(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    src, dest, topic = args.src.strip(), args.dest.strip(), args.topic.strip()
    route = await admin.topic_route(topic)
    addr_of = {d.broker_name: d.select_broker_addr() for d in route.broker_datas}
    # Without a topic the brokers list only the topics the group committed offsets in (as
    # upstream's examineConsumeStats(srcGroup)); a group that never consumed the topic is refused.
    offsets = [r for r in (await admin.consume_stats(src, None))[0] if r.topic == topic]
    if not offsets:
        raise AdminError(f"consumer group {src} has no offsets for topic {topic}")
    cloned = []
    for row in offsets:
        addr = addr_of.get(row.broker_name)
        if not addr or row.consumer_offset < 0:
            continue
        await admin.update_consumer_offset(addr, dest, topic, row.queue_id, row.consumer_offset)
        cloned.append({"brokerName": row.broker_name, "queueId": row.queue_id, "offset": row.consumer_offset})
    lines = []
    if not args.offline:
        try:
            await admin.consumer_connection(dest)
            lines.append(f"WARN: consumer group {dest} is online; its clients may commit their own offsets "
                         f"over the cloned ones.")
        except AdminError:
            pass  # not online: nothing will overwrite the clone
    lines.append(f"clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]")
    return Result({"srcGroup": src, "destGroup": dest, "topic": topic, "offsets": cloned}, "\n".join(lines))


def _skip_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="set the consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument("-f", "--force", type=_bool, default=True,
                   help="set the force rollback by timestamp switch[true|false]")
    p.add_argument("-c", "--cluster", help="Cluster name: only the topic's brokers in this cluster")


@command("skipAccumulatedMessage", "Skip all messages that are accumulated (not consumed) currently.",
         _skip_options)
async def skip_accumulated_message(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    names = None
    if args.cluster:
        names = {name for name, _addr in await admin.master_addrs(args.cluster.strip())}
    rows = await admin.reset_offset_by_timestamp(args.topic.strip(), args.group.strip(), -1, args.force,
                                                 broker_names=names)
    if not rows:
        raise AdminError(f"topic {args.topic} has no queue on cluster {args.cluster}")
    text = render_table(["#brokerName", "#queueId", "#offset"], [[r["brokerName"], r["queueId"], r["offset"]]
                                                                 for r in rows])
    return Result({"group": args.group, "topic": args.topic, "offsets": rows}, text)


# ---- the store ------------------------------------------------------------------------------------------

def _delete_commit_log_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="Broker address")
    p.add_argument("-c", "--cluster", help="clustername")


async def on_masters(admin: MQAdminExt, args: argparse.Namespace, name: str,
                     call: Callable[[str], Awaitable[None]]) -> Result:
    """A store request to -b, else to every master of -c, else to every master of every cluster
    (upstream with neither flag), one progress line each: deleteExpiredCommitLog, cleanExpiredCQ,
    cleanUnusedTopic."""
    if args.broker_addr:
        targets = [args.broker_addr.strip()]
    elif args.cluster:
        targets = [addr for _n, addr in await admin.master_addrs(args.cluster.strip())]
    else:
        targets = [addr for _n, addr in await admin.all_master_addrs()]
    if not targets:
        raise AdminError("no master broker online")
    for i, addr in enumerate(targets, 1):
        progress(f"[{i}/{len(targets)}] {name} {addr}")
        await call(addr)
    return Result({"brokers": targets, "success": True}, "success")


@command("deleteExpiredCommitLog", "Delete expired CommitLog files.", _delete_commit_log_options)
async def delete_expired_commit_log(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """The broker's next retention passes delete segments older than fileReservedTime now."""
    return await on_masters(admin, args, "deleteExpiredCommitLog", admin.delete_expired_commit_log)


# ---- messages ---------------------------------------------------------------------------------------------

def _send_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="Topic name")
    p.add_argument("-p", "--body", required=True, help="UTF-8 string format of the message body")
    p.add_argument("-k", "--key", help="Message keys")
    p.add_argument("-c", "--tags", help="Message tags")
    p.add_argument("-b", "--broker", help="Send message to target broker")
    p.add_argument("-i", "--qid", type=int, help="Send message to target queue")
    p.add_argument("-m", "--msgTraceEnable", dest="trace", type=_bool, default=False,
                   help="Message Trace Enable, Default: false")


@command("sendMessage", "Send a message.", _send_options)
async def send_message(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.qid is not None and not args.broker:
        raise UsageError("Broker name must be set if the queue is chosen!")
    msg = Message(args.topic.strip(), args.body.strip().encode("utf-8"))
    if args.tags:
        msg.put_property(MessageConst.TAGS, args.tags.strip())
    if args.key:
        msg.put_property(MessageConst.KEYS, args.key.strip())
    group = str(int(time.time() * 1000))
    started = time.monotonic()
    result = await admin.send(msg, group, args.broker.strip() if args.broker else None, args.qid)
    if args.trace:  # as a Remoting producer with enableMsgTrace: a Pub record in RMQ_SYS_TRACE_TOPIC
        await trace_commands.send_pub_trace(admin, msg, group, result, int((time.monotonic() - started) * 1000))
    row = {"brokerName": result.broker_name, "queueId": result.queue_id, "sendStatus": result.status.value,
           "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id, "queueOffset": result.queue_offset}
    text = render_table(["#Broker Name", "#QID", "#Send Result", "#MsgId"],
                        [[row["brokerName"], row["queueId"], row["sendStatus"], row["msgId"]]])
    return Result(row, text)


def message_to_string(msg: MessageExt, broker_name: str) -> str:
    """MessageExt.toString's fields, as printMsg shows each message."""
    props = ", ".join(f"{k}={v}" for k, v in msg.properties.items())
    return (f"MessageExt [brokerName={broker_name}, queueId={msg.queue_id}, storeSize={msg.store_size}, "
            f"queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, bornTimestamp={msg.born_timestamp}, "
            f"bornHost={msg.born_host}, storeTimestamp={msg.store_timestamp}, storeHost={msg.store_host}, "
            f"msgId={msg.msg_id}, commitLogOffset={msg.commit_log_offset}, bodyCRC={msg.body_crc}, "
            f"reconsumeTimes={msg.reconsume_times}, preparedTransactionOffset={msg.prepared_transaction_offset}, "
            f"toString()=Message{{topic='{msg.topic}', flag={msg.flag}, properties={{{props}}}, "
            f"body=[{len(msg.body)} bytes]}}]")


def _mq_string(topic: str, broker_name: str, queue_id: int) -> str:
    return f"MessageQueue [topic={topic}, brokerName={broker_name}, queueId={queue_id}]"


def _body(msg: MessageExt, charset: str) -> str:
    return msg.body.decode(charset, errors="replace")


async def _scan_queue(admin: MQAdminExt, addr: str, topic: str, broker_name: str, queue_id: int, begin: int,
                      end: int, subscription: str, group: str, charset: str, print_body: bool,
                      lines: list[str], found: list[dict[str, Any]]) -> None:
    """Pull [begin, end) of one queue, 32 at a time, printing as printMsg does."""
    mq = _mq_string(topic, broker_name, queue_id)
    offset = begin
    while offset < end:
        result = await admin.pull(addr, topic, queue_id, offset, min(32, end - offset), subscription, group)
        previous, offset = offset, result.next_begin_offset
        if result.status == PullStatus.FOUND:
            for msg in result.messages:
                if msg.queue_offset >= end:
                    continue
                body = _body(msg, charset) if print_body else "NOT PRINT BODY"
                lines.append(f"MSGID: {msg.uniq_id_or_msg_id} {message_to_string(msg, broker_name)} BODY: {body}")
                found.append({"brokerName": broker_name, "queueId": queue_id, "queueOffset": msg.queue_offset,
                              "msgId": msg.uniq_id_or_msg_id, "offsetMsgId": msg.msg_id, "topic": msg.topic,
                              "tags": msg.tags, "keys": msg.keys, "storeTimestamp": msg.store_timestamp,
                              "body": _body(msg, charset) if print_body else None})
        elif result.status == PullStatus.NO_MATCHED_MSG:
            lines.append(f"{mq} no matched msg. status={result.status.value}, offset={offset}")
        if result.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG) or offset <= previous:
            lines.append(f"{mq} print msg finished. status={result.status.value}, offset={offset}")
            return


def _print_msg_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--charsetName", dest="charset", type=charset_type, default="utf-8",
                   help="CharsetName(eg: UTF-8,GBK)")
    p.add_argument("-s", "--subExpression", dest="sub_expression", default="*",
                   help="Subscribe Expression(eg: TagA || TagB)")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=_timestamp,
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-e", "--endTimestamp", dest="end", type=_timestamp,
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-d", "--printBody", dest="print_body", type=_bool, default=True, help="print body")
    p.add_argument("-l", "--lmqParentTopic", dest="lmq_parent", help="Lmq parent topic, lmq is used to find the route.")


@command("printMsg", "Print Message Detail.", _print_msg_options)
async def print_msg(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    topic = args.topic.strip()
    route = await admin.topic_route(args.lmq_parent.strip() if args.lmq_parent else topic)
    queues = [(d.broker_name, q) for d in route.queue_datas if d.perm & PERM_READ
              for q in range(d.read_queue_nums)]
    addr_of = {d.broker_name: d.select_broker_addr() for d in route.broker_datas}
    lines: list[str] = []
    found: list[dict[str, Any]] = []
    for i, (broker_name, queue_id) in enumerate(sorted(queues), 1):
        addr = addr_of.get(broker_name)
        if not addr:
            continue
        progress(f"[{i}/{len(queues)}] {_mq_string(topic, broker_name, queue_id)}")
        min_offset, max_offset = await admin.queue_bounds(addr, topic, queue_id)
        if args.begin is not None:
            min_offset = await admin.search_offset(addr, topic, queue_id, args.begin)
        if args.end is not None:
            max_offset = await admin.search_offset(addr, topic, queue_id, args.end)
        lines.append(f"minOffset={min_offset}, maxOffset={max_offset}, {_mq_string(topic, broker_name, queue_id)}")
        await _scan_queue(admin, addr, topic, broker_name, queue_id, min_offset, max_offset, args.sub_expression,
                          TOOLS_CONSUMER_GROUP, args.charset, args.print_body, lines, found)
        lines.append("--------------------------------------------------------")
    return Result(found, "\n".join(lines))


def _consume_message_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="Topic name")
    p.add_argument("-b", "--brokerName", dest="broker_name", help="Broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, help="Queue Id")
    p.add_argument("-o", "--offset", type=int, help="Queue offset")
    p.add_argument("-g", "--consumerGroup", dest="group", default=TOOLS_CONSUMER_GROUP, help="Consumer group name")
    p.add_argument("-s", "--beginTimestamp", dest="begin", type=_timestamp,
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-e", "--endTimestamp", dest="end", type=_timestamp,
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-c", "--MessageNumber", dest="count", type=_positive, default=128,
                   help="Number of message to be consumed")


@command("consumeMessage", "Consume message.", _consume_message_options)
async def consume_message(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Pull messages without committing offsets: all queues (DEFAULT), one queue, or from an offset."""
    if args.queue_id is not None and not args.broker_name:
        raise UsageError("Please set the brokerName before queueId!")
    if args.offset is not None and args.queue_id is None:
        raise UsageError("Please set queueId before offset!")
    now = int(time.time() * 1000)
    if args.begin is not None and args.begin > now:
        raise UsageError("Please set the beginTimestamp before now!")
    if args.end is not None and args.end > now:
        raise UsageError("Please set the endTimestamp before now!")
    if args.begin is not None and args.end is not None and args.begin > args.end:
        raise UsageError("Please make sure that the beginTimestamp is less than or equal to the endTimestamp")
    topic = args.topic.strip()
    route = await admin.topic_route(topic)
    addr_of = {d.broker_name: d.select_broker_addr() for d in route.broker_datas}
    if args.queue_id is not None:
        if args.broker_name not in addr_of:
            raise AdminError(f"broker {args.broker_name} serves no queue of topic {topic}")
        queues = [(args.broker_name, args.queue_id)]
    else:
        queues = sorted((d.broker_name, q) for d in route.queue_datas if d.perm & PERM_READ
                        for q in range(d.read_queue_nums))
    lines: list[str] = []
    found: list[dict[str, Any]] = []
    left = args.count
    for i, (broker_name, queue_id) in enumerate(queues, 1):
        addr = addr_of.get(broker_name)
        if left <= 0 or not addr:
            break
        progress(f"[{i}/{len(queues)}] {_mq_string(topic, broker_name, queue_id)}")
        min_offset, max_offset = await admin.queue_bounds(addr, topic, queue_id)
        if args.begin is not None:
            min_offset = await admin.search_offset(addr, topic, queue_id, args.begin)
        if args.end is not None:
            max_offset = await admin.search_offset(addr, topic, queue_id, args.end)
        if args.offset is not None:
            if args.offset > max_offset:
                lines.append(f"{_mq_string(topic, broker_name, queue_id)} no matched msg, offset={args.offset}")
                continue
            min_offset = max(min_offset, args.offset)
        if max_offset - min_offset > left:
            lines.append(f"The older {left} message of the {queue_id} queue will be provided")
            max_offset = min_offset + left
        before = len(found)
        if max_offset > min_offset:
            lines.append("Consume ok")
        await _scan_queue(admin, addr, topic, broker_name, queue_id, min_offset, max_offset, "*", args.group,
                          "utf-8", True, lines, found)
        left -= len(found) - before
    return Result(found, "\n".join(lines))


def write_file(path: str, data: bytes) -> str:
    """A CLI-side file (the admin process, not a server loop), its directory made as needed."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)
    return path


def body_file(msg: MessageExt, directory: str = "/tmp/rocketmq/msgbodys") -> str:
    """QueryMsgByIdSubCommand.createBodyFile: the body, raw, in <directory>/<msgId>."""
    return write_file(os.path.join(directory, msg.uniq_id_or_msg_id), msg.body)


async def resend(admin: MQAdminExt, msg: MessageExt) -> dict[str, Any]:
    """queryMsgById -s true: send the stored message again (producer group ReSendMsgById).

    A dead-letter message goes back to its group's retry topic (what RETRY_TOPIC/the DLQ name
    say), so the group consumes it again; any other message goes to its own topic.
    """
    # A fresh message id, and reconsume counting starts over (the header carries it for a retry topic).
    dropped = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageConst.RECONSUME_TIME,
               MessageConst.MAX_RECONSUME_TIMES}
    props = {k: v for k, v in msg.properties.items() if k not in dropped}
    topic = msg.topic
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        topic = RETRY_GROUP_TOPIC_PREFIX + topic[len(DLQ_GROUP_TOPIC_PREFIX):]
    out = Message(topic, msg.body, msg.flag, props)
    result = await admin.send(out, "ReSendMsgById")
    return {"originalMsgId": msg.uniq_id_or_msg_id, "topic": topic, "sendStatus": result.status.value,
            "msgId": result.msg_id, "brokerName": result.broker_name, "queueId": result.queue_id,
            "queueOffset": result.queue_offset}



def _resend_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id(s), comma separated")
    p.add_argument("-t", "--topic", help="look the id up as a unique key (UNIQ_KEY) in this topic")


@command("resendMsgById", "Resend messages by id (queryMsgById -s true); a DLQ message goes back to its "
         "group's retry topic.", _resend_options)
async def resend_msg_by_id(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Not an upstream command name: the issue's name for upstream's ``queryMsgById -s true``."""
    ids = [i.strip() for i in args.msg_id.split(",") if i.strip()]
    if not ids:
        raise UsageError("-i msgId is empty")
    docs, lines = [], []
    for msg_id in ids:
        sent = await resend(admin, await admin.view_message(msg_id, args.topic))
        docs.append(sent)
        lines.append(f"prepare resend msg. originalMsgId={msg_id}\n" + json.dumps(sent, ensure_ascii=False))
    return Result(docs[0] if len(docs) == 1 else docs, "\n".join(lines))
