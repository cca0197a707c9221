"""ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue over POP.

ReceiveMessage streams a status, then the messages, then a delivery timestamp (the official
clients need the last one). Messages a consumer has tried max_attempts times are moved to the
group's DLQ instead of being delivered again (PopMessageResultFilterImpl).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from orbitmq.client import MQBrokerError, PopStatus
from orbitmq.common.filter import SubscriptionData
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import converter, errors, validation
from orbitmq.proxy.client_manager import ClientManager, subscription_data
from orbitmq.proxy.cluster import ClusterService
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.context import ProxyContext
from orbitmq.proxy.errors import ProxyError
from orbitmq.proxy.receipt_handle import InvalidReceiptHandle, ReceiptHandle, with_commit_log_offset
from orbitmq.proxy.renewal import ReceiptHandleRenewer
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode

log = logging.getLogger("orbitmq.proxy.consumer")
Code = pb.Code
ReceiveMessageResponse = spb.ReceiveMessageResponse

INIT_MODE_MAX = 0  # ConsumeInitMode.MAX
MAX_MSG_NUMS_FOR_POP_REQUEST = 32  # ProxyUtils.MAX_MSG_NUMS_FOR_POP_REQUEST
NACK_INVISIBLE_TIME_MS = 1000  # a message that could not be written becomes visible again soon
ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION = "5.0.3"


def _now_ms() -> int:
    return int(time.time() * 1000)


def decode_handle(raw: str, check_expired: bool = True) -> ReceiptHandle:
    try:
        handle = ReceiptHandle.decode(raw)
    except InvalidReceiptHandle as exc:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None
    if check_expired and handle.is_expired():
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    return handle


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
            polling = request.long_polling_timeout.ToMilliseconds()
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
        group, topic = request.group.name, request.message_queue.topic.name
        pop = asyncio.ensure_future(self._pop(ctx, request))
        try:
            messages = await asyncio.shield(pop)
        except asyncio.CancelledError:
            # The client gave up while the broker was long-polling: what it pops is made visible again.
            pop.add_done_callback(lambda done: self._nack_result(request, done))
            raise
        except Exception as exc:  # noqa: BLE001 -- every failure becomes a Status
            yield spb.ReceiveMessageResponse(status=errors.status_of(exc))
        else:
            if messages is None:
                yield spb.ReceiveMessageResponse(status=errors.status(Code.TOO_MANY_REQUESTS, "polling full"))
            elif not messages:
                yield spb.ReceiveMessageResponse(status=errors.status(Code.MESSAGE_NOT_FOUND, "no new message"))
            else:
                ids = [m.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, m.msg_id) for m in messages]
                if request.auto_renew:
                    for msg, message_id in zip(messages, ids, strict=True):
                        handle = msg.properties.get(MessageConst.POP_CK)
                        if handle:
                            self.renewer.hold(ctx.client_id, group, topic, message_id, handle,
                                              self.config.default_invisible_time_mills)
                written = 0
                try:
                    yield spb.ReceiveMessageResponse(status=errors.ok())
                    fill = converter.fill_proto_message
                    for msg in messages:
                        # Built in place inside the response: passing a Message to the constructor copies it.
                        response = ReceiveMessageResponse()
                        fill(response.message, msg)
                        yield response
                        written += 1
                finally:
                    if written < len(messages):
                        for message_id in ids[written:]:
                            self.renewer.forget(ctx.client_id, group, message_id)
                        self._spawn(self._nack(request, messages[written:]))
        last = ReceiveMessageResponse()
        converter.set_timestamp_ms(last.delivery_timestamp, _now_ms())
        yield last

    def _nack_result(self, request: spb.ReceiveMessageRequest, done: asyncio.Future) -> None:
        if done.cancelled() or done.exception() is not None:
            return
        messages = done.result()
        if messages:
            self._spawn(self._nack(request, messages))

    async def _pop(self, ctx: ProxyContext, request: spb.ReceiveMessageRequest) -> list[MessageExt] | None:
        """The deliverable messages ([] when none arrived in time, None when polling is full)."""
        group = request.group.name
        topic = request.message_queue.topic.name
        settings = await self.clients.effective_settings(ctx.client_id)
        polling = self._polling_time(ctx, request, settings)
        validation.validate_topic(topic)
        validation.validate_consumer_group(group)
        if request.auto_renew:
            invisible = self.config.default_invisible_time_mills
        else:
            invisible = request.invisible_duration.ToMilliseconds() if request.HasField("invisible_duration") else 0
            validation.validate_invisible_time(invisible, self.config.min_invisible_time_mills_for_recv,
                                               self.config.max_invisible_time_mills)
        sub = subscription_data(topic, request.filter_expression)
        if request.batch_size <= 0:
            raise ProxyError(Code.BAD_REQUEST, "batch size must be positive")
        fifo, max_attempts = await self.clients.consumer_policy_of(settings, group)
        broker_name, addr = await self.cluster.select_read_broker(topic, request.message_queue.broker.name)
        header = h.PopMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=-1,
            max_msg_nums=min(request.batch_size, MAX_MSG_NUMS_FOR_POP_REQUEST), invisible_time=invisible,
            poll_time=polling, born_time=_now_ms(), init_mode=INIT_MODE_MAX, exp_type=sub.expression_type,
            exp=sub.sub_string, order=fifo, attempt_id=request.attempt_id if request.HasField("attempt_id") else None)
        timeout = (polling + self.config.remoting_timeout_millis) / 1000.0
        result = await self.cluster.api.pop_message(addr, broker_name, header, timeout)
        if result.status == PopStatus.POLLING_FULL:
            return None
        if result.status != PopStatus.FOUND:
            return []
        deliverable: list[MessageExt] = []
        for msg in result.messages:
            handle = with_commit_log_offset(msg.properties.get(MessageConst.POP_CK), msg.commit_log_offset)
            if handle is None:
                deliverable.append(msg)
                continue
            msg.properties[MessageConst.POP_CK] = handle
            if not tag_matched(sub, msg.properties.get(MessageConst.TAGS)):
                self._spawn(self._quiet(self._ack(handle, group, topic)))
            elif msg.reconsume_times >= max_attempts:
                self._spawn(self._quiet(self._to_dlq(handle, msg.properties.get(
                    MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, msg.msg_id), group, topic)))
            else:
                deliverable.append(msg)
        return deliverable

    async def _quiet(self, coro) -> None:
        try:
            await coro
        except Exception as exc:  # background clean-up: the revive service retries later
            log.warning("background ack/DLQ failed: %s", exc)

    async def _nack(self, request: spb.ReceiveMessageRequest, messages: list[MessageExt]) -> None:
        for msg in messages:
            raw = msg.properties.get(MessageConst.POP_CK)
            if raw:
                await self._quiet(self._change_invisible(decode_handle(raw, False), request.group.name,
                                                         request.message_queue.topic.name, NACK_INVISIBLE_TIME_MS))

    # ---- ack / change invisible / DLQ --------------------------------------------------------

    async def _ack(self, raw_handle: str, group: str, topic: str, check_expired: bool = False) -> None:
        await self._ack_handle(decode_handle(raw_handle, check_expired), group, topic)

    async def _ack_handle(self, handle: ReceiptHandle, group: str, topic: str) -> None:
        addr = await self.cluster.broker_addr(handle.broker_name, topic)
        result = await self.cluster.api.ack_message(addr, h.AckMessageRequestHeader(
            consumer_group=group, topic=handle.real_topic(topic, group), queue_id=handle.queue_id,
            extra_info=handle.raw, offset=handle.offset, broker_name=handle.broker_name))
        if result.status.value != "OK":
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")

    async def ack_message(self, ctx: ProxyContext, request: spb.AckMessageRequest) -> spb.AckMessageResponse:
        group, topic = request.group.name, request.topic.name
        validation.validate_topic(topic)
        validation.validate_consumer_group(group)
        if not request.entries:
            raise ProxyError(Code.BAD_REQUEST, "no ack entry")
        statuses: list[pb.Status | None] = [None] * len(request.entries)
        by_broker: dict[str, list[tuple[int, ReceiptHandle]]] = {}
        for index, entry in enumerate(request.entries):
            latest = await self.renewer.release(ctx.client_id, group, entry.message_id)
            try:
                handle = decode_handle(latest or entry.receipt_handle)
            except ProxyError as exc:
                statuses[index] = errors.status_of(exc)
                continue
            by_broker.setdefault(handle.broker_name, []).append((index, handle))

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
            await asyncio.gather(*(one(index, handle) for index, handle in items))

        await asyncio.gather(*(per_broker(name, items) for name, items in by_broker.items()))
        # Entries added in place: a message passed to a constructor (entries=, status=) is copied.
        response = spb.AckMessageResponse()
        add = response.entries.add
        codes = set()
        for e, st in zip(request.entries, statuses, strict=True):
            add(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st)
            codes.add(st.code)  # type: ignore[union-attr]
        code = codes.pop() if len(codes) == 1 else Code.MULTIPLE_RESULTS
        response.status.code = code
        response.status.message = Code.Name(code)
        return response

    async def _change_invisible(self, handle: ReceiptHandle, group: str, topic: str, invisible_ms: int) -> str:
        addr = await self.cluster.broker_addr(handle.broker_name, topic)
        result = await self.cluster.api.change_invisible_time(addr, handle.broker_name, h.ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=handle.real_topic(topic, group), queue_id=handle.queue_id,
            extra_info=handle.raw, offset=handle.offset, invisible_time=invisible_ms,
            broker_name=handle.broker_name))
        return with_commit_log_offset(result.extra_info, handle.commit_log_offset) or ""

    async def change_invisible_duration(self, ctx: ProxyContext, request: spb.ChangeInvisibleDurationRequest
                                        ) -> spb.ChangeInvisibleDurationResponse:
        group, topic = request.group.name, request.topic.name
        validation.validate_topic(topic)
        validation.validate_consumer_group(group)
        invisible = request.invisible_duration.ToMilliseconds()
        validation.validate_invisible_time(invisible, 0, self.config.max_invisible_time_mills)
        latest = await self.renewer.release(ctx.client_id, group, request.message_id)
        handle = decode_handle(latest or request.receipt_handle)
        new_handle = await self._change_invisible(handle, group, topic, invisible)
        return spb.ChangeInvisibleDurationResponse(status=errors.ok(), receipt_handle=new_handle)

    async def _to_dlq(self, raw_handle: str, message_id: str, group: str, topic: str) -> None:
        handle = decode_handle(raw_handle, False)
        if handle.commit_log_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle carries no commit log offset")
        addr = await self.cluster.broker_addr(handle.broker_name, topic)
        await self.cluster.api.consumer_send_msg_back(addr, group, handle.commit_log_offset, -1, message_id,
                                                      handle.real_topic(topic, group), 0)
        await self._ack(raw_handle, group, topic)

    async def forward_to_dlq(self, ctx: ProxyContext, request: spb.ForwardMessageToDeadLetterQueueRequest
                             ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        group, topic = request.group.name, request.topic.name
        validation.validate_topic(topic)
        validation.validate_consumer_group(group)
        raw = await self.renewer.release(ctx.client_id, group, request.message_id) or request.receipt_handle
        decode_handle(raw)
        try:
            await self._to_dlq(raw, request.message_id, group, topic)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                raise ProxyError(Code.CONSUMER_GROUP_NOT_FOUND, exc.remark) from None
            raise
        return spb.ForwardMessageToDeadLetterQueueResponse(status=errors.ok())
