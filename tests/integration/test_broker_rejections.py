"""Every refusal of the broker answers RocketMQ's response code, and malformed Remoting frames and
headers (missing fields, wrong types, huge numbers, bad bodies) never stop it serving others.

Local helpers live in this file on purpose: the three broker test files share no module.
"""

from __future__ import annotations

import asyncio
import json
import random
import struct
import time
from pathlib import Path

import pytest

from orbitmq.broker.processors.batch_codec import BatchItem, encode_batch
from orbitmq.common.message import properties_to_string
from orbitmq.common.message_codec import decode_records
from orbitmq.common.sysflag import build_pull_sys_flag
from orbitmq.remoting import RemotingClient, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.support import astart_broker

MAX_MESSAGE_SIZE = 64 * 1024


@pytest.fixture
async def broker(procs, tmp_path: Path):
    proc, addr = await astart_broker(procs, tmp_path, name="broker-rej", brokerClusterName="RejectCluster",
                                     brokerName="broker-rej", maxMessageSize=MAX_MESSAGE_SIZE,
                                     autoCreateTopicEnable="false", autoCreateSubscriptionGroup="false")
    async with RemotingClient() as client:
        await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, topic_fields("RejTopic", 2, 6))
        await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, topic_fields("ReadOnlyTopic", 1, 4))
        for group, enabled in (("CG_REJ", True), ("CG_DISABLED", False)):
            body = json.dumps({"groupName": group, "consumeEnable": enabled}).encode()
            await call(client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        yield client, addr, proc


def topic_fields(topic: str, queues: int, perm: int, attributes: str | None = None) -> dict[str, str]:
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
              "writeQueueNums": str(queues), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
              "topicSysFlag": "0", "order": "false"}
    if attributes is not None:
        fields["attributes"] = attributes
    return fields


async def call(client: RemotingClient, addr: str, code: int, fields: dict[str, str] | None = None,
               body: bytes = b"", expect: int | None = ResponseCode.SUCCESS) -> RemotingCommand:
    response = await client.invoke(addr, RemotingCommand.request(code, fields or {}, body), 10)
    if expect is not None:
        assert response.code == expect, (code, response.code, response.remark)
    return response


def send_fields(topic: str, queue_id: int = 0, props: dict[str, str] | None = None,
                batch: bool = False) -> dict[str, str]:
    props = {"UNIQ_KEY": f"{time.time_ns():032X}", **(props or {})}
    return {"a": "PG_REJ", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": properties_to_string(props), "j": "0",
            "k": "false", "m": "true" if batch else "false"}


def pull_fields(topic: str, group: str = "CG_REJ", queue_id: int = 0, subscription: str = "*",
                expression_type: str = "TAG") -> dict[str, str]:
    sys_flag = build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True, class_filter=False)
    return {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": "0",
            "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": subscription, "subVersion": "0", "expressionType": expression_type}


