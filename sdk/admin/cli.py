"""`orbitmq admin <command> [options]`: mqadmin's command names and flags over Remoting.

Every command takes ``-n host:port[;host:port]`` (else NAMESRV_ADDR) and ``--json``. Output is
an aligned table by default and JSON with ``--json``; any failure prints one line
"orbitmq admin <command>: <reason>" on stderr and exits 1 (2 for a usage error).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from orbitmq.admin.admin_api import ORDER_TOPIC_CONFIG_NAMESPACE, AdminError, MQAdminExt
from orbitmq.admin.output import (
    format_timestamp,
    message_to_json,
    render_message,
    render_pairs,
    render_table,
    to_json,
)
from orbitmq.auth.client import install_signing
from orbitmq.client import MQBrokerError, MQClientError, resolve_namesrv_addr
from orbitmq.common.constants import MASTER_ID, PERM_READ, PERM_WRITE, dlq_topic, retry_topic
from orbitmq.common.route import RouteDataError
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig, normalize_attributes
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.tls import DEFAULT_TLS_CONFIG_FILE, tool_ssl_context

EXIT_FAILURE = 1
EXIT_USAGE = 2


@dataclass
class Result:
    """What a command produced: the JSON document and the human-readable text (None when the
    command printed its lines while it ran, as clusterRT does)."""

    data: Any
    text: str | None


Handler = Callable[[MQAdminExt, argparse.Namespace], Awaitable[Result]]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line instead of exiting with the usage text."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def command(name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None]):
    def register(handler: Handler) -> Handler:
        COMMANDS[name] = (help_text, configure, handler)
        return handler
    return register


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return lowered == "true"


def _timestamp(text: str) -> int:
    """resetOffsetByTime -s: milliseconds, "now", or yyyy-MM-dd#HH:mm:ss:SSS as mqadmin takes."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000)
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        moment = dt.datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad timestamp {text!r}: use milliseconds, now, or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(moment.timestamp() * 1000)


def _target_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="create/delete on this broker (ip:port)")
    p.add_argument("-c", "--clusterName", dest="cluster", help="create/delete on every master of this cluster")


# ---- topics ----------------------------------------------------------------------------------

def _update_topic_options(p: argparse.ArgumentParser) -> None:
    _target_options(p)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=PERM_READ | PERM_WRITE, help="2 W, 4 R, 6 RW")
    p.add_argument("-o", "--order", type=_bool, default=False, help="true for an ordered topic")
    p.add_argument("-a", "--attributes", default=None, help="e.g. +message.type=FIFO")


