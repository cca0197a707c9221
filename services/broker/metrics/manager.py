"""BrokerMetricsManager: RocketMQ 5's broker metrics (upstream's BrokerMetricsManager and
BrokerMetricsConstant; docs/metrics.md) for Prometheus.

Counting happens at the BrokerController's put and get seams, where every processor (send,
send-back, DLQ, revive, delay delivery, pull, POP) meets, and in one wrapper around each
Remoting processor (rpc latency). The hot path is a dict lookup of a per-(topic, type) slot and
a few integer additions; everything that can be derived from broker state (lag, inflight,
connections, storage, watermarks, counts) is computed when Prometheus scrapes.

Names are BrokerMetricsConstant's, and the OTel Prometheus exporter appends the unit, so a
latency declared in milliseconds is exported as ``..._milliseconds`` and a size in bytes as
``..._bytes``; counters end in ``_total``.

Hook points for features other modules own (call them on the event loop):
- transactions: ``on_commit(topic)``, ``on_rollback(topic)``, ``on_finish_latency(topic, seconds)``
  and ``set_half_messages_source(fn)`` (fn() -> {topic: half message count});
- timer wheel: ``on_timer_enqueue(topic)``, ``on_timer_dequeue(topic)``,
  ``on_delay_latency(seconds)`` and ``add_source(fn)`` for its gauges (enqueue/dequeue lag and
  latency, ``rocketmq_timing_messages``, ``rocketmq_timer_message_snapshot``), where ``fn``
  yields families built with ``orbitmq.common.metrics.gauge`` and labelled ``self.common_labels``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from orbitmq.common import fastjson
from orbitmq.common import metrics as m
from orbitmq.common.constants import (
    CID_RMQ_SYS_PREFIX,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_GROUP,
)
from orbitmq.common.message import MessageConst
from orbitmq.common.validators import is_system_topic
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.processor import ON_ERROR_ATTR, WRAPPED_ATTR

log = logging.getLogger(__name__)

MESSAGE_SIZE_BUCKETS = (1024, 4096, 524288, 1048576, 2097152, 4194304)
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
CREATE_TIME_BUCKETS_MS = (10, 100, 1000, 3000, 5000)
FINISH_LATENCY_BUCKETS = (5, 60, 600, 3600, 43200, 86400)
DELAY_LATENCY_BUCKETS_S = (60, 600, 3600, 43200, 86400, 259200)

COMMON = ("cluster", "node_type", "node_id")
IN_LABELS = ("topic", "message_type", "is_system")
OUT_LABELS = ("topic", "consumer_group", "is_system")
LAG_LABELS = ("consumer_group", "topic", "is_retry", "is_system")
RPC_LABELS = ("protocol_type", "request_code", "response_code", "is_long_polling", "result")

_TRAN = MessageConst.TRANSACTION_PREPARED
_SHARDING = MessageConst.SHARDING_KEY
_DELAY_KEYS = ("__STARTDELIVERTIME", MessageConst.DELAY_TIME_LEVEL, MessageConst.TIMER_DELIVER_MS,
               MessageConst.TIMER_DELAY_SEC, MessageConst.TIMER_DELAY_MS)
_LONG_POLLING_CODES = {int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE),
                       int(RequestCode.POP_MESSAGE), int(RequestCode.NOTIFICATION)}
_SUSPEND_FLAG = 0x2  # PullSysFlag.FLAG_SUSPEND
_CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}


def message_type(properties: dict[str, str] | None, sys_flag: int = 0) -> str:
    """BrokerMetricsManager.getMessageType: transaction, else fifo, else delay, else normal."""
    if sys_flag & 0x4 or (properties and properties.get(_TRAN) == "true"):
        return "transaction"
    if not properties:
        return "normal"
    if properties.get(_SHARDING):
        return "fifo"
    for key in _DELAY_KEYS:
        if properties.get(key):
            return "delay"
    return "normal"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _is_system_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


def _code_name(enum: Any, code: int) -> str:
    """RemotingHelper: the constant's name in lower case, the number when unknown."""
    try:
        return enum(code).name.lower()
    except ValueError:
        return str(code)


class _InSlot:
    __slots__ = ("nums", "size", "histo")

    def __init__(self) -> None:
        self.nums = 0
        self.size = 0
        self.histo = m.Histo(MESSAGE_SIZE_BUCKETS)


