"""Metadata JSON files: RocketMQ shapes, atomic writes with .bak, corrupt-file fallback, reload."""

from __future__ import annotations

import json
import os

import pytest

from orbitmq.broker.store.metadata import (
    ConsumerOffsetManager,
    SubscriptionGroupManager,
    TopicConfigManager,
    load_json_with_backup,
    write_json_atomic,
)
from orbitmq.broker.store.metadata import json_file as jf
from orbitmq.common import constants as C
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig, TopicMessageType, normalize_attributes


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ---- dataclasses -------------------------------------------------------------------------
def test_topic_config_json_names_and_message_type():
    tc = TopicConfig("T", attributes={"+message.type": "FIFO"})
    assert tc.attributes == {"message.type": "FIFO"}
    assert tc.message_type is TopicMessageType.FIFO
    assert TopicConfig("U").message_type is TopicMessageType.NORMAL
    d = tc.to_json_dict()
    assert d == {
        "topicName": "T",
        "readQueueNums": 16,
        "writeQueueNums": 16,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
        "attributes": {"message.type": "FIFO"},
    }
    # Unknown upstream fields survive a round trip.
    back = TopicConfig.from_json_dict({**d, "futureField": 1})
    assert back == tc and back.to_json_dict()["futureField"] == 1
    with pytest.raises(ValueError):
        TopicConfig("V", attributes={"message.type": "BOGUS"})
    with pytest.raises(ValueError):
        TopicConfig.from_json_dict({"readQueueNums": 1})
    assert normalize_attributes({"-message.type": ""}, {"message.type": "FIFO", "x": "1"}) == {"x": "1"}


def test_subscription_group_config_json_names():
    d = SubscriptionGroupConfig("G").to_json_dict()
    assert d == {
        "groupName": "G",
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "consumeMessageOrderly": False,
        "retryQueueNums": 1,
        "retryMaxTimes": 16,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "groupSysFlag": 0,
        "consumeTimeoutMinute": 15,
        "groupRetryPolicy": {"type": "CUSTOMIZED"},
        "attributes": {},
    }
    cfg = SubscriptionGroupConfig.from_json_dict({**d, "retryMaxTimes": 3, "subscriptionDataSet": [{"topic": "T"}]})
    assert cfg.retry_max_times == 3
    assert cfg.to_json_dict()["subscriptionDataSet"] == [{"topic": "T"}]


# ---- atomic file -------------------------------------------------------------------------
def test_atomic_write_keeps_bak_and_leaves_no_temp(tmp_path, monkeypatch):
    path = str(tmp_path / "config" / "x.json")
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace
    monkeypatch.setattr(jf.os, "replace", lambda a, b: (replaced.append((a, b)), real_replace(a, b)))
    write_json_atomic(path, {"v": 1})
    write_json_atomic(path, {"v": 2})
    assert _read(path) == {"v": 2}
    assert _read(path + ".bak") == {"v": 1}
    assert sorted(os.listdir(tmp_path / "config")) == ["x.json", "x.json.bak"]
    # The main file is only ever replaced by rename of a complete temp file beside it.
    into_main = [os.fspath(src) for src, dst in replaced if os.fspath(dst) == path]
    assert len(into_main) == 2
    assert all(os.path.dirname(src) == os.path.dirname(path) and os.path.basename(src).startswith("x.json.")
               and src.endswith(".tmp") for src in into_main)


def test_interrupted_write_leaves_previous_version(tmp_path, monkeypatch):
    path = str(tmp_path / "x.json")
    write_json_atomic(path, {"v": 1})

    def boom(_a, _b):
        raise OSError("power cut")

    monkeypatch.setattr(jf.os, "replace", boom)
    with pytest.raises(OSError):
        write_json_atomic(path, {"v": 2})
    monkeypatch.undo()
    assert _read(path) == {"v": 1}
    assert load_json_with_backup(path) == ({"v": 1}, path)


def test_corrupt_main_falls_back_to_bak(tmp_path):
    path = str(tmp_path / "x.json")
    write_json_atomic(path, {"v": 1})
    write_json_atomic(path, {"v": 2})
    with open(path, "w") as f:
        f.write('{"v": 3, trunc')
    assert load_json_with_backup(path) == ({"v": 1}, path + ".bak")
    assert not os.path.exists(path)  # deleted, so the next write does not back it up
    write_json_atomic(path, {"v": 4})
    assert _read(path + ".bak") == {"v": 1}
    assert load_json_with_backup(str(tmp_path / "missing.json")) == (None, None)