def _parse_attributes(raw: str | None) -> dict[str, str]:
    """AttributeParser.parseToMap for the CLI: "+k=v,-k2" -> {"+k": "v", "-k2": ""}."""
    changes: dict[str, str] = {}
    for item in (raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("-"):
            changes[item.split("=", 1)[0]] = ""
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("+") or len(key) < 2 or not value:
            raise AdminError(f"bad attribute {item!r}: expected +key=value or -key")
        changes[key] = value
    return changes


@command("updateTopic", "Update or create topic", _update_topic_options)
async def update_topic(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.read_queue_nums <= 0 or args.write_queue_nums <= 0:
        raise AdminError("readQueueNums (-r) and writeQueueNums (-w) must be positive")
    try:
        changes = _parse_attributes(args.attributes)
        normalize_attributes(changes)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    config = TopicConfig(topic_name=args.topic, read_queue_nums=args.read_queue_nums,
                         write_queue_nums=args.write_queue_nums, perm=args.perm, order=args.order)
    targets = await admin.targets(args.cluster, args.broker_addr)
    lines, done = [], []
    for _label, addr in targets:
        # The broker applies +/- edits to the attributes it already has (AttributeUtil).
        await admin.create_topic(addr, config, args.attributes)
        lines.append(f"create topic to {addr} success.")
        done.append(addr)
    if args.order and args.cluster:
        order_conf = ";".join(f"{name}:{args.write_queue_nums}" for name, _ in targets)
        await admin.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, args.topic, order_conf)
        lines.append(f"set cluster orderConf. isOrder={str(args.order).lower()}, orderConf=[{order_conf}]")
    shown = config.to_json_dict()
    shown["attributes"] = normalize_attributes(changes)
    lines.append(json.dumps(shown, ensure_ascii=False))
    return Result({"brokers": done, "topicConfig": shown}, "\n".join(lines))


def _delete_topic_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--clusterName", dest="cluster", required=True)


async def _delete_topic_everywhere(admin: MQAdminExt, cluster: str, topic: str) -> list[str]:
    for _name, addr in await admin.master_addrs(cluster):
        await admin.delete_topic_in_broker(addr, topic)
    await admin.delete_topic_in_namesrv(topic, cluster)
    return [f"delete topic [{topic}] from cluster [{cluster}] success.",
            f"delete topic [{topic}] from NameServer success."]


@command("deleteTopic", "Delete topic from broker and NameServer", _delete_topic_options)
async def delete_topic(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    lines = await _delete_topic_everywhere(admin, args.cluster, args.topic)
    return Result({"topic": args.topic, "cluster": args.cluster, "deleted": True}, "\n".join(lines))


def _topic_list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterModel", dest="cluster_model", action="store_true",
                   help="also show each topic's cluster")


@command("topicList", "Fetch all topic list from name server", _topic_list_options)
async def topic_list(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.cluster_model:  # with each topic's cluster and consumer groups, as upstream
        return await ops_commands.topic_list_cluster_model(admin)
    topics = await admin.topic_list()
    return Result(topics, "\n".join(topics))


def _topic_route_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-l", "--list", action="store_true", help="table format (the default here)")


@command("topicRoute", "Examine topic route info", _topic_route_options)
async def topic_route(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    route = await admin.topic_route(args.topic)
    addrs = {d.broker_name: d for d in route.broker_datas}
    rows = []
    for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
        data = addrs.get(q.broker_name)
        rows.append([data.cluster if data else "", q.broker_name,
                     data.broker_addrs.get(MASTER_ID, "") if data else "", q.read_queue_nums, q.write_queue_nums,
                     q.perm])
    text = render_table(["#ClusterName", "#BrokerName", "#BrokerAddr", "#ReadQueueNums", "#WriteQueueNums",
                         "#Perm"], rows)
    return Result(route.to_json_dict(), text)


def _topic_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)


@command("topicStatus", "Examine topic Status info", _topic_status_options)
async def topic_status(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    rows = await admin.topic_status(args.topic)
    text = render_table(["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
                        [[r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"],
                          format_timestamp(r["lastUpdateTimestamp"])] for r in rows])
    return Result(rows, text)


# ---- subscription groups -----------------------------------------------------------------------

def _update_sub_group_options(p: argparse.ArgumentParser) -> None:
    _target_options(p)
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-s", "--consumeEnable", dest="consume_enable", type=_bool)
    p.add_argument("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=_bool)
    p.add_argument("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=_bool)
    p.add_argument("-o", "--consumeMessageOrderly", dest="consume_message_orderly", type=_bool)
    p.add_argument("-q", "--retryQueueNums", dest="retry_queue_nums", type=int)
    p.add_argument("-r", "--retryMaxTimes", dest="retry_max_times", type=int)
    p.add_argument("-i", "--brokerId", dest="broker_id", type=int)
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int)
    p.add_argument("-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed_enable", type=_bool)


_GROUP_FLAGS = ("consume_enable", "consume_from_min_enable", "consume_broadcast_enable", "consume_message_orderly",
                "retry_queue_nums", "retry_max_times", "broker_id", "which_broker_when_consume_slowly",
                "notify_consumer_ids_changed_enable")


@command("updateSubGroup", "Update or create subscription group", _update_sub_group_options)
async def update_sub_group(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.retry_queue_nums is not None and args.retry_queue_nums < 0:
        raise AdminError("retryQueueNums must not be negative")
    if args.retry_max_times is not None and args.retry_max_times < -1:
        raise AdminError("retryMaxTimes must be -1 or more")
    lines, configs = [], []
    for _label, addr in await admin.targets(args.cluster, args.broker_addr):
        # Flags not given keep the broker's current value (or the default for a new group).
        config = await admin.get_subscription_group(addr, args.group) or SubscriptionGroupConfig(args.group)
        for name in _GROUP_FLAGS:
            value = getattr(args, name)
            if value is not None:
                setattr(config, name, value)
        await admin.create_subscription_group(addr, config)
        lines.append(f"create subscription group to {addr} success.")
        configs.append(config.to_json_dict())
    lines.append(json.dumps(configs[-1], ensure_ascii=False))
    return Result({"subscriptionGroupConfig": configs[-1], "count": len(configs)}, "\n".join(lines))


def _delete_sub_group_options(p: argparse.ArgumentParser) -> None:
    _target_options(p)
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-r", "--removeOffset", dest="remove_offset", type=_bool, default=False,
                   help="also remove the group's committed offsets")


@command("deleteSubGroup", "Delete subscription group from broker", _delete_sub_group_options)
async def delete_sub_group(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    lines = []
    for _label, addr in await admin.targets(args.cluster, args.broker_addr):
        await admin.delete_subscription_group(addr, args.group, args.remove_offset)
        where = f" in cluster [{args.cluster}]" if args.cluster and not args.broker_addr else ""
        lines.append(f"delete subscription group [{args.group}] from broker [{addr}]{where} success.")
    if args.cluster and not args.broker_addr:
        # mqadmin also drops the group's retry and dead-letter topics with the group.
        for topic in (retry_topic(args.group), dlq_topic(args.group)):
            try:
                lines += await _delete_topic_everywhere(admin, args.cluster, topic)
            except MQBrokerError:
                pass
    return Result({"group": args.group, "deleted": True}, "\n".join(lines))


# ---- consumption ----------------------------------------------------------------------------------

def _consumer_progress_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group")
    p.add_argument("-t", "--topicName", dest="topic")


@command("consumerProgress", "Query consumers's progress, speed", _consumer_progress_options)
async def consumer_progress(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if not args.group:
        rows = []
        for group in await admin.consumer_groups():
            offsets, tps = await admin.consume_stats(group, None)
            if not offsets:
                continue  # a group that never consumed anything (built-in groups, unused ones)
            rows.append({"group": group, "consumeTps": round(tps, 2), "diffTotal": sum(r.diff for r in offsets)})
        text = render_table(["#Group", "#TPS", "#Diff Total"],
                            [[r["group"], f"{r['consumeTps']:.2f}", r["diffTotal"]] for r in rows])
        return Result(rows, text)
    offsets, tps = await admin.consume_stats(args.group, args.topic)
    diff_total = sum(r.diff for r in offsets)
    rows = [{"topic": r.topic, "brokerName": r.broker_name, "queueId": r.queue_id, "brokerOffset": r.broker_offset,
             "consumerOffset": r.consumer_offset, "diff": r.diff, "lastTimestamp": r.last_timestamp}
            for r in offsets]
    table = render_table(["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                          "#LastTime"],
                         [[r["topic"], r["brokerName"], r["queueId"], r["brokerOffset"], r["consumerOffset"],
                           r["diff"], format_timestamp(r["lastTimestamp"])] for r in rows])
    text = f"{table}\n\nConsume TPS: {tps:.2f}\nDiff Total: {diff_total}"
    return Result({"group": args.group, "consumeTps": tps, "diffTotal": diff_total, "offsets": rows}, text)


def _reset_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-s", "--timestamp", type=_timestamp, required=True,
                   help="milliseconds, now, or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-f", "--force", type=_bool, default=True)


@command("resetOffsetByTime", "Reset consumer offset by timestamp(without client restart)", _reset_offset_options)
async def reset_offset_by_time(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    rows = await admin.reset_offset_by_timestamp(args.topic, args.group, args.timestamp, args.force)
    head = (f"rollback consumer offset by specified group[{args.group}], topic[{args.topic}], "
            f"force[{str(args.force).lower()}], timestamp(string)[{format_timestamp(args.timestamp)}], "
            f"timestamp(long)[{args.timestamp}]")
    table = render_table(["#brokerName", "#queueId", "#offset"],
                         [[r["brokerName"], r["queueId"], r["offset"]] for r in rows])
    return Result({"group": args.group, "topic": args.topic, "timestamp": args.timestamp, "offsets": rows},
                  f"{head}\n{table}")


# ---- messages ---------------------------------------------------------------------------------------

def _query_by_id_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id(s), comma separated")
    p.add_argument("-t", "--topic", help="look the id up as a unique key (UNIQ_KEY) in this topic")
    p.add_argument("-s", "--sendMessage", dest="resend", type=_bool, default=False,
                   help="true: resend the message (a DLQ message goes back to its group's retry topic)")
    p.add_argument("-f", "--bodyFormat", dest="charset", type=ops_commands.charset_type,
                   help="print message body by the specified format (charset)")
    p.add_argument("-g", "--consumerGroup", dest="group", help="with -d: this consumer consumes the message now")
    p.add_argument("-d", "--clientId", dest="client_id", help="with -g: the consumer's client id")


@command("queryMsgById", "Query Message by Id", _query_by_id_options)
async def query_msg_by_id(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Each message's body is written to /tmp/rocketmq/msgbodys/<msgId>, as upstream does."""
    ids = [i.strip() for i in args.msg_id.split(",") if i.strip()]
    if not ids:
        raise UsageError("-i msgId is empty")
    if bool(args.group) != bool(args.client_id):
        raise UsageError("-g consumerGroup and -d clientId go together")
    docs, texts = [], []
    for msg_id in ids:
        msg = await admin.view_message(msg_id, args.topic)
        if args.group:
            result = await ops_commands.consume_directly(admin, args.group.strip(), args.client_id.strip(), msg)
            docs.append(result)
            texts.append(ops_commands.directly_result_string(result))
            continue
        if args.resend:
            sent = await ops_commands.resend(admin, msg)
            docs.append(sent)
            texts.append(f"prepare resend msg. originalMsgId={msg_id}\n"
                         + json.dumps(sent, ensure_ascii=False))
            continue
        path = ops_commands.body_file(msg)
        doc = message_to_json(msg)
        doc["bodyPath"] = path
        text = render_message(msg) + f"\n{'Message Body Path:':<20} {path}"
        if args.charset:
            text += f"\n{'Message Body:':<20} {msg.body.decode(args.charset, errors='replace')}"
        docs.append(doc)
        texts.append(text)
    return Result(docs[0] if len(docs) == 1 else docs, "\n\n".join(texts))


def _resume_half_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="the transaction message's topic")
    p.add_argument("-i", "--msgId", dest="msg_id", required=True,
                   help="its message id (unique key), or the offset id of its record in TRANS_CHECK_MAX_TIME_TOPIC")


@command("resumeCheckHalfMessage", "Resume the transaction check of a discarded half message",
         _resume_half_options)
async def resume_check_half_message(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """OrbitMQ's command for MQAdminExt.resumeCheckHalfMessage (upstream offers it to the dashboard
    and the admin API only)."""
    await admin.resume_check_half_message(args.topic, args.msg_id.strip())
    return Result({"msgId": args.msg_id, "resumed": True}, f"resume check half message {args.msg_id} OK")


def _query_by_key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--msgKey", dest="key", required=True)
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=int, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=int, default=2**63 - 1)
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64)


@command("queryMsgByKey", "Query Message by Key", _query_by_key_options)
async def query_msg_by_key(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.max_num <= 0:
        raise AdminError("maxNum must be positive")
    found = await admin.query_message(args.topic, args.key, args.max_num, args.begin, args.end)
    text = render_table(["#Message ID", "#QID", "#Offset"],
                        [[m.uniq_id_or_msg_id, m.queue_id, m.queue_offset] for m in found])
    return Result([message_to_json(m) for m in found], text)


def _query_by_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)


@command("queryMsgByOffset", "Query Message by offset", _query_by_offset_options)
async def query_msg_by_offset(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    msg = await admin.message_at_offset(args.topic, args.broker_name, args.queue_id, args.offset)
    return Result(message_to_json(msg), render_message(msg))


# ---- cluster and brokers ----------------------------------------------------------------------------

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
                             "reachable": bool(runtime), "role": ha_commands.role_of(broker_id),
                             "epoch": await ha_commands.replica_epoch(admin, addr) if runtime else None})
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


def _broker_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr")
    p.add_argument("-c", "--clusterName", dest="cluster")


@command("brokerStatus", "Fetch broker runtime status data", _broker_status_options)
async def broker_status(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    targets = await admin.targets(args.cluster, args.broker_addr)
    tables = {}
    for _label, addr in targets:
        tables[addr] = dict(sorted((await admin.broker_runtime_info(addr)).items()))
    if len(tables) == 1:
        ((addr, table),) = tables.items()
        return Result(table, render_pairs([(f"{k}", f": {v}") for k, v in table.items()], width=32))
    text = "\n".join(render_pairs([(f"{addr:<24}{k}", f": {v}") for k, v in table.items()], width=56)
                     for addr, table in tables.items())
    return Result(tables, text)


# mqadmin's controller commands (getControllerMetaData, electMaster, ...) and the operator commands
# (topicClusterList, updateBrokerConfig, printMsg, ...; topicList -c and queryMsgById use their
# helpers) register themselves on import.
# The ACL 2.0 user/ACL commands (createUser ... listAcl, auth_commands) and queryMsgTraceById
# (trace_commands) register themselves too.
from orbitmq.admin import (  # noqa: E402,F401
    auth_commands,
    client_commands,
    controller_commands,
    lookup_commands,
    metadata_commands,
    ops_commands,
    trace_commands,
)

# ---- entry point ----------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="orbitmq admin", description="OrbitMQ administration (mqadmin commands).")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    for name, (help_text, configure, _handler) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("-n", "--namesrvAddr", dest="namesrv", help="NameServer address list, e.g. 127.0.0.1:9876")
        p.add_argument("--json", action="store_true", help="print JSON for scripts")
        p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each answer")
        p.add_argument("--accessKey", dest="access_key", default=os.environ.get("ORBITMQ_ACCESS_KEY"),
                       help="ACL 2.0: sign requests as this user (else ORBITMQ_ACCESS_KEY)")
        p.add_argument("--secretKey", dest="secret_key", default=os.environ.get("ORBITMQ_SECRET_KEY"),
                       help="ACL 2.0: that user's password (else ORBITMQ_SECRET_KEY)")
        p.add_argument("--tls", action="store_true", default=_env_true("ORBITMQ_TLS_ENABLE"),
                       help="talk to NameServers, brokers and controllers over TLS (tls.enable; else "
                            "ORBITMQ_TLS_ENABLE=true)")
        p.add_argument("--tlsConfigFile", dest="tls_config_file", default=os.environ.get("ORBITMQ_TLS_CONFIG_FILE"),
                       help="properties file of tls.client.* keys (upstream's tls.config.file; default "
                            f"{DEFAULT_TLS_CONFIG_FILE} when it exists): certPath/keyPath for mutual TLS, "
                            "authServer/trustCertPath")
        configure(p)
    return parser


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, MQBrokerError):
        where = f" (broker {exc.addr})" if exc.addr else ""
        return f"{exc.remark or 'request refused'} [code {exc.code}]{where}"
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


async def _run(handler: Handler, args: argparse.Namespace) -> Result:
    if getattr(handler, "without_namesrv", False):  # controller commands talk to -a only
        return await handler(None, args)  # type: ignore[arg-type]
    addrs = resolve_namesrv_addr(args.namesrv)
    async with MQAdminExt(addrs, timeout=args.timeout) as admin:
        admin.api.remoting.ssl_context = tool_ssl_context(args.tls, args.tls_config_file)
        if args.access_key:  # ACL 2.0: sign every request (AclClientRPCHook)
            install_signing(admin.api.remoting, (args.access_key, args.secret_key or ""))
        return await handler(admin, args)


def _usage_error(parser: argparse.ArgumentParser, name: str, exc: UsageError) -> int:
    """The command's usage on stdout, the one-line reason on stderr; exit 2."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            print(action.choices[name].format_usage().rstrip(), flush=True)
    print(f"orbitmq admin {name}: {exc}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help", "help"):
        parser.print_help()
        return 0 if argv else EXIT_USAGE
    name = argv[0]
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return _usage_error(parser, name, exc)
    _help, _configure, handler = COMMANDS[args.command]
    try:
        result = asyncio.run(_run(handler, args))
    except UsageError as exc:  # flags that parse but do not fit together (e.g. neither -b nor -c)
        return _usage_error(parser, name, exc)
    except (AdminError, MQBrokerError, MQClientError, RemotingError, RouteDataError, ValueError, OSError) as exc:
        print(f"orbitmq admin {args.command}: {_reason(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        if args.json or result.text is not None:  # None: the command printed its lines as it went
            print(to_json(result.data) if args.json else result.text, flush=True)
    except BrokenPipeError:  # e.g. piped into head: the reader has what it wanted
        sys.stderr.close()
    return 0


# The broker-side HA commands (getBrokerEpoch, haStatus) register themselves on import too;
# clusterList uses their role/epoch helpers.
from orbitmq.admin import ha_commands  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
