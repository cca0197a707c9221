"""RocketMQ's trace text format (orbitmq.common.trace_codec) and the proxy tracer's bounded queue."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from orbitmq.common import trace_codec as tc
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.trace import ProxyTracer


def test_pub_record_matches_upstream_layout() -> None:
    record = tc.encode_pub(timestamp=1, region_id="DefaultRegion", group="PG", topic="T", msg_id="ID", tags=None,
                           keys="k1 k2", store_host="10.0.0.1:10911", body_length=5, cost_time=3, msg_type=0,
                           offset_msg_id="OFF", success=True)
    assert record == "\u0001".join(["Pub", "1", "DefaultRegion", "PG", "T", "ID", "null", "k1 k2",
                                    "10.0.0.1:10911", "5", "3", "0", "OFF", "true"]) + "\u0002"
    (decoded,) = tc.decode(record)
    assert (decoded.type, decoded.tags, decoded.keys, decoded.offset_msg_id, decoded.success) == (
        tc.TraceType.PUB, "", "k1 k2", "OFF", True)


def test_decoder_tolerates_upstream_variants_and_our_client_host() -> None:
    old_pub = "\u0001".join(["Pub", "1", "R", "G", "T", "ID", "t", "k", "h", "1", "2", "0", "false"]) + "\u0002"
    cloud_after = "\u0001".join(["SubAfter", "rq", "ID", "4", "true", "k", "0"]) + "\u0001\u0002"
    ours = tc.encode_sub_before(timestamp=9, region_id="R", group="CG", request_id="rq", msg_id="ID", retry_times=2,
                                keys=None, client_host="1.2.3.4:5/cid")
    records = tc.decode(old_pub + cloud_after + ours + "Junk\u0001x\u0002")
    assert [r.type for r in records] == [tc.TraceType.PUB, tc.TraceType.SUB_AFTER, tc.TraceType.SUB_BEFORE]
    assert records[0].success is False and records[0].offset_msg_id == ""
    assert records[1].context_code == 0 and records[1].group == ""
    assert (records[2].retry_times, records[2].client_host) == (2, "1.2.3.4:5/cid")
    after = tc.encode_sub_after(request_id="rq", msg_id="ID", cost_time=7, success=False, keys=None, context_code=4,
                                timestamp=5, group="CG")
    assert after.split("\u0001")[6:] == ["4", "5", "CG\u0002"]
    end = tc.encode_end_transaction(timestamp=1, region_id="R", group="PG", topic="T", msg_id="ID", tags=None,
                                    keys=None, store_host="h", transaction_id="tx", transaction_state="COMMIT_MESSAGE",
                                    from_transaction_check=False)
    (e,) = tc.decode(end)
    assert (e.msg_type, e.transaction_state, e.from_transaction_check) == (2, "COMMIT_MESSAGE", False)


def test_pack_splits_bodies_at_the_limit() -> None:
    assert tc.pack(["a" * 6, "b" * 6, "c" * 3], limit=10) == ["a" * 6, "b" * 6 + "c" * 3]


def test_tracer_queue_is_bounded_and_drops_are_counted() -> None:
    async def go() -> None:
        config = ProxyConfig(trace_enable=True, trace_queue_capacity=3, trace_msg_batch_num=20)
        sent: list = []

        async def send_message(*args, **kwargs):
            sent.append(args)

        async def select_write_queue(topic, group):
            return SimpleNamespace(broker_addr="b:1", broker_name="b", queue_id=0)

        cluster = SimpleNamespace(select_write_queue=select_write_queue, api=SimpleNamespace(send_message=send_message))
        tracer = ProxyTracer(config, cluster)  # type: ignore[arg-type]
        for i in range(5):
            tracer.on_end_transaction("G", "T", f"id{i}", "tx", "COMMIT_MESSAGE", False, "h")
        assert tracer.dropped == 2 and len(tracer._queue) == 3
        tracer.start()
        await tracer.shutdown()  # flushes what is queued
        assert tracer.sent_records == 3 and len(sent) == 1
        msg = sent[0][2]
        assert msg.topic == "RMQ_SYS_TRACE_TOPIC" and msg.properties["KEYS"] == "id0 id1 id2"

    asyncio.run(go())