# ---- TopicConfigManager --------------------------------------------------------------------
def test_topic_manager_system_topics(tmp_path):
    m = TopicConfigManager(str(tmp_path), broker_cluster_name="C1", broker_name="b1")
    t = m.select_topic_config
    assert (t("TBW102").write_queue_nums, t("TBW102").perm) == (8, 7)
    assert t("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18
    assert t("SELF_TEST_TOPIC").write_queue_nums == 1
    assert t("BenchmarkTest").write_queue_nums == 1024
    assert (t("C1").write_queue_nums, t("C1").perm) == (16, 7)
    assert (t("b1").write_queue_nums, t("b1").perm) == (1, 7)
    assert t("OFFSET_MOVED_EVENT").write_queue_nums == 1
    assert t("C1_REPLY_TOPIC").write_queue_nums == 1
    assert t("rmq_sys_REVIVE_LOG_C1").write_queue_nums == 8
    assert t("rmq_sys_SYNC_BROKER_MEMBER_b1").perm == C.PERM_INHERIT
    assert t("RMQ_SYS_TRANS_HALF_TOPIC") and t("RMQ_SYS_TRANS_OP_HALF_TOPIC")
    assert t("rmq_sys_wheel_timer")
    assert t("RMQ_SYS_TRACE_TOPIC") is None  # traceTopicEnable is off by default
    off = TopicConfigManager(str(tmp_path), auto_create_topic_enable=False, broker_topic_enable=False)
    assert off.select_topic_config("TBW102") is None
    assert off.select_topic_config("broker-a").perm == C.PERM_INHERIT


async def test_topic_manager_persist_reload_and_version(tmp_path):
    m = TopicConfigManager(str(tmp_path))
    v0 = m.data_version.counter
    await m.update_topic_config(TopicConfig("orders", 4, 4, attributes={"+message.type": "FIFO"}))
    assert m.data_version.counter == v0 + 1
    m.persist()  # a change is a journal line (test_metadata_journal.py); the snapshot as upstream's
    on_disk = _read(os.path.join(str(tmp_path), "topics.json"))
    assert set(on_disk) == {"topicConfigTable", "dataVersion"}
    assert set(on_disk["dataVersion"]) == {"stateVersion", "timestamp", "counter"}
    assert on_disk["topicConfigTable"]["orders"]["attributes"] == {"message.type": "FIFO"}
    assert on_disk["topicConfigTable"]["orders"]["readQueueNums"] == 4

    again = TopicConfigManager(str(tmp_path))
    assert again.load()
    assert again.select_topic_config("orders").message_type is TopicMessageType.FIFO
    assert again.data_version.counter == m.data_version.counter
    assert await again.delete_topic_config("orders") is not None
    assert again.data_version.counter == m.data_version.counter + 1
    third = TopicConfigManager(str(tmp_path))
    third.load()
    assert third.select_topic_config("orders") is None
    assert third.select_topic_config("TBW102") is not None


def test_topic_manager_corrupt_file_uses_bak(tmp_path):
    m = TopicConfigManager(str(tmp_path))
    m.put(TopicConfig("a"))
    m.persist()
    m.put(TopicConfig("b"))
    m.persist()
    with open(m.path, "w") as f:
        f.write(json.dumps({"topicConfigTable": {"x": {"perm": 6}}}))  # valid JSON, wrong shape
    again = TopicConfigManager(str(tmp_path))
    assert again.load()
    assert again.select_topic_config("a") is not None and again.select_topic_config("b") is None


def test_auto_create_topic_from_tbw102(tmp_path):
    m = TopicConfigManager(str(tmp_path))
    tc, created = m.create_topic_in_send_message_method("new", "TBW102", 4)
    assert created and (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, 6)
    assert m.create_topic_in_send_message_method("new", "TBW102", 4) == (tc, False)
    assert m.create_topic_in_send_message_method("x", "nope", 4) == (None, False)
    assert m.create_topic_in_send_message_method("y", "SELF_TEST_TOPIC", 4) == (None, False)  # not inheritable
    retry, created = m.create_topic_in_send_message_back_method("%RETRY%g", 1, 6)
    assert created and retry.write_queue_nums == 1


# ---- SubscriptionGroupManager --------------------------------------------------------------
async def test_subscription_group_manager(tmp_path):
    m = SubscriptionGroupManager(str(tmp_path))
    for g in ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
              "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS"):
        assert g in m
    v0 = m.data_version.counter
    cfg, created = m.find_subscription_group_config("auto")
    assert created and cfg.retry_max_times == 16 and m.data_version.counter == v0 + 1
    await m.update_subscription_group_config(SubscriptionGroupConfig("orderly", consume_message_orderly=True))
    m.persist()  # a change is a journal line (test_metadata_journal.py); the snapshot as upstream's
    on_disk = _read(m.path)
    assert set(on_disk) == {"subscriptionGroupTable", "forbiddenTable", "dataVersion"}
    assert on_disk["subscriptionGroupTable"]["orderly"]["consumeMessageOrderly"] is True

    again = SubscriptionGroupManager(str(tmp_path), auto_create_subscription_group=False)
    assert again.load()
    assert again.get("orderly").consume_message_orderly and again.get("auto") is not None
    assert again.find_subscription_group_config("unknown") == (None, False)
    await again.delete_subscription_group_config("orderly")
    third = SubscriptionGroupManager(str(tmp_path))
    third.load()
    assert third.get("orderly") is None


