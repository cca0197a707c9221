"""The trimmed consume path (ReceiveMessage/AckMessage) gives what the plain one gave.

decode_pop_records against decode_records, _attach_pop_ck against the loop it replaced, the
streamed ReceiveMessage responses against a reference built from the general decoder and
converter, and the nack-on-cancel guarantee at every point a client can give up.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orbitmq.client import api as api_mod
from orbitmq.client.api import MQClientAPI
from orbitmq.common import extra_info as ei
from orbitmq.common.message import MessageConst, MessageExt, properties_to_string
from orbitmq.common.message_codec import decode_pop_records, decode_records, encode_record
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy import consumer as consumer_mod
from orbitmq.proxy import converter
from orbitmq.proxy.client_manager import ClientManager
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.consumer import ConsumerActivity
from orbitmq.proxy.service import MessagingService
from orbitmq.remoting import headers as h
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.protocol import RemotingCommand

Code = pb.Code
TOPIC, GROUP, BROKER = "T1", "G1", "broker-a"
_HOSTS = [("127.0.0.1", 5555), ("10.1.2.3", 0), ("::1", 77), ("fe80::1", 65535), ("::ffff:1.2.3.4", 9)]
_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=12)


def _record(rnd: random.Random, i: int, props: dict[str, str] | None = None, topic: str = TOPIC, qid: int = 3,
            qoff: int = 100, reconsume: int = 0) -> bytes:
    if props is None:
        props = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"ID{i:06d}", MessageConst.TAGS: "a"}
    return encode_record(topic=topic, queue_id=qid, body=rnd.randbytes(rnd.randint(0, 200)), flag=rnd.randint(0, 9),
                         queue_offset=qoff, physical_offset=rnd.randint(0, 2**40), sys_flag=rnd.choice((0, 1, 8)),
                         born_timestamp=rnd.randint(0, 2**42), born_host=rnd.choice(_HOSTS),
                         store_timestamp=rnd.randint(0, 2**42), store_host=rnd.choice(_HOSTS),
                         reconsume_times=reconsume, prepared_transaction_offset=rnd.randint(0, 99),
                         properties=properties_to_string(props))


def _outcome(fn, buf):
    try:
        return "ok", fn(buf)
    except Exception as exc:  # noqa: BLE001 -- compared by type and message
        return "error", type(exc), str(exc)


# ---- decode_pop_records ------------------------------------------------------------------------

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), count=st.integers(1, 5),
       props=st.dictionaries(_text.filter(bool), _text, max_size=4),
       damage=st.sampled_from(["none", "truncate", "flip", "append"]), where=st.integers(0, 10**6),
       value=st.integers(0, 255))
def test_decode_pop_records_matches_decode_records(seed, count, props, damage, where, value) -> None:
    rnd = random.Random(seed)
    buf = b"".join(_record(rnd, i, {**props, MessageConst.POP_CK: f"0 1 2 3 0 b 3 {i}"}) for i in range(count))
    if damage == "truncate":
        buf = buf[:where % len(buf)]
    elif damage == "flip":
        data = bytearray(buf)
        data[where % len(data)] = value
        buf = bytes(data)
    elif damage == "append":
        buf += bytes([value]) * (where % 120)
    expected = _outcome(lambda b: decode_records(b, check_crc=False), buf)
    assert _outcome(decode_pop_records, buf) == expected
    if expected[0] == "ok":
        for got, want in zip(decode_pop_records(buf), expected[1], strict=True):
            assert type(got.body) is type(want.body) is bytes
    assert _outcome(decode_pop_records, bytearray(buf)) == expected
    assert _outcome(decode_pop_records, memoryview(buf)) == expected


def test_decode_pop_records_edge_cases() -> None:
    assert decode_pop_records(b"") == []
    rnd = random.Random(7)
    rec = _record(rnd, 1, {})
    assert decode_pop_records(rec * 3) == decode_records(rec * 3, check_crc=False)
    for at, value in ((-1, 0xFF), (-3, 0xFF), (4, 0)):  # properties length, topic byte, magic
        bad = bytearray(rec)
        bad[at] = value
        assert _outcome(decode_pop_records, bytes(bad)) == _outcome(
            lambda b: decode_records(b, check_crc=False), bytes(bad))


# ---- _attach_pop_ck ----------------------------------------------------------------------------

def _reference_attach(messages: list[MessageExt], rh: h.PopMessageResponseHeader,
                      header: h.PopMessageRequestHeader, broker_name: str) -> None:
    """The loop as it was written before (MQClientAPIImpl.processPopResponse)."""
    start_info = ei.parse_start_offset_info(rh.start_offset_info)
    msg_info = ei.parse_msg_offset_info(rh.msg_offset_info)
    order_info = ei.parse_order_count_info(rh.order_count_info)
    sorted_offsets: dict[str, list[int]] = {}
    for msg in messages:
        sorted_offsets.setdefault(ei.start_offset_info_key(msg.topic, msg.queue_id), []).append(msg.queue_offset)
    first_ck: dict[str, str] = {}
    for msg in messages:
        props = msg.properties
        if not start_info:
            key = msg.topic + str(msg.queue_id)
            if key not in first_ck:
                first_ck[key] = ei.build_extra_info(msg.queue_offset, rh.pop_time, rh.invisible_time, rh.revive_qid,
                                                    msg.topic, broker_name, msg.queue_id)
            props[MessageConst.POP_CK] = first_ck[key] + ei.KEY_SEPARATOR + str(msg.queue_offset)
        elif MessageConst.POP_CK not in props:
            qkey = ei.start_offset_info_key(msg.topic, msg.queue_id)
            offsets = msg_info.get(qkey)
            queue_offset = msg.queue_offset
            if offsets:
                index = sorted_offsets[qkey].index(msg.queue_offset)
                if index < len(offsets):
                    queue_offset = offsets[index]
            props[MessageConst.POP_CK] = ei.build_extra_info(
                start_info.get(qkey, msg.queue_offset), rh.pop_time, rh.invisible_time, rh.revive_qid, msg.topic,
                broker_name, msg.queue_id, queue_offset)
            if header.order and order_info:
                count = order_info.get(ei.queue_offset_map_key(msg.topic, msg.queue_id, msg.queue_offset))
                if count is None:
                    count = order_info.get(qkey)
                if count:
                    msg.reconsume_times = count
        props.setdefault(MessageConst.FIRST_POP_TIME, str(rh.pop_time))
        msg.topic = header.topic


@pytest.mark.parametrize("with_ck", ["all", "none", "some"])
@pytest.mark.parametrize("with_infos", [True, False])
@pytest.mark.parametrize("order", [False, True])
def test_attach_pop_ck_matches_reference(with_ck: str, with_infos: bool, order: bool) -> None:
    rnd = random.Random(3)
    retry = f"%RETRY%{GROUP}"
    layout = [(TOPIC, 0, 10), (TOPIC, 0, 12), (TOPIC, 1, 4), (retry, 0, 7), (TOPIC, 0, 13)]
    records = []
    for i, (topic, qid, qoff) in enumerate(layout):
        props = {MessageConst.TAGS: "a"}
        if with_ck == "all" or (with_ck == "some" and i % 2):
            props[MessageConst.POP_CK] = f"{qoff} 5 6 7 0 {BROKER} {qid} {qoff}"
        if i == 4:
            props[MessageConst.FIRST_POP_TIME] = "42"
        records.append(_record(rnd, i, props, topic, qid, qoff))
    body = b"".join(records)
    fields = {"popTime": "1000", "invisibleTime": "6000", "reviveQid": "2", "restNum": "0"}
    if with_infos:
        fields["startOffsetInfo"] = ";".join([ei.start_offset_item(TOPIC, 0, 10), ei.start_offset_item(TOPIC, 1, 4),
                                              ei.start_offset_item(retry, 0, 7)])
        fields["msgOffsetInfo"] = ";".join([ei.msg_offset_item(TOPIC, 0, [10, 12, 13]), ei.msg_offset_item(TOPIC, 1, [4]),
                                            ei.msg_offset_item(retry, 0, [7])])
    if order:
        fields["orderCountInfo"] = ";".join([ei.queue_offset_order_count_item(TOPIC, 0, 12, 3),
                                             ei.queue_id_order_count_item(TOPIC, 1, 2)])
    rh = h.PopMessageResponseHeader.from_ext_fields(fields)
    header = h.PopMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=-1, max_msg_nums=32,
                                       invisible_time=6000, poll_time=0, born_time=0, init_mode=0, order=order)
    got, want = decode_pop_records(body), decode_records(body, check_crc=False)
    api_mod._attach_pop_ck(got, rh, header, BROKER)
    _reference_attach(want, rh, header, BROKER)
    assert got == want


# ---- the handlers, end to end against canned broker responses ----------------------------------

NOW = int(time.time() * 1000)


@pytest.fixture(autouse=True)
def _fresh_now() -> None:
    """The canned handles carry NOW as their pop time (60 s invisible): taken again for every test,
    so that a run reaching this file minutes after collection does not find them expired."""
    global NOW
    NOW = int(time.time() * 1000)


def _pop_response(records: list[tuple[bytes, str, int, int]], with_ck: bool = True) -> RemotingCommand:
    from orbitmq.broker.pop.message_rewrite import rewrite_popped_record

    body, starts, offs = [], {}, {}
    for rec, topic, qid, qoff in records:
        starts.setdefault((topic, qid), qoff)
        offs.setdefault((topic, qid), []).append(qoff)
        if with_ck:
            info = ei.build_extra_info(starts[(topic, qid)], NOW, 60000, 2, topic, BROKER, qid, qoff)
            rec = rewrite_popped_record(rec, extra_info=info, pop_time=NOW)
        body.append(rec)
    fields = {"popTime": str(NOW), "invisibleTime": "60000", "reviveQid": "2", "restNum": "0",
              "startOffsetInfo": ";".join(ei.start_offset_item(t, q, s) for (t, q), s in starts.items()),
              "msgOffsetInfo": ";".join(ei.msg_offset_item(t, q, o) for (t, q), o in offs.items())}
    return RemotingCommand.response(ResponseCode.SUCCESS, None, fields, b"".join(body))


class _Remoting:
    def __init__(self) -> None:
        self.pops: list[RemotingCommand] = []
        self.log: list[tuple[int, dict[str, str], bytes]] = []
        self.gate: asyncio.Event | None = None
        self.batch_code = ResponseCode.SUCCESS

    async def invoke(self, addr, request, timeout):  # noqa: ASYNC109
        self.log.append((request.code, dict(request.ext_fields), bytes(request.body)))
        if request.code == RequestCode.POP_MESSAGE:
            if self.gate is not None:
                await self.gate.wait()
            r = self.pops.pop(0)
            return RemotingCommand.response(r.code, r.remark, dict(r.ext_fields), r.body)
        if request.code == RequestCode.CHANGE_MESSAGE_INVISIBLETIME:
            return RemotingCommand.response(ResponseCode.SUCCESS, None, {
                "popTime": str(NOW + 1), "invisibleTime": request.ext_fields["invisibleTime"], "reviveQid": "2"})
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            return RemotingCommand.response(self.batch_code, "no" if self.batch_code else None)
        return RemotingCommand.response(ResponseCode.SUCCESS)


class _Cluster:
    def __init__(self) -> None:
        self.remoting = _Remoting()
        self.api = MQClientAPI(self.remoting)  # type: ignore[arg-type]

    async def group_config(self, group: str) -> None:
        return None

    async def broker_addr(self, name: str, topic: str | None = None) -> str:
        return f"addr-{name}"

    async def select_read_broker(self, topic: str, name: str | None) -> tuple[str, str]:
        return BROKER, f"addr-{BROKER}"


class _Context:
    def __init__(self, client_id: str = "client-1") -> None:
        self.md = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"))

    def invocation_metadata(self):
        return self.md

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"

    def time_remaining(self) -> float:
        return 25.0


def _service() -> tuple[MessagingService, ConsumerActivity, _Remoting]:
    cfg = ProxyConfig()
    cluster = _Cluster()
    clients = ClientManager(cfg, cluster)  # type: ignore[arg-type]
    consumer = ConsumerActivity(cfg, cluster, clients)  # type: ignore[arg-type]
    return MessagingService(None, None, consumer, None, clients), consumer, cluster.remoting  # type: ignore[arg-type]


def _receive_request(auto_renew: bool = False, expr: str = "*") -> spb.ReceiveMessageRequest:
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP), message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression=expr), batch_size=32,
        auto_renew=auto_renew)
    if not auto_renew:
        req.invisible_duration.FromMilliseconds(15000)
    req.long_polling_timeout.FromMilliseconds(20000)
    return req


async def _drain() -> None:
    for _ in range(30):
        await asyncio.sleep(0)


def _rich_records() -> list[tuple[bytes, str, int, int]]:
    rnd = random.Random(11)
    retry = f"%RETRY%{GROUP}"
    rich = {MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "RICH", MessageConst.TAGS: "b", MessageConst.KEYS: "k1 k2",
            "u1": "v1", "ü": "✓", MessageConst.SHARDING_KEY: "grp", MessageConst.TRACE_CONTEXT: "tr",
            MessageConst.TIMER_DELIVER_MS: str(NOW + 5000), MessageConst.BORN_HOST: "10.0.0.9:1",
            MessageConst.DLQ_ORIGIN_TOPIC: "OT", MessageConst.DLQ_ORIGIN_MESSAGE_ID: "OM"}
    return [(_record(rnd, 1, qid=0, qoff=10), TOPIC, 0, 10),
            (_record(rnd, 2, qid=1, qoff=11), TOPIC, 1, 11),
            (_record(rnd, 3, {MessageConst.RETRY_TOPIC: TOPIC, MessageConst.TAGS: "a"}, retry, 0, 7), retry, 0, 7),
            (_record(rnd, 4, rich, qid=0, qoff=12), TOPIC, 0, 12),
            (_record(rnd, 5, {MessageConst.DELAY_TIME_LEVEL: "3"}, qid=0, qoff=13), TOPIC, 0, 13)]


def test_receive_responses_match_reference_conversion() -> None:
    async def run() -> None:
        service, _consumer, remoting = _service()
        response = _pop_response(_rich_records())
        remoting.pops.append(response)
        got = [r async for r in service.ReceiveMessage(_receive_request(), _Context())]
        # The reference: the general decoder, the broker's POP_CK plus the CommitLog offset, the converter.
        expected = [spb.ReceiveMessageResponse(status=pb.Status(code=Code.OK, message="OK"))]
        for msg in decode_records(response.body, check_crc=False):
            msg.properties[MessageConst.POP_CK] += f" {msg.commit_log_offset}"
            msg.properties.setdefault(MessageConst.FIRST_POP_TIME, str(NOW))
            msg.topic = TOPIC
            expected.append(spb.ReceiveMessageResponse(message=converter.build_proto_message(msg)))
        assert len(got) == len(expected) + 1
        for g, e in zip(got, expected, strict=False):
            assert g.SerializeToString(deterministic=True) == e.SerializeToString(deterministic=True)
        assert got[-1].WhichOneof("content") == "delivery_timestamp"

        entries = [spb.AckMessageEntry(message_id=r.message.system_properties.message_id,
                                       receipt_handle=r.message.system_properties.receipt_handle) for r in got[1:-1]]
        ack = await service.AckMessage(spb.AckMessageRequest(group=pb.Resource(name=GROUP),
                                                             topic=pb.Resource(name=TOPIC), entries=entries), _Context())
        assert ack.status.code == Code.OK and [e.status.code for e in ack.entries] == [Code.OK] * len(entries)
        assert [c for c, _f, _b in remoting.log] == [RequestCode.POP_MESSAGE, RequestCode.BATCH_ACK_MESSAGE]

    asyncio.run(run())


def test_receive_statuses_and_filtering() -> None:
    async def run() -> None:
        service, _consumer, remoting = _service()
        for code, status in ((ResponseCode.POLLING_FULL, (Code.TOO_MANY_REQUESTS, "polling full")),
                             (ResponseCode.POLLING_TIMEOUT, (Code.MESSAGE_NOT_FOUND, "no new message")),
                             (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, (Code.CONSUMER_GROUP_NOT_FOUND, "nope"))):
            remoting.pops.append(RemotingCommand.response(code, "nope", {"popTime": "1", "invisibleTime": "1",
                                                                         "reviveQid": "0", "restNum": "0"}))
            got = [r async for r in service.ReceiveMessage(_receive_request(), _Context())]
            assert (got[0].status.code, got[0].status.message) == status and len(got) == 2
        # Not the client's tag: acked in the background; too many attempts: to the DLQ.
        rnd = random.Random(5)
        recs = [(_record(rnd, i, {MessageConst.TAGS: t}, qoff=20 + i, reconsume=rc), TOPIC, 3, 20 + i)
                for i, (t, rc) in enumerate([("a", 0), ("c", 0), ("b", 17), ("b", 1)])]
        remoting.pops.append(_pop_response(recs))
        remoting.log.clear()
        got = [r async for r in service.ReceiveMessage(_receive_request(expr="a||b"), _Context())]
        await _drain()
        assert [r.message.system_properties.queue_offset for r in got[1:-1]] == [20, 23]
        assert sorted(c for c, _f, _b in remoting.log) == sorted([
            RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE, RequestCode.CONSUMER_SEND_MSG_BACK,
            RequestCode.ACK_MESSAGE])
        # Refused before any broker call, with the same codes as before.
        remoting.log.clear()
        bad = _receive_request()
        bad.batch_size = 0
        got = [r async for r in service.ReceiveMessage(bad, _Context())]
        assert got[0].status.code == Code.BAD_REQUEST
        bad = _receive_request()
        bad.group.name = "bad group!"
        got = [r async for r in service.ReceiveMessage(bad, _Context())]
        assert got[0].status.code == Code.ILLEGAL_CONSUMER_GROUP
        got = [r async for r in service.ReceiveMessage(_receive_request(), _Context(" "))]
        assert [r.status.code for r in got] == [Code.CLIENT_ID_REQUIRED]
        assert remoting.log == []

    asyncio.run(run())


@pytest.mark.parametrize("spins", range(0, 14))
@pytest.mark.parametrize("auto_renew", [False, True])
def test_cancelled_receive_nacks_what_it_did_not_deliver(spins: int, auto_renew: bool) -> None:
    """Wherever the client gives up, each popped message is either delivered or nacked, never both."""

    async def run() -> None:
        service, consumer, remoting = _service()
        rnd = random.Random(spins)
        remoting.pops.append(_pop_response([(_record(rnd, i, qoff=60 + i), TOPIC, 3, 60 + i) for i in range(3)]))
        remoting.gate = asyncio.Event()
        seen: list[spb.ReceiveMessageResponse] = []

        async def client() -> None:
            async for r in service.ReceiveMessage(_receive_request(auto_renew), _Context()):
                seen.append(r)
                await asyncio.sleep(0)

        task = asyncio.ensure_future(client())
        for _ in range(3):
            await asyncio.sleep(0)
        remoting.gate.set()
        for _ in range(spins):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):  # the late spins find it finished
            await task
        await _drain()
        delivered = [r.message.system_properties.receipt_handle for r in seen if r.HasField("message")]
        nacks = [f for c, f, _b in remoting.log if c == RequestCode.CHANGE_MESSAGE_INVISIBLETIME]
        nacked = {f["extraInfo"] for f in nacks}
        assert len(nacked) == len(nacks) and all(f["invisibleTime"] == "1000" for f in nacks)
        assert len(set(delivered) | nacked) == 3
        # The message handed over when the client gave up may not have left: it is nacked too.
        assert not set(delivered[:-1]) & nacked
        if auto_renew:  # what is nacked is no longer renewed
            held = {v.handle for v in consumer.renewer._held.values()}
            assert held == set(delivered) - nacked
        await consumer.shutdown()

    asyncio.run(run())


def test_ack_uses_renewed_handle_and_per_entry_fallback() -> None:
    async def run() -> None:
        service, consumer, remoting = _service()
        rnd = random.Random(1)
        remoting.pops.append(_pop_response([(_record(rnd, i, qoff=50 + i), TOPIC, 3, 50 + i) for i in range(2)]))
        got = [r async for r in service.ReceiveMessage(_receive_request(auto_renew=True), _Context())]
        msgs = [r.message for r in got[1:-1]]
        for held in consumer.renewer._held.values():
            held.visible_at = int(time.time() * 1000) + 1000  # due for renewal
        await consumer.renewer.renew_due()
        renewed = {v.message_id: v.handle for v in consumer.renewer._held.values()}
        assert set(renewed) == {m.system_properties.message_id for m in msgs}
        remoting.log.clear()
        remoting.batch_code = ResponseCode.SYSTEM_ERROR  # the batch fails: one ACK_MESSAGE per entry
        entries = [spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                       receipt_handle=m.system_properties.receipt_handle) for m in msgs]
        ack = await service.AckMessage(spb.AckMessageRequest(group=pb.Resource(name=GROUP),
                                                             topic=pb.Resource(name=TOPIC), entries=entries), _Context())
        assert ack.status.code == Code.OK
        assert [e.receipt_handle for e in ack.entries] == [m.system_properties.receipt_handle for m in msgs]
        acked = [f["extraInfo"] for c, f, _b in remoting.log if c == RequestCode.ACK_MESSAGE]
        assert sorted(acked) == sorted(renewed.values())
        assert consumer.renewer._held == {}
        await consumer.shutdown()

    asyncio.run(run())


def test_duration_ms_matches_protobuf() -> None:
    from orbitmq.proto.pool import Duration

    for seconds, nanos in ((0, 0), (20, 0), (1, 999_999_999), (0, 1_500_000), (-3, -1_500_000), (0, -999_999),
                           (315576000000, 999_999_999), (-315576000000, -999_999_999)):
        d = Duration(seconds=seconds, nanos=nanos)
        assert consumer_mod.duration_ms(d) == d.ToMilliseconds()
