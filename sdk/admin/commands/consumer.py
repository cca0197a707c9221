"""mqadmin's consumer commands (org.apache.rocketmq.tools.command.consumer): updateSubGroup,
deleteSubGroup, consumerProgress, consumerStatus, consumer and getConsumerConfig, with upstream's
names, flags and output. consumerStatus writes one progress line per client on stderr, so stdout
stays the command's output.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.commands.connection import version_desc
from orbitmq.admin.commands.topic import _parse_attributes, delete_topic_everywhere
from orbitmq.admin.options import bool_type, target_options
from orbitmq.admin.output import format_timestamp, progress, render_table, write_file
from orbitmq.admin.registry import Result, command
from orbitmq.client import MQBrokerError
from orbitmq.common.constants import dlq_topic, retry_topic
from orbitmq.common.fastjson import message_queue_pairs
from orbitmq.common.subscription_group import SubscriptionGroupConfig, validate_group_attributes
from orbitmq.common.topic_config import normalize_attributes
from orbitmq.remoting.errors import RemotingError


def _update_sub_group_options(p: argparse.ArgumentParser) -> None:
    target_options(p)
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-s", "--consumeEnable", dest="consume_enable", type=bool_type)
    p.add_argument("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=bool_type)
    p.add_argument("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=bool_type)
    p.add_argument("-o", "--consumeMessageOrderly", dest="consume_message_orderly", type=bool_type)
    p.add_argument("-q", "--retryQueueNums", dest="retry_queue_nums", type=int)
    p.add_argument("-r", "--retryMaxTimes", dest="retry_max_times", type=int)
    p.add_argument("-i", "--brokerId", dest="broker_id", type=int)
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int)
    p.add_argument("-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed_enable", type=bool_type)
    # UpdateSubGroupSubCommand's long-only option, e.g. +priority.factor=50 (RIP-80).
    p.add_argument("--attributes", default=None, help="attribute(+a=b,+c=d,-e)")


_GROUP_FLAGS = ("consume_enable", "consume_from_min_enable", "consume_broadcast_enable", "consume_message_orderly",
                "retry_queue_nums", "retry_max_times", "broker_id", "which_broker_when_consume_slowly",
                "notify_consumer_ids_changed_enable")


@command("updateSubGroup", "Update or create subscription group", _update_sub_group_options)
async def update_sub_group(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.retry_queue_nums is not None and args.retry_queue_nums < 0:
        raise AdminError("retryQueueNums must not be negative")
    if args.retry_max_times is not None and args.retry_max_times < -1:
        raise AdminError("retryMaxTimes must be -1 or more")
    changes = _parse_attributes(args.attributes)
    lines, configs = [], []
    for _label, addr in await admin.targets(args.cluster, args.broker_addr):
        # Flags not given keep the broker's current value (or the default for a new group).
        config = await admin.get_subscription_group(addr, args.group) or SubscriptionGroupConfig(args.group)
        for name in _GROUP_FLAGS:
            value = getattr(args, name)
            if value is not None:
                setattr(config, name, value)
        if changes:
            config.attributes = normalize_attributes(changes, config.attributes)
            try:
                validate_group_attributes(config.attributes)
            except ValueError as exc:
                raise AdminError(str(exc)) from None
        await admin.create_subscription_group(addr, config)
        lines.append(f"create subscription group to {addr} success.")
        configs.append(config.to_json_dict())
    lines.append(json.dumps(configs[-1], ensure_ascii=False))
    return Result({"subscriptionGroupConfig": configs[-1], "count": len(configs)}, "\n".join(lines))


def _delete_sub_group_options(p: argparse.ArgumentParser) -> None:
    target_options(p)
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-r", "--removeOffset", dest="remove_offset", type=bool_type, default=False,
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
                lines += await delete_topic_everywhere(admin, args.cluster, topic)
            except MQBrokerError:
                pass
    return Result({"group": args.group, "deleted": True}, "\n".join(lines))


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


def _format_running_info(info: dict[str, Any]) -> str:
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


def _running_info_json(info: dict[str, Any]) -> dict[str, Any]:
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
        return Result(_running_info_json(info), _format_running_info(info))
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
        path = write_file(os.path.join(str(now), client_id), _format_running_info(info).encode("utf-8"))
        infos[client_id] = _running_info_json(info)
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


def _consumer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-s", "--jstack", action="store_true", help="Run jstack command in the consumer progress")


@command("consumer", "Query consumer's connection, status, etc.", _consumer_options)
async def consumer(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """consumerStatus under its older name: every online client's ConsumerRunningInfo, written to
    <now>/<clientId>, and whether the group's subscriptions agree."""
    args.client_id = None
    args.broker_addr = None
    return await consumer_status(admin, args)


def _consumer_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", required=True, help="subscription group name")


@command("getConsumerConfig", "Get consumer config by subscription group name!", _consumer_config_options)
async def get_consumer_config(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """The group's SubscriptionGroupConfig on every broker that has it, field by field."""
    group = args.group.strip()
    info = await admin.cluster_info()
    cluster_of = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
    docs, lines = [], []
    for broker_name, data in sorted(info.broker_addr_table.items()):
        addr = data.select_broker_addr()
        if not addr:
            continue
        config = await admin.get_subscription_group(addr, group)
        if config is None:
            continue
        doc = config.to_json_dict()
        cluster = cluster_of.get(broker_name, "")
        docs.append({"clusterName": cluster, "brokerName": broker_name, "subscriptionGroupConfig": doc})
        lines.append(f"============================={cluster}:{broker_name}=============================")
        lines += [f"{key:<40}=  {'' if value is None else _java_text(value)}" for key, value in doc.items()]
    if not docs:
        raise AdminError(f"subscription group {group} is on no broker")
    return Result(docs, "\n".join(lines))


def _java_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