# ---- ConsumerOffsetManager -----------------------------------------------------------------
async def test_consumer_offsets(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path), update_version_step=1)
    v0 = m.data_version.counter
    m.commit_offset("g1", "T", 0, 12)
    m.commit_offset("g1", "T", 1, 7)
    m.commit_offset("g1", "U", 0, 3)
    m.commit_offset("g2", "T", 0, 5)
    assert m.data_version.counter == v0 + 4
    assert m.query_offset("g1", "T", 0) == 12
    assert m.query_offset("g1", "T", 9) == -1
    assert m.query_group_offsets("g1", "T") == {0: 12, 1: 7}
    assert m.query_group("g1") == {"T": {0: 12, 1: 7}, "U": {0: 3}}
    assert m.which_group_by_topic("T") == {"g1", "g2"}
    await m.persist_async()
    assert _read(m.path)["offsetTable"] == {"T@g1": {"0": 12, "1": 7}, "U@g1": {"0": 3}, "T@g2": {"0": 5}}

    m.reset_offsets("g1", "T", {0: 2})
    assert m.query_offset("g1", "T", 0) == 2
    m.commit_offset("g1", "T", 0, 11)  # a client still holding the old position
    assert m.query_offset("g1", "T", 0) == 2
    assert m.query_then_erase_reset_offset("g1", "T", 0) == 2
    assert m.query_offset("g1", "T", 0) == 11
    with pytest.raises(ValueError):
        m.reset_offsets("g1", "T", {0: -5})

    assert m.clean_offset_by_topic("U") == ["U@g1"]
    assert m.remove_offset("g2") == ["T@g2"]
    m.commit_offset("g3", "gone", 0, 1)
    assert m.clean_deleted_topics({"T"}) == ["gone@g3"]
    m.persist()

    again = ConsumerOffsetManager(str(tmp_path))
    assert again.load()
    assert again.offset_table == {"T@g1": {0: 11, 1: 7}}
    assert again.data_version.counter == m.data_version.counter


def test_consumer_offsets_load_apache_fastjson_file(tmp_path):
    """An Apache broker's consumerOffset.json (fastjson pretty form: bare integer map keys,
    tabs, groupTopicMap and pullOffsetTable beside offsetTable) loads as it is."""
    (tmp_path / "consumerOffset.json").write_text(
        '{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"stateVersion":0,\n\t\t"timestamp":1796180480682\n\t},\n'
        '\t"groupTopicMap":{\n\t\t"GroupX":[\n\t\t\t"TopicA"\n\t\t]\n\t},\n'
        '\t"offsetTable":{\n\t\t"TopicA@GroupX":{\n\t\t\t0:1,\n\t\t\t3:4\n\t\t}\n\t},\n'
        '\t"pullOffsetTable":{\n\t\t"TopicA@GroupX":{\n\t\t\t0:1\n\t\t}\n\t}\n}', encoding="utf-8")
    m = ConsumerOffsetManager(str(tmp_path))
    assert m.load()
    assert m.offset_table == {"TopicA@GroupX": {0: 1, 3: 4}}
    assert m.data_version.counter == 3
    assert (tmp_path / "consumerOffset.json").exists()  # not taken for corrupt and deleted


def test_offset_version_step_default_is_upstreams(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))
    v0 = m.data_version.counter
    for i in range(499):
        m.commit_offset("g", "T", 0, i)
    assert m.data_version.counter == v0
    m.commit_offset("g", "T", 0, 500)
    assert m.data_version.counter == v0 + 1


async def test_stale_snapshot_never_overwrites_newer(tmp_path):
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit_offset("g", "T", 0, 1)
    old = m._snapshot()
    m.commit_offset("g", "T", 0, 2)
    m.persist()
    m._write(*old)  # the older snapshot's writer lost the race
    assert _read(m.path)["offsetTable"] == {"T@g": {"0": 2}}


def test_pull_offset_snapshot_is_a_copy_with_string_queue_ids(tmp_path) -> None:
    m = ConsumerOffsetManager(str(tmp_path))
    m.commit_pull_offset("G", "T", 2, 17)
    snapshot = m.pull_offset_snapshot()
    assert snapshot == {"T@G": {"2": 17}}
    m.commit_pull_offset("G", "T", 2, 18)
    assert snapshot == {"T@G": {"2": 17}}  # not a view of the live table
    assert m.query_pull_offset("G", "T", 2) == 18