async def test_send_rejections_answer_rocketmq_codes(broker) -> None:
    client, addr, _ = broker
    send = RequestCode.SEND_MESSAGE_V2
    ok = await call(client, addr, send, send_fields("RejTopic", 1), b"fine")
    assert ok.ext_fields["queueId"] == "1" and ok.ext_fields["queueOffset"] == "0"
    assert ok.ext_fields["MSG_REGION"] == "DefaultRegion"

    # autoCreateTopicEnable=false: an unknown topic is refused, not created.
    missing = await call(client, addr, send, send_fields("NoSuchTopic"), b"x", expect=ResponseCode.TOPIC_NOT_EXIST)
    assert "not exist" in missing.remark
    # Topic permission: read-only topic.
    ro = await call(client, addr, send, send_fields("ReadOnlyTopic"), b"x", expect=ResponseCode.NO_PERMISSION)
    assert "forbidden" in ro.remark
    # System topics a client may not send to.
    await call(client, addr, send, send_fields("SCHEDULE_TOPIC_XXXX"), b"x", expect=ResponseCode.NO_PERMISSION)
    # queueId beyond the topic's queues: INVALID_PARAMETER "request queueId[..] is illegal" (msgCheck, 5.x).
    bad_queue = await call(client, addr, send, send_fields("RejTopic", 7), b"x",
                           expect=ResponseCode.INVALID_PARAMETER)
    assert "queueId[7] is illegal" in bad_queue.remark
    # Topic name rules and the 127-char limit: INVALID_PARAMETER, as Apache RocketMQ 5.5's broker
    # answers them (tests/compat/conformance).
    await call(client, addr, send, send_fields("bad topic!"), b"x", expect=ResponseCode.INVALID_PARAMETER)
    await call(client, addr, send, send_fields("T" * 128), b"x", expect=ResponseCode.INVALID_PARAMETER)
    # Body over maxMessageSize, properties over 32767 bytes.
    big = await call(client, addr, send, send_fields("RejTopic"), b"x" * (MAX_MESSAGE_SIZE + 1),
                     expect=ResponseCode.MESSAGE_ILLEGAL)
    assert str(MAX_MESSAGE_SIZE) in big.remark
    await call(client, addr, send, send_fields("RejTopic", props={"big": "p" * 33000}), b"x",
               expect=ResponseCode.MESSAGE_ILLEGAL)
    # A malformed batch body.
    await call(client, addr, RequestCode.SEND_BATCH_MESSAGE, send_fields("RejTopic", batch=True), b"\x00\x00\x00\x09junk",
               expect=ResponseCode.MESSAGE_ILLEGAL)
    # A batch holding a delayed message: the delay redirect works per message, so it is refused.
    delayed = encode_batch([BatchItem(0, b"d", properties_to_string({"UNIQ_KEY": "KD", "DELAY": "2"}))])
    refused_delay = await call(client, addr, RequestCode.SEND_BATCH_MESSAGE, send_fields("RejTopic", 0, batch=True),
                               delayed, expect=ResponseCode.MESSAGE_ILLEGAL)
    assert "delay" in refused_delay.remark
    # A retry topic of an unknown group (autoCreateSubscriptionGroup=false).
    await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, topic_fields("%RETRY%CG_GHOST", 1, 6))
    await call(client, addr, send, send_fields("%RETRY%CG_GHOST"), b"x",
               expect=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)

    # Broker permission: a read-only broker refuses sends but still serves pulls.
    await call(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n")
    refused = await call(client, addr, send, send_fields("RejTopic"), b"x", expect=ResponseCode.NO_PERMISSION)
    assert "sending message is forbidden" in refused.remark
    pulled = await call(client, addr, RequestCode.PULL_MESSAGE, pull_fields("RejTopic", queue_id=1))
    assert [m.body for m in decode_records(pulled.body)] == [b"fine"]
    await call(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6\n")
    await call(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"listenPort=1\n", expect=ResponseCode.NO_PERMISSION)

    # A well-formed batch is stored as consecutive queue offsets.
    batch = encode_batch([BatchItem(0, f"b{i}".encode(), properties_to_string({"UNIQ_KEY": f"K{i}"}))
                          for i in range(3)])
    stored = await call(client, addr, RequestCode.SEND_BATCH_MESSAGE, send_fields("RejTopic", 0, batch=True), batch)
    assert len(stored.ext_fields["msgId"].split(",")) == 3


async def test_flow_control_answers_system_busy(broker) -> None:
    client, addr, _ = broker
    # Test knob: the single send worker sleeps 400 ms per message, so queued sends wait > 200 ms.
    await call(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"sendMessageTestDelayMills=400\n")
    responses = await asyncio.gather(*(
        call(client, addr, RequestCode.SEND_MESSAGE_V2, send_fields("RejTopic"), f"m{i}".encode(), expect=None)
        for i in range(4)))
    codes = [r.code for r in responses]
    busy = [r for r in responses if r.code == ResponseCode.SYSTEM_BUSY]
    print(f"flow control: response codes {codes}; remark: {busy[0].remark if busy else None}")
    assert ResponseCode.SUCCESS in codes
    assert busy and all(r.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy") for r in busy)
    await call(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=b"sendMessageTestDelayMills=0\n")
    await call(client, addr, RequestCode.SEND_MESSAGE_V2, send_fields("RejTopic"), b"after")


async def test_pull_offset_and_admin_rejections(broker) -> None:
    client, addr, _ = broker
    pull = RequestCode.PULL_MESSAGE
    await call(client, addr, pull, pull_fields("RejTopic", group="CG_NOBODY"),
               expect=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
    await call(client, addr, pull, pull_fields("RejTopic", group="CG_DISABLED"), expect=ResponseCode.NO_PERMISSION)
    await call(client, addr, pull, pull_fields("NoSuchTopic"), expect=ResponseCode.TOPIC_NOT_EXIST)
    await call(client, addr, pull, pull_fields("RejTopic", queue_id=9), expect=ResponseCode.INVALID_PARAMETER)
    await call(client, addr, pull, pull_fields("RejTopic", subscription="a >", expression_type="SQL92"),
               expect=ResponseCode.SUBSCRIPTION_PARSE_FAILED)
    empty = await call(client, addr, pull, pull_fields("RejTopic"), expect=ResponseCode.PULL_NOT_FOUND)
    assert empty.ext_fields["nextBeginOffset"] == "0"
    # Pull without FLAG_SUBSCRIPTION from a consumer that never sent a heartbeat.
    no_sub = pull_fields("RejTopic")
    no_sub["sysFlag"] = "0"
    await call(client, addr, pull, no_sub, expect=ResponseCode.SUBSCRIPTION_NOT_EXIST)
    # Offsets.
    await call(client, addr, RequestCode.QUERY_CONSUMER_OFFSET,
               {"consumerGroup": "CG_REJ", "topic": "RejTopic", "queueId": "0", "setZeroIfNotFound": "false"},
               expect=ResponseCode.QUERY_NOT_FOUND)
    await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET,
               {"consumerGroup": "CG_REJ", "topic": "NoSuchTopic", "queueId": "0", "commitOffset": "1"},
               expect=ResponseCode.TOPIC_NOT_EXIST)
    await call(client, addr, RequestCode.QUERY_MESSAGE,
               {"topic": "RejTopic", "key": "nothing", "maxNum": "5", "beginTimestamp": "0",
                "endTimestamp": str(2**62)}, expect=ResponseCode.QUERY_NOT_FOUND)
    # Admin: attribute values are validated, system topics protected, unknown codes refused.
    bad_type = await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                          topic_fields("FifoTopic", 1, 6, "+message.type=BOGUS"), expect=ResponseCode.INVALID_PARAMETER)
    assert "message.type" in bad_type.remark
    await call(client, addr, RequestCode.UPDATE_AND_CREATE_TOPIC, topic_fields("FifoTopic", 1, 6, "+message.type=FIFO"))
    await call(client, addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"},
               expect=ResponseCode.INVALID_PARAMETER)
    await call(client, addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"},
               expect=ResponseCode.TOPIC_NOT_EXIST)
    await call(client, addr, 99999, expect=ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


# ---- fuzz ------------------------------------------------------------------------------------------

BROKER_CODES = [10, 310, 320, 11, 12, 14, 15, 17, 21, 25, 26, 28, 29, 30, 31, 32, 33, 34, 35, 38, 41, 42,
                200, 201, 202, 203, 204, 207, 208, 215, 222, 300, 351, 352]
FIELD_NAMES = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "producerGroup", "topic",
               "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag",
               "properties", "reconsumeTimes", "batch", "consumerGroup", "queueOffset", "maxMsgNums",
               "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion", "expressionType", "key",
               "maxNum", "beginTimestamp", "endTimestamp", "offset", "timestamp", "clientID", "readQueueNums",
               "writeQueueNums", "perm", "topicFilterType", "order", "attributes", "groupName", "cleanOffset",
               "group", "isForce", "msgId", "maxMsgBytes", "setZeroIfNotFound"]
FIELD_VALUES = ["", "abc", "-1", "0", "1", "99999999999999999999999999", "-99999999999999999999", "1e9", "true",
                "null", "%RETRY%x", "\u0000", "x" * 300, "2147483648", "9223372036854775808", " 5 ", "TBW102",
                "NoTopic", "+message.type=FIFO", "a >", "SQL92", "{}", "[]", "-2147483649", "0x10"]
BAD_BODIES = [b"", b"{", b"[]", b"null", b'{"a":', b"\xff\xfe\x00garbage", b'{"clientID": 5}',
              b'{"clientID":"c","consumerDataSet":"x"}', b'{"clientID":"c","consumerDataSet":[{"groupName":[]}]}',
              b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":5}]}]}',
              b'{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":1}]}',
              b'{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t","brokerName":"b","queueId":1e99}]}',
              b'{"groupName":"g","retryMaxTimes":"many"}', b"[" * 5000 + b"]" * 5000, b"key_without_value",
              b"\x00\x00\x00\x30" + b"\x00" * 20, bytes(range(256))]


def fuzz_request(rng: random.Random, code: int) -> RemotingCommand:
    fields = {name: rng.choice(FIELD_VALUES) for name in rng.sample(FIELD_NAMES, rng.randint(0, 12))}
    return RemotingCommand.request(code, fields, rng.choice(BAD_BODIES))


def raw_frames() -> list[bytes]:
    good_header = json.dumps({"code": 34, "language": "JAVA", "version": 479, "opaque": 1, "flag": 0}).encode()
    return [
        struct.pack(">i", -5),                                               # negative length
        struct.pack(">i", 1 << 30) + b"xx",                                  # oversize length
        struct.pack(">ii", 8, 1000) + b"abcd",                               # header beyond frame
        struct.pack(">ii", 4 + 5, 5) + b"{bad}",                             # invalid JSON header
        struct.pack(">ii", 4 + len(good_header), (7 << 24) | len(good_header)) + good_header,  # bad serialize type
        b"\x00\x00",                                                         # truncated, then close
    ]


async def send_raw(host: str, port: int, frame: bytes) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(frame)
        await writer.drain()
        try:
            await asyncio.wait_for(reader.read(1024), 2)  # the broker closes (or answers) the connection
        except TimeoutError:
            pass
    finally:
        writer.close()


async def test_fuzzed_frames_and_headers_leave_broker_serving(broker) -> None:
    client, addr, proc = broker
    rng = random.Random(20261121)
    host, port = addr.rsplit(":", 1)
    stop = asyncio.Event()
    good_rounds = 0

    async def well_behaved() -> None:
        nonlocal good_rounds
        async with RemotingClient() as own:
            while not stop.is_set():
                sent = await call(own, addr, RequestCode.SEND_MESSAGE_V2, send_fields("RejTopic", 1), b"steady")
                assert sent.code == ResponseCode.SUCCESS
                good_rounds += 1
                await asyncio.sleep(0.02)

    steady = asyncio.create_task(well_behaved())
    answered: dict[int, int] = {}
    async with RemotingClient() as fuzz_client:
        for code in BROKER_CODES:
            batch = [fuzz_request(rng, code) for _ in range(25)]
            responses = await asyncio.gather(*(fuzz_client.invoke(addr, r, 10) for r in batch))
            for response in responses:
                assert response.is_response
                answered[response.code] = answered.get(response.code, 0) + 1
    for frame in raw_frames():
        await send_raw(host, int(port), frame)
    stop.set()
    await steady
    print(f"fuzz: {sum(answered.values())} malformed requests answered, codes {dict(sorted(answered.items()))}; "
          f"{good_rounds} well-behaved sends meanwhile")
    assert proc.is_running()
    # The guard logs "processor for request code N failed" only for an unexpected exception:
    # every malformed input above must have been refused deliberately.
    assert "processor for request code" not in proc.log_text()
    # Still serving: a normal send and pull round trip.
    await call(client, addr, RequestCode.SEND_MESSAGE_V2, send_fields("RejTopic", 0), b"still-alive")
    pulled = await call(client, addr, RequestCode.PULL_MESSAGE, pull_fields("RejTopic", queue_id=0))
    assert b"still-alive" in [m.body for m in decode_records(pulled.body)]


async def test_admin_requests_of_this_release_refuse_bad_input_and_keep_serving(broker) -> None:
    """The maintenance, batch and client-status requests answer RocketMQ's codes to missing fields,
    wrong types and bad bodies, and the broker keeps serving."""
    client, addr, _ = broker
    system_error, invalid = ResponseCode.SYSTEM_ERROR, ResponseCode.INVALID_PARAMETER
    cases = [
        (RequestCode.QUERY_CONSUME_QUEUE, {"topic": "RejTopic"}, b"", system_error),          # no queueId/index
        (RequestCode.QUERY_CONSUME_QUEUE, {"topic": "RejTopic", "queueId": "x", "index": "0", "count": "1"}, b"",
         system_error),
        (RequestCode.QUERY_CONSUME_QUEUE, {"topic": "NoSuch", "queueId": "0", "index": "0", "count": "1"}, b"",
         system_error),
        (RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, b"", system_error),                     # no body
        (RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, b"{not json", system_error),
        (RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, b'{"topicConfigList": []}', invalid),
        (RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, b'{"topicConfigList": [{"topicName": 5}]}', invalid),
        (RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, {}, b'{"topicConfigList": [{"topicName": "T", "perm": 99}]}',
         invalid),
        (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, {}, b'{"groupConfigList": "no"}', system_error),
        (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, {}, b'{"groupConfigList": [{"groupName": ""}]}',
         system_error),
        (RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "RejTopic", "group": "CG_REJ"}, b"",
         system_error),                                                                       # nobody online
        (RequestCode.RESUME_CHECK_HALF_MESSAGE, {"topic": "RejTopic"}, b"", system_error),     # no msgId
        (RequestCode.RESUME_CHECK_HALF_MESSAGE, {"topic": "RejTopic", "msgId": "zz"}, b"", system_error),
    ]
    for code, fields, body, expected in cases:
        response = await call(client, addr, code, fields, body, expect=None)
        assert response.code == expected, (code, fields, body, response.code, response.remark)
        assert response.remark, (code, fields)
    assert (await call(client, addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).body
    assert (await call(client, addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)).code == ResponseCode.SUCCESS
    await call(client, addr, RequestCode.SEND_MESSAGE_V2, send_fields("RejTopic"), b"still serving")
