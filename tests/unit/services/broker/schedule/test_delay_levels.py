"""messageDelayLevel parsing, the put-path redirect and config/delayOffset.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orbitmq.broker.schedule.delay_levels import DelayLevelTable, parse_delay_levels
from orbitmq.broker.schedule.delay_offset import DelayOffsetManager
from orbitmq.broker.schedule.redirect import DelayRedirect
from orbitmq.broker.store.model import MessageExtBrokerInner, PutMessageStatus
from orbitmq.common.message import string_to_properties
from orbitmq.common.sysflag import TRANSACTION_PREPARED_TYPE


def test_default_levels_match_upstream() -> None:
    table = DelayLevelTable()
    assert table.max_level == 18
    assert [table.delay_of(level) for level in (1, 3, 5, 17, 18)] == [1000, 10_000, 60_000, 3_600_000, 7_200_000]


def test_units_and_bad_items() -> None:
    assert parse_delay_levels("500s 2m 1h 1d") == {1: 500_000, 2: 120_000, 3: 3_600_000, 4: 86_400_000}
    for bad in ("", "1x", "s", "1.5s", "-1s"):
        with pytest.raises(ValueError, match="messageDelayLevel"):
            parse_delay_levels(bad)


def _msg(**props: str) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic="T", queue_id=3, properties=dict(props))


def test_redirect_parks_in_schedule_topic_and_caps_the_level() -> None:
    redirect = DelayRedirect(DelayLevelTable("1s 2s 3s"), lambda: 1_000)
    msg = _msg(DELAY="7", TAGS="a")
    assert redirect(msg) is None
    assert (msg.topic, msg.queue_id, msg.tags_code) == ("SCHEDULE_TOPIC_XXXX", 2, 4_000)
    assert string_to_properties(msg.properties_string) == {"DELAY": "3", "TAGS": "a", "REAL_TOPIC": "T",
                                                           "REAL_QID": "3"}


def test_redirect_leaves_other_messages_alone() -> None:
    redirect = DelayRedirect(DelayLevelTable(), lambda: 0)
    for msg in (_msg(), _msg(DELAY="0"), _msg(DELAY="-2")):
        assert redirect(msg) is None and msg.topic == "T"
    prepared = _msg(DELAY="2")
    prepared.sys_flag = TRANSACTION_PREPARED_TYPE  # a half message waits for its commit first
    assert redirect(prepared) is None and prepared.topic == "T"
    refused = redirect(_msg(DELAY="soon"))
    assert refused is not None and refused.status is PutMessageStatus.MESSAGE_ILLEGAL


def test_delay_offsets_round_trip_and_upstream_format(tmp_path: Path) -> None:
    manager = DelayOffsetManager(str(tmp_path))
    assert manager.load() and manager.get(1) == 0
    manager.update(1, 12)
    manager.update(3, 4)
    manager.persist()
    written = json.loads((tmp_path / "delayOffset.json").read_text())
    # ScheduleMessageService#encode's shape: the table and its DataVersion
    assert written["offsetTable"] == {"1": 12, "3": 4}
    assert set(written["dataVersion"]) == {"stateVersion", "timestamp", "counter"}
    again = DelayOffsetManager(str(tmp_path))
    assert again.load() and (again.get(1), again.get(3)) == (12, 4)

    # Apache RocketMQ writes the level keys bare (fastjson); such a file still loads.
    (tmp_path / "delayOffset.json").write_text('{"offsetTable":{1:7,18:2}}')
    upstream = DelayOffsetManager(str(tmp_path))
    assert upstream.load() and (upstream.get(1), upstream.get(18)) == (7, 2)
