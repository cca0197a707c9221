"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue over POP.

ReceiveMessage streams a status, then the messages, then a delivery timestamp (the official
clients need the last one). Messages a consumer has tried max_attempts times are moved to the
group's DLQ instead of being delivered again (PopMessageResultFilterImpl).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from orbitmq.client import MQBrokerError, PopStatus
from orbitmq.common.constants import POP_HANDLE_ACKED_REMARK
from orbitmq.common.extra_info import KEY_SEPARATOR
from orbitmq.common.filter import SubscriptionData
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.namespace import wrap_namespace
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.pool import Duration
from orbitmq.proxy import converter, errors, validation
from orbitmq.proxy.client_manager import ClientManager, subscription_data
from orbitmq.proxy.cluster import FAILOVER_BACKOFF_INITIAL_S, ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.producer import UNKNOWN_OUTCOME, failure_kind
from orbitmq.proxy.receipt_handle import InvalidReceiptHandle, ReceiptHandle, with_commit_log_offset
from orbitmq.proxy.renewal import ReceiptHandleRenewer
from orbitmq.proxy.trace import FAILED, ProxyTracer, client_of
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingError

log = logging.getLogger("orbitmq.proxy.consumer")
T = TypeVar("T")
Code = pb.Code
ReceiveMessageResponse = spb.ReceiveMessageResponse

INIT_MODE_MAX = 0  # ConsumeInitMode.MAX
MAX_MSG_NUMS_FOR_POP_REQUEST = 32  # ProxyUtils.MAX_MSG_NUMS_FOR_POP_REQUEST
NACK_INVISIBLE_TIME_MS = 1000  # a message that could not be written becomes visible again soon
ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION = "5.0.3"


def _now_ms() -> int:
    return int(time.time() * 1000)


def decode_handle(raw: str, check_expired: bool = True, now_ms: int | None = None) -> ReceiptHandle:
    try:
        handle = ReceiptHandle.decode(raw)
    except InvalidReceiptHandle as exc:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None
    if check_expired and handle.is_expired(now_ms):
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    return handle


