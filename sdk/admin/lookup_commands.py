"""mqadmin's lookup, planning, probing and store-maintenance commands: DecodeMessageId,
queryMsgByUniqueKey, printMsgByQueue, allocateMQ, getConsumerConfig, updateOrderConf, queryCq,
sendMsgStatus, checkMsgSendRT, clusterRT, cleanExpiredCQ and cleanUnusedTopic, with upstream's names
and flags.

Each registers itself with ``cli.command`` on import. Deviations, each for a reason:
- DecodeMessageId prints ``ip=`` and ``date=`` on two lines (upstream runs them together on one).
- clusterRT takes -r rounds (OrbitMQ's: upstream runs until interrupted, which stays the default),
  so a script can take one measurement.
- allocateMQ sorts the topic's queues (topic, broker, queue id) before dividing them; upstream
  hands the strategy a HashSet's order, so its answer can differ from run to run. The client ids
  are taken in the order given, as upstream does.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import time
from typing import Any

from orbitmq.admin import ops_commands
from orbitmq.admin.admin_api import ORDER_TOPIC_CONFIG_NAMESPACE, AdminError, MQAdminExt
from orbitmq.admin.cli import Result, UsageError, _bool, _timestamp, command
from orbitmq.admin.controller_commands import without_namesrv
from orbitmq.admin.output import format_timestamp, message_to_json, render_message
from orbitmq.client import MQBrokerError
from orbitmq.client.results import PullStatus
from orbitmq.common.constants import PERM_READ, PERM_WRITE
from orbitmq.common.message import Message, MessageConst
from orbitmq.common.message_id import create_uniq_id, uniq_id_ip, uniq_id_timestamp
from orbitmq.remoting.errors import RemotingError

# The producer group of the probe sends (sendMsgStatus's, upstream's "PID_SMSC")
_PROBE_GROUP = "PID_SMSC"
# DefaultMQAdminExt.queryMessageByUniqKey's cap (queryMsgByUniqueKey -a: "the limit is 32")
_UNIQUE_KEY_MAX = 32


# ---- DecodeMessageId ---------------------------------------------------------------------------

def _decode_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--messageId", dest="msg_id", required=True, help="unique message ID")


@command("DecodeMessageId", "Decode unique message ID", _decode_options)
@without_namesrv  # pure decoding, as upstream: no NameServer needed
async def decode_message_id(_admin: Any, args: argparse.Namespace) -> Result:
    """The producer's address and the (month-relative, so approximate) creation time inside a
    client message id (MessageClientIDSetter's layout)."""
    msg_id = args.msg_id.strip()
    try:
        ip = uniq_id_ip(msg_id)
        born = uniq_id_timestamp(msg_id)
    except (ValueError, TypeError) as exc:
        raise AdminError(f"{msg_id!r} is not a unique message id: {exc}") from None
    date = format_timestamp(born)
    return Result({"msgId": msg_id, "ip": ip, "date": date, "timestamp": born}, f"ip={ip}\ndate={date}")


# ---- queryMsgByUniqueKey -----------------------------------------------------------------------

def _unique_key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id")
    p.add_argument("-t", "--topic", required=True, help="The topic of msg")
    p.add_argument("-g", "--consumerGroup", dest="group", help="consumer group name")
    p.add_argument("-d", "--clientId", dest="client_id", help="The consumer's client id")
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true", help="Print all message, the limit is 32")
    p.add_argument("-c", "--cluster", help="Cluster name or lmq parent topic, lmq is used to find the route.")


@command("queryMsgByUniqueKey", "Query Message by Unique key", _unique_key_options)
async def query_msg_by_unique_key(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """The message(s) whose UNIQ_KEY (what clients call the message id) is -i in topic -t; with -g
    and -d, that consumer consumes it now (as queryMsgById -g -d)."""
    msg_id, topic = args.msg_id.strip(), args.topic.strip()
    if bool(args.group) != bool(args.client_id):
        raise UsageError("-g consumerGroup and -d clientId go together")
    if args.cluster and args.cluster.strip() != topic:
        # Upstream uses -c only to find the route of an LMQ (light message queue) topic.
        raise UsageError("-c names an LMQ parent topic; OrbitMQ has no LMQ topics (leave -c out)")
    found = await admin.query_message(topic, msg_id, _UNIQUE_KEY_MAX, 0, 2**63 - 1, unique_key=True)
    if not found:
        raise AdminError(f"message {msg_id} not found in topic {topic}")
    if args.group:
        result = await ops_commands.consume_directly(admin, args.group.strip(), args.client_id.strip(), found[0])
        return Result(result, ops_commands.directly_result_string(result))
    shown = found if args.show_all else found[:1]
    docs = [message_to_json(m) for m in shown]
    return Result(docs if args.show_all else docs[0], "\n\n".join(render_message(m) for m in shown))


# ---- allocateMQ --------------------------------------------------------------------------------

def _allocate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-i", "--ipList", dest="ip_list", required=True, help="ipList")


def allocate_averagely(queues: list[Any], clients: list[str], client: str) -> list[Any]:
    """AllocateMessageQueueAveragely: contiguous shares, the first ``len % n`` clients one more."""
    if client not in clients or not queues:
        return []
    index, total, n = clients.index(client), len(queues), len(clients)
    mod = total % n
    if total <= n:
        size = 1
    else:
        size = total // n + 1 if mod > 0 and index < mod else total // n
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [queues[(start + i) % total] for i in range(max(min(size, total - start), 0))]


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


# ---- getConsumerConfig -------------------------------------------------------------------------

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


# ---- updateOrderConf ---------------------------------------------------------------------------

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


# ---- queryCq -----------------------------------------------------------------------------------

def _query_cq_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-q", "--queue", dest="queue_id", type=int, required=True, help="queue num, ie. 1")
    p.add_argument("-i", "--index", type=int, required=True, help="start queue index.")
    p.add_argument("-c", "--count", type=int, default=10, help="how many.")
    p.add_argument("-b", "--broker", help="broker addr.")
    p.add_argument("-g", "--consumer", dest="group", help="consumer group.")


@command("queryCq", "Query cq command.", _query_cq_options)
async def query_cq(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """ConsumeQueue entries (physical offset, size, tags hash) of one queue, from -i on."""
    topic = args.topic.strip()
    if args.count <= 0:
        raise UsageError(f"-c count must be positive, not {args.count}")
    addr = (args.broker or "").strip()
    if not addr:
        masters = admin.route_masters(await admin.topic_route(topic))
        if not masters:
            raise AdminError(f"No topic route data! (topic {topic} has no master online)")
        addr = masters[0][1]
    body, remark = await admin.query_consume_queue(addr, topic, args.queue_id, args.index, args.count,
                                                   (args.group or "").strip() or None)
    out = []
    if body.get("subscriptionData") is not None:
        out += ["Subscription data: ", json.dumps(body["subscriptionData"], indent="\t"), _LINE]
    if body.get("filterData") is not None:
        out += ["Filter data: ", str(body["filterData"]), _LINE]
    out += ["Queue data: ", f"max: {body.get('maxQueueIndex')}, min: {body.get('minQueueIndex')}", _LINE]
    for i, entry in enumerate(body.get("queueData") or [], args.index):
        fields = (f"physicOffset={entry.get('physicOffset')}, physicSize={entry.get('physicSize')}, "
                  f"tagsCode={entry.get('tagsCode')}, extendDataJson='null', bitMap='null', eval=false, msg='null'")
        out += [f"idx: {i}", "ConsumeQueueData{" + fields + "}", _LINE]
    if remark:
        out.append(remark)
    return Result({**body, "brokerAddr": addr, "remark": remark}, "\n".join(out))


_LINE = "======================================"


# ---- cleanExpiredCQ / cleanUnusedTopic ---------------------------------------------------------

def _clean_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="Broker address")
    p.add_argument("-c", "--cluster", help="cluster name")


@command("cleanExpiredCQ", "Clean expired ConsumeQueue on broker.", _clean_options)
async def clean_expired_cq(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Drop the ConsumeQueues whose messages retention has removed from the CommitLog."""
    return await ops_commands.on_masters(admin, args, "cleanExpiredCQ", admin.clean_expired_consume_queue)


@command("cleanUnusedTopic", "Clean unused topic on broker.", _clean_options)
async def clean_unused_topic(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Drop the ConsumeQueues of topics the broker no longer has a config for."""
    return await ops_commands.on_masters(admin, args, "cleanUnusedTopic", admin.clean_unused_topic)


# ---- printMsgByQueue ---------------------------------------------------------------------------

def _print_by_queue_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-a", "--brokerName", dest="broker_name", required=True, help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True, help="queue id")
    p.add_argument("-c", "--charsetName", dest="charset", type=ops_commands.charset_type, default="UTF-8",
                   help="CharsetName(eg: UTF-8,GBK)")
    p.add_argument("-s", "--subExpression", dest="sub_expression", default="*",
                   help="Subscribe Expression(eg: TagA || TagB)")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=_timestamp,
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-e", "--endTimestamp", dest="end", type=_timestamp,
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-p", "--printMsg", dest="print_msg", type=_bool, default=False,
                   help="print msg. eg: true | false(default)")
    p.add_argument("-d", "--printBody", dest="print_body", type=_bool, default=False,
                   help="print body. eg: true | false(default)")
    p.add_argument("-f", "--calculate", dest="by_tag", type=_bool, default=False,
                   help="calculate by tag. eg: true | false(default)")


@command("printMsgByQueue", "Print Message Detail by queueId.", _print_by_queue_options)
async def print_msg_by_queue(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """One queue's messages between two store times (-b/-e, else its whole range), printed (-p)
    and/or counted by tag (-f, most frequent first)."""
    topic, broker_name, queue_id = args.topic.strip(), args.broker_name.strip(), args.queue_id
    addr = await admin.broker_addr_by_name(broker_name)
    low, high = await admin.queue_bounds(addr, topic, queue_id)
    if args.begin is not None:
        low = await admin.search_offset(addr, topic, queue_id, args.begin)
    if args.end is not None:
        high = await admin.search_offset(addr, topic, queue_id, args.end)
    lines: list[str] = []
    found: list[dict[str, Any]] = []
    tags: dict[str, int] = {}
    offset = low
    while offset < high:
        result = await admin.pull(addr, topic, queue_id, offset, 32, args.sub_expression)
        offset = result.next_begin_offset
        if result.status != PullStatus.FOUND:
            break  # NO_MATCHED_MSG, NO_NEW_MSG, OFFSET_ILLEGAL: upstream stops reading too
        for msg in result.messages:
            if args.by_tag and msg.tags and msg.tags.strip():
                tags[msg.tags] = tags.get(msg.tags, 0) + 1
            if args.print_msg:
                body = msg.body.decode(args.charset, errors="replace") if args.print_body else None
                lines.append(f"MSGID: {msg.uniq_id_or_msg_id} {ops_commands.message_to_string(msg, broker_name)} "
                             f"BODY: {'NOT PRINT BODY' if body is None else body}")
                found.append({"msgId": msg.uniq_id_or_msg_id, "offsetMsgId": msg.msg_id, "queueOffset": msg.queue_offset,
                              "tags": msg.tags, "storeTimestamp": msg.store_timestamp, "body": body})
    ranked = sorted(tags.items(), key=lambda kv: -kv[1])  # TagCountBean: most frequent first
    if args.by_tag:
        lines += [f"Tag: {tag:<30} Count: {count}" for tag, count in ranked]
    data = {"topic": topic, "brokerName": broker_name, "queueId": queue_id, "minOffset": low, "maxOffset": high,
            "messages": found, "tagCounts": dict(ranked) if args.by_tag else None}
    return Result(data, "\n".join(lines))


# ---- sendMsgStatus / checkMsgSendRT ------------------------------------------------------------

def _send_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True,
                   help="Broker Name e.g. clusterName_brokerName as DefaultCluster_broker-a")
    p.add_argument("-s", "--messageSize", dest="size", type=int, default=128, help="Message Size, Default: 128")
    p.add_argument("-c", "--count", type=int, default=50, help="send message count, Default: 50")


def send_result_string(result: Any) -> str:
    """SendResult.toString."""
    return (f"SendResult [sendStatus={result.status.value}, msgId={result.msg_id}, offsetMsgId={result.offset_msg_id}, "
            f"messageQueue=MessageQueue [topic={result.topic}, brokerName={result.broker_name}, "
            f"queueId={result.queue_id}], queueOffset={result.queue_offset}, recallHandle={result.recall_handle}]")


def _probe(topic: str, size: int) -> Message:
    return Message(topic, b"a" * size, properties={MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id()})


async def _timed_send(admin: MQAdminExt, topic: str, size: int, broker_name: str,
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
        lines.append(f"rt={rt}ms, SendResult={send_result_string(result)}")
    return Result(rows, "\n".join(lines))


def _send_rt_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-a", "--amount", type=int, default=100, help="message amount | default 100")
    p.add_argument("-s", "--size", type=int, default=128, help="message size | default 128 Byte")


@command("checkMsgSendRT", "Check message send response time.", _send_rt_options)
async def check_msg_send_rt(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """-a messages of -s bytes to the topic, round-robin over its writable queues, each with its
    round trip; the average leaves out the first send (connection set-up), as upstream."""
    topic = args.topic.strip()
    if args.amount < 2 or args.size <= 0:
        raise UsageError("-a amount must be at least 2 and -s size positive")
    route = await admin.topic_route(topic)
    masters = dict(admin.route_masters(route))
    queues = sorted((qd.broker_name, i) for qd in route.queue_datas
                    if qd.broker_name in masters and qd.perm & PERM_WRITE for i in range(qd.write_queue_nums))
    if not queues:
        raise AdminError(f"topic {topic} has no writable queue")
    header = f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #RT"
    lines, rows, elapsed = [header], [], 0
    for i in range(args.amount):
        broker_name, queue_id = queues[i % len(queues)]
        ok, rt = await _timed_send(admin, topic, args.size, broker_name, queue_id)
        if i:
            elapsed += rt
        rows.append({"brokerName": broker_name, "queueId": queue_id, "sendResult": ok, "rt": rt})
        lines.append(f"{broker_name:<32}  {queue_id:<4}  {str(ok).lower():<20}    {rt}")
    average = elapsed / (args.amount - 1)
    lines.append(f"Avg RT: {average:.2f}")
    return Result({"sends": rows, "avgRT": round(average, 2)}, "\n".join(lines))


# ---- clusterRT ---------------------------------------------------------------------------------

def _cluster_rt_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-a", "--amount", type=int, default=100, help="message amount | default 100")
    p.add_argument("-s", "--size", type=int, default=128, help="message size | default 128 Byte")
    p.add_argument("-c", "--cluster", help="cluster name | default display all cluster")
    p.add_argument("-p", "--printLog", dest="tlog", type=_bool, default=False, help="print as tlog | default false")
    p.add_argument("-m", "--machineRoom", dest="room", default="noname", help="machine room name | default noname")
    p.add_argument("-i", "--interval", type=int, default=10, help="print interval | default 10 seconds")
    p.add_argument("-r", "--rounds", type=int, default=0,
                   help="OrbitMQ: stop after this many rounds (default 0: until interrupted, as upstream)")


@command("clusterRT", "List All clusters Message Send RT", _cluster_rt_options)
async def cluster_rt(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Every -i seconds, -a sends of -s bytes to each broker's own topic, per cluster: the average
    round trip (the first send left out) and the success and failure counts. Lines are printed as
    they are measured; with --json, once the -r rounds are done."""
    if args.amount < 2 or args.size <= 0 or args.interval <= 0 or args.rounds < 0:
        raise UsageError("-a amount must be at least 2, -s size and -i interval positive, -r rounds >= 0")
    if args.json and not args.rounds:
        raise UsageError("--json needs -r rounds: without it clusterRT runs until interrupted")
    info = await admin.cluster_info()
    clusters = [args.cluster.strip()] if args.cluster else sorted(info.cluster_addr_table)
    emit = (lambda line: None) if args.json else (lambda line: print(line, flush=True))
    if not args.tlog:
        emit(f"{'#Cluster Name':<24}  {'#Broker Name':<24}  {'#RT':<4}  {'#successCount':<8}  {'#failCount':<8}")
    rows: list[dict[str, Any]] = []
    done = 0
    while True:
        for cluster in clusters:
            names = info.cluster_addr_table.get(cluster)
            if names is None:
                raise AdminError(f"cluster [{cluster}] not exist")
            for broker_name in sorted(names):
                ok_count = failed = elapsed = 0
                for i in range(args.amount):
                    ok, rt = await _timed_send(admin, broker_name, args.size, broker_name)
                    ok_count += ok
                    failed += not ok
                    if i:
                        elapsed += rt
                rt = elapsed / (args.amount - 1)
                rows.append({"cluster": cluster, "brokerName": broker_name, "rt": round(rt, 2),
                             "successCount": ok_count, "failCount": failed})
                if args.tlog:
                    stamp = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
                    emit(f"{stamp}|{args.room}|{cluster}|{broker_name}|{round(rt)}")
                else:
                    emit(f"{cluster:<24}  {broker_name:<24}  {rt:<8.2f}  {ok_count:<16}  {failed:<16}".rstrip())
        done += 1
        if args.rounds and done >= args.rounds:
            return Result(rows, None)
        await asyncio.sleep(args.interval)
