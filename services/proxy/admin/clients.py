"""GetConsumerRunningInfo, VerifyMessage and PrintThreadStackTrace: questions to one client.

They go the way mqadmin's consumerStatus / consumeMessage / consumer -s go: to a broker, which
asks the client over its own connection (AdminBrokerProcessor#callConsumer). A gRPC client is
known to the brokers through the proxy that heartbeats for it, so the broker's request comes back
to that proxy's ClientRequestRelay (client_relay.py) and reaches the client over its Telemetry
stream, whichever proxy replica this call came to. A stack trace of a client of this proxy goes
to it directly (PrintThreadStackTraceCommand), producers included; without a client id the
answer is this proxy's own stacks.
"""

from __future__ import annotations

import json
from typing import Any

from orbitmq.common.fastjson import loads, message_queue_pairs
from orbitmq.proto.apache.rocketmq.v2 import admin_pb2 as apb
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import errors
from orbitmq.proxy.admin.common import AdminParts, group_name, masters, require_group, topic_name
from orbitmq.proxy.admin.messages import find_message
from orbitmq.proxy.admin.runtime import proxy_stacks
from orbitmq.proxy.client_relay import _StreamLost
from orbitmq.proxy.errors import ProxyError
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

Code = pb.Code
_NOT_ONLINE = "not online"
# ConsumeMessageDirectlyResult.consumeResult -> the Code VerifyMessage answers
_VERIFY_CODES = {"CR_SUCCESS": Code.OK, "CR_LATER": Code.FAILED_TO_CONSUME_MESSAGE,
                 "CR_ROLLBACK": Code.FAILED_TO_CONSUME_MESSAGE, "CR_COMMIT": Code.OK,
                 "CR_RETURN_NULL": Code.MESSAGE_CORRUPTED, "CR_THROW_EXCEPTION": Code.FAILED_TO_CONSUME_MESSAGE}


def _client_id(value: str) -> str:
    if not value.strip():
        raise ProxyError(Code.CLIENT_ID_REQUIRED, "client_id is required")
    return value


async def call_client(parts: AdminParts, group: str, client_id: str, code: int, fields: dict[str, str],
                      addrs: list[str] | None = None) -> RemotingCommand:
    """``code`` to the client through the first master that has it online; NOT_FOUND when
    none has (apache.rocketmq.v2.Code has no client-specific code), PROXY_TIMEOUT when it does not answer in time."""
    last = f"The Consumer <{group}> <{client_id}> not online"
    for addr in addrs if addrs is not None else [a for _n, a in await masters(parts)]:
        response = await parts.api.invoke(addr, code, fields)
        if response.code == ResponseCode.SUCCESS:
            return response
        remark = response.remark or ""
        if _NOT_ONLINE in remark:
            last = remark
            continue
        if response.code in (ResponseCode.CONSUME_MSG_TIMEOUT, ResponseCode.SYSTEM_BUSY) or "timeout" in remark.lower():
            raise ProxyError(Code.PROXY_TIMEOUT, f"client {client_id} did not answer: {remark}")
        raise ProxyError(errors.code_of_response(response.code), remark or f"code {response.code}")
    raise ProxyError(Code.NOT_FOUND, last)


async def running_info(parts: AdminParts, group: str, client_id: str, jstack: bool = False) -> dict[str, Any]:
    """The client's ConsumerRunningInfo as JSON (GET_CONSUMER_RUNNING_INFO)."""
    response = await call_client(parts, group, client_id, RequestCode.GET_CONSUMER_RUNNING_INFO, {
        "consumerGroup": group, "clientId": client_id, "jstackEnable": "true" if jstack else "false"})
    try:
        body = loads(response.body) if response.body else {}
    except ValueError as exc:
        raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"client {client_id} answered a running info that is not "
                                                     f"JSON: {exc}") from None
    return body if isinstance(body, dict) else {}


def filter_expression(sd: dict[str, Any]) -> pb.FilterExpression:
    """A Remoting SubscriptionData as a gRPC FilterExpression."""
    kind = pb.FilterType.SQL if str(sd.get("expressionType", "TAG")).upper() == "SQL92" else pb.FilterType.TAG
    return pb.FilterExpression(type=kind, expression=str(sd.get("subString", "*") or "*"))


def _number(value: Any, kind: type = int) -> Any:
    try:
        return kind(value or 0)
    except (TypeError, ValueError):
        return kind(0)


_PROCESS_QUEUE_FIELDS = {
    "commitOffset": "commit_offset", "cachedMsgMinOffset": "cached_msg_min_offset",
    "cachedMsgMaxOffset": "cached_msg_max_offset", "cachedMsgCount": "cached_msg_count",
    "cachedMsgSizeInMiB": "cached_msg_size_in_mib", "transactionMsgMinOffset": "transaction_msg_min_offset",
    "transactionMsgMaxOffset": "transaction_msg_max_offset", "transactionMsgCount": "transaction_msg_count",
    "tryUnlockTimes": "try_unlock_times", "lastLockTimestamp": "last_lock_timestamp",
    "lastPullTimestamp": "last_pull_timestamp", "lastConsumeTimestamp": "last_consume_timestamp"}


