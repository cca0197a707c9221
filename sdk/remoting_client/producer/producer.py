"""DefaultMQProducer over Remoting (DefaultMQProducer / DefaultMQProducerImpl).

Sends go straight to the master of a broker group that serves the topic: the queue comes from
the topic's TopicPublishInfo (round robin, avoiding the group the previous attempt failed on,
and with sendLatencyFaultEnable the groups that were slow or failed recently), a synchronous
send is retried retryTimesWhenSendFailed times (on the response codes upstream retries, on
transport errors, and on a non-SEND_OK status with retryAnotherBrokerWhenNotStoreOK), an
asynchronous one retryTimesWhenSendAsyncFailed times on transport errors. Bodies of
compressMsgBodyOverHowmuch bytes and more travel compressed with the producer's compressType
(ZLIB by default, LZ4 or ZSTD), COMPRESSED_FLAG and the type's bits in sysFlag; bodies over
maxMessageSize are refused before any request.

``AsyncDefaultMQProducer`` is the asyncio class; ``DefaultMQProducer`` wraps it for threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.request_reply import RequestTimeoutError
from orbitmq.client.results import SendResult, SendStatus
from orbitmq.clientcore import loop as bg
from orbitmq.common import validators
from orbitmq.common.compression import (
    DEFAULT_COMPRESS_LEVEL,
    DEFAULT_COMPRESS_TYPE,
    CompressionType,
    compress,
)
from orbitmq.common.constants import AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX
from orbitmq.common.message import Message, MessageConst, MessageExt, properties_to_string
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.sysflag import COMPRESSED_FLAG, TRANSACTION_PREPARED_TYPE
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.instance import (
    ACCESS_BROKER_TIMEOUT,
    BROKER_NOT_EXIST_EXCEPTION,
    CLIENT_INNER_PRODUCER_GROUP,
    CONNECT_BROKER_EXCEPTION,
    NOT_FOUND_TOPIC_EXCEPTION,
    REQUEST_TIMEOUT_EXCEPTION,
    MQClientInstance,
    get_or_create_instance,
)
from orbitmq.remoting_client.latency import MQFaultStrategy
from orbitmq.remoting_client.producer.selector import MessageQueueSelector
from orbitmq.remoting_client.publish_info import TopicPublishInfo, route_to_publish_info

log = logging.getLogger("orbitmq.remoting_client")

T = TypeVar("T")

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"  # MixAll.DEFAULT_PRODUCER_GROUP: refused, name your own
# DefaultMQProducer#retryResponseCodes
RETRY_RESPONSE_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT, ResponseCode.GO_AWAY})

# callback(result, error), or an object with on_success(result) and on_exception(error) (SendCallback)
SendCallback = Callable[[SendResult | None, BaseException | None], Any] | Any
# callback(reply, error), or an object with on_success(reply) and on_exception(error) (RequestCallback)
RequestCallback = Callable[[MessageExt | None, BaseException | None], Any] | Any
# before(msg, mq) / after(msg, mq, broker_addr, result or None, error or None, cost ms): SendMessageHook
SendHook = Any


class _Mode:
    SYNC, ASYNC, ONEWAY = "SYNC", "ASYNC", "ONEWAY"


def _client_error_code(exc: BaseException | None) -> int:
    """The code sendDefaultImpl's final MQClientException carries for its last failure."""
    if isinstance(exc, MQBrokerError):
        return exc.code
    if isinstance(exc, RemotingConnectError):
        return CONNECT_BROKER_EXCEPTION
    if isinstance(exc, RemotingTimeoutError):
        return ACCESS_BROKER_TIMEOUT
    if isinstance(exc, MQClientError):
        return BROKER_NOT_EXIST_EXCEPTION
    return -1


# per message in a SEND_BATCH_MESSAGE body: totalSize, magic, bodyCRC, flag, bodyLength (int32) + propertiesLength (int16)
_BATCH_FIXED_BYTES = 5 * 4 + 2


