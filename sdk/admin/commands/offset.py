"""mqadmin's offset commands (org.apache.rocketmq.tools.command.offset): resetOffsetByTime,
resetOffsetByTimeOld, cloneGroupOffset, skipAccumulatedMessage and getConsumerStatus, with
upstream's names, flags and output.
"""

from __future__ import annotations

import argparse

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.options import bool_type, timestamp_type
from orbitmq.admin.output import format_timestamp, render_table
from orbitmq.admin.registry import Result, UsageError, command


def _reset_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-s", "--timestamp", type=timestamp_type, required=True,
                   help="milliseconds, now, or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-f", "--force", type=bool_type, default=True)


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


def _reset_old_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="set the consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument("-s", "--timestamp", required=True, type=timestamp_type,
                   help="set the timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-f", "--force", type=bool_type, default=True,
                   help="set the force rollback by timestamp switch[true|false]")
    p.add_argument("-c", "--cluster", help="Cluster name or lmq parent topic, lmq is used to find the route.")


@command("resetOffsetByTimeOld", "Reset consumer offset by timestamp(execute this command required client restart).",
         _reset_old_options)
async def reset_offset_by_time_old(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Each queue's committed offset set to the first message stored at or after -s (-1: the
    queue's end), written straight to the brokers; running clients keep their own positions
    until they restart. Without -f true only moves backwards are made."""
    group, topic, timestamp = args.group.strip(), args.topic.strip(), args.timestamp
    if args.cluster and args.cluster.strip() != topic:
        raise UsageError("-c names an LMQ parent topic; OrbitMQ has no LMQ topics (leave -c out)")
    rows, _tps = await admin.consume_stats(group, topic)
    if not rows:
        raise AdminError(f"consumer group {group} has no offsets for topic {topic}")
    stats = []
    for row in rows:
        addr = await admin.broker_addr_by_name(row.broker_name)
        if timestamp == -1:
            reset = (await admin.queue_bounds(addr, topic, row.queue_id))[1]
        else:
            reset = await admin.search_offset(addr, topic, row.queue_id, timestamp)
        rollback = row.consumer_offset
        if args.force or reset <= row.consumer_offset:
            await admin.update_consumer_offset(addr, group, topic, row.queue_id, reset)
            rollback = reset
        stats.append({"brokerName": row.broker_name, "queueId": row.queue_id, "brokerOffset": row.broker_offset,
                      "consumerOffset": row.consumer_offset, "timestampOffset": reset, "rollbackOffset": rollback})
    lines = [f"reset consumer offset by specified consumerGroup[{group}], topic[{topic}], "
             f"force[{str(args.force).lower()}], timestamp(string)[{timestamp}], timestamp(long)[{timestamp}]",
             "  ".join(f"{h:<20}" for h in ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset",
                                            "#timestampOffset", "#resetOffset")).rstrip()]
    lines += ["  ".join(f"{v!s:<20}" for v in (f"{s['brokerName']:<32}", s["queueId"], s["brokerOffset"],
                                                s["consumerOffset"], s["timestampOffset"], s["rollbackOffset"])).rstrip()
              for s in stats]
    return Result(stats, "\n".join(lines))


def _clone_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-s", "--srcGroup", dest="src", required=True, help="set source consumer group")
    p.add_argument("-d", "--destGroup", dest="dest", required=True, help="set destination consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument("-o", "--offline", type=bool_type, default=False,
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
    p.add_argument("-f", "--force", type=bool_type, default=True,
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


def _consumer_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="set the consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument("-i", "--originClientId", dest="client_id", default="", help="set the consumer clientId")


@command("getConsumerStatus", "get consumer status from client.", _consumer_status_options)
async def get_consumer_status(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """The offsets each online Remoting client of the group holds for the topic (its own view, before
    it commits). gRPC clients keep no such table: their proxy answers an empty one."""
    group, topic, client_id = args.group.strip(), args.topic.strip(), args.client_id.strip()
    table = await admin.consumer_status(topic, group, client_id)
    lines = [f"get consumer status from client. group={group}, topic={topic}, originClientId={client_id}",
             f"{'#clientId':<50}  {'#brokerName':<15}  {'#queueId':<15}  {'#offset':<20}".rstrip()]
    rows = []
    for cid, pairs in table.items():
        for mq, offset in sorted(pairs, key=lambda p: (str(p[0].get("brokerName")), int(p[0].get("queueId", 0)))):
            rows.append({"clientId": cid, "brokerName": mq.get("brokerName"), "queueId": mq.get("queueId"),
                         "offset": offset})
            lines.append(f"{cid:<50}  {mq.get('brokerName')!s:<15}  {mq.get('queueId')!s:<15}  {offset!s:<20}".rstrip())
    return Result(rows, "\n".join(lines))