def duration_ms(d: Duration) -> int:
    """Duration.ToMilliseconds without its Python-level call chain (same result)."""
    nanos = d.nanos
    return d.seconds * 1000 + (nanos // 1_000_000 if nanos >= 0 else -(-nanos // 1_000_000))


def _message_id(msg: MessageExt) -> str:
    return msg.properties.get(_UNIQ_KEY, msg.msg_id)


def _check_group(group: str) -> None:
    """validate_consumer_group, once per name that passed (the check depends on the name only)."""
    if group not in _VALID_GROUPS:
        validation.validate_consumer_group(group)
        if len(_VALID_GROUPS) >= _CACHE_MAX:
            _VALID_GROUPS.clear()
        _VALID_GROUPS.add(group)


def _group_of(resource: pb.Resource) -> str:
    """validation.group_of: the group the brokers know, ``{namespace}%{name}``, validated."""
    if resource.resource_namespace:
        return validation.group_of(resource)
    group = resource.name
    _check_group(group)
    return group


def _names(request: spb.ReceiveMessageRequest) -> tuple[str, str]:
    """(group, topic) of a receive as the brokers know them (checked by _pop already)."""
    group, topic = request.group, request.message_queue.topic
    return wrap_namespace(group.resource_namespace, group.name), wrap_namespace(topic.resource_namespace, topic.name)


def _subscription(topic: str, expr: pb.FilterExpression) -> SubscriptionData:
    """subscription_data, kept per (topic, type, expression): every ReceiveMessage of a consumer
    names the same filter. A pop only reads it (type, string, tags); only a filter that parsed
    is kept, so a bad one meets the same error every time."""
    key = (topic, expr.type, expr.expression)
    sub = _SUBSCRIPTIONS.get(key)
    if sub is None:
        sub = subscription_data(topic, expr)
        if len(_SUBSCRIPTIONS) >= _CACHE_MAX:
            _SUBSCRIPTIONS.clear()
        _SUBSCRIPTIONS[key] = sub
    return sub


_CACHE_MAX = 4096
# Consumer group names that passed validation (validate_consumer_group depends on the name only).
_VALID_GROUPS: set[str] = set()
_SUBSCRIPTIONS: dict[tuple[str, int, str], SubscriptionData] = {}
_POP_CK = MessageConst.POP_CK
_TAGS = MessageConst.TAGS
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_OK_STATUS = errors.OK_STATUS


def tag_matched(sub: SubscriptionData, tag: str | None) -> bool:
    """FilterUtils.isTagMatched: the broker filtered by hash code; re-check the exact tag."""
    if sub.expression_type != "TAG" or sub.is_sub_all or not sub.tags_set:
        return True
    return tag is not None and tag in sub.tags_set


class ConsumerActivity:
    def __init__(self, config: ProxyConfig, cluster: ClusterService, clients: ClientManager) -> None:
        self.config = config
        self.cluster = cluster
        self.clients = clients
        self._background: set[asyncio.Task] = set()
        self.renewer = ReceiptHandleRenewer(config, self._change_invisible_raw)
        # Message trace for gRPC clients (services/proxy/trace.py), set by the server with traceEnable.
        self.tracer: ProxyTracer | None = None
        clients.client_gone_hooks.append(self.renewer.release_client)

    def start(self) -> None:
        self.renewer.start()

    async def _change_invisible_raw(self, raw: str, group: str, topic: str, invisible_ms: int) -> str:
        return await self._change_invisible(decode_handle(raw, False), group, topic, invisible_ms)

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def shutdown(self) -> None:
        await self.renewer.shutdown()
        if self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # ---- ReceiveMessage ----------------------------------------------------------------------

    def _polling_time(self, ctx: ProxyContext, request: spb.ReceiveMessageRequest,
                      settings: pb.Settings | None) -> int:
        cfg = self.config
        remaining = ctx.remaining_ms
        if request.HasField("long_polling_timeout"):
            polling = duration_ms(request.long_polling_timeout)
        elif remaining is not None:
            request_timeout = settings.request_timeout.ToMilliseconds() if settings is not None else 3000
            polling = remaining - request_timeout // 2
        else:
            polling = cfg.grpc_client_consumer_max_long_polling_timeout_millis
        polling = max(polling, cfg.grpc_client_consumer_min_long_polling_timeout_millis)
        polling = min(polling, cfg.grpc_client_consumer_max_long_polling_timeout_millis)
        if remaining is not None and polling > remaining:
            if remaining >= cfg.grpc_client_consumer_min_long_polling_timeout_millis:
                polling = remaining - cfg.long_polling_reserve_time_in_millis
            else:
                version = ctx.client_version
                code = (Code.BAD_REQUEST if not version or ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION > version
                        else Code.ILLEGAL_POLLING_TIME)
                raise ProxyError(code, "The deadline time remaining is not enough for polling, "
                                       "please check network condition")
        return max(polling, 0)

    async def receive_message(self, ctx: ProxyContext, request: spb.ReceiveMessageRequest
                              ) -> AsyncIterator[spb.ReceiveMessageResponse]:
        # The pop runs in its own task so that a client giving up while the broker long-polls
        # cancels only the wait on `delivered`: the pop completes, and nacks what it got itself.
        delivered: asyncio.Future[list[MessageExt] | None] = asyncio.get_running_loop().create_future()
        # Kept in _background: a pop the client gave up on still nacks, and shutdown waits for it.
        self._spawn(self._pop_for(ctx, request, delivered))
        try:
            messages = await delivered
        except asyncio.CancelledError:
            # Cancelled after the pop handed its messages over but before this handler resumed.
            if delivered.done() and not delivered.cancelled() and delivered.exception() is None:
                popped = delivered.result()
                if popped:
                    self._spawn(self._nack(request, popped))
            raise
        except Exception as exc:  # noqa: BLE001 -- every failure becomes a Status
            yield ReceiveMessageResponse(status=errors.status_of(exc))
        else:
            if messages is None:
                yield ReceiveMessageResponse(status=errors.status(Code.TOO_MANY_REQUESTS, "polling full"))
            elif not messages:
                yield ReceiveMessageResponse(status=errors.status(Code.MESSAGE_NOT_FOUND, "no new message"))
            else:
                if request.auto_renew:
                    self._hold_all(ctx.client_id, request, messages)
                written = 0
                try:
                    yield ReceiveMessageResponse(status=_OK_STATUS)  # copied into the response
                    fill = converter.fill_proto_message
                    for msg in messages:
                        # Built in place inside the response: passing a Message to the constructor copies it.
                        response = ReceiveMessageResponse()
                        fill(response.message, msg)
                        yield response
                        written += 1
                    if self.tracer is not None:  # SubBefore records, queued, never awaited
                        self.tracer.on_deliver(_names(request)[0], messages, client_of(ctx))
                finally:
                    if written < len(messages):
                        group = _names(request)[0]
                        forget = self.renewer.forget
                        for msg in messages[written:]:
                            forget(ctx.client_id, group, _message_id(msg))
                        self._spawn(self._nack(request, messages[written:]))
        last = ReceiveMessageResponse()
        converter.set_timestamp_ms(last.delivery_timestamp, _now_ms())
        yield last

    def _hold_all(self, client_id: str, request: spb.ReceiveMessageRequest, messages: list[MessageExt]) -> None:
        group, topic = _names(request)
        invisible = self.config.default_invisible_time_mills
        hold = self.renewer.hold
        for msg in messages:
            handle = msg.properties.get(_POP_CK)
            if handle:
                hold(client_id, group, topic, _message_id(msg), handle, invisible)

    async def _pop_for(self, ctx: ProxyContext, request: spb.ReceiveMessageRequest,
                       delivered: asyncio.Future[list[MessageExt] | None]) -> None:
        """_pop, handing its result straight to the waiting handler (one wake-up, no shield).

        When the handler was cancelled meanwhile (`delivered` is done), whatever was popped is
        made visible again.
        """
        try:
            messages = await self._pop(ctx, request)
        except Exception as exc:  # noqa: BLE001 -- the handler turns it into a Status
            if not delivered.done():
                delivered.set_exception(exc)
            return
        except BaseException:
            delivered.cancel()
            raise
        if not delivered.done():
            delivered.set_result(messages)
        elif messages:
            self._spawn(self._nack(request, messages))

    async def _pop(self, ctx: ProxyContext, request: spb.ReceiveMessageRequest) -> list[MessageExt] | None:
        """The deliverable messages ([] when none arrived in time, None when polling is full)."""
        queue = request.message_queue
        settings = await self.clients.effective_settings(ctx.client_id)
        polling = self._polling_time(ctx, request, settings)
        topic = validation.topic_of(queue.topic)  # "{namespace}%{name}", as the brokers know it
        group = _group_of(request.group)
        auto_renew = request.auto_renew
        if auto_renew:
            invisible = self.config.default_invisible_time_mills
        else:
            invisible = duration_ms(request.invisible_duration) if request.HasField("invisible_duration") else 0
            validation.validate_invisible_time(invisible, self.config.min_invisible_time_mills_for_recv,
                                               self.config.max_invisible_time_mills)
        sub = _subscription(topic, request.filter_expression)
        batch_size = request.batch_size
        if batch_size <= 0:
            raise ProxyError(Code.BAD_REQUEST, "batch size must be positive")
        fifo, max_attempts = await self.clients.consumer_policy_of(settings, group)
        cluster = self.cluster
        try:
            broker_name, addr = await cluster.select_read_broker(topic, queue.broker.name)
        except ProxyError as exc:
            if exc.code != Code.FORBIDDEN:
                raise
            # Maybe only failing over (no master right now): wait for one within the window.
            broker_name, addr = await cluster.wait_read_broker(topic, queue.broker.name,
                                                               cluster.failover_deadline(ctx.time_remaining))
        header = h.PopMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=-1,
            max_msg_nums=min(batch_size, MAX_MSG_NUMS_FOR_POP_REQUEST), invisible_time=invisible,
            poll_time=polling, born_time=_now_ms(), init_mode=INIT_MODE_MAX, exp_type=sub.expression_type,
            exp=sub.sub_string, order=fifo, attempt_id=request.attempt_id if request.HasField("attempt_id") else None)
        timeout = (polling + self.config.remoting_timeout_millis) / 1000.0
        started = time.monotonic()
        deadline: float | None = None
        while True:
            try:
                result = await cluster.api.pop_message(addr, broker_name, header, timeout)
                break
            except (MQBrokerError, RemotingError) as exc:
                # The master died (or refused, fenced) under the pop: pop again from the set's new
                # master within the client's deadline. Whatever the dead one had popped comes back
                # after its invisible time (at worst a message is delivered once more).
                if failure_kind(exc) is None:
                    raise
                cluster.broker_unreachable(broker_name, addr, exc)
                if deadline is None:
                    deadline = cluster.failover_deadline(ctx.time_remaining)
                if time.monotonic() >= deadline:
                    raise
                failed = addr if not isinstance(exc, MQBrokerError) else ""
                addr = await cluster.failover_master(broker_name, topic, failed, deadline)
                # Only what is left of the long-polling time, so the answer still meets the deadline.
                left_ms = int(polling - (time.monotonic() - started) * 1000)
                header = dataclasses.replace(header, poll_time=max(left_ms, 0), born_time=_now_ms())
        if result.status == PopStatus.POLLING_FULL:
            return None
        if result.status != PopStatus.FOUND:
            return []
        deliverable: list[MessageExt] = []
        # Without a tag list every tag matches (tag_matched): only the attempts are checked then.
        check_tag = sub.expression_type == "TAG" and not sub.is_sub_all and bool(sub.tags_set)
        sep = KEY_SEPARATOR
        for msg in result.messages:
            props = msg.properties
            pop_ck = props.get(_POP_CK)
            if pop_ck is None:  # with_commit_log_offset gives None: delivered without a handle
                deliverable.append(msg)
                continue
            handle = props[_POP_CK] = f"{pop_ck}{sep}{msg.commit_log_offset}"
            if check_tag and not tag_matched(sub, props.get(_TAGS)):
                self._spawn(self._quiet(self._ack(handle, group, topic)))
            elif msg.reconsume_times >= max_attempts:
                self._spawn(self._quiet(self._to_dlq(handle, _message_id(msg), group, topic)))
            else:
                deliverable.append(msg)
        return deliverable

    async def _quiet(self, coro) -> None:
        try:
            await coro
        except Exception as exc:  # background clean-up: the revive service retries later
            log.warning("background ack/DLQ failed: %s", exc)

    async def _nack(self, request: spb.ReceiveMessageRequest, messages: list[MessageExt]) -> None:
        group, topic = _names(request)
        for msg in messages:
            raw = msg.properties.get(MessageConst.POP_CK)
            if raw:
                await self._quiet(self._change_invisible(decode_handle(raw, False), group, topic,
                                                         NACK_INVISIBLE_TIME_MS))

    # ---- ack / change invisible / DLQ --------------------------------------------------------

    async def _ack(self, raw_handle: str, group: str, topic: str, check_expired: bool = False) -> None:
        await self._ack_handle(decode_handle(raw_handle, check_expired), group, topic)

    async def _on_master(self, broker_name: str, topic: str, call: Callable[[str], Awaitable[T]],
                         retry_unknown: bool, time_remaining: float | None = None) -> T:
        """``call(master address)`` of a broker set, across a failover: receipt handles name the set,
        so a failed master's routes are dropped and the set's new master is resolved afresh (waiting
        up to brokerFailoverWaitMillis). An unknown outcome is retried only if ``retry_unknown``
        (ack and change-invisible may be repeated: at worst a message is delivered once more)."""
        cluster = self.cluster
        try:
            addr = await cluster.broker_addr(broker_name, topic)
        except ProxyError as exc:
            addr = await cluster.wait_master_addr(broker_name, topic, time_remaining, exc)
        deadline: float | None = None
        while True:
            try:
                return await call(addr)
            except (MQBrokerError, RemotingError) as exc:
                kind = failure_kind(exc)
                if kind is None:
                    raise
                cluster.broker_unreachable(broker_name, addr, exc)
                if kind is UNKNOWN_OUTCOME and not retry_unknown:
                    raise
                if deadline is None:
                    deadline = cluster.failover_deadline(time_remaining)
                if time.monotonic() >= deadline:
                    raise
                failed = addr if not isinstance(exc, MQBrokerError) else ""
                if not failed:
                    await asyncio.sleep(FAILOVER_BACKOFF_INITIAL_S)
                addr = await cluster.failover_master(broker_name, topic, failed, deadline)

    async def _ack_handle(self, handle: ReceiptHandle, group: str, topic: str) -> None:
        header = h.AckMessageRequestHeader(
            consumer_group=group, topic=handle.real_topic(topic, group), queue_id=handle.queue_id,
            extra_info=handle.raw, offset=handle.offset, broker_name=handle.broker_name)
        api = self.cluster.api
        result = await self._on_master(handle.broker_name, topic, lambda addr: api.ack_message(addr, header), True)
        if result.status.value != "OK":
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")

    async def ack_message(self, ctx: ProxyContext, request: spb.AckMessageRequest) -> spb.AckMessageResponse:
        topic = validation.topic_of(request.topic)
        group = _group_of(request.group)
        entries = request.entries
        if not entries:
            raise ProxyError(Code.BAD_REQUEST, "no ack entry")
        statuses: list[pb.Status | None] = [None] * len(entries)
        by_broker: dict[str, list[tuple[int, ReceiptHandle]]] = {}
        renewer = self.renewer
        client_id = ctx.client_id
        now = _now_ms()
        for index, entry in enumerate(entries):
            latest = None
            if renewer.holds(client_id, group, entry.message_id):
                # Only a message this proxy renews has a newer handle (release waits for its renewal).
                latest = await renewer.release(client_id, group, entry.message_id)
                now = _now_ms()
            try:
                handle = decode_handle(latest or entry.receipt_handle, True, now)
            except ProxyError as exc:
                statuses[index] = errors.status_of(exc)
                continue
            items = by_broker.get(handle.broker_name)
            if items is None:
                by_broker[handle.broker_name] = [(index, handle)]
            else:
                items.append((index, handle))

        async def one(index: int, handle: ReceiptHandle) -> None:
            try:
                await self._ack_handle(handle, group, topic)  # already decoded (and checked) above
                statuses[index] = errors.ok()
            except Exception as exc:  # noqa: BLE001 -- per-entry status
                statuses[index] = errors.status_of(exc)

        async def per_broker(broker_name: str, items: list[tuple[int, ReceiptHandle]]) -> None:
            if len(items) > 1 and not any(handle.is_order for _i, handle in items):
                # One BATCH_ACK_MESSAGE for the lot; on any trouble, ack one by one for exact statuses.
                try:
                    addr = await self.cluster.broker_addr(broker_name, topic)
                    await self.cluster.api.batch_ack_points(addr, broker_name, group, topic, [
                        (hd.topic_type, hd.queue_id, hd.start_offset, hd.retrieve_time, hd.revive_queue_id,
                         hd.invisible_time, hd.offset) for _i, hd in items])
                    for index, _handle in items:
                        statuses[index] = errors.OK_STATUS  # read-only: copied into the response entry
                    return
                except Exception as exc:  # noqa: BLE001
                    log.debug("batch ack on %s failed (%s); acking one by one", broker_name, exc)
            if len(items) == 1:
                await one(*items[0])
            else:
                await asyncio.gather(*(one(index, handle) for index, handle in items))

        if len(by_broker) == 1:  # the usual case: no task for gather to wrap the one coroutine in
            for name, items in by_broker.items():
                await per_broker(name, items)
        elif by_broker:
            await asyncio.gather(*(per_broker(name, items) for name, items in by_broker.items()))
        # Entries added in place: a message passed to a constructor (entries=, status=) is copied.
        response = spb.AckMessageResponse()
        add = response.entries.add
        first = statuses[0].code  # type: ignore[union-attr]
        code = first
        for e, st in zip(entries, statuses, strict=True):
            add(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st)
            if st.code != first:  # type: ignore[union-attr]
                code = Code.MULTIPLE_RESULTS
        response.status.code = code
        response.status.message = Code.Name(code)
        tracer = self.tracer
        if tracer is not None:  # SubAfter records of the acked messages
            host = client_of(ctx)
            for items in by_broker.values():
                for index, handle in items:
                    if statuses[index].code == Code.OK:  # type: ignore[union-attr]
                        tracer.on_consumed(group, entries[index].message_id, handle, True, host)
        return response

    async def _change_invisible(self, handle: ReceiptHandle, group: str, topic: str, invisible_ms: int) -> str:
        header = h.ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=handle.real_topic(topic, group), queue_id=handle.queue_id,
            extra_info=handle.raw, offset=handle.offset, invisible_time=invisible_ms,
            broker_name=handle.broker_name)
        api = self.cluster.api
        result = await self._on_master(handle.broker_name, topic,
                                       lambda addr: api.change_invisible_time(addr, handle.broker_name, header), True)
        return with_commit_log_offset(result.extra_info, handle.commit_log_offset) or ""

    async def change_invisible_duration(self, ctx: ProxyContext, request: spb.ChangeInvisibleDurationRequest
                                        ) -> spb.ChangeInvisibleDurationResponse:
        topic = validation.topic_of(request.topic)
        group = validation.group_of(request.group)
        invisible = request.invisible_duration.ToMilliseconds()
        validation.validate_invisible_time(invisible, 0, self.config.max_invisible_time_mills)
        latest = await self.renewer.release(ctx.client_id, group, request.message_id)
        handle = decode_handle(latest or request.receipt_handle)
        try:
            new_handle = await self._change_invisible(handle, group, topic, invisible)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.NO_MESSAGE and exc.remark == POP_HANDLE_ACKED_REMARK:
                # The broker refuses to revive an acked message (services/broker/pop/recent_acks.py).
                raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is invalid: the message has "
                                                              "already been acked") from None
            raise
        return spb.ChangeInvisibleDurationResponse(status=errors.ok(), receipt_handle=new_handle)

    async def _to_dlq(self, raw_handle: str, message_id: str, group: str, topic: str) -> None:
        handle = decode_handle(raw_handle, False)
        if handle.commit_log_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle carries no commit log offset")
        api = self.cluster.api
        await self._on_master(handle.broker_name, topic, lambda addr: api.consumer_send_msg_back(
            addr, group, handle.commit_log_offset, -1, message_id, handle.real_topic(topic, group), 0), False)
        await self._ack(raw_handle, group, topic)
        if self.tracer is not None:  # dead-lettered: a failed SubAfter (the DLQ holds the message)
            self.tracer.on_consumed(group, message_id, handle, False, "", FAILED)

    async def forward_to_dlq(self, ctx: ProxyContext, request: spb.ForwardMessageToDeadLetterQueueRequest
                             ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        topic = validation.topic_of(request.topic)
        group = validation.group_of(request.group)
        raw = await self.renewer.release(ctx.client_id, group, request.message_id) or request.receipt_handle
        decode_handle(raw)
        try:
            await self._to_dlq(raw, request.message_id, group, topic)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                raise ProxyError(Code.CONSUMER_GROUP_NOT_FOUND, exc.remark) from None
            raise
        return spb.ForwardMessageToDeadLetterQueueResponse(status=errors.ok())
