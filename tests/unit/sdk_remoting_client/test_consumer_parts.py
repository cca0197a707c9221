"""Unit tests of the Remoting consumers' parts that need no broker: ProcessQueue, the offset
stores (a fake instance stands in for the broker), the consume services and the pull loop's
flow control (fake pull API), computePullFromWhere and the send-back fallback."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from orbitmq.client.api import MessageQueueRef
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.results import PullResult, PullStatus
from orbitmq.common.allocate import AllocateMessageQueueAveragely
from orbitmq.common.filter.subscription import SubscriptionData
from orbitmq.common.message import Message, MessageConst, MessageExt
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.consumer import consume_service as cs
from orbitmq.remoting_client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from orbitmq.remoting_client.consumer.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    decode_offset_table,
    encode_offset_table,
    local_offset_store_dir,
)
from orbitmq.remoting_client.consumer.process_queue import ProcessQueue
from orbitmq.remoting_client.consumer.push_consumer import AsyncDefaultMQPushConsumer, PullRequest
from orbitmq.remoting_client.consumer.rebalance import RebalanceImpl, compute_pull_from_where

MQ = MessageQueueRef("T", "broker-a", 0)


def msg(offset: int, body: bytes = b"x", topic: str = "T") -> MessageExt:
    return MessageExt(topic=topic, body=body, queue_offset=offset, msg_id=f"id{offset}", commit_log_offset=offset)


# ---- ProcessQueue -----------------------------------------------------------------------------


def test_process_queue_counts_span_and_commit_offset() -> None:
    pq = ProcessQueue()
    assert pq.remove_message([]) == -1  # nothing cached: nothing to commit
    assert pq.put_message([msg(5, b"aa"), msg(6, b"b"), msg(9)])
    assert (pq.msg_count, pq.msg_size, pq.get_max_span()) == (3, 4, 4)
    pq.put_message([msg(6)])  # a duplicate offset is not counted twice
    assert pq.msg_count == 3
    assert pq.remove_message([msg(6)]) == 5  # 5 still held: the offset cannot pass it
    assert pq.remove_message([msg(5)]) == 9
    assert pq.remove_message([msg(9)]) == 10  # empty: max + 1
    assert (pq.msg_count, pq.msg_size) == (0, 0)


def test_process_queue_orderly_take_commit_and_rollback() -> None:
    pq = ProcessQueue()
    pq.put_message([msg(i) for i in range(5)])
    batch = pq.take_messages(2)
    assert [m.queue_offset for m in batch] == [0, 1]
    pq.make_message_to_consume_again(batch)  # suspended: back in front
    assert [m.queue_offset for m in pq.take_messages(3)] == [0, 1, 2]
    assert pq.commit() == 3
    assert pq.msg_count == 2
    assert pq.commit() == -1
    pq.take_messages(10)
    assert pq.take_messages(1) == [] and not pq.consuming_now  # the run ends when nothing is left


def test_process_queue_expired_and_lock_expiry() -> None:
    pq = ProcessQueue(lock_max_live_time=0.0)
    old = msg(1)
    old.properties[MessageConst.CONSUME_START_TIMESTAMP] = str(int(time.time() * 1000) - 16 * 60_000)
    fresh = msg(2)
    fresh.properties[MessageConst.CONSUME_START_TIMESTAMP] = str(int(time.time() * 1000))
    pq.put_message([old, fresh])
    assert pq.expired_messages(15) == [old]
    time.sleep(0.01)
    assert pq.is_lock_expired()


# ---- offset stores ----------------------------------------------------------------------------


class FakeApi:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str, int], int] = {}
        self.fail: Exception | None = None
        self.max_offset = 42
        self.searched: list[int] = []
        self.sent_back: list[dict[str, Any]] = []
        self.send_back_error: Exception | None = None

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        if self.fail:
            raise self.fail
        key = (group, topic, queue_id)
        if key not in self.stored:
            raise MQBrokerError(ResponseCode.QUERY_NOT_FOUND, "not found", addr)
        return self.stored[key]

    async def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.stored[(group, topic, queue_id)] = offset

    async def get_max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return self.max_offset

    async def search_offset(self, addr: str, topic: str, queue_id: int, ts: int) -> int:
        self.searched.append(ts)
        return 7

    async def consumer_send_msg_back(self, addr: str, group: str, offset: int, delay: int, msg_id: str,
                                     topic: str, max_times: int | None = None) -> None:
        if self.send_back_error:
            raise self.send_back_error
        self.sent_back.append({"addr": addr, "offset": offset, "delay": delay, "topic": topic, "max": max_times})


class FakeInstance:
    client_id = "127.0.0.1@fake"

    def __init__(self) -> None:
        self.api = FakeApi()

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this: bool) -> tuple[str, int, bool] | None:
        return ("127.0.0.1:10911", 0, False) if broker_name == "broker-a" else None

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        return "127.0.0.1:10911" if broker_name == "broker-a" else None

    async def update_topic_route(self, topic: str) -> bool:
        return False


async def test_remote_store_read_persist_and_errors() -> None:
    inst = FakeInstance()
    store = RemoteBrokerOffsetStore(inst, "G")
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_STORE) == -1  # QUERY_NOT_FOUND
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_MEMORY) == -1
    store.update_offset(MQ, 10, True)
    store.update_offset(MQ, 8, True)  # increaseOnly keeps 10
    assert await store.read_offset(MQ, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 10
    other = MessageQueueRef("T", "broker-a", 1)
    store.update_offset(other, 3, False)
    await store.persist_all({MQ})
    assert inst.api.stored == {("G", "T", 0): 10}
    assert other not in store.offset_table  # persistAll forgets queues no longer assigned
    inst.api.fail = MQBrokerError(ResponseCode.SYSTEM_ERROR, "boom")
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_STORE) == -2
    store.update_and_freeze_offset(MQ, 4)
    store.update_offset(MQ, 99, False)
    assert store.offset_table[MQ] == 4  # frozen by a reset
    unknown = MessageQueueRef("T", "broker-x", 0)
    inst.api.fail = None
    assert await store.read_offset(unknown, ReadOffsetType.READ_FROM_STORE) == -2  # no such broker


async def test_local_file_store_layout_backup_and_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalFileOffsetStore("127.0.0.1@c1", "G", tmp_path)
    assert store.store_path == tmp_path / "127.0.0.1@c1" / "G" / "offsets.json"
    await store.load()
    assert await store.read_offset(MQ, ReadOffsetType.READ_FROM_STORE) == -1
    store.update_offset(MQ, 5, False)
    await store.persist_all({MQ})
    store.update_offset(MQ, 6, False)
    await store.persist_all({MQ})
    text = store.store_path.read_text()
    assert text == '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:6}}'
    assert decode_offset_table(store.store_path.with_name("offsets.json.bak").read_text()) == {MQ: 5}
    store.store_path.write_text("")  # an empty or unreadable file falls back to the .bak
    again = LocalFileOffsetStore("127.0.0.1@c1", "G", tmp_path)
    await again.load()
    assert again.offset_table == {MQ: 5}
    assert decode_offset_table(encode_offset_table({MQ: 1})) == {MQ: 1}
    # a standard-JSON writer's string keys are read too
    assert decode_offset_table(json.dumps({"offsetTable": {json.dumps(MQ.to_json_dict()): 3}})) == {MQ: 3}
    monkeypatch.setenv("rocketmq.client.localOffsetStoreDir", str(tmp_path / "x"))
    assert local_offset_store_dir() == tmp_path / "x"
    monkeypatch.delenv("rocketmq.client.localOffsetStoreDir")
    monkeypatch.delenv("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", raising=False)
    assert local_offset_store_dir() == Path.home() / ".rocketmq_offsets"
    both_bad = LocalFileOffsetStore("c", "G", tmp_path)
    both_bad.store_path.parent.mkdir(parents=True)
    both_bad.store_path.write_text("{not json")
    both_bad.store_path.with_name("offsets.json.bak").write_text("{not json")
    with pytest.raises(MQClientError, match="readLocalOffset"):
        await both_bad.load()


async def test_compute_pull_from_where_policies() -> None:
    inst = FakeInstance()
    store = RemoteBrokerOffsetStore(inst, "G")
    retry = MessageQueueRef("%RETRY%G", "broker-a", 0)
    assert await compute_pull_from_where(inst, store, MQ, "CONSUME_FROM_LAST_OFFSET", 0) == 42
    assert await compute_pull_from_where(inst, store, retry, "CONSUME_FROM_LAST_OFFSET", 0) == 0
    assert await compute_pull_from_where(inst, store, MQ, "CONSUME_FROM_FIRST_OFFSET", 0) == 0
    assert await compute_pull_from_where(inst, store, MQ, "CONSUME_FROM_TIMESTAMP", 1234) == 7
    assert inst.api.searched == [1234]
    assert await compute_pull_from_where(inst, store, retry, "CONSUME_FROM_TIMESTAMP", 1234) == 42
    inst.api.stored[("G", "T", 0)] = 9
    assert await compute_pull_from_where(inst, store, MQ, "CONSUME_FROM_FIRST_OFFSET", 0) == 9
    inst.api.fail = MQBrokerError(ResponseCode.SYSTEM_ERROR, "boom")
    with pytest.raises(MQClientError) as info:
        await compute_pull_from_where(inst, store, MQ, "CONSUME_FROM_LAST_OFFSET", 0)
    assert info.value.code == ResponseCode.QUERY_NOT_FOUND


# ---- consume services -------------------------------------------------------------------------


class FakeRebalance:
    def __init__(self) -> None:
        self.process_queue_table: dict[MessageQueueRef, ProcessQueue] = {}
        self.locked: list[MessageQueueRef] = []

    async def lock(self, mq: MessageQueueRef) -> bool:
        self.locked.append(mq)
        return True

    async def lock_all(self) -> None:
        return None

    async def unlock_all(self) -> None:
        return None


class FakeStats:
    def record(self, *args: Any) -> None:
        return None


class FakeConsumer:
    def __init__(self, model: str = "CLUSTERING", batch: int = 1, threads: int = 2) -> None:
        self.consumer_group = "G"
        self.message_model = model
        self.consume_thread_min = 1
        self.consume_thread_max = threads
        self.consume_message_batch_max_size = batch
        self.consume_timeout = 15.0
        self.suspend_current_queue_time_millis = 10
        self.lock_interval = 20.0
        self.offset_store = RemoteBrokerOffsetStore(FakeInstance(), "G")
        self.rebalance = FakeRebalance()
        self.stats = FakeStats()
        self.sent_back: list[tuple[bytes, int]] = []
        self.dlq: list[bytes] = []
        self.fail_send_back = 0
        self.max_times = 2
        self.consume_message_hooks: list[Any] = []

    async def send_message_back(self, m: MessageExt, delay: int, broker_name: str | None,
                                mq: MessageQueueRef | None = None) -> None:
        if self.fail_send_back > 0:
            self.fail_send_back -= 1
            raise MQClientError("broker and retry topic both down")
        self.sent_back.append((m.body, delay))

    async def send_message_back_as_normal(self, m: MessageExt, orderly: bool = False) -> None:
        self.dlq.append(m.body)

    def max_reconsume_times_orderly(self) -> int:
        return self.max_times


async def _settle(predicate: Any, timeout: float = 5.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


async def test_concurrent_batches_offsets_and_worker_bound() -> None:
    consumer = FakeConsumer(batch=3, threads=2)
    running = 0
    peak = 0
    batches: list[int] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        batches.append(len(msgs))
        await asyncio.sleep(0.02)
        running -= 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    service = cs.ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    msgs = [msg(i) for i in range(10)]
    pq.put_message(msgs)
    service.submit_consume_request(msgs, pq, MQ, True)
    await _settle(lambda: consumer.offset_store.offset_table.get(MQ) == 10)
    assert sorted(batches) == [1, 3, 3, 3]
    assert peak == 2  # consumeThreadMax
    await service.shutdown()


async def test_reconsume_later_sends_back_and_failed_send_back_is_consumed_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cs, "CONSUME_LATER_DELAY", 0.05)
    consumer = FakeConsumer()
    consumer.fail_send_back = 1
    calls: list[tuple[bytes, int]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        calls.extend((m.body, m.reconsume_times) for m in msgs)
        ctx.delay_level_when_next_consume = 2
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    service = cs.ConsumeMessageConcurrentlyService(consumer, listener)
    service.start()
    pq = ProcessQueue()
    m = msg(0, b"bad")
    pq.put_message([m])
    service.submit_consume_request([m], pq, MQ, True)
    await _settle(lambda: consumer.sent_back == [(b"bad", 2)])
    # first send-back failed: consumed locally again with reconsumeTimes + 1, offset held until then
    assert calls == [(b"bad", 0), (b"bad", 1)]
    await _settle(lambda: consumer.offset_store.offset_table.get(MQ) == 1)
    await service.shutdown()


async def test_broadcasting_failure_is_dropped_and_dropped_queue_not_committed() -> None:
    consumer = FakeConsumer(model="BROADCASTING")
    service = cs.ConsumeMessageConcurrentlyService(consumer, lambda msgs, ctx: None)  # None = RECONSUME_LATER
    service.start()
    pq = ProcessQueue()
    pq.put_message([msg(0)])
    service.submit_consume_request([msg(0)], pq, MQ, True)
    await _settle(lambda: MQ in consumer.offset_store.offset_table)
    assert consumer.sent_back == []
    pq2 = ProcessQueue()
    pq2.dropped = True
    q2 = MessageQueueRef("T", "broker-a", 1)
    service.submit_consume_request([msg(0)], pq2, q2, True)
    await asyncio.sleep(0.05)
    assert q2 not in consumer.offset_store.offset_table
    await service.shutdown()


async def test_clean_expired_messages_sends_back_with_level_3() -> None:
    consumer = FakeConsumer()
    service = cs.ConsumeMessageConcurrentlyService(consumer, lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    pq = ProcessQueue()
    stuck = msg(0, b"stuck")
    stuck.properties[MessageConst.CONSUME_START_TIMESTAMP] = str(int(time.time() * 1000) - 20 * 60_000)
    pq.put_message([stuck, msg(1)])
    consumer.rebalance.process_queue_table[MQ] = pq
    assert await service.clean_expired_messages() == 1
    assert consumer.sent_back == [(b"stuck", 3)]
    assert consumer.offset_store.offset_table[MQ] == 1


async def test_orderly_suspends_in_place_then_dead_letters() -> None:
    consumer = FakeConsumer()
    consumer.max_times = 2
    seen: list[tuple[int, int]] = []

    def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        seen.extend((m.queue_offset, m.reconsume_times) for m in msgs)
        if msgs[0].queue_offset == 1:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    service = cs.ConsumeMessageOrderlyService(consumer, listener)
    service.workers.start()
    pq = ProcessQueue()
    pq.locked = True
    consumer.rebalance.process_queue_table[MQ] = pq
    msgs = [msg(i) for i in range(3)]
    dispatch = pq.put_message(msgs)
    service.submit_consume_request(msgs, pq, MQ, dispatch)
    await _settle(lambda: consumer.offset_store.offset_table.get(MQ) == 3)
    # offset 1 tried 3 times (reconsumeTimes 0, 1, 2), then to the DLQ; 2 only after it
    assert seen == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert consumer.dlq == [b"x"]
    await service.shutdown()


async def test_orderly_unlocked_queue_waits_for_the_lock() -> None:
    consumer = FakeConsumer()
    service = cs.ConsumeMessageOrderlyService(consumer, lambda msgs, ctx: ConsumeOrderlyStatus.SUCCESS)
    service.workers.start()
    pq = ProcessQueue()
    pq.put_message([msg(0)])
    service.submit_consume_request([msg(0)], pq, MQ, True)
    await _settle(lambda: consumer.rebalance.locked == [MQ])  # tryLockLaterAndReconsume
    await service.shutdown()


# ---- the push consumer's pull loop and send-back fallback ------------------------------------


def _push(**options: Any) -> AsyncDefaultMQPushConsumer:
    config = RemotingClientConfig(namesrv_addr="127.0.0.1:1", client_ip="127.0.0.1")
    c = AsyncDefaultMQPushConsumer("G_unit", config, **options)
    c.subscribe("T")
    c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    return c


def test_push_consumer_bad_config() -> None:
    config = RemotingClientConfig(namesrv_addr="127.0.0.1:1")
    for kwargs, why in [({}, "DEFAULT_CONSUMER"), ({"message_model": "X"}, "messageModel"),
                        ({"consume_from_where": "CONSUME_FROM_NOWHERE"}, "consumeFromWhere"),
                        ({"pull_threshold_for_queue": 0}, "pullThresholdForQueue"),
                        ({"consume_thread_min": 5, "consume_thread_max": 2}, "consumeThreadMin"),
                        ({"consume_timestamp": "yesterday"}, "yyyyMMddHHmmss"),
                        ({"consume_message_batch_max_size": 2000}, "consumeMessageBatchMaxSize")]:
        group = "DEFAULT_CONSUMER" if not kwargs else "G_bad"
        with pytest.raises(MQClientError, match=why):
            AsyncDefaultMQPushConsumer(group, config, **kwargs)
    c = _push()
    with pytest.raises(MQClientError, match="subscription exception"):
        c.subscribe("T", "||")


async def test_push_consumer_start_needs_listener_and_subscription() -> None:
    c = AsyncDefaultMQPushConsumer("G_x", RemotingClientConfig(namesrv_addr="127.0.0.1:1"))
    with pytest.raises(MQClientError, match="messageListener is null"):
        await c.start()
    c.register_message_listener(lambda msgs, ctx: None)
    with pytest.raises(MQClientError, match="no subscription"):
        await c.start()


class FakePullApi:
    def __init__(self, results: list[PullResult | Exception]) -> None:
        self.results = results
        self.calls: list[dict[str, Any]] = []

    async def pull_kernel(self, mq: MessageQueueRef, sub_expression: Any, expression_type: str, sub_version: int,
                          offset: int, max_nums: int, max_size: int, sys_flag: int, commit_offset: int,
                          suspend: int, timeout: float) -> PullResult:  # noqa: ASYNC109
        self.calls.append({"offset": offset, "sys_flag": sys_flag, "commit_offset": commit_offset,
                           "suspend": suspend, "timeout": timeout})
        r = self.results.pop(0)
        if isinstance(r, Exception):
            raise r
        return r

    def process_pull_result(self, mq: MessageQueueRef, result: PullResult, sub: Any) -> PullResult:
        return result


async def test_pull_flow_control_commit_flag_and_results() -> None:
    c = _push(pull_threshold_for_queue=2)
    c.service_state = "RUNNING"
    later: list[float] = []
    c.execute_pull_request_later = lambda pr, delay: later.append(delay)  # type: ignore[method-assign]
    again: list[PullRequest] = []
    c.execute_pull_request_immediately = lambda pr: again.append(pr)  # type: ignore[method-assign]
    submitted: list[int] = []

    class Service:
        def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueueRef,
                                   dispatch: bool) -> None:
            submitted.extend(m.queue_offset for m in msgs)
    c.consume_service = Service()  # type: ignore[assignment]
    c.pull_api = FakePullApi([PullResult(PullStatus.FOUND, 3, 0, 3, [msg(0), msg(1), msg(2)]),
                              PullResult(PullStatus.NO_NEW_MSG, 3, 0, 3),
                              MQBrokerError(ResponseCode.SYSTEM_ERROR, "x")])  # type: ignore[assignment]
    pq = ProcessQueue()
    pr = PullRequest("G_unit", MQ, pq, 0)
    c.offset_store.update_offset(MQ, 5, False)
    await c.pull_message(pr)
    call = c.pull_api.calls[0]  # type: ignore[attr-defined]
    assert call["sys_flag"] & 0x1 and call["sys_flag"] & 0x2  # FLAG_COMMIT_OFFSET and FLAG_SUSPEND
    assert (call["commit_offset"], call["suspend"], call["timeout"]) == (5, 15000, 30.0)
    assert submitted == [0, 1, 2] and pr.next_offset == 3 and again == [pr]
    await c.pull_message(pr)  # 3 cached > pullThresholdForQueue 2: flow control, 50 ms
    assert later == [0.05]
    pq.remove_message(pq.messages())
    await c.pull_message(pr)  # NO_NEW_MSG with an empty cache: correctTagsOffset
    assert c.offset_store.offset_table[MQ] == 5  # increaseOnly: 3 does not move 5 back
    await c.pull_message(pr)  # an error: pulled again 3 s later
    assert later == [0.05, 3.0]
    c.consume_concurrently_max_span = 1
    pq.put_message([msg(10), msg(13)])
    pq2_later = len(later)
    c.pull_threshold_for_queue = 100
    await c.pull_message(pr)  # span 3 > 1
    assert later[pq2_later:] == [0.05]
    pq.dropped = True
    await c.pull_message(pr)  # a dropped queue's request just ends
    assert len(later) == pq2_later + 1


async def test_send_back_falls_back_to_retry_topic() -> None:
    c = _push(max_reconsume_times=5)
    inst = FakeInstance()
    inst.api.send_back_error = MQBrokerError(ResponseCode.SYSTEM_ERROR, "down")
    c.instance = inst  # type: ignore[assignment]
    sent: list[Message] = []

    async def send_to_topic(m: Message) -> None:
        sent.append(m)
    c.send_to_topic = send_to_topic  # type: ignore[method-assign]
    m = msg(0, b"body")
    m.reconsume_times = 2
    await c.send_message_back(m, 0, "broker-a")
    (new,) = sent
    assert new.topic == "%RETRY%G_unit" and new.body == b"body"
    p = new.properties
    assert (p[MessageConst.RETRY_TOPIC], p[MessageConst.RECONSUME_TIME], p[MessageConst.MAX_RECONSUME_TIMES],
            p[MessageConst.DELAY_TIME_LEVEL], p[MessageConst.ORIGIN_MESSAGE_ID]) == ("T", "3", "5", "5", "id0")
    inst.api.send_back_error = None
    await c.send_message_back(m, 2, "broker-a")
    assert inst.api.sent_back == [{"addr": "127.0.0.1:10911", "offset": 0, "delay": 2, "topic": "T", "max": 5}]


# ---- rebalance --------------------------------------------------------------------------------


class RebalanceInstance(FakeInstance):
    def __init__(self, cids: list[str], lockable: set[MessageQueueRef] | None = None) -> None:
        super().__init__()
        self.cids = cids
        self.lockable = lockable
        self.woken = 0

        outer = self

        class LockApi(FakeApi):
            async def lock_batch_mq(self, addr: str, group: str, client_id: str,
                                    queues: Any) -> set[MessageQueueRef]:
                return set(queues) if outer.lockable is None else set(queues) & outer.lockable

        self.api = LockApi()

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        return list(self.cids)

    def rebalance_immediately(self) -> None:
        self.woken += 1


class RecordingRebalance(RebalanceImpl):
    """RebalanceImpl with the push hooks replaced by recorders."""

    def __init__(self, instance: RebalanceInstance) -> None:
        super().__init__("G", "CLUSTERING", AllocateMessageQueueAveragely(), instance)
        self.removed: list[MessageQueueRef] = []
        self.dispatched: list[tuple[MessageQueueRef, int]] = []
        self.changes: list[set[MessageQueueRef]] = []

    async def remove_unnecessary_message_queue(self, mq: MessageQueueRef, pq: ProcessQueue) -> bool:
        self.removed.append(mq)
        return True

    def remove_dirty_offset(self, mq: MessageQueueRef) -> None:
        return None

    async def compute_pull_from_where(self, mq: MessageQueueRef) -> int:
        return mq.queue_id * 10

    def dispatch_pull_request(self, requests: list[tuple[MessageQueueRef, ProcessQueue, int]]) -> None:
        self.dispatched += [(mq, off) for mq, _, off in requests]

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueueRef],
                                    mq_divided: set[MessageQueueRef]) -> None:
        self.changes.append(set(mq_divided))


async def test_rebalance_takes_its_share_and_gives_queues_back() -> None:
    queues = {MessageQueueRef("T", "broker-a", i) for i in range(4)}
    inst = RebalanceInstance(["127.0.0.1@fake"])
    rb = RecordingRebalance(inst)
    rb.subscription_inner["T"] = SubscriptionData(topic="T")
    rb.topic_subscribe_info_table["T"] = queues
    assert await rb.do_rebalance(False)
    assert set(rb.process_queue_table) == queues
    assert sorted(off for _, off in rb.dispatched) == [0, 10, 20, 30]  # computePullFromWhere per queue
    inst.cids = ["127.0.0.1@fake", "127.0.0.2@other"]  # a second member: we keep the first half
    await rb.do_rebalance(False)
    assert {mq.queue_id for mq in rb.process_queue_table} == {0, 1}
    assert {mq.queue_id for mq in rb.removed} == {2, 3}
    assert rb.changes[-1] == {mq for mq in queues if mq.queue_id < 2}
    inst.cids = ["127.0.0.0@first", "127.0.0.1@fake"]
    await rb.do_rebalance(False)
    assert {mq.queue_id for mq in rb.process_queue_table} == {2, 3}
    inst.cids = []  # no consumer list: nothing changes
    assert not await rb.do_rebalance(False)
    assert {mq.queue_id for mq in rb.process_queue_table} == {2, 3}
    rb.subscription_inner.clear()  # unsubscribed: truncateMessageQueueNotMyTopic
    await rb.do_rebalance(False)
    assert rb.process_queue_table == {}


async def test_orderly_rebalance_waits_for_the_broker_lock() -> None:
    queues = {MessageQueueRef("T", "broker-a", i) for i in range(2)}
    inst = RebalanceInstance(["127.0.0.1@fake"], lockable={MessageQueueRef("T", "broker-a", 0)})
    rb = RecordingRebalance(inst)
    rb.subscription_inner["T"] = SubscriptionData(topic="T")
    rb.topic_subscribe_info_table["T"] = queues
    await rb.do_rebalance(True)
    assert set(rb.process_queue_table) == {MessageQueueRef("T", "broker-a", 0)}
    assert rb.process_queue_table[MessageQueueRef("T", "broker-a", 0)].locked
    await asyncio.sleep(0.6)
    assert inst.woken == 1  # the queue whose lock failed is tried again in 500 ms
    inst.lockable = None
    await rb.lock_all()
    await rb.do_rebalance(True)
    assert set(rb.process_queue_table) == queues


async def test_pull_threshold_for_topic_is_split_over_queues() -> None:
    c = _push(pull_threshold_for_topic=100, pull_threshold_size_for_topic=10)
    heartbeats = []

    async def heartbeat(is_rebalance: bool = False) -> None:
        heartbeats.append(is_rebalance)
    c.instance.send_heartbeat_to_all_brokers = heartbeat  # type: ignore[method-assign]
    for i in range(3):
        c.rebalance.process_queue_table[MessageQueueRef("T", "broker-a", i)] = ProcessQueue()
    await c.rebalance.message_queue_changed("T", set(), set())
    assert (c.pull_threshold_for_queue, c.pull_threshold_size_for_queue) == (33, 3)
    assert heartbeats == [True]  # a rebalance: V2 fingerprints are forgotten