def running_info_proto(info: dict[str, Any]) -> apb.ConsumerRunningInfo:
    out = apb.ConsumerRunningInfo(properties={str(k): str(v) for k, v in (info.get("properties") or {}).items()})
    for sd in info.get("subscriptionSet") or []:
        if isinstance(sd, dict) and sd.get("topic"):
            out.subscriptions[str(sd["topic"])].CopyFrom(filter_expression(sd))
    for mq, pq in message_queue_pairs(info.get("mqTable")):
        pq = pq if isinstance(pq, dict) else {}
        item = out.message_queue_table.add()
        item.message_queue.topic.name = str(mq.get("topic", ""))
        item.message_queue.id = _number(mq.get("queueId"))
        item.message_queue.broker.name = str(mq.get("brokerName", ""))
        queue = item.process_queue_info
        for key, name in _PROCESS_QUEUE_FIELDS.items():
            setattr(queue, name, _number(pq.get(key)))
        queue.locked, queue.dropped = bool(pq.get("locked")), bool(pq.get("droped", pq.get("dropped")))
    for topic, st in (info.get("statusTable") or {}).items():
        st = st if isinstance(st, dict) else {}
        out.consume_status_table[str(topic)].CopyFrom(apb.ConsumeStatus(
            receive_rt=_number(st.get("pullRT"), float), receive_tps=_number(st.get("pullTPS"), float),
            consume_rt=_number(st.get("consumeRT"), float), consume_ok_tps=_number(st.get("consumeOKTPS"), float),
            consume_failed_tps=_number(st.get("consumeFailedTPS"), float),
            consume_failed_msgs=_number(st.get("consumeFailedMsgs"))))
    return out


async def get_consumer_running_info(parts: AdminParts, request: apb.GetConsumerRunningInfoRequest
                                    ) -> apb.GetConsumerRunningInfoResponse:
    group = group_name(request.group)
    client_id = _client_id(request.client_id)
    await require_group(parts, group)
    info = await running_info(parts, group, client_id)
    return apb.GetConsumerRunningInfoResponse(status=errors.ok(), consumer_running_info=running_info_proto(info))


async def verify_message(parts: AdminParts, request: apb.VerifyMessageRequest) -> apb.VerifyMessageResponse:
    """CONSUME_MESSAGE_DIRECTLY to the broker storing the message, which hands it to the client."""
    group = group_name(request.group)
    topic = topic_name(request.topic)
    client_id = _client_id(request.client_id)
    if not request.message_id:
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message_id is required")
    await require_group(parts, group)
    msg = await find_message(parts, topic, request.message_id)
    response = await call_client(parts, group, client_id, RequestCode.CONSUME_MESSAGE_DIRECTLY, {
        "consumerGroup": group, "clientId": client_id, "msgId": msg.msg_id, "topic": topic}, [msg.store_host])
    try:
        result = json.loads(response.body) if response.body else {}
    except ValueError:
        result = {}
    consume_result = str(result.get("consumeResult", "")) if isinstance(result, dict) else ""
    code = _VERIFY_CODES.get(consume_result, Code.INTERNAL_SERVER_ERROR)
    remark = result.get("remark") if isinstance(result, dict) else None
    return apb.VerifyMessageResponse(status=errors.status(code, f"{consume_result} {remark or ''}".strip()))


async def print_thread_stack_trace(parts: AdminParts, request: apb.PrintThreadStackTraceRequest
                                   ) -> apb.PrintThreadStackTraceResponse:
    if not request.client_id.strip():
        return apb.PrintThreadStackTraceResponse(status=errors.ok(), thread_stack_trace=proxy_stacks())
    client_id = request.client_id
    relay = parts.messaging.relay
    local = parts.clients.clients.get(client_id)
    if relay is not None and local is not None and local.outbox is not None:
        nonce = relay._next_nonce()
        try:
            answer = await relay._ask(local, spb.TelemetryCommand(
                print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)), nonce)
        except _StreamLost as exc:
            raise ProxyError(Code.NOT_FOUND, str(exc)) from None
        if answer is None:
            raise ProxyError(Code.PROXY_TIMEOUT, f"client {client_id} did not answer the stack trace in time")
        if answer.status.code not in (Code.OK, Code.CODE_UNSPECIFIED):
            return apb.PrintThreadStackTraceResponse(status=answer.status)
        return apb.PrintThreadStackTraceResponse(status=errors.ok(),
                                                 thread_stack_trace=answer.thread_stack_trace.thread_stack_trace)
    group = group_name(request.group)  # a client elsewhere is asked through a broker, by its group
    await require_group(parts, group)
    info = await running_info(parts, group, client_id, jstack=True)
    return apb.PrintThreadStackTraceResponse(status=errors.ok(), thread_stack_trace=str(info.get("jstack", "")))
