"""mqadmin's broker commands (org.apache.rocketmq.tools.command.broker): brokerStatus,
getBrokerConfig, updateBrokerConfig, brokerConsumeStats, deleteExpiredCommitLog, cleanExpiredCQ,
cleanUnusedTopic and sendMsgStatus, with upstream's names, flags and output. The store requests
write one progress line per broker on stderr, so stdout stays the command's output.

getBrokerEpoch, upstream's broker package too, lives with haStatus in ha.py (they share the
replica listing and the -i repeat).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.options import bool_type, positive_int
from orbitmq.admin.output import config_lines, format_timestamp, progress, render_pairs, render_table
from orbitmq.admin.registry import Result, UsageError, command
from orbitmq.client import MQBrokerError
from orbitmq.common.fastjson import message_queue_pairs
from orbitmq.common.message import Message, MessageConst
from orbitmq.common.message_id import create_uniq_id
from orbitmq.remoting.errors import RemotingError


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
        lines += config_lines(props) if props else [f"Broker[{addr}] has no config property!"]
        lines.append("")
    return Result(data, "\n".join(lines).rstrip("\n"))


def _update_broker_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="update which broker")
    p.add_argument("-c", "--clusterName", dest="cluster", help="update which cluster")
    p.add_argument("-a", "--updateAllBroker", dest="all_brokers", type=bool_type, default=False,
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


def _broker_consume_stats_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", required=True, help="Broker address")
    p.add_argument("-t", "--timeoutMillis", dest="timeout_millis", type=positive_int, default=50000,
                   help="request timeout Millis")
    p.add_argument("-l", "--level", type=int, default=0, help="threshold of print diff")
    p.add_argument("-o", "--order", type=bool_type, default=False, help="order topic")


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


def _delete_commit_log_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="Broker address")
    p.add_argument("-c", "--cluster", help="clustername")


async def _on_masters(admin: MQAdminExt, args: argparse.Namespace, name: str,
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
    return await _on_masters(admin, args, "deleteExpiredCommitLog", admin.delete_expired_commit_log)


def _clean_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="Broker address")
    p.add_argument("-c", "--cluster", help="cluster name")


@command("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.", _clean_options)
async def clean_expired_cq(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Drop the ConsumeQueues whose messages retention has removed from the CommitLog."""
    return await _on_masters(admin, args, "cleanExpiredCQ", admin.clean_expired_consume_queue)


@command("cleanUnusedTopic", "Clean unused topic on broker.", _clean_options)
async def clean_unused_topic(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Drop the ConsumeQueues of topics the broker no longer has a config for."""
    return await _on_masters(admin, args, "cleanUnusedTopic", admin.clean_unused_topic)


# The producer group of the probe sends (sendMsgStatus's, upstream's "PID_SMSC")
_PROBE_GROUP = "PID_SMSC"


def _send_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True,
                   help="Broker Name e.g. clusterName_brokerName as DefaultCluster_broker-a")
    p.add_argument("-s", "--messageSize", dest="size", type=int, default=128, help="Message Size, Default: 128")
    p.add_argument("-c", "--count", type=int, default=50, help="send message count, Default: 50")


def _send_result_string(result: Any) -> str:
    """SendResult.toString."""
    return (f"SendResult [sendStatus={result.status.value}, msgId={result.msg_id}, offsetMsgId={result.offset_msg_id}, "
            f"messageQueue=MessageQueue [topic={result.topic}, brokerName={result.broker_name}, "
            f"queueId={result.queue_id}], queueOffset={result.queue_offset}, recallHandle={result.recall_handle}]")


def _probe(topic: str, size: int) -> Message:
    return Message(topic, b"a" * size, properties={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id()})


async def timed_send(admin: MQAdminExt, topic: str, size: int, broker_name: str,
                      queue_id: int | None = None) -> tuple[bool, int]:
    """One probe send: (whether it was stored, its round trip in ms)."""
    started = time.monotonic()
    try:
        await admin.send(_probe(topic, size), _PROBE_GROUP, broker_name, queue_id)
        ok = True
    except (AdminError, MQBrokerError, RemotingError):
        ok = False
    return ok, int((time.monotonic() - started) * 1000)


@command("sendMsgStatus", "Send msg to broker.", _send_status_options)
async def send_msg_status(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Messages of -s bytes to the broker's own topic (every broker serves a topic named after
    itself), each with its round trip, after one small warm-up send."""
    if args.size <= 0 or args.count <= 0:
        raise UsageError("-s messageSize and -c count must be positive")
    topic = args.broker_name.strip()
    await admin.send(_probe(topic, 16), _PROBE_GROUP)
    rows, lines = [], []
    for _ in range(args.count):
        started = time.monotonic()
        result = await admin.send(_probe(topic, args.size), _PROBE_GROUP)
        rt = int((time.monotonic() - started) * 1000)
        rows.append({"rt": rt, "sendStatus": result.status.value, "msgId": result.msg_id,
                     "brokerName": result.broker_name, "queueId": result.queue_id})
        lines.append(f"rt={rt}ms, SendResult={_send_result_string(result)}")
    return Result(rows, "\n".join(lines))
