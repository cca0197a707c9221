"""`orbitmq admin queryMsgTraceById`: a message's whole path from its trace records.

Upstream's QueryMsgTraceByIdSubCommand: QUERY_MESSAGE (12) on the trace topic by the message id
(trace messages carry every traced id in KEYS), decode the bodies (orbitmq.common.trace_codec)
and keep the records of that id. Upstream prints the Pub and SubAfter rows; this prints every
record in time order (sent and stored, delivered to which group and client with its retry
count, acked or failed, transaction ends) and adds a dead-letter row when the message sits in
the DLQ of a group that consumed it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from orbitmq.admin.admin_api import AdminError, MQAdminExt
from orbitmq.admin.output import format_timestamp, render_table
from orbitmq.admin.registry import Result, command
from orbitmq.client import MQBrokerError, MQClientError, SendResult
from orbitmq.common import trace_codec as tc
from orbitmq.common.constants import RMQ_SYS_TRACE_TOPIC, dlq_topic
from orbitmq.common.message import Message, MessageConst
from orbitmq.common.route import RouteDataError
from orbitmq.remoting.errors import RemotingError

_LONG_MAX = 2**63 - 1
_MSG_TYPES = {t.value: t.name for t in tc.MessageType}


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the message id (UNIQ_KEY)")
    p.add_argument("-t", "--traceTopic", dest="trace_topic", default=RMQ_SYS_TRACE_TOPIC,
                   help=f"the trace topic (default {RMQ_SYS_TRACE_TOPIC})")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=int, default=0)
    p.add_argument("-e", "--endTimestamp", dest="end", type=int, default=_LONG_MAX)
    p.add_argument("-c", "--maxNum", dest="max_num", type=int, default=64)


def _row(record: tc.TraceRecord, trace_born_host: str) -> dict[str, Any]:
    """One record as the command shows it: what happened, where, to whom."""
    host = record.client_host or trace_born_host
    doc: dict[str, Any] = {"type": record.type.value, "group": record.group, "clientHost": host,
                           "time": record.timestamp, "costTime": record.cost_time}
    if record.type == tc.TraceType.PUB:
        doc.update(status="success" if record.success else "failed", topic=record.topic, tags=record.tags,
                   keys=record.keys, storeHost=record.store_host, offsetMsgId=record.offset_msg_id,
                   bodyLength=record.body_length, msgType=_MSG_TYPES.get(record.msg_type, str(record.msg_type)),
                   detail=f"sent to {record.topic}, stored on {record.store_host}"
                          + (f" (offsetMsgId {record.offset_msg_id})" if record.offset_msg_id else ""))
    elif record.type == tc.TraceType.SUB_BEFORE:
        doc.update(status="delivered", retryTimes=record.retry_times, requestId=record.request_id,
                   detail="delivered" + (f", retry {record.retry_times}" if record.retry_times else ""))
    elif record.type == tc.TraceType.SUB_AFTER:
        doc.update(status="success" if record.success else "failed", requestId=record.request_id,
                   contextCode=record.context_code,
                   detail="acked" if record.success else f"consume failed (contextCode {record.context_code})")
    elif record.type == tc.TraceType.END_TRANSACTION:
        doc.update(status=record.transaction_state, topic=record.topic, transactionId=record.transaction_id,
                   fromTransactionCheck=record.from_transaction_check,
                   detail=f"transaction ended {record.transaction_state}"
                          + (" (broker check-back)" if record.from_transaction_check else ""))
    else:
        doc.update(status="success" if record.success else "failed", topic=record.topic, detail="recalled")
    return doc


async def _dead_letter_rows(admin: MQAdminExt, msg_id: str, groups: list[str]) -> list[dict[str, Any]]:
    """A row per consumer group whose DLQ holds the message."""
    rows = []
    for group in groups:
        try:
            found = await admin.query_message(dlq_topic(group), msg_id, 1, 0, _LONG_MAX, unique_key=True)
        except (AdminError, MQBrokerError, MQClientError, RemotingError, RouteDataError):
            continue  # no DLQ topic: nothing dead-lettered in that group
        for msg in found:
            rows.append({"type": "DLQ", "group": group, "clientHost": "", "time": msg.store_timestamp,
                         "costTime": 0, "status": "dead-lettered", "topic": msg.topic,
                         "detail": f"in {msg.topic} after {msg.reconsume_times} retries"})
    return rows


async def send_pub_trace(admin: MQAdminExt, msg: Message, group: str, result: SendResult, cost_ms: int,
                         trace_topic: str = RMQ_SYS_TRACE_TOPIC) -> None:
    """What a Remoting producer with enableMsgTrace writes after a send: one Pub record in a
    trace message whose KEYS are the message id and keys (`sendMessage -m true`). As upstream's
    asynchronous trace, a failure never fails the send: it is reported on stderr."""
    try:
        await _send_pub_trace(admin, msg, group, result, cost_ms, trace_topic)
    except (AdminError, MQBrokerError, MQClientError, RemotingError, RouteDataError, OSError) as exc:
        reason = exc.remark if isinstance(exc, MQBrokerError) else str(exc)
        print(f"orbitmq admin sendMessage: message sent, its trace not written to {trace_topic}: {reason}",
              file=sys.stderr)


async def _send_pub_trace(admin: MQAdminExt, msg: Message, group: str, result: SendResult, cost_ms: int,
                          trace_topic: str) -> None:
    try:
        store_host = await admin.broker_addr_by_name(result.broker_name)
    except AdminError:
        store_host = result.broker_name
    keys = msg.get_property(MessageConst.KEYS)
    record = tc.encode_pub(timestamp=int(time.time() * 1000), region_id=tc.DEFAULT_REGION, group=group,
                           topic=msg.topic, msg_id=result.msg_id, tags=msg.get_property(MessageConst.TAGS),
                           keys=keys, store_host=store_host, body_length=len(msg.body), cost_time=cost_ms,
                           msg_type=int(tc.MessageType.NORMAL), offset_msg_id=result.offset_msg_id,
                           success=result.status.value == "SEND_OK")
    trace = Message(trace_topic, record.encode("utf-8"))
    trace.put_property(MessageConst.KEYS, " ".join([result.msg_id, *(keys or "").split()]))
    await admin.send(trace, f"_INNER_TRACE_PRODUCER-{group}-PRODUCE")


@command("queryMsgTraceById", "query a message trace", _options)
async def query_msg_trace_by_id(admin: MQAdminExt, args: argparse.Namespace) -> Result:
    msg_id = args.msg_id.strip()
    if not msg_id:
        raise AdminError("-i msgId is empty")
    if args.max_num <= 0:
        raise AdminError("maxNum must be positive")
    try:
        await admin.topic_route(args.trace_topic)
    except (AdminError, MQBrokerError, MQClientError, RouteDataError) as exc:
        reason = exc.remark if isinstance(exc, MQBrokerError) else str(exc)
        raise AdminError(f"{reason}; brokers create the trace topic with traceTopicEnable=true") from None
    traces = await admin.query_message(args.trace_topic, msg_id, args.max_num, args.begin, args.end)
    rows: list[dict[str, Any]] = []
    for trace in traces:
        for record in tc.decode(trace.body.decode("utf-8", errors="replace")):
            if record.msg_id == msg_id:
                rows.append(_row(record, trace.born_host))
    groups = sorted({r["group"] for r in rows if r["type"] in ("SubBefore", "SubAfter") and r["group"]})
    rows += await _dead_letter_rows(admin, msg_id, groups)
    order = {"Pub": 0, "EndTransaction": 1, "SubBefore": 2, "SubAfter": 3, "DLQ": 4, "Recall": 5}
    rows.sort(key=lambda r: (r["time"], order.get(r["type"], 9)))
    if not rows:
        return Result([], f"no trace of message {msg_id} in {args.trace_topic}")
    text = render_table(
        ["#Type", "#Group", "#ClientHost", "#Time", "#CostTimes", "#Status", "#Detail"],
        [[r["type"], r["group"] or "-", r["clientHost"] or "-", format_timestamp(r["time"]),
          f"{r['costTime']}ms", r["status"], r["detail"]] for r in rows])
    return Result(rows, text)
