"""mqadmin's message commands (org.apache.rocketmq.tools.command.message): queryMsgById,
queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, DecodeMessageId, sendMessage, printMsg,
printMsgByQueue, consumeMessage and checkMsgSendRT, with upstream's names, flags and output, plus
OrbitMQ's resendMsgById and resumeCheckHalfMessage. queryMsgTraceById is in trace.py. Commands
that walk many queues write one progress line per queue on stderr, so stdout stays their output.

DecodeMessageId prints ``ip=`` and ``date=`` on two lines (upstream runs them together on one).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.commands.broker import timed_send
from orbitmq.admin.commands.trace import send_pub_trace
from orbitmq.admin.options import bool_type, charset_type, positive_int, timestamp_type
from orbitmq.admin.output import (
    format_timestamp,
    message_to_json,
    progress,
    render_message,
    render_table,
    write_file,
)
from orbitmq.admin.registry import Result, UsageError, command, without_namesrv
from orbitmq.client import MQBrokerError, MQClientError
from orbitmq.client.results import PullStatus
from orbitmq.common.constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    TOOLS_CONSUMER_GROUP,
)
from orbitmq.common.extra_info import build_pop_retry_topic, parse_normal_topic
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.common.message_id import uniq_id_ip, uniq_id_timestamp
from orbitmq.remoting.errors import RemotingError


def _query_by_id_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id(s), comma separated")
    p.add_argument("-t", "--topic", help="look the id up as a unique key (UNIQ_KEY) in this topic")
    p.add_argument("-s", "--sendMessage", dest="resend", type=bool_type, default=False,
                   help="true: resend the message (a DLQ message goes back to where its group reads retries)")
    p.add_argument("-f", "--bodyFormat", dest="charset", type=charset_type,
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
            result = await _consume_directly(admin, args.group.strip(), args.client_id.strip(), msg)
            docs.append(result)
            texts.append(_directly_result_string(result))
            continue
        if args.resend:
            sent = await _resend(admin, msg)
            docs.append(sent)
            texts.append(f"prepare resend msg. originalMsgId={msg_id}\n"
                         + json.dumps(sent, ensure_ascii=False))
            continue
        path = _body_file(msg)
        doc = message_to_json(msg)
        doc["bodyPath"] = path
        text = render_message(msg) + f"\n{'Message Body Path:':<20} {path}"
        if args.charset:
            text += f"\n{'Message Body:':<20} {msg.body.decode(args.charset, errors='replace')}"
        docs.append(doc)
        texts.append(text)
    return Result(docs[0] if len(docs) == 1 else docs, "\n\n".join(texts))


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


# DefaultMQAdminExt.queryMessageByUniqKey's cap (queryMsgByUniqueKey -a: "the limit is 32")
_UNIQUE_KEY_MAX = 32


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
        result = await _consume_directly(admin, args.group.strip(), args.client_id.strip(), found[0])
        return Result(result, _directly_result_string(result))
    shown = found if args.show_all else found[:1]
    docs = [message_to_json(m) for m in shown]
    return Result(docs if args.show_all else docs[0], "\n\n".join(render_message(m) for m in shown))


def _query_by_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)


@command("queryMsgByOffset", "Query Message by offset", _query_by_offset_options)
async def query_msg_by_offset(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    msg = await admin.message_at_offset(args.topic, args.broker_name, args.queue_id, args.offset)
    return Result(message_to_json(msg), render_message(msg))


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


PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"  # ConsumerRunningInfo#PROP_CONSUME_TYPE


def _is_push_type(info: dict[str, Any]) -> bool:
    return (info.get("properties") or {}).get(PROP_CONSUME_TYPE) == "CONSUME_PASSIVELY"


async def _consume_directly(admin: MQAdminExt, group: str, client_id: str, msg: MessageExt) -> dict[str, Any]:
    """queryMsgById -g -d: a push consumer client consumes the message now (e.g. a dead letter)."""
    addr, _cc = await admin.consumer_connection(group)
    info = await admin.consumer_running_info(addr, group, client_id, False)
    if not _is_push_type(info):
        raise AdminError(f"this {client_id} client is not push consumer ,not support direct push")
    return await admin.consume_message_directly(group, client_id, msg)


def _directly_result_string(result: dict[str, Any]) -> str:
    """ConsumeMessageDirectlyResult.toString."""
    def text(value: Any) -> str:
        return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return (f"ConsumeMessageDirectlyResult [order={text(result.get('order', False))}, "
            f"autoCommit={text(result.get('autoCommit', True))}, consumeResult={text(result.get('consumeResult'))}, "
            f"remark={text(result.get('remark'))}, spentTimeMills={text(result.get('spentTimeMills', 0))}]")


def _body_file(msg: MessageExt, directory: str = "/tmp/rocketmq/msgbodys") -> str:
    """QueryMsgByIdSubCommand.createBodyFile: the body, raw, in <directory>/<msgId>."""
    return write_file(os.path.join(directory, msg.uniq_id_or_msg_id), msg.body)


def resend_target(group: str, origin_topic: str | None, consumers: dict[str, Any] | None,
                  existing_pop_retry: str | None, retry_v2: bool) -> str:
    """Where a dead letter of ``group`` goes so that the group's consumers read it again.

    ``origin_topic``: the topic it was consumed from (its RETRY_TOPIC); ``consumers``: the
    group's GET_CONSUMER_CONNECTION_LIST answer (None when none is online); ``existing_pop_retry``:
    the group's pop retry topic of that topic when the cluster has one; ``retry_v2``: the broker's
    enableRetryTopicV2.

    Live consumers decide: a Remoting push consumer subscribes %RETRY%<group>
    (DefaultMQPushConsumerImpl#copySubscription), one that switched from POP to pull subscribes
    the pop retry topic (RebalanceImpl), and a consumer of the topic with no retry subscription
    pops it (the proxy's gRPC clients), reading KeyBuilder#buildPopRetryTopic(topic, group) as
    PopMessageProcessor does. With nobody online: the pop retry topic when the message came from
    one or the cluster has one (DefaultMQAdminExtImpl#examineConsumeStats counts it as the
    group's), else %RETRY%<group>.
    """
    classic = RETRY_GROUP_TOPIC_PREFIX + group
    if origin_topic is None:
        return classic
    topic = parse_normal_topic(origin_topic, group)
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):  # %RETRY%<group> itself: no normal topic to pop
        return classic
    subscribed = set((consumers or {}).get("subscriptionTable") or {})
    if classic in subscribed:
        return classic
    for name in (build_pop_retry_topic(topic, group), build_pop_retry_topic(topic, group, v2=True)):
        if name in subscribed:
            return name
    if topic in subscribed:
        return existing_pop_retry or build_pop_retry_topic(topic, group, retry_v2)
    if origin_topic != topic and origin_topic.startswith(RETRY_GROUP_TOPIC_PREFIX + group):
        return origin_topic  # it was popped from this pop retry topic
    return existing_pop_retry or classic


async def _resend_target(admin: MQAdminExt, msg: MessageExt) -> str:
    """resend_target's evidence, looked up only for a dead letter."""
    group = msg.topic[len(DLQ_GROUP_TOPIC_PREFIX):]
    origin = msg.properties.get(MessageConst.RETRY_TOPIC) or msg.properties.get(MessageConst.DLQ_ORIGIN_TOPIC)
    if not origin:
        return RETRY_GROUP_TOPIC_PREFIX + group
    topic = parse_normal_topic(origin, group)
    try:
        _addr, consumers = await admin.consumer_connection(group)
    except (AdminError, MQBrokerError):
        consumers = None
    existing = None
    for name in (build_pop_retry_topic(topic, group, v2=True), build_pop_retry_topic(topic, group)):
        try:
            await admin.topic_route(name)
        except (AdminError, MQClientError):
            continue
        existing = name
        break
    retry_v2 = False
    if existing is None and msg.store_host:  # Apache brokers may name new pop retry topics V2
        try:
            config = await admin.broker_config(msg.store_host)
        except (AdminError, MQBrokerError, RemotingError):
            config = {}
        retry_v2 = str(config.get("enableRetryTopicV2", "false")).strip().lower() == "true"
    return resend_target(group, origin, consumers, existing, retry_v2)


# Dropped from a re-sent message: a fresh message id, reconsume counting over (the header carries
# it for a retry topic), and the dead-letter marks (it is not read from a DLQ any more).
_RESEND_DROPPED = frozenset({MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageConst.RECONSUME_TIME,
                             MessageConst.MAX_RECONSUME_TIMES, MessageConst.DLQ_ORIGIN_TOPIC,
                             MessageConst.DLQ_ORIGIN_MESSAGE_ID, MessageConst.POP_CK})


async def _resend(admin: MQAdminExt, msg: MessageExt) -> dict[str, Any]:
    """queryMsgById -s true: send the stored message again (producer group ReSendMsgById).

    A dead letter goes back where its group's consumers read it again (resend_target): the
    group's pop retry topic for POP consumers (5.x gRPC clients through the proxy),
    %RETRY%<group> for Remoting push consumers. Any other message goes to its own topic.
    """
    props = {k: v for k, v in msg.properties.items() if k not in _RESEND_DROPPED}
    topic = msg.topic
    route_topic, queue_id = None, None
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        group = topic[len(DLQ_GROUP_TOPIC_PREFIX):]
        topic = await _resend_target(admin, msg)
        origin = props.get(MessageConst.RETRY_TOPIC)
        if origin:  # what a consumer shows as the message's topic (resetRetryAndNamespace)
            props[MessageConst.RETRY_TOPIC] = parse_normal_topic(origin, group)
        if topic != RETRY_GROUP_TOPIC_PREFIX + group:
            # A pop retry topic lives beside its topic on each broker; its first message creates it.
            try:
                await admin.topic_route(topic)
            except AdminError:
                route_topic, queue_id = parse_normal_topic(topic, group), 0
    out = Message(topic, msg.body, msg.flag, props)
    result = await admin.send(out, "ReSendMsgById", queue_id=queue_id, route_topic=route_topic)
    return {"originalMsgId": msg.uniq_id_or_msg_id, "topic": topic, "sendStatus": result.status.value,
            "msgId": result.msg_id, "brokerName": result.broker_name, "queueId": result.queue_id,
            "queueOffset": result.queue_offset}


def _resend_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="Message Id(s), comma separated")
    p.add_argument("-t", "--topic", help="look the id up as a unique key (UNIQ_KEY) in this topic")


@command("resendMsgById", "Resend messages by id (queryMsgById -s true); a DLQ message goes back to where "
         "its group reads retries (pop retry topic or %RETRY%group).", _resend_options)
async def resend_msg_by_id(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """Not an upstream command name: the issue's name for upstream's ``queryMsgById -s true``."""
    ids = [i.strip() for i in args.msg_id.split(",") if i.strip()]
    if not ids:
        raise UsageError("-i msgId is empty")
    docs, lines = [], []
    for msg_id in ids:
        sent = await _resend(admin, await admin.view_message(msg_id, args.topic))
        docs.append(sent)
        lines.append(f"prepare resend msg. originalMsgId={msg_id}\n" + json.dumps(sent, ensure_ascii=False))
    return Result(docs[0] if len(docs) == 1 else docs, "\n".join(lines))


def _send_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="Topic name")
    p.add_argument("-p", "--body", required=True, help="UTF-8 string format of the message body")
    p.add_argument("-k", "--key", help="Message keys")
    p.add_argument("-c", "--tags", help="Message tags")
    p.add_argument("-b", "--broker", help="Send message to target broker")
    p.add_argument("-i", "--qid", type=int, help="Send message to target queue")
    p.add_argument("-m", "--msgTraceEnable", dest="trace", type=bool_type, default=False,
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
        await send_pub_trace(admin, msg, group, result, int((time.monotonic() - started) * 1000))
    row = {"brokerName": result.broker_name, "queueId": result.queue_id, "sendStatus": result.status.value,
           "msgId": result.msg_id, "offsetMsgId": result.offset_msg_id, "queueOffset": result.queue_offset}
    text = render_table(["#Broker Name", "#QID", "#Send Result", "#MsgId"],
                        [[row["brokerName"], row["queueId"], row["sendStatus"], row["msgId"]]])
    return Result(row, text)


def _message_to_string(msg: MessageExt, broker_name: str) -> str:
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


async def _offset_range(admin: MQAdminExt, addr: str, topic: str, queue_id: int, begin: int | None,
                        end: int | None) -> tuple[int, int]:
    """The queue's offsets [min, max), narrowed to the messages stored from ``begin`` to ``end``
    when given (SEARCH_OFFSET_BY_TIMESTAMP), as printMsg, printMsgByQueue and consumeMessage read."""
    low, high = await admin.queue_bounds(addr, topic, queue_id)
    if begin is not None:
        low = await admin.search_offset(addr, topic, queue_id, begin)
    if end is not None:
        high = await admin.search_offset(addr, topic, queue_id, end)
    return low, high


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
                lines.append(f"MSGID: {msg.uniq_id_or_msg_id} {_message_to_string(msg, broker_name)} BODY: {body}")
                found.append({"brokerName": broker_name, "queueId": queue_id, "queueOffset": msg.queue_offset,
                              "msgId": msg.uniq_id_or_msg_id, "offsetMsgId": msg.msg_id, "topic": msg.topic,
                              "tags": msg.tags, "keys": msg.keys, "storeTimestamp": msg.store_timestamp,
                              "body": _body(msg, charset) if print_body else None})
        elif result.status == PullStatus.NO_MATCHED_MSG:
            lines.append(f"{mq} no matched msg. status={result.status.value}, offset={offset}")
        if result.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG) or offset <= previous:
            lines.append(f"{mq} print msg finished. status={result.status.value}, offset={offset}")
            return


def _scan_options(p: argparse.ArgumentParser) -> None:
    """printMsg's and printMsgByQueue's -c -s -b -e."""
    p.add_argument("-c", "--charsetName", dest="charset", type=charset_type, default="utf-8",
                   help="CharsetName(eg: UTF-8,GBK)")
    p.add_argument("-s", "--subExpression", dest="sub_expression", default="*",
                   help="Subscribe Expression(eg: TagA || TagB)")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=timestamp_type,
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-e", "--endTimestamp", dest="end", type=timestamp_type,
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")


def _print_msg_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    _scan_options(p)
    p.add_argument("-d", "--printBody", dest="print_body", type=bool_type, default=True, help="print body")
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
        min_offset, max_offset = await _offset_range(admin, addr, topic, queue_id, args.begin, args.end)
        lines.append(f"minOffset={min_offset}, maxOffset={max_offset}, {_mq_string(topic, broker_name, queue_id)}")
        await _scan_queue(admin, addr, topic, broker_name, queue_id, min_offset, max_offset, args.sub_expression,
                          TOOLS_CONSUMER_GROUP, args.charset, args.print_body, lines, found)
        lines.append("--------------------------------------------------------")
    return Result(found, "\n".join(lines))


def _print_by_queue_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-a", "--brokerName", dest="broker_name", required=True, help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True, help="queue id")
    _scan_options(p)
    p.add_argument("-p", "--printMsg", dest="print_msg", type=bool_type, default=False,
                   help="print msg. eg: true | false(default)")
    p.add_argument("-d", "--printBody", dest="print_body", type=bool_type, default=False,
                   help="print body. eg: true | false(default)")
    p.add_argument("-f", "--calculate", dest="by_tag", type=bool_type, default=False,
                   help="calculate by tag. eg: true | false(default)")


@command("printMsgByQueue", "Print Message Detail by queueId.", _print_by_queue_options)
async def print_msg_by_queue(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    """One queue's messages between two store times (-b/-e, else its whole range), printed (-p)
    and/or counted by tag (-f, most frequent first)."""
    topic, broker_name, queue_id = args.topic.strip(), args.broker_name.strip(), args.queue_id
    addr = await admin.broker_addr_by_name(broker_name)
    low, high = await _offset_range(admin, addr, topic, queue_id, args.begin, args.end)
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
                lines.append(f"MSGID: {msg.uniq_id_or_msg_id} {_message_to_string(msg, broker_name)} "
                             f"BODY: {'NOT PRINT BODY' if body is None else body}")
                found.append({"msgId": msg.uniq_id_or_msg_id, "offsetMsgId": msg.msg_id, "queueOffset": msg.queue_offset,
                              "tags": msg.tags, "storeTimestamp": msg.store_timestamp, "body": body})
    ranked = sorted(tags.items(), key=lambda kv: -kv[1])  # TagCountBean: most frequent first
    if args.by_tag:
        lines += [f"Tag: {tag:<30} Count: {count}" for tag, count in ranked]
    data = {"topic": topic, "brokerName": broker_name, "queueId": queue_id, "minOffset": low, "maxOffset": high,
            "messages": found, "tagCounts": dict(ranked) if args.by_tag else None}
    return Result(data, "\n".join(lines))


def _consume_message_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="Topic name")
    p.add_argument("-b", "--brokerName", dest="broker_name", help="Broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, help="Queue Id")
    p.add_argument("-o", "--offset", type=int, help="Queue offset")
    p.add_argument("-g", "--consumerGroup", dest="group", default=TOOLS_CONSUMER_GROUP, help="Consumer group name")
    p.add_argument("-s", "--beginTimestamp", dest="begin", type=timestamp_type,
                   help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-e", "--endTimestamp", dest="end", type=timestamp_type,
                   help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]")
    p.add_argument("-c", "--MessageNumber", dest="count", type=positive_int, default=128,
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
        min_offset, max_offset = await _offset_range(admin, addr, topic, queue_id, args.begin, args.end)
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
        ok, rt = await timed_send(admin, topic, args.size, broker_name, queue_id)
        if i:
            elapsed += rt
        rows.append({"brokerName": broker_name, "queueId": queue_id, "sendResult": ok, "rt": rt})
        lines.append(f"{broker_name:<32}  {queue_id:<4}  {str(ok).lower():<20}    {rt}")
    average = elapsed / (args.amount - 1)
    lines.append(f"Avg RT: {average:.2f}")
    return Result({"sends": rows, "avgRT": round(average, 2)}, "\n".join(lines))
