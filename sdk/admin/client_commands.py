"""mqadmin's client-side views and the old offset reset: producer, consumer, getConsumerStatus
and resetOffsetByTimeOld, with upstream's names, flags and output."""

from __future__ import annotations

import argparse

from orbitmq.admin import ops_commands
from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.cli import Result, UsageError, _bool, _timestamp, command

# ---- producer ----------------------------------------------------------------------------------

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


# ---- consumer ----------------------------------------------------------------------------------

def _consumer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group name")
    p.add_argument("-s", "--jstack", action="store_true", help="Run jstack command in the consumer progress")


@command("consumer", "Query consumer's connection, status, etc.", _consumer_options)
async def consumer(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """consumerStatus under its older name: every online client's ConsumerRunningInfo, written to
    <now>/<clientId>, and whether the group's subscriptions agree."""
    args.client_id = None
    args.broker_addr = None
    return await ops_commands.consumer_status(admin, args)


# ---- resetOffsetByTimeOld ----------------------------------------------------------------------

def _reset_old_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", required=True, help="set the consumer group")
    p.add_argument("-t", "--topic", required=True, help="set the topic")
    p.add_argument("-s", "--timestamp", required=True, type=_timestamp,
                   help="set the timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-f", "--force", type=_bool, default=True,
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


# ---- getConsumerStatus -------------------------------------------------------------------------

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