def batch_body_size(messages: list[Message]) -> int:
    """The SEND_BATCH_MESSAGE body's length (orbitmq.client.batch.encode_messages), without encoding."""
    return sum(_BATCH_FIXED_BYTES + len(m.body or b"") + len(properties_to_string(m.properties).encode("utf-8"))
               for m in messages)


class AsyncDefaultMQProducer:
    """The asyncio producer; one per producer group in a client instance."""

    def __init__(self, producer_group: str = DEFAULT_PRODUCER_GROUP, config: RemotingClientConfig | None = None, *,
                 namesrv_addr: str | None = None, send_msg_timeout: float = 3.0,
                 compress_msg_body_over_howmuch: int = 4 * 1024, compress_level: int = DEFAULT_COMPRESS_LEVEL,
                 compress_type: str = DEFAULT_COMPRESS_TYPE,
                 retry_times_when_send_failed: int = 2, retry_times_when_send_async_failed: int = 2,
                 retry_another_broker_when_not_store_ok: bool = False, max_message_size: int = 4 * 1024 * 1024,
                 send_latency_fault_enable: bool | None = None, enable_msg_trace: bool = False,
                 customized_trace_topic: str | None = None,
                 retry_response_codes: Iterable[int] = RETRY_RESPONSE_CODES) -> None:
        base = config or RemotingClientConfig()
        self.config = dataclasses.replace(base, namesrv_addr=namesrv_addr or base.namesrv_addr)
        self.producer_group = producer_group
        self.send_msg_timeout = send_msg_timeout
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.compress_level = compress_level
        self.compress_type = CompressionType.of(compress_type)  # DefaultMQProducer#setCompressType
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.max_message_size = max_message_size
        self.retry_response_codes = set(retry_response_codes)
        latency = self.config.send_latency_enable if send_latency_fault_enable is None else send_latency_fault_enable
        self.fault_strategy = MQFaultStrategy(latency)
        self.enable_msg_trace = enable_msg_trace
        self.customized_trace_topic = customized_trace_topic
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self.send_hooks: list[SendHook] = []
        self.instance: MQClientInstance | None = None
        self.trace_dispatcher: Any = None
        self._running = False
        self._async_tasks: set[asyncio.Future[Any]] = set()

    # ---- ClientConfig#withNamespace -----------------------------------------------------------

    @property
    def group_name(self) -> str:
        return self.config.with_namespace(self.producer_group)

    def with_namespace(self, resource: str) -> str:
        return self.config.with_namespace(resource)

    # ---- life cycle ---------------------------------------------------------------------------

    def _check_config(self) -> None:
        try:
            validators.check_group(self.producer_group)
        except validators.ValidationError as exc:
            raise MQClientError(str(exc)) from None
        if self.producer_group == DEFAULT_PRODUCER_GROUP:
            raise MQClientError(f"producerGroup can not equal {DEFAULT_PRODUCER_GROUP}, please specify another one.")

    async def start(self) -> None:
        """DefaultMQProducerImpl#start: register with the client instance, start it, heartbeat."""
        if self._running:
            return
        self._check_config()
        if self.producer_group != CLIENT_INNER_PRODUCER_GROUP:
            self.config.change_instance_name_to_pid()
        instance = get_or_create_instance(self.config)
        if not instance.register_producer(self.group_name, self):
            raise MQClientError(f"The producer group[{self.producer_group}] has been created before, specify "
                                "another name please.")
        self.instance = instance
        self.topic_publish_info_table.setdefault(AUTO_CREATE_TOPIC_KEY_TOPIC, TopicPublishInfo())
        try:
            await instance.start()
        except BaseException:
            instance.unregister_producer(self.group_name)
            raise
        self._running = True
        if self.enable_msg_trace:
            from orbitmq.remoting_client.trace import AsyncTraceDispatcher
            self.trace_dispatcher = AsyncTraceDispatcher(self.config, self.producer_group,
                                                         self.customized_trace_topic)
            await self.trace_dispatcher.start()
            self.send_hooks.append(self.trace_dispatcher.send_hook())
        await instance.send_heartbeat_to_all_brokers()

    async def shutdown(self) -> None:
        """Unregister from every broker (UNREGISTER_CLIENT) and stop the instance when it was the last."""
        if not self._running:
            return
        self._running = False
        if self._async_tasks:
            await asyncio.wait(list(self._async_tasks), timeout=self.send_msg_timeout)
        if self.trace_dispatcher is not None:
            await self.trace_dispatcher.shutdown()
        assert self.instance is not None
        await self.instance.unregister_producer_now(self.group_name)
        await self.instance.shutdown()

    async def __aenter__(self) -> AsyncDefaultMQProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _make_sure_state_ok(self) -> MQClientInstance:
        if not self._running or self.instance is None:
            raise MQClientError("The producer service state not OK, maybe started once, or not started")
        return self.instance

    # ---- MQProducerInner (called by MQClientInstance) -----------------------------------------

    def publish_topics(self) -> set[str]:
        return {t for t in self.topic_publish_info_table if t != AUTO_CREATE_TOPIC_KEY_TOPIC}

    def is_publish_topic_need_update(self, topic: str) -> bool:
        info = self.topic_publish_info_table.get(topic)
        return info is None or not info.ok()

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        if topic in self.topic_publish_info_table:
            self.topic_publish_info_table[topic] = info

    async def check_transaction_state(self, addr: str, msg: MessageExt,
                                      header: h.CheckTransactionStateRequestHeader) -> None:
        log.warning("check transaction state of %s from %s, but %s is not a TransactionMQProducer",
                    msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX), addr, self.producer_group)

    # ---- routes -------------------------------------------------------------------------------

    async def try_to_find_topic_publish_info(self, topic: str) -> TopicPublishInfo | None:
        """DefaultMQProducerImpl#tryToFindTopicPublishInfo: the cached info, else the NameServer's
        route, else (for brokers that create topics on first send) the route of TBW102."""
        instance = self._make_sure_state_ok()
        info = self.topic_publish_info_table.get(topic)
        if info is None or not info.ok():
            self.topic_publish_info_table[topic] = TopicPublishInfo()
            await instance.update_topic_route(topic)
            info = self.topic_publish_info_table.get(topic)
        if info is not None and (info.have_topic_router_info or info.ok()):
            return info
        default = await self._default_topic_publish_info(topic)
        if default is not None:
            self.topic_publish_info_table[topic] = default
            return default
        return info

    async def _default_topic_publish_info(self, topic: str) -> TopicPublishInfo | None:
        """updateTopicRouteInfoFromNameServer(topic, isDefault=true): TBW102's route with its queue
        counts capped at defaultTopicQueueNums (4)."""
        instance = self._make_sure_state_ok()
        try:
            route = await instance.topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
        except (MQClientError, MQBrokerError, RemotingError, OSError):
            return None
        adjusted = dataclasses.replace(route, queue_datas=[
            dataclasses.replace(qd, read_queue_nums=min(4, qd.read_queue_nums),
                                write_queue_nums=min(4, qd.read_queue_nums)) for qd in route.queue_datas])
        info = route_to_publish_info(topic, adjusted)
        return info if info.ok() else None

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueueRef]:
        """The topic's writable queues (MQAdminImpl#fetchPublishMessageQueues), namespace removed."""
        info = await self.try_to_find_topic_publish_info(self.with_namespace(topic))
        if info is None or not info.ok():
            raise MQClientError(f"No route info of this topic: {topic}", NOT_FOUND_TOPIC_EXCEPTION)
        return [MessageQueueRef(self.config.without_namespace(q.topic), q.broker_name, q.queue_id)
                for q in info.message_queue_list]

    # ---- checks -------------------------------------------------------------------------------

    def check_message(self, msg: Message, body_size: int | None = None) -> None:
        """Validators#checkMessage: a legal topic one may send to, a body of 1..maxMessageSize bytes."""
        if msg is None:
            raise MQClientError("the message is null", ResponseCode.MESSAGE_ILLEGAL)
        try:
            validators.check_topic(msg.topic)
        except validators.ValidationError as exc:
            raise MQClientError(str(exc)) from None
        if validators.is_not_allowed_send_topic(msg.topic):
            raise MQClientError(f"Sending message to topic[{msg.topic}] is forbidden.", ResponseCode.NO_PERMISSION)
        if msg.body is None:
            raise MQClientError("the message body is null", ResponseCode.MESSAGE_ILLEGAL)
        size = len(msg.body) if body_size is None else body_size
        if size == 0:
            raise MQClientError("the message body length is zero", ResponseCode.MESSAGE_ILLEGAL)
        if size > self.max_message_size:
            raise MQClientError(f"the message body size over max value, MAX: {self.max_message_size}",
                                ResponseCode.MESSAGE_ILLEGAL)
        lmq = msg.properties.get(MessageConst.INNER_MULTI_DISPATCH)
        if lmq and "/" in lmq:
            raise MQClientError(f"INNER_MULTI_DISPATCH {lmq} can not contains / character",
                                ResponseCode.MESSAGE_ILLEGAL)

    # ---- sending ------------------------------------------------------------------------------

    async def send(self, msg: Message, timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """A synchronous send with retries (send(Message, timeout))."""
        msg.topic = self.with_namespace(msg.topic)
        result = await self._send_default(msg, _Mode.SYNC, self._timeout(timeout))
        assert result is not None
        return result

    def send_async(self, msg: Message, callback: SendCallback | None = None,
                   timeout: float | None = None) -> asyncio.Future[SendResult]:  # noqa: ASYNC109
        """An asynchronous send: a future of the SendResult; ``callback(result, error)`` runs when it ends."""
        msg.topic = self.with_namespace(msg.topic)
        return self._spawn(self._send_default(msg, _Mode.ASYNC, self._timeout(timeout)), callback)

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for the broker's answer (sendOneway): one attempt, no result."""
        msg.topic = self.with_namespace(msg.topic)
        await self._send_default(msg, _Mode.ONEWAY, self.send_msg_timeout)

    async def send_to_queue(self, msg: Message, mq: MessageQueueRef,
                            timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """send(Message, MessageQueue): that queue, one attempt (sendKernelImpl directly)."""
        instance = self._make_sure_state_ok()
        msg.topic = self.with_namespace(msg.topic)
        self.check_message(msg)
        mq = MessageQueueRef(self.with_namespace(mq.topic), mq.broker_name, mq.queue_id)
        if mq.topic != msg.topic:
            raise MQClientError(f"message's topic not equal mq's topic: {msg.topic} != {mq.topic}")
        info = await self.try_to_find_topic_publish_info(msg.topic)
        result = await self._send_kernel(instance, msg, mq, _Mode.SYNC, info, self._timeout(timeout))
        assert result is not None
        return result

    async def send_with_selector(self, msg: Message, selector: MessageQueueSelector, arg: Any,
                                 timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """send(Message, MessageQueueSelector, arg) (sendSelectImpl): the selector picks among the
        topic's writable queues, one attempt; the same ``arg`` keeps the same queue (ordered messages)."""
        instance = self._make_sure_state_ok()
        msg.topic = self.with_namespace(msg.topic)
        self.check_message(msg)
        info = await self.try_to_find_topic_publish_info(msg.topic)
        if info is None or not info.ok():
            raise MQClientError(f"No route info for this topic, {msg.topic}", NOT_FOUND_TOPIC_EXCEPTION)
        shown = [MessageQueueRef(self.config.without_namespace(q.topic), q.broker_name, q.queue_id)
                 for q in info.message_queue_list]
        chosen = selector(shown, msg, arg)
        if chosen is None:
            raise MQClientError("select message queue return null.")
        mq = MessageQueueRef(self.with_namespace(chosen.topic), chosen.broker_name, chosen.queue_id)
        result = await self._send_kernel(instance, msg, mq, _Mode.SYNC, info, self._timeout(timeout))
        assert result is not None
        return result

    async def send_batch(self, msgs: Iterable[Message], timeout: float | None = None) -> SendResult:  # noqa: ASYNC109
        """send(Collection<Message>): one SEND_BATCH_MESSAGE to one queue (MessageBatch#generateFromList
        rules: one topic, no delay level, no retry topic, one waitStoreMsgOK)."""
        batch = list(msgs)
        if not batch:
            raise MQClientError("the message batch is empty", ResponseCode.MESSAGE_ILLEGAL)
        first = batch[0]
        for m in batch:
            if m.delay_time_level > 0:
                raise MQClientError("TimeDelayLevel is not supported for batching")
            if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MQClientError("Retry Group is not supported for batching")
            if m.topic != first.topic:
                raise MQClientError("The topic of the messages in one batch should be the same")
            if m.wait_store_msg_ok != first.wait_store_msg_ok:
                raise MQClientError("The waitStoreMsgOK of the messages in one batch should the same")
        for m in batch:
            m.topic = self.with_namespace(m.topic)
            if not m.uniq_key:
                m.uniq_key = create_uniq_id()
        result = await self._send_default(_Batch(batch), _Mode.SYNC, self._timeout(timeout))
        assert result is not None
        return result

    def _timeout(self, timeout: float | None) -> float:
        return self.send_msg_timeout if timeout is None else timeout

    def _spawn(self, coro: Awaitable[T], callback: Callable[[T | None, BaseException | None], Any] | None
               ) -> asyncio.Future[T]:
        future = asyncio.ensure_future(coro)
        self._async_tasks.add(future)

        def done(f: asyncio.Future[T]) -> None:
            self._async_tasks.discard(f)
            if f.cancelled():
                return
            error = f.exception()
            if callback is None:
                return
            try:
                if hasattr(callback, "on_success"):  # a SendCallback object: onSuccess / onException
                    if error is None:
                        callback.on_success(f.result())
                    else:
                        callback.on_exception(error)
                else:
                    callback(None if error else f.result(), error)
            except Exception:  # a user callback's failure is the user's, not the producer's
                log.exception("send or request callback failed")
        future.add_done_callback(done)
        return future

    async def _send_default(self, msg: Message | _Batch, mode: str, timeout: float) -> SendResult | None:  # noqa: ASYNC109
        """DefaultMQProducerImpl#sendDefaultImpl: select, send, retry."""
        instance = self._make_sure_state_ok()
        if isinstance(msg, _Batch):
            self.check_message(msg.as_message(), batch_body_size(msg.messages))
        else:
            self.check_message(msg)
        topic = msg.topic
        begin_first = time.monotonic()
        info = await self.try_to_find_topic_publish_info(topic)
        if info is None or not info.ok():
            why = instance.last_route_error.get(topic)
            raise MQClientError(f"No route info of this topic: {self.config.without_namespace(topic)}"
                                + (f" ({why})" if why else ""), NOT_FOUND_TOPIC_EXCEPTION)
        if mode == _Mode.SYNC:
            times_total = 1 + self.retry_times_when_send_failed
        elif mode == _Mode.ASYNC:
            times_total = 1 + self.retry_times_when_send_async_failed
        else:
            times_total = 1
        mq: MessageQueueRef | None = None
        exception: BaseException | None = None
        result: SendResult | None = None
        brokers_sent: list[str] = []
        call_timeout = False
        times = 0
        while times < times_total:
            last_broker = mq.broker_name if mq is not None else None
            selected = self.fault_strategy.select_one_message_queue(info, last_broker, times > 0)
            if selected is None:
                break
            mq = selected
            brokers_sent.append(mq.broker_name)
            times += 1
            begin = time.monotonic()
            cost = begin - begin_first
            if timeout < cost:
                call_timeout = True
                break
            try:
                result = await self._send_kernel(instance, msg, mq, mode, info, timeout - cost)
                self._update_fault_item(mq.broker_name, begin, False, True)
                if mode != _Mode.SYNC or result is None:
                    return result
                if result.status != SendStatus.SEND_OK and self.retry_another_broker_when_not_store_ok:
                    continue
                return result
            except MQBrokerError as exc:
                self._update_fault_item(mq.broker_name, begin, True, False)
                exception = exc
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    instance._spawn(instance.update_topic_route(topic))
                if mode == _Mode.SYNC and exc.code in self.retry_response_codes:
                    continue
                if result is not None:
                    return result
                raise
            except RemotingError as exc:
                self._update_fault_item(mq.broker_name, begin, True, True)
                exception = exc
                if isinstance(exc, RemotingConnectError):  # the route may name a broker that is gone
                    instance._spawn(instance.update_topic_route(topic))
                continue
            except MQClientError as exc:
                if mode == _Mode.ASYNC:  # async retries cover transport failures only, as upstream's
                    raise
                self._update_fault_item(mq.broker_name, begin, False, True)
                exception = exc
                continue
        if result is not None:
            return result
        if call_timeout:
            raise MQClientError("sendDefaultImpl call timeout", ACCESS_BROKER_TIMEOUT)
        shown = self.config.without_namespace(topic)
        error = MQClientError(f"Send [{times}] times, still failed, cost [{(time.monotonic() - begin_first) * 1000:.0f}]"
                              f"ms, Topic: {shown}, BrokersSent: {brokers_sent}: {exception}",
                              _client_error_code(exception))
        raise error from exception

    def _update_fault_item(self, broker_name: str, begin: float, isolation: bool, reachable: bool) -> None:
        self.fault_strategy.update_fault_item(broker_name, int((time.monotonic() - begin) * 1000), isolation,
                                              reachable)

    def _compress(self, body: bytes) -> bytes | None:
        """tryToCompressMessage: compressType's codec at compressLevel for bodies of
        compressMsgBodyOverHowmuch bytes or more."""
        if len(body) >= self.compress_msg_body_over_howmuch:
            return compress(body, self.compress_type, self.compress_level)
        return None

    async def _send_kernel(self, instance: MQClientInstance, msg: Message | _Batch, mq: MessageQueueRef, mode: str,
                           info: TopicPublishInfo | None, timeout: float) -> SendResult | None:  # noqa: ASYNC109
        """DefaultMQProducerImpl#sendKernelImpl: the header fields, sysFlag, compression, one request."""
        broker_name = mq.broker_name
        addr = instance.find_broker_address_in_publish(broker_name)
        if addr is None:
            await self.try_to_find_topic_publish_info(mq.topic)
            addr = instance.find_broker_address_in_publish(broker_name)
        if addr is None:
            raise MQClientError(f"The broker[{broker_name}] not exist")
        if self.config.vip_channel_enabled:  # MixAll#brokerVIPChannel: the fast server at listenPort - 2
            host, _, port = addr.rpartition(":")
            addr = f"{host}:{int(port) - 2}"
        api = instance.api
        started = time.monotonic()
        if isinstance(msg, _Batch):
            for hook in self.send_hooks:
                hook.before(msg.as_message(), mq, addr)
            try:
                result = await api.send_batch(addr, broker_name, msg.messages, self.group_name, mq.queue_id,
                                              timeout=timeout)
            except BaseException as exc:
                self._after_hooks(msg.as_message(), mq, addr, None, exc, started)
                raise
            result.topic = self.config.without_namespace(result.topic)
            self._after_hooks(msg.as_message(), mq, addr, result, None, started)
            return result
        if not msg.uniq_key:
            msg.uniq_key = create_uniq_id()  # MessageClientIDSetter#setUniqID
        if self.config.namespace:
            msg.properties[MessageConst.INSTANCE_ID] = self.config.namespace
        sys_flag = 0
        wire = msg
        compressed = self._compress(msg.body or b"")
        if compressed is not None:
            sys_flag |= COMPRESSED_FLAG | self.compress_type.compression_flag
            wire = Message(msg.topic, compressed, msg.flag, dict(msg.properties))
        if (msg.properties.get(MessageConst.TRANSACTION_PREPARED) or "").lower() == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE
        for hook in self.send_hooks:
            hook.before(msg, mq, addr)
        try:
            if mode == _Mode.ONEWAY:
                await api.send_message_oneway(addr, broker_name, wire, self.group_name, mq.queue_id, sys_flag,
                                              timeout)
                self._after_hooks(msg, mq, addr, None, None, started)
                return None
            result = await api.send_message(addr, broker_name, wire, self.group_name, mq.queue_id, sys_flag, timeout)
        except BaseException as exc:
            self._after_hooks(msg, mq, addr, None, exc, started)
            raise
        result.topic = self.config.without_namespace(result.topic)
        self._after_hooks(msg, mq, addr, result, None, started)
        return result

    def _after_hooks(self, msg: Message, mq: MessageQueueRef, addr: str, result: SendResult | None,
                     error: BaseException | None, started: float) -> None:
        if not self.send_hooks:
            return
        cost = int((time.monotonic() - started) * 1000)
        for hook in self.send_hooks:
            try:
                hook.after(msg, mq, addr, result, error, cost)
            except Exception:  # a hook (the trace) never fails a send
                log.exception("send message hook failed")

    # ---- request/reply ------------------------------------------------------------------------

    async def request(self, msg: Message, timeout: float | None = None,  # noqa: ASYNC109
                      selector: MessageQueueSelector | None = None, arg: Any = None,
                      mq: MessageQueueRef | None = None) -> MessageExt:
        """DefaultMQProducer#request: send ``msg`` as a request and wait for its reply message.

        MQClientError(REQUEST_TIMEOUT_EXCEPTION) (a RequestTimeoutError) when no reply comes in time.
        """
        instance = self._make_sure_state_ok()
        timeout = self._timeout(timeout)
        begin = time.monotonic()
        correlation_id = str(uuid.uuid4())  # CorrelationIdUtil#createCorrelationId
        msg.properties[MessageConst.CORRELATION_ID] = correlation_id
        msg.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] = instance.client_id
        msg.properties[MessageConst.MESSAGE_TTL] = str(int(timeout * 1000))
        topic = self.with_namespace(msg.topic)
        # prepareSendRequest: the broker must know this client's channel before it pushes a reply
        if not instance.topic_route_table.get(topic):
            await self.try_to_find_topic_publish_info(topic)
            await instance.send_heartbeat_to_all_brokers()
        future = instance.request_futures.register(correlation_id)
        try:
            if mq is not None:
                await self.send_to_queue(msg, mq, timeout)
            elif selector is not None:
                await self.send_with_selector(msg, selector, arg, timeout)
            else:
                await self.send(msg, timeout)
            remaining = timeout - (time.monotonic() - begin)
            try:
                return await asyncio.wait_for(asyncio.shield(future), max(remaining, 0.0))
            except TimeoutError:
                raise RequestTimeoutError(f"send request message to <{msg.topic}> OK, but wait reply message "
                                          f"timeout, {timeout * 1000:.0f} ms.", REQUEST_TIMEOUT_EXCEPTION) from None
        finally:
            instance.request_futures.remove(correlation_id)
            if not future.done():
                future.cancel()


    def request_async(self, msg: Message, callback: RequestCallback | None = None,
                      timeout: float | None = None, **kwargs: Any) -> asyncio.Future[MessageExt]:
        """DefaultMQProducer#request(msg, RequestCallback, timeout): a future of the reply;
        ``callback(reply, error)`` or a RequestCallback's on_success(reply) / on_exception(error)
        runs when it ends (a failed send, or RequestTimeoutError when no reply came in time)."""
        return self._spawn(self.request(msg, timeout, **kwargs), callback)


class _Batch:
    """A MessageBatch: the messages one SEND_BATCH_MESSAGE carries."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    @property
    def topic(self) -> str:
        return self.messages[0].topic

    def as_message(self) -> Message:
        """The batch as one Message for checks and hooks: topic, the joined ids and keys."""
        first = self.messages[0]
        ids = ",".join(m.uniq_key or "" for m in self.messages)
        props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: ids}
        keys = " ".join(k for m in self.messages for k in m.keys)
        if keys:
            props[MessageConst.KEYS] = keys
        return Message(first.topic, b"".join(m.body or b"" for m in self.messages), first.flag, props)


# ---- synchronous wrapper ----------------------------------------------------------------------


class DefaultMQProducer:
    """DefaultMQProducer for threads: every call runs on orbitmq.clientcore's background loop."""

    def __init__(self, producer_group: str = DEFAULT_PRODUCER_GROUP, config: RemotingClientConfig | None = None,
                 **options: Any) -> None:
        async def make() -> AsyncDefaultMQProducer:
            return AsyncDefaultMQProducer(producer_group, config, **options)
        self._impl: AsyncDefaultMQProducer = bg.run(make())

    @property
    def impl(self) -> AsyncDefaultMQProducer:
        return self._impl

    def start(self) -> DefaultMQProducer:
        bg.run(self._impl.start())
        return self

    def shutdown(self) -> None:
        bg.run(self._impl.shutdown())

    def __enter__(self) -> DefaultMQProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send(self, msg: Message, timeout: float | None = None) -> SendResult:
        return bg.run(self._impl.send(msg, timeout))

    def send_async(self, msg: Message, callback: SendCallback | None = None,
                   timeout: float | None = None) -> concurrent.futures.Future[SendResult]:
        """A concurrent.futures.Future of the result; ``callback(result, error)`` runs on the client's loop."""
        async def go() -> SendResult:
            return await self._impl.send_async(msg, callback, timeout)
        return bg.submit(go())

    def send_oneway(self, msg: Message) -> None:
        bg.run(self._impl.send_oneway(msg))

    def send_to_queue(self, msg: Message, mq: MessageQueueRef, timeout: float | None = None) -> SendResult:
        return bg.run(self._impl.send_to_queue(msg, mq, timeout))

    def send_with_selector(self, msg: Message, selector: MessageQueueSelector, arg: Any,
                           timeout: float | None = None) -> SendResult:
        return bg.run(self._impl.send_with_selector(msg, selector, arg, timeout))

    def send_batch(self, msgs: Iterable[Message], timeout: float | None = None) -> SendResult:
        return bg.run(self._impl.send_batch(list(msgs), timeout))

    def request(self, msg: Message, timeout: float | None = None, **kwargs: Any) -> MessageExt:
        return bg.run(self._impl.request(msg, timeout, **kwargs))

    def request_async(self, msg: Message, callback: RequestCallback | None = None,
                      timeout: float | None = None, **kwargs: Any) -> concurrent.futures.Future[MessageExt]:
        """A concurrent.futures.Future of the reply; ``callback`` runs on the client's loop."""
        async def go() -> MessageExt:
            return await self._impl.request_async(msg, callback, timeout, **kwargs)
        return bg.submit(go())

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueueRef]:
        return bg.run(self._impl.fetch_publish_message_queues(topic))
