"""mqadmin's topic commands (org.apache.rocketmq.tools.command.topic): updateTopic, deleteTopic,
topicList, topicRoute, topicStatus, topicClusterList, updateTopicPerm, updateOrderConf and
allocateMQ, with upstream's names, flags and output.

allocateMQ sorts the topic's queues (topic, broker, queue id) before dividing them; upstream
hands the strategy a HashSet's order, so its answer can differ from run to run. The client ids
are taken in the order given, as upstream does.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from orbitmq.admin.admin_api import ORDER_TOPIC_CONFIG_NAMESPACE, AdminError, MQAdminExt
from orbitmq.admin.options import bool_type, target_options
from orbitmq.admin.output import format_timestamp, render_table
from orbitmq.admin.registry import Result, UsageError, command
from orbitmq.client import MQBrokerError
from orbitmq.common.allocate import allocate_averagely
from orbitmq.common.constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
)
from orbitmq.common.topic_config import TopicConfig, normalize_attributes
from orbitmq.remoting.errors import RemotingError


def _update_topic_options(p: argparse.ArgumentParser) -> None:
    target_options(p)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8)
    p.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8)
    p.add_argument("-p", "--perm", type=int, default=PERM_READ | PERM_WRITE, help="2 W, 4 R, 6 RW")
    p.add_argument("-o", "--order", type=bool_type, default=False, help="true for an ordered topic")
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


async def delete_topic_everywhere(admin: MQAdminExt, cluster: str, topic: str) -> list[str]:
    """DeleteTopicSubCommand#deleteTopic: off every master of the cluster, then off the NameServers."""
    for _name, addr in await admin.master_addrs(cluster):
        await admin.delete_topic_in_broker(addr, topic)
    await admin.delete_topic_in_namesrv(topic, cluster)
    return [f"delete topic [{topic}] from cluster [{cluster}] success.",
            f"delete topic [{topic}] from NameServer success."]


@command("deleteTopic", "Delete topic from broker and NameServer", _delete_topic_options)
async def delete_topic(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    lines = await delete_topic_everywhere(admin, args.cluster, args.topic)
    return Result({"topic": args.topic, "cluster": args.cluster, "deleted": True}, "\n".join(lines))


def _topic_list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterModel", dest="cluster_model", action="store_true",
                   help="also show each topic's cluster")


@command("topicList", "Fetch all topic list from name server", _topic_list_options)
async def topic_list(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    if args.cluster_model:  # with each topic's cluster and consumer groups, as upstream
        return await _topic_list_cluster_model(admin)
    topics = await admin.topic_list()
    return Result(topics, "\n".join(topics))


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


async def _topic_list_cluster_model(admin: MQAdminExt) -> Result:
    """topicList -c: "#Cluster Name  #Topic  #Consumer Group", retry and DLQ topics left out."""
    rows = await _topic_list_rows(admin)
    text = render_table(["#Cluster Name", "#Topic", "#Consumer Group"],
                        [[r["clusterName"], r["topic"], r["consumerGroup"]] for r in rows])
    return Result(rows, text)


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


def _topic_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


@command("topicClusterList", "Get cluster info for topic.", _topic_cluster_options)
async def topic_cluster_list(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    clusters = await admin.topic_clusters(args.topic.strip())
    return Result(clusters, "\n".join(clusters))


def _perm(text: str) -> int:
    value = text.strip()
    if value not in ("2", "4", "6"):
        raise argparse.ArgumentTypeError(f"perm must be 2 (W), 4 (R) or 6 (RW), got {text!r}")
    return int(value)


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


def _order_conf_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-v", "--orderConf", dest="order_conf", help="set order conf [eg. brokerName1:num;brokerName2:num]")
    p.add_argument("-m", "--method", required=True, help="option type [eg. put|get|delete")


@command("updateOrderConf", "Create or update or delete order conf", _order_conf_options)
async def update_order_conf(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """A topic's order conf (brokerName:queueNums;...) in the NameServers' ORDER_TOPIC_CONFIG KV
    namespace, which routes of orderly topics carry."""
    topic, method = args.topic.strip(), args.method.strip()
    if method == "get":
        conf = await admin.get_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, topic)
        if conf is None:
            raise AdminError(f"topic {topic} has no orderConf")
        return Result({"topic": topic, "orderConf": conf},
                      f"get orderConf success. topic=[{topic}], orderConf=[{conf}] ")
    if method == "put":
        conf = (args.order_conf or "").strip()
        if not conf:
            raise UsageError("please set orderConf with option -v.")
        _check_order_conf(conf)
        await admin.put_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, topic, conf)
        return Result({"topic": topic, "orderConf": conf}, f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")
    if method == "delete":
        await admin.delete_kv_config(ORDER_TOPIC_CONFIG_NAMESPACE, topic)
        return Result({"topic": topic, "deleted": True}, f"delete orderConf success. topic=[{topic}]")
    raise UsageError(f"-m method must be put, get or delete, not {method!r}")


def _check_order_conf(conf: str) -> None:
    """brokerName:num;... (upstream stores any text; a malformed one breaks every route of the topic)."""
    for part in conf.split(";"):
        name, sep, num = part.partition(":")
        if not part:
            continue
        if not sep or not name.strip() or not num.strip().isdigit() or int(num) <= 0:
            raise UsageError(f"-v orderConf {conf!r}: each entry must be brokerName:queueNums, not {part!r}")


def _allocate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-i", "--ipList", dest="ip_list", required=True, help="ipList")


@command("allocateMQ", "Allocate MQ", _allocate_options)
async def allocate_mq(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """How a topic's readable queues divide between the clients (-i ip1,ip2) with the averaging
    strategy: RebalanceResult's JSON."""
    topic = args.topic.strip()
    clients = [ip.strip() for ip in args.ip_list.split(",") if ip.strip()]
    if not clients:
        raise UsageError("-i ipList is empty")
    route = await admin.topic_route(topic)
    queues = sorted(({"brokerName": qd.broker_name, "queueId": i, "topic": topic}
                     for qd in route.queue_datas if qd.perm & PERM_READ for i in range(qd.read_queue_nums)),
                    key=lambda q: (q["topic"], q["brokerName"], q["queueId"]))
    result = {"result": {ip: allocate_averagely(queues, clients, ip) for ip in clients}}
    return Result(result, json.dumps(result, separators=(",", ":")))
