"""The POP path's shortcuts give exactly what the general code gives for the same input."""

from __future__ import annotations

import itertools
import struct

import pytest

from orbitmq.broker.pop.message_rewrite import rewrite_popped, rewrite_popped_record
from orbitmq.broker.pop.pop_processor import takes_everything
from orbitmq.broker.pop.revive import record_tag_and_body
from orbitmq.common.filter import build_message_filter
from orbitmq.common.message_codec import BODY_CRC_POSITION, RecordError, decode_record, encode_record

EXTRA = "0 1700000000000 60000 3 0 broker-a 3 12345"

PROPS = [
    "",
    "UNIQ_KEY\x01ABC\x02TAGS\x01TagA\x02",
    "UNIQ_KEY\x01ABC\x02TAGS\x01TagA",  # no final separator
    "A\x011\x02A\x012\x02",  # duplicate name
    "\x02\x02B\x01x\x02NOSEP\x02\x01v\x02",  # empty and unusable items
    "POP_CK\x01old ck\x02KEYS\x01k\x02",  # already popped once
    "1ST_POP_TIME\x0117\x02POP_CK\x01old\x02",
    "K\x01värde ✓\x02",
]
HOSTS = [(("127.0.0.1", 50000), ("10.0.0.2", 10911)), (("::1", 1), ("127.0.0.1", 10911)),
         (("127.0.0.1", 5), ("fe80::1", 10911))]


def _record(props: str, hosts: tuple, topic: str = "TopicA", body: bytes = b"x" * 100) -> bytes:
    born, store = hosts
    return encode_record(topic=topic, queue_id=3, body=body, flag=7, queue_offset=12345, physical_offset=987654321,
                         sys_flag=0, born_timestamp=1700000000000, born_host=born, store_timestamp=1700000000001,
                         store_host=store, reconsume_times=2, prepared_transaction_offset=0, properties=props)


@pytest.mark.parametrize(("props", "hosts", "shown", "times"), list(itertools.product(
    PROPS, HOSTS, [None, "Shown", "%RETRY%g_t"], [None, 0, 5])))
def test_rewrite_popped_record_matches_decode_and_encode(props: str, hosts: tuple, shown: str | None,
                                                         times: int | None) -> None:
    record = _record(props, hosts)
    expected = rewrite_popped(record, extra_info=EXTRA, pop_time=1700000000123, shown_topic=shown,
                              reconsume_times=times)[0]
    assert rewrite_popped_record(record, extra_info=EXTRA, pop_time=1700000000123, shown_topic=shown,
                                 reconsume_times=times) == expected


def test_rewrite_popped_record_recomputes_a_wrong_body_crc_like_encode() -> None:
    record = bytearray(_record(PROPS[1], HOSTS[0]))
    struct.pack_into(">i", record, BODY_CRC_POSITION, 12345)
    expected = rewrite_popped(bytes(record), extra_info=EXTRA, pop_time=1)[0]
    assert rewrite_popped_record(bytes(record), extra_info=EXTRA, pop_time=1) == expected


def test_rewrite_popped_record_empty_body_and_odd_ports() -> None:
    for born, store in ((("127.0.0.1", 0), ("127.0.0.1", 65535)),):
        record = _record(PROPS[1], (born, store), body=b"")
        assert rewrite_popped_record(record, extra_info=EXTRA, pop_time=1) == \
            rewrite_popped(record, extra_info=EXTRA, pop_time=1)[0]


def test_rewrite_popped_record_fails_like_the_general_path() -> None:
    record = _record(PROPS[1], HOSTS[0])
    with pytest.raises(RecordError):
        rewrite_popped(record, extra_info=EXTRA, pop_time=1, shown_topic="T" * 200)
    with pytest.raises(RecordError):
        rewrite_popped_record(record, extra_info=EXTRA, pop_time=1, shown_topic="T" * 200)
    truncated = record[:-5]
    with pytest.raises(RecordError):
        rewrite_popped(truncated, extra_info=EXTRA, pop_time=1)
    with pytest.raises(RecordError):
        rewrite_popped_record(truncated, extra_info=EXTRA, pop_time=1)
    with pytest.raises(RecordError):
        rewrite_popped_record(record[:20], extra_info=EXTRA, pop_time=1)


@pytest.mark.parametrize(("kind", "expr", "everything"), [
    ("TAG", "*", True), ("TAG", "", True), ("TAG", None, True), ("TAG", "A", False), ("TAG", "A||B", False),
    ("TAG", " || ", False), ("SQL92", "a > 1", False)])
def test_takes_everything(kind: str, expr: str | None, everything: bool) -> None:
    message_filter = build_message_filter(kind, expr)
    assert takes_everything(message_filter) is everything
    if everything:
        # The filter it stands in for passes every entry at both stages.
        for code, props in ((None, None), (123, {}), (-5, {"TAGS": "X"})):
            assert message_filter.is_matched_by_consume_queue(code)
            assert message_filter.is_matched_by_commit_log(props)


@pytest.mark.parametrize(("props", "hosts"), list(itertools.product(
    PROPS + ["TAGS\x01ck\x02UNIQ_KEY\x01u\x02", "TAGS\x01ack", "TAGS\x01a\x02TAGS\x01bAck\x02"], HOSTS)))
def test_revive_record_tag_and_body_match_decode(props: str, hosts: tuple) -> None:
    for body in (b"", b'{"so":1,"pt":2}'):
        record = _record(props, hosts, topic="rmq_sys_REVIVE_LOG_c", body=body)
        msg = decode_record(record, 0, check_crc=False)
        assert record_tag_and_body(record) == (msg.tags, msg.body)


def test_revive_record_tag_and_body_rejects_like_decode() -> None:
    record = _record(PROPS[1], HOSTS[0])
    for bad in (record[:-1], record[:10], b"\0" * 8 + record[8:]):
        with pytest.raises(RecordError):
            record_tag_and_body(bad)
    # Trailing bytes after a complete record are not an error for decode_record either.
    msg = decode_record(record + b"\0", 0, check_crc=False)
    assert record_tag_and_body(record + b"\0") == (msg.tags, msg.body)
