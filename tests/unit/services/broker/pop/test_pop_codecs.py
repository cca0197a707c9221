"""POP's wire strings and revive-log bodies: ExtraInfo, offset infos, checkpoint/ack JSON, BitSet."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.broker.pop import checkpoint as cp
from orbitmq.broker.pop.order_info import ConsumerOrderInfoManager
from orbitmq.common import extra_info as ei
from orbitmq.common.extra_info import build_pop_retry_topic, parse_normal_topic

names = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=" ;"), min_size=1, max_size=20)
longs = st.integers(0, 2**62)


@given(longs, longs, longs, st.integers(0, 999), names, names, st.integers(0, 1024), longs,
       st.sampled_from(["T", "%RETRY%g_T", "%RETRY%g+T"]))
def test_extra_info_round_trip(ck, pop_time, invisible, rqid, broker, group, qid, offset, topic) -> None:
    text = ei.build_extra_info(ck, pop_time, invisible, rqid, topic, broker, qid, offset)
    info = ei.parse_extra_info(text)
    assert (info.ck_queue_offset, info.pop_time, info.invisible_time, info.revive_qid, info.broker_name,
            info.queue_id, info.msg_queue_offset) == (ck, pop_time, invisible, rqid, broker, qid, offset)
    assert info.retry == {"T": "0", "%RETRY%g_T": "1", "%RETRY%g+T": "2"}[topic]
    assert info.is_order == (rqid == 999)


def test_extra_info_matches_rocketmq_layout_and_real_topic() -> None:
    text = ei.build_extra_info(5, 1700000000000, 30000, 3, "%RETRY%G_T", "broker-a", 1, 7)
    assert text == "5 1700000000000 30000 3 1 broker-a 1 7"
    info = ei.parse_extra_info(text)
    assert info.real_topic("T", "G") == "%RETRY%G_T" == build_pop_retry_topic("T", "G")
    assert parse_normal_topic("%RETRY%G_T", "G") == "T"


@pytest.mark.parametrize("bad", ["", "1 2 3", "a 1 2 3 0 b 0", "1 2 3 4 7 b 0", "-1 2 3 4 0 b 0",
                                 "1 2 3 99999999999 0 b 0", "1 2 3 4 0 b 0 x"])
def test_bad_extra_info_is_refused(bad: str) -> None:
    with pytest.raises(ei.ExtraInfoError):
        ei.parse_extra_info(bad)


def test_offset_infos_parse_as_the_client_reads_them() -> None:
    start = ";".join([ei.start_offset_item("T", 0, 10), ei.start_offset_item("%RETRY%G_T", 0, 3)])
    msgs = ";".join([ei.msg_offset_item("T", 0, [10, 12]), ei.msg_offset_item("%RETRY%G_T", 0, [3])])
    assert ei.parse_start_offset_info(start) == {"0@0": 10, "1@0": 3}
    assert ei.parse_msg_offset_info(msgs) == {"0@0": [10, 12], "1@0": [3]}
    with pytest.raises(ei.ExtraInfoError):
        ei.parse_start_offset_info("0 0 1;0 0 2")


@given(longs, longs, longs, st.lists(st.integers(0, 10_000), min_size=1, max_size=32, unique=True), names, names)
def test_checkpoint_json_round_trip(start, pop_time, invisible, diffs, topic, group) -> None:
    ck = cp.PopCheckPoint(start_offset=start, pop_time=pop_time, invisible_time=invisible, num=len(diffs),
                          queue_id=2, topic=topic, cid=group, broker_name="b", queue_offset_diff=sorted(diffs))
    body = ck.to_json()
    assert set(json.loads(body)) >= {"so", "pt", "it", "bm", "n", "q", "t", "c", "ro", "d", "bn"}
    back = cp.PopCheckPoint.from_json(body)
    assert back == ck
    for i, d in enumerate(sorted(diffs)):
        assert back.index_of_ack(start + d) == i and back.ack_offset_by_index(i) == start + d


def test_ack_bodies_and_bad_payloads() -> None:
    ack = cp.AckMsg(ack_offset=7, start_offset=5, consumer_group="G", topic="T", queue_id=1, pop_time=9,
                    broker_name="b")
    assert cp.AckMsg.from_json(ack.to_json()) == ack
    assert json.loads(ack.to_json())["ao"] == 7
    batch = cp.BatchAckMsg(ack_offset=-1, start_offset=5, consumer_group="G", topic="T", queue_id=1, pop_time=9,
                           broker_name="b", ack_offset_list=[5, 8])
    assert cp.BatchAckMsg.from_json(batch.to_json()).offsets() == [5, 8]
    for bad in (b"", b"[]", b"{", b'{"so": "x"}', b'{"so": 1, "pt": 1, "it": 1, "n": 99, "q": 0, "t": "T", "c": "G"}'):
        with pytest.raises(cp.RevivePayloadError):
            cp.PopCheckPoint.from_json(bad)


@given(st.lists(st.integers(0, 2000), max_size=64, unique=True))
def test_bitset_matches_java_to_byte_array(indexes) -> None:
    assert cp.decode_bitset(cp.encode_bitset(indexes)) == sorted(indexes)


def test_batch_ack_body_round_trip() -> None:
    acks = [cp.BatchAck("G", "T", "1", 10, 0, 3, 99, 30000, [0, 2, 9])]
    broker, parsed = cp.parse_batch_ack_body(cp.build_batch_ack_body("b", acks))
    assert broker == "b" and parsed == acks


def test_order_info_blocks_until_acked_and_survives_persist(tmp_path) -> None:
    manager = ConsumerOrderInfoManager(str(tmp_path))
    pop_time = int(time.time() * 1000)
    counts, info = manager.update(None, "T", "G", 0, pop_time=pop_time, invisible_time=60_000, offsets=[4, 5])
    assert counts == {4: 0, 5: 0} and "qo0%4" in info
    assert manager.check_block(None, "T", "G", 0)
    assert manager.commit_and_next("T", "G", 0, 4, pop_time) == 5
    assert manager.commit_and_next("T", "G", 0, 5, pop_time - 1) == -2  # a stale pop's handle
    assert manager.commit_and_next("T", "G", 0, 7, pop_time) == -1
    manager.persist()
    reloaded = ConsumerOrderInfoManager(str(tmp_path))
    reloaded.load()
    assert reloaded.check_block(None, "T", "G", 0)
    assert reloaded.commit_and_next("T", "G", 0, 5, pop_time) == 6
    assert not reloaded.check_block(None, "T", "G", 0)
    counts, _ = reloaded.update(None, "T", "G", 0, pop_time=2000, invisible_time=1, offsets=[6])
    assert counts == {6: 0}


def test_order_info_counts_redeliveries_and_unblocks_at_the_next_visible_time(tmp_path) -> None:
    manager = ConsumerOrderInfoManager(str(tmp_path))
    now = int(time.time() * 1000)
    manager.update("a1", "T", "G", 0, pop_time=now, invisible_time=60_000, offsets=[4, 5])
    assert not manager.check_block("a1", "T", "G", 0)  # the same attempt retrying its request
    assert manager.check_block("a2", "T", "G", 0)
    manager.commit_and_next("T", "G", 0, 4, now)
    # The invisible time of the batch passed: offset 5 is delivered again, counted once more.
    counts, info = manager.update("a2", "T", "G", 0, pop_time=now, invisible_time=60_000, offsets=[5, 6])
    assert counts == {5: 1, 6: 0} and info == "0 qo0%5 1;0 qo0%6 0;0 0 0"
    counts, _ = manager.update("a2", "T", "G", 0, pop_time=now, invisible_time=60_000, offsets=[5, 6])
    assert counts == {5: 1, 6: 0}  # the same attempt again is not a new delivery
    assert manager.check_block(None, "T", "G", 0)
    assert manager.update_next_visible_time("T", "G", 0, 5, now, now - 1)
    assert manager.check_block(None, "T", "G", 0)  # offset 6 is still invisible
    assert manager.update_next_visible_time("T", "G", 0, 6, now, now - 1)
    assert not manager.check_block(None, "T", "G", 0)
    assert not manager.update_next_visible_time("T", "G", 0, 6, now - 1, now)  # a stale pop's handle