class _OutSlot:
    __slots__ = ("nums", "size")

    def __init__(self) -> None:
        self.nums = 0
        self.size = 0


class BrokerMetricsManager:
    """Per-broker counters plus scrape-time gauges, registered as one source of the hub."""

    def __init__(self, broker: Any, hub: m.MetricsHub | None = None) -> None:
        self.broker = broker
        self.hub = hub or m.hub()
        cfg = broker.config
        extra = m.parse_metrics_label(cfg.metrics_label)
        self.label_names: tuple[str, ...] = COMMON + tuple(extra)
        self.common_labels: tuple[str, ...] = (cfg.broker_cluster_name, "broker", cfg.broker_name,
                                               *extra.values())
        self._in: dict[tuple[str, str], _InSlot | None] = {}
        self._out: dict[tuple[str, str], _OutSlot | None] = {}
        self._dlq: dict[tuple[str, str], int] = {}
        self._rpc: dict[tuple[int, int, bool, str], m.Histo] = {}
        self._topic_create: dict[tuple[str, str], m.Histo] = {}
        self._group_create: dict[tuple[str, str], m.Histo] = {}
        # hooks of other modules (transactions, timer)
        self._commit: dict[str, int] = {}
        self._rollback: dict[str, int] = {}
        self._finish: dict[str, m.Histo] = {}
        self._timer_enqueue: dict[str, int] = {}
        self._timer_dequeue: dict[str, int] = {}
        self._delay_latency = m.Histo(DELAY_LATENCY_BUCKETS_S)
        self._half_messages: Callable[[], dict[str, int]] | None = None
        # POP revive (services/broker/pop): PopMetricsManager's counters
        self._revive_in: dict[tuple[str, str, str, str], int] = {}
        self._revive_out: dict[tuple[str, str, int, str], int] = {}
        self._revive_retry: dict[tuple[str, str, str], int] = {}
        self._auth_denied: dict[str, int] = {}  # reason -> Remoting requests refused by ACL 2.0
        self._extra_sources: list[m.Source] = []
        self._registered = False

    # ---- lifecycle ------------------------------------------------------------------------

    def register(self) -> None:
        if not self._registered:
            self._registered = True
            self.hub.add_source(self.collect)

    def unregister(self) -> None:
        if self._registered:
            self._registered = False
            self.hub.remove_source(self.collect)

    # ---- hot path: puts, reads, DLQ --------------------------------------------------------

    def on_put(self, topic: str, properties: dict[str, str] | None, sys_flag: int, nums: int, size: int) -> None:
        """A successful put of ``nums`` messages (``size`` bytes) to ``topic``."""
        mtype = message_type(properties, sys_flag)
        key = (topic, mtype)
        slot = self._in.get(key, False)
        if slot is False:
            slot = self._new_in_slot(topic, properties, key)
        if slot is not None:
            slot.nums += nums
            slot.size += size
            slot.histo.observe(size / nums if nums > 1 else size)

    def _new_in_slot(self, topic: str, properties: dict[str, str] | None, key: tuple[str, str]) -> _InSlot | None:
        if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            # send-to-DLQ counted here, where send-back and POP's dead-lettering both put
            self._on_dlq(topic, properties)
            return None
        slot = None if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else _InSlot()
        self._in[key] = slot
        return slot

    def _on_dlq(self, topic: str, properties: dict[str, str] | None) -> None:
        group = topic[len(DLQ_GROUP_TOPIC_PREFIX):]
        origin = (properties or {}).get(MessageConst.RETRY_TOPIC, "") or topic
        key = (group, origin)
        self._dlq[key] = self._dlq.get(key, 0) + 1

    def on_read(self, group: str, topic: str, nums: int, size: int) -> None:
        """Messages read out of the store for a consumer (pull, POP, peek)."""
        if not nums:
            return
        key = (topic, group)
        slot = self._out.get(key, False)
        if slot is False:
            skip = (group == REVIVE_GROUP or topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                    or topic.startswith(DLQ_GROUP_TOPIC_PREFIX))
            slot = self._out[key] = None if skip else _OutSlot()
        if slot is not None:
            slot.nums += nums
            slot.size += size

    # ---- remoting --------------------------------------------------------------------------

    def timed(self, code: int, processor: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
        """``processor`` wrapped to record rocketmq_rpc_latency by request and response code."""
        perf = time.perf_counter
        rpc = self._rpc
        long_polling_code = code in _LONG_POLLING_CODES
        # A guard wrapper exposes the processor it wraps and its exception mapping: call the
        # inner one and map exceptions here, so timing costs one coroutine, not two.
        inner = getattr(processor, WRAPPED_ATTR, None)
        on_error = getattr(processor, ON_ERROR_ATTR, None)
        if inner is None or on_error is None:
            inner, on_error = processor, None
        # AdminBrokerProcessor's topic and group creation are timed as upstream does, here.
        create = {int(RequestCode.UPDATE_AND_CREATE_TOPIC): self._on_topic_create_request,
                  int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP): self._on_group_create_request}.get(code)

        async def timed_processor(request: Any, channel: Any) -> Any:
            start = perf()
            response = None
            result = "process_request_failed"
            try:
                try:
                    response = await inner(request, channel)
                except Exception as exc:
                    if on_error is None:
                        raise
                    response = on_error(request, exc)
                result = "oneway" if request.flag & 2 else "success"
                return response
            finally:
                elapsed = (perf() - start) * 1000.0
                long_polling = long_polling_code and _long_polling(code, request)
                key = (code, response.code if response is not None else -1, long_polling, result)
                histo = rpc.get(key)
                if histo is None:
                    histo = rpc[key] = m.Histo(RPC_LATENCY_BUCKETS_MS)
                histo.observe(elapsed)
                if create is not None:
                    create(request, response, elapsed)

        timed_processor.__name__ = getattr(processor, "__name__", "processor")
        return timed_processor

    def _on_topic_create_request(self, request: Any, response: Any, elapsed_ms: float) -> None:
        topic = str((getattr(request, "ext_fields", None) or {}).get("topic", ""))
        ok = response is not None and response.code == ResponseCode.SUCCESS
        self._create(self._topic_create, elapsed_ms, ok, is_system_topic(topic))

    def _on_group_create_request(self, request: Any, response: Any, elapsed_ms: float) -> None:
        try:
            group = str(fastjson.loads(request.body or b"{}").get("groupName", ""))
        except Exception:
            group = ""
        ok = response is not None and response.code == ResponseCode.SUCCESS
        self._create(self._group_create, elapsed_ms, ok, _is_system_group(group))

    @staticmethod
    def _create(table: dict[tuple[str, str], m.Histo], elapsed_ms: float, ok: bool, system: bool) -> None:
        key = ("success" if ok else "failure", _bool(system))
        histo = table.get(key)
        if histo is None:
            histo = table[key] = m.Histo(CREATE_TIME_BUCKETS_MS)
        histo.observe(elapsed_ms)

    # ---- hooks for transactions and the timer wheel ------------------------------------------

    def on_commit(self, topic: str, nums: int = 1) -> None:
        self._commit[topic] = self._commit.get(topic, 0) + nums

    def on_rollback(self, topic: str, nums: int = 1) -> None:
        self._rollback[topic] = self._rollback.get(topic, 0) + nums

    def on_finish_latency(self, topic: str, seconds: float) -> None:
        """Born -> commit/rollback, recorded in seconds as upstream does."""
        histo = self._finish.get(topic)
        if histo is None:
            histo = self._finish[topic] = m.Histo(FINISH_LATENCY_BUCKETS)
        histo.observe(seconds)

    def set_half_messages_source(self, source: Callable[[], dict[str, int]] | None) -> None:
        self._half_messages = source

    def on_timer_enqueue(self, topic: str, nums: int = 1) -> None:
        self._timer_enqueue[topic] = self._timer_enqueue.get(topic, 0) + nums

    def on_timer_dequeue(self, topic: str, nums: int = 1) -> None:
        self._timer_dequeue[topic] = self._timer_dequeue.get(topic, 0) + nums

    def on_delay_latency(self, seconds: float) -> None:
        self._delay_latency.observe(seconds)

    def on_revive_in(self, group: str, topic: str, record_type: str, put_status: str, nums: int = 1) -> None:
        """A checkpoint (CK) or ack (ACK) written to the revive log, with the put's status."""
        key = (group, topic, record_type, put_status)
        self._revive_in[key] = self._revive_in.get(key, 0) + nums

    def on_revive_out(self, group: str, topic: str, revive_queue_id: int, record_type: str) -> None:
        """A CK or ACK record read back by the revive service from revive queue ``revive_queue_id``."""
        key = (group, topic, revive_queue_id, record_type)
        self._revive_out[key] = self._revive_out.get(key, 0) + 1

    def on_revive_retry(self, group: str, topic: str, put_status: str) -> None:
        """An un-acked message re-put (to its retry topic or the DLQ) by the revive service."""
        key = (group, topic, put_status)
        self._revive_retry[key] = self._revive_retry.get(key, 0) + 1

    def on_auth_denied(self, reason: str) -> None:
        """A Remoting request refused by ACL 2.0 (reason: authentication | authorization)."""
        self._auth_denied[reason] = self._auth_denied.get(reason, 0) + 1

    def add_source(self, source: m.Source) -> None:
        """Extra families of this broker (timer gauges …), collected with the broker's own."""
        self._extra_sources.append(source)

    # ---- scrape ----------------------------------------------------------------------------

    def collect(self) -> Iterable[m.Metric]:
        common = self.common_labels
        names = self.label_names
        yield from self._collect_counters(common, names)
        yield from self._collect_broker_state(common, names)
        yield from self._collect_lag(common, names)
        yield from self._collect_store(common, names)
        yield from self._collect_ha(common, names)
        for source in list(self._extra_sources):
            try:
                yield from source()
            except Exception:
                log.debug("broker metrics source %r failed", source, exc_info=True)

    def _collect_counters(self, common: tuple[str, ...], names: tuple[str, ...]) -> Iterable[m.Metric]:
        msgs_in = m.counter("rocketmq_messages_in_total", "Messages put, by topic and message type.", names + IN_LABELS)
        bytes_in = m.counter("rocketmq_throughput_in_total", "Bytes put, by topic and message type.", names + IN_LABELS)
        size = m.histogram("rocketmq_message_size_bytes", "Size of put messages (bytes per message of a put).",
                           names + IN_LABELS)
        for (topic, mtype), slot in list(self._in.items()):
            if slot is None:
                continue
            values = (*common, topic, mtype, _bool(is_system_topic(topic)))
            msgs_in.add_metric(values, slot.nums)
            bytes_in.add_metric(values, slot.size)
            m.add_histo(size, values, slot.histo)
        msgs_out = m.counter("rocketmq_messages_out_total", "Messages read by consumers.", names + OUT_LABELS)
        bytes_out = m.counter("rocketmq_throughput_out_total", "Bytes read by consumers.", names + OUT_LABELS)
        for (topic, group), out in list(self._out.items()):
            if out is None:
                continue
            values = (*common, topic, group, _bool(is_system_topic(topic) or _is_system_group(group)))
            msgs_out.add_metric(values, out.nums)
            bytes_out.add_metric(values, out.size)
        dlq = m.counter("rocketmq_send_to_dlq_messages_total", "Messages moved to a DLQ.",
                        names + ("consumer_group", "topic", "is_system"))
        for (group, topic), count in list(self._dlq.items()):
            dlq.add_metric((*common, group, topic, _bool(_is_system_group(group))), count)
        rpc = m.histogram("rocketmq_rpc_latency_milliseconds", "Remoting request latency.", names + RPC_LABELS)
        for (code, response_code, long_polling, result), histo in list(self._rpc.items()):
            m.add_histo(rpc, (*common, "remoting", _code_name(RequestCode, code),
                              _code_name(ResponseCode, response_code) if response_code >= 0 else "-1",
                              _bool(long_polling), result), histo)
        topic_create = m.histogram("rocketmq_topic_create_execution_time_milliseconds", "Topic creation time.",
                                   names + ("invocation_status", "is_system"))
        for key, histo in list(self._topic_create.items()):
            m.add_histo(topic_create, (*common, *key), histo)
        group_create = m.histogram("rocketmq_consumer_group_create_execution_time_milliseconds",
                                   "Consumer group creation time.", names + ("invocation_status", "is_system"))
        for key, histo in list(self._group_create.items()):
            m.add_histo(group_create, (*common, *key), histo)
        yield from (msgs_in, bytes_in, size, msgs_out, bytes_out, dlq, rpc, topic_create, group_create)
        yield from self._collect_hooks(common, names)

    def _collect_hooks(self, common: tuple[str, ...], names: tuple[str, ...]) -> Iterable[m.Metric]:
        topic = names + ("topic",)
        commit = m.counter("rocketmq_commit_messages_total", "Transaction messages committed.", topic)
        for name, count in list(self._commit.items()):
            commit.add_metric((*common, name), count)
        rollback = m.counter("rocketmq_rollback_messages_total", "Transaction messages rolled back.", topic)
        for name, count in list(self._rollback.items()):
            rollback.add_metric((*common, name), count)
        finish = m.histogram("rocketmq_finish_message_latency", "Born to commit/rollback, seconds (as upstream).",
                             topic)
        for name, histo in list(self._finish.items()):
            m.add_histo(finish, (*common, name), histo)
        out = [commit, rollback, finish]
        if self._half_messages is not None:
            half = m.gauge("rocketmq_half_messages", "Transaction half messages not yet resolved.", topic)
            for name, count in (self._half_messages() or {}).items():
                half.add_metric((*common, name), count)
            out.append(half)
        enqueue = m.counter("rocketmq_timer_enqueue_total", "Messages entering the timer wheel.", topic)
        for name, count in list(self._timer_enqueue.items()):
            enqueue.add_metric((*common, name), count)
        dequeue = m.counter("rocketmq_timer_dequeue_total", "Messages leaving the timer wheel.", topic)
        for name, count in list(self._timer_dequeue.items()):
            dequeue.add_metric((*common, name), count)
        out += [enqueue, dequeue]
        out += self._collect_pop(common, names)
        if self._delay_latency.total:
            delay = m.histogram("rocketmq_delay_message_latency_seconds", "Delivery delay of timer messages.", names)
            m.add_histo(delay, common, self._delay_latency)
            out.append(delay)
        return out

    def _collect_pop(self, common: tuple[str, ...], names: tuple[str, ...]) -> list[m.Metric]:
        """PopMetricsManager's revive figures. Not exported: the buffer gauges and the buffer scan
        time (this broker writes checkpoints straight to the revive log, it has no merge buffer)."""
        revive_in = m.counter("rocketmq_pop_revive_in_message_total", "Checkpoints and acks written to the revive log.",
                              names + ("consumer_group", "topic", "revive_message_type", "put_status"))
        for key, count in list(self._revive_in.items()):
            revive_in.add_metric((*common, *key), count)
        revive_out = m.counter("rocketmq_pop_revive_out_message_total", "Checkpoints and acks read by the revive service.",
                               names + ("consumer_group", "topic", "queue_id", "revive_message_type"))
        for (group, topic, queue_id, kind), count in list(self._revive_out.items()):
            revive_out.add_metric((*common, group, topic, str(queue_id), kind), count)
        retry = m.counter("rocketmq_pop_revive_retry_messages_total",
                          "Un-acked messages re-put to their retry topic or DLQ by the revive service.",
                          names + ("consumer_group", "topic", "put_status"))
        for key, count in list(self._revive_retry.items()):
            retry.add_metric((*common, *key), count)
        out: list[m.Metric] = [revive_in, revive_out, retry]
        if self._auth_denied:
            denied = m.counter("rocketmq_auth_denied_total", "Requests refused by ACL 2.0 (beyond upstream).",
                               names + ("protocol_type", "reason"))
            for reason, count in sorted(self._auth_denied.items()):
                denied.add_metric((*common, "remoting", reason), count)
            out.append(denied)
        revive = getattr(getattr(self.broker, "pop_service", None), "revive_service", None)
        if revive is not None:
            lag = m.gauge("rocketmq_pop_revive_lag", "Revive log records not yet processed, per revive queue.",
                          names + ("queue_id",))
            latency = m.gauge("rocketmq_pop_revive_latency_milliseconds",
                              "How far the oldest pending checkpoint is past its revive time, per revive queue.",
                              names + ("queue_id",))
            for queue_id, (behind, late_ms) in sorted(revive.revive_progress().items()):
                lag.add_metric((*common, str(queue_id)), behind)
                latency.add_metric((*common, str(queue_id)), late_ms)
            out += [lag, latency]
        return out

    def _collect_broker_state(self, common: tuple[str, ...], names: tuple[str, ...]) -> Iterable[m.Metric]:
        b = self.broker
        perm = m.gauge("rocketmq_broker_permission", "brokerPermission (6 = read and write).", names)
        perm.add_metric(common, b.config.broker_permission)
        topics = m.gauge("rocketmq_topic_number", "Topics in the topic config table.", names)
        topics.add_metric(common, len(b.topic_config_manager.all()))
        groups = m.gauge("rocketmq_consumer_group_number", "Subscription groups.", names)
        groups.add_metric(common, len(b.subscription_group_manager.all()))
        watermark = m.gauge("rocketmq_processor_watermark", "Requests queued for a processor.",
                            names + ("processor",))
        # The send queue is the one executor queue OrbitMQ has (other requests run at once).
        watermark.add_metric((*common, "send"), len(b.send_queue))
        producers = m.gauge("rocketmq_producer_connections", "Remoting producer connections.",
                            names + ("language", "version", "protocol_type"))
        counts: dict[tuple[str, str], int] = {}
        for table in list(b.producer_manager.group_channel_table.values()):
            for info in list(table.values()):
                key = (str(info.language).lower(), str(info.version))
                counts[key] = counts.get(key, 0) + 1
        for (language, version), count in counts.items():
            producers.add_metric((*common, language, version, "remoting"), count)
        consumers = m.gauge("rocketmq_consumer_connections", "Remoting consumer connections.",
                            names + ("consumer_group", "language", "version", "consume_mode", "protocol_type",
                                     "is_system"))
        ccounts: dict[tuple[str, str, str, str], int] = {}
        for group, info in list(b.consumer_manager.consumer_table.items()):
            mode = _CONSUME_MODES.get(info.consume_type, "pull")
            for channel_info in list(info.channel_info_table.values()):
                key = (group, str(channel_info.language).lower(), str(channel_info.version), mode)
                ccounts[key] = ccounts.get(key, 0) + 1
        for (group, language, version, mode), count in ccounts.items():
            consumers.add_metric((*common, group, language, version, mode, "remoting",
                                  _bool(_is_system_group(group))), count)
        return [perm, topics, groups, watermark, producers, consumers]

    def _collect_lag(self, common: tuple[str, ...], names: tuple[str, ...]) -> Iterable[m.Metric]:
        """ConsumerLagCalculator's figures per (group, topic), summed over the topic's queues:
        lag = max - committed, inflight = pulled - committed, ready = max - pulled; the
        latencies are now minus the store time of the first unconsumed / unpulled message."""
        b = self.broker
        labels = names + LAG_LABELS
        lag = m.gauge("rocketmq_consumer_lag_messages", "Messages not yet consumed.", labels)
        lag_latency = m.gauge("rocketmq_consumer_lag_latency_milliseconds",
                              "Age of the oldest message not yet consumed.", labels)
        inflight = m.gauge("rocketmq_consumer_inflight_messages", "Messages pulled but not yet consumed.", labels)
        ready = m.gauge("rocketmq_consumer_ready_messages", "Messages not yet pulled.", labels)
        queueing = m.gauge("rocketmq_consumer_queueing_latency_milliseconds",
                           "Age of the oldest message not yet pulled.", labels)
        store = b.message_store
        offsets = b.consumer_offset_manager
        if store is None:
            return [lag, lag_latency, inflight, ready, queueing]
        now = m.now_ms()
        from orbitmq.broker.store.metadata.consumer_offset_manager import split_key

        for key in list(offsets.offset_table):
            tg = split_key(key)
            if tg is None:
                continue
            topic, group = tg
            if group == REVIVE_GROUP or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                continue
            config = b.topic_config_manager.select_topic_config(topic)
            if config is None:
                continue
            total_lag = total_inflight = total_ready = 0
            oldest_unconsumed = oldest_unpulled = 0
            for queue_id in range(config.write_queue_nums):
                max_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
                committed = max(offsets.query_offset(group, topic, queue_id), 0)
                pulled = max(offsets.query_pull_offset(group, topic, queue_id), committed)
                q_lag = max(max_offset - committed, 0)
                q_ready = max(max_offset - pulled, 0)
                total_lag += q_lag
                total_ready += q_ready
                total_inflight += max(min(pulled, max_offset) - committed, 0)
                if q_lag:
                    ts = b.message_store_timestamp(topic, queue_id, committed)
                    if ts and (not oldest_unconsumed or ts < oldest_unconsumed):
                        oldest_unconsumed = ts
                if q_ready:
                    ts = b.message_store_timestamp(topic, queue_id, pulled)
                    if ts and (not oldest_unpulled or ts < oldest_unpulled):
                        oldest_unpulled = ts
            values = (*common, group, topic, _bool(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
                      _bool(is_system_topic(topic) or _is_system_group(group)))
            lag.add_metric(values, total_lag)
            inflight.add_metric(values, total_inflight)
            ready.add_metric(values, total_ready)
            lag_latency.add_metric(values, max(now - oldest_unconsumed, 0) if oldest_unconsumed else 0)
            queueing.add_metric(values, max(now - oldest_unpulled, 0) if oldest_unpulled else 0)
        return [lag, lag_latency, inflight, ready, queueing]

    def _collect_ha(self, common: tuple[str, ...], names: tuple[str, ...]) -> Iterable[m.Metric]:
        try:
            figures = _ha_figures(self.broker)
        except Exception:
            log.debug("HA figures unavailable", exc_info=True)
            return []
        out = []
        for key, name, doc in (
                ("master", "rocketmq_ha_master", "1 when this broker is the master of its set (writable)."),
                ("in_sync_replicas", "rocketmq_ha_in_sync_replicas", "Replicas in sync, the master included."),
                ("connections", "rocketmq_ha_connections", "HA connections (master: slaves attached)."),
                ("confirm_behind", "rocketmq_ha_confirm_behind_bytes",
                 "CommitLog bytes not yet confirmed by the replicas a send waits for."),
                ("epoch", "rocketmq_ha_master_epoch", "Master epoch (controller mode)."),
                ("sync_state_set", "rocketmq_ha_sync_state_set_size", "SyncStateSet size (controller mode).")):
            if key in figures:
                g = m.gauge(name, doc, names)
                g.add_metric(common, figures[key])
                out.append(g)
        return out

    def _collect_store(self, common: tuple[str, ...], names: tuple[str, ...]) -> Iterable[m.Metric]:
        store = self.broker.message_store
        labels = names + ("storage_type", "storage_medium")
        values = (*common, "local", "disk")
        size = m.gauge("rocketmq_storage_size_bytes", "CommitLog bytes held (max - min offset).", labels)
        flush = m.gauge("rocketmq_storage_flush_behind_bytes", "CommitLog bytes not yet flushed.", labels)
        dispatch = m.gauge("rocketmq_storage_dispatch_behind_bytes", "CommitLog bytes not yet dispatched.", labels)
        reserve = m.gauge("rocketmq_storage_message_reserve_time_milliseconds",
                          "Age of the oldest stored message.", labels)
        if store is not None and getattr(store, "reput_service", None) is not None:
            commit_log = store.commit_log
            max_offset = commit_log.get_max_offset()
            size.add_metric(values, max(max_offset - commit_log.get_min_offset(), 0))
            flush.add_metric(values, max(max_offset - commit_log.mapped_file_queue.flushed_where, 0))
            dispatch.add_metric(values, max(store.dispatch_behind_bytes(), 0))
            earliest = store.get_earliest_message_time_store()
            reserve.add_metric(values, max(m.now_ms() - earliest, 0) if earliest and earliest > 0 else 0)
        return [size, flush, dispatch, reserve]


def _ha_figures(broker: Any) -> dict[str, int]:
    """Beyond upstream (which has no HA metrics): role, in-sync replicas, SyncStateSet, epoch."""
    from orbitmq.broker.store.config import SLAVE

    ha = broker.ha_service
    store = broker.message_store
    out = {"master": int(broker.store_config.broker_role != SLAVE and not broker.fenced)}
    if ha is None or store is None:
        return out
    out["in_sync_replicas"] = int(ha.in_sync_replicas_nums())
    out["connections"] = int(ha.connection_count())
    out["confirm_behind"] = max(int(store.commit_log.get_max_offset()) - int(ha.get_confirm_offset()), 0)
    manager = broker.replicas_manager
    if manager is not None:
        out["epoch"] = int(manager.master_epoch)
        out["sync_state_set"] = len(manager.sync_state_set)
    return out


def _long_polling(code: int, request: Any) -> bool:
    """Whether the client let the broker hold the request (pull suspend flag, POP poll time)."""
    fields = getattr(request, "ext_fields", None) or {}
    if code in (int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE)):
        try:
            return bool(int(fields.get("sysFlag", 0)) & _SUSPEND_FLAG)
        except (TypeError, ValueError):
            return False
    try:
        return int(fields.get("pollTime", 0)) > 0
    except (TypeError, ValueError):
        return False
