"""BATCH_ACK_MESSAGE writes its acks in one store call: the revive log gets exactly the records
one append_ack per entry writes (bodies, properties, queue, order), and the revive service still
sees every popped message acked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from orbitmq.broker.controller import BrokerController
from orbitmq.broker.pop.checkpoint import BatchAckMsg
from orbitmq.broker.pop.constants import REVIVE_GROUP
from orbitmq.broker.pop.revive_log import PROPERTY_REVIVE_TIME
from orbitmq.client import api as client_api
from orbitmq.common import extra_info as ei
from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.remoting import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support.broker import in_process_broker

TOPIC, GROUP, QUEUES = "PathTopic", "PathGroup", 4


class _Channel:
    remote_address = "127.0.0.1:50000"
    is_active = True


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerController]:
    async with in_process_broker(tmp_path / "store", "PathCluster", "broker-path") as controller:
        yield controller


async def _settle(broker: BrokerController) -> None:
    """Lets the reput service (a task on this loop) dispatch everything appended so far."""
    for _ in range(2000):
        if broker.message_store.reput_service.behind() == 0:
            return
        await asyncio.sleep(0.001)


async def _call(broker: BrokerController, code: int, fields: dict[str, str] | None,
                body: bytes | None = None) -> RemotingCommand:
    return await broker.processors.table[int(code)](RemotingCommand.request(code, fields, body), _Channel())


async def test_batch_ack_writes_the_records_of_one_append_ack_per_entry(broker: BrokerController) -> None:
    response = await _call(broker, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES),
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    assert response.code == ResponseCode.SUCCESS, response.remark
    for n in range(2 * QUEUES):
        props = {"UNIQ_KEY": f"{n:032X}", "TAGS": "T"}
        response = await _call(broker, RequestCode.SEND_MESSAGE_V2, {
            "a": "PG", "b": TOPIC, "c": "TBW102", "d": str(QUEUES), "e": str(n % QUEUES), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
            "k": "false", "m": "false"}, b"body")
        assert response.code == ResponseCode.SUCCESS, response.remark
    await _settle(broker)
    pop = broker.pop_service
    revive_topic = pop.revive_topic
    store = broker.message_store
    before = {q: store.get_max_offset_in_queue(revive_topic, q) for q in range(pop.revive_queue_num())}
    response = await _call(broker, RequestCode.POP_MESSAGE, {
        "consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "32", "invisibleTime": "60000",
        "pollTime": "0", "bornTime": str(int(time.time() * 1000)), "initMode": "1", "expType": "TAG", "exp": "*",
        "order": "false"})
    assert response.code == ResponseCode.SUCCESS, response.remark
    messages = decode_records(response.body, check_crc=False)
    assert len(messages) == 2 * QUEUES
    await _settle(broker)
    infos = [ei.parse_extra_info(m.properties["POP_CK"]) for m in messages]
    revive_qid = infos[0].revive_qid
    after_pop = store.get_max_offset_in_queue(revive_topic, revive_qid)
    assert after_pop - before[revive_qid] == QUEUES  # one checkpoint per queue
    points = [(i.retry, i.queue_id, i.ck_queue_offset, i.pop_time, i.revive_qid, i.invisible_time,
               i.msg_queue_offset) for i in infos]
    merged: dict[tuple, tuple[dict, set[int]]] = {}
    for retry, queue_id, start, pop_time, rq, invisible, offset in points:
        entry = merged.setdefault((retry, queue_id, start, pop_time), (
            {"c": GROUP, "t": TOPIC, "r": retry, "so": start, "q": queue_id, "rq": rq, "pt": pop_time,
             "it": invisible}, set()))
        entry[1].add(offset - start)
    acks = []
    for entry, bits in merged.values():
        entry["b"] = client_api._encode_bitset(sorted(bits))
        acks.append(entry)
    body = client_api.dump_json({"brokerName": "broker-path", "acks": acks})
    response = await _call(broker, RequestCode.BATCH_ACK_MESSAGE, None, body)
    assert response.code == ResponseCode.SUCCESS, response.remark
    await _settle(broker)

    result = broker.message_store.get_message(REVIVE_GROUP, revive_topic, revive_qid, after_pop, 64, 1 << 20, None)
    records = decode_records(b"".join(bytes(r) for r in result.message_buffer_list), check_crc=False)
    assert len(records) == len(acks)
    for record, entry in zip(records, acks, strict=True):
        offsets = sorted(entry["so"] + i for i in merged[(entry["r"], entry["q"], entry["so"], entry["pt"])][1])
        expected = BatchAckMsg(ack_offset=-1, start_offset=entry["so"], consumer_group=GROUP, topic=TOPIC,
                               queue_id=entry["q"], pop_time=entry["pt"], broker_name="broker-path",
                               ack_offset_list=offsets)
        assert record.body == expected.to_json()
        assert record.topic == revive_topic and record.queue_id == revive_qid
        assert record.properties == {"TAGS": "bAck", "UNIQ_KEY": expected.unique_id(),
                                     PROPERTY_REVIVE_TIME: str(entry["pt"] + entry["it"])}
        raw = properties_to_string(record.properties)
        assert raw.encode() in b"".join(bytes(r) for r in result.message_buffer_list)

    await pop.revive_service.revive_once()
    assert pop.revive_service.pending_count() == 0
