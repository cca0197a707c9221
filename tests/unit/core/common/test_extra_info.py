"""orbitmq.common.extra_info, the one ExtraInfoUtil the broker, the clients and the proxy share:
the real topic behind a retry flag and the POP response-header offset infos."""

from __future__ import annotations

import pytest

from orbitmq.common import extra_info as ei


@pytest.mark.parametrize(("topic", "flag", "want"), [
    ("T", "0", "T"),
    ("T", "1", "%RETRY%G_T"),
    ("T", "2", "%RETRY%G+T"),
    ("%RETRY%G_T", "1", "%RETRY%G_T"),  # the caller already named the retry topic
])
def test_real_topic_follows_the_retry_flag(topic: str, flag: str, want: str) -> None:
    assert ei.real_topic(topic, "G", flag) == want
    assert ei.retry_flag(want) == flag


def test_real_topic_refuses_an_unknown_flag() -> None:
    with pytest.raises(ei.ExtraInfoError):
        ei.real_topic("T", "G", "7")


def test_offset_infos_round_trip_and_share_their_keys() -> None:
    start = ";".join([ei.start_offset_item("T", 0, 5), ei.start_offset_item("%RETRY%G_T", 0, 9)])
    msgs = ";".join([ei.msg_offset_item("T", 0, [5, 7]), ei.msg_offset_item("%RETRY%G_T", 0, [9])])
    orders = ";".join([ei.queue_offset_order_count_item("T", 0, 7, 3), ei.queue_id_order_count_item("T", 0, 2)])
    assert start == "0 0 5;1 0 9" and msgs == "0 0 5,7;1 0 9" and orders == "0 qo0%7 3;0 0 2"
    assert ei.parse_start_offset_info(start) == {ei.start_offset_info_key("T", 0): 5,
                                                 ei.start_offset_info_key("%RETRY%G_T", 0): 9}
    assert ei.parse_msg_offset_info(msgs) == {"0@0": [5, 7], "1@0": [9]}
    assert ei.parse_order_count_info(orders) == {ei.queue_offset_map_key("T", 0, 7): 3, "0@0": 2}
    assert ei.parse_start_offset_info(None) == {} and ei.parse_msg_offset_info("") == {}


@pytest.mark.parametrize("bad", ["0 0", "0 0 x", "0 0 1;0 0 2"])
def test_bad_offset_info_is_refused(bad: str) -> None:
    with pytest.raises(ei.ExtraInfoError):
        ei.parse_start_offset_info(bad)
