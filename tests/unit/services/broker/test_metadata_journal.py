"""topics.json / subscriptionGroup.json as snapshot + append-only journal (store/metadata/journal.py):
a change appends one line instead of rewriting the table, a restart replays the journal, a
torn tail or an interrupted compaction loses nothing acknowledged, shutdown leaves the
upstream file alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

from orbitmq.broker.store.metadata import SubscriptionGroupManager, TopicConfigManager
from orbitmq.broker.store.metadata.config_manager import _BACKGROUND
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig


def _topics(config_dir: Path) -> TopicConfigManager:
    manager = TopicConfigManager(str(config_dir), broker_name="broker-j")
    assert manager.load()
    return manager


def _journal_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_a_create_appends_one_line_and_leaves_the_snapshot_alone(tmp_path: Path) -> None:
    manager = _topics(tmp_path)
    manager.quiet_snapshot_seconds = 600  # the quiet-time snapshot is the next test's
    manager.persist()
    snapshot = (tmp_path / "topics.json").read_bytes()
    for i in range(50):
        await manager.update_topic_config(TopicConfig(f"T{i}", read_queue_nums=8, write_queue_nums=8))
    await manager.delete_topic_config("T7")
    assert (tmp_path / "topics.json").read_bytes() == snapshot  # not rewritten per change
    lines = _journal_lines(tmp_path / "topics.json.journal")
    assert len(lines) == 51
    assert lines[0]["put"] == "T0" and lines[0]["value"]["topicName"] == "T0"
    assert lines[-1] == {"del": "T7", "dataVersion": manager.data_version.to_json_dict()}

    again = _topics(tmp_path)  # a restart without a clean stop: the journal is replayed
    assert "T7" not in again and "T49" in again and again.get("T3").read_queue_nums == 8
    assert again.data_version == manager.data_version


async def test_the_snapshot_catches_up_once_changes_stop(tmp_path: Path) -> None:
    """What another broker reads (topics.json alone) trails the last change by the quiet time, not
    by the size rule; a burst pays one rewrite, at its end."""
    import asyncio

    manager = _topics(tmp_path)
    manager.quiet_snapshot_seconds = 1.0  # a stall between two creates longer than this would fail it
    before = manager.compactions
    for i in range(30):
        await manager.update_topic_config(TopicConfig(f"Q{i}"))
    assert manager.compactions == before  # still changing: no rewrite yet
    for _ in range(100):
        if manager.compactions > before:
            break
        await asyncio.sleep(0.05)
    assert manager.compactions == before + 1
    snapshot = json.loads((tmp_path / "topics.json").read_text())
    assert {f"Q{i}" for i in range(30)} <= set(snapshot["topicConfigTable"])
    assert not (tmp_path / "topics.json.journal").exists() or not _journal_lines(tmp_path / "topics.json.journal")
    await manager.update_topic_config(TopicConfig("Q-late"))  # the next quiet time, the next rewrite
    for task in list(_BACKGROUND):
        await task
    assert "Q-late" in json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]


async def test_the_journal_is_compacted_once_as_long_as_the_table(tmp_path: Path) -> None:
    manager = _topics(tmp_path)
    manager.compact_min_entries = 20
    for i in range(60):
        await manager.update_topic_config(TopicConfig(f"T{i}"))
    for task in list(_BACKGROUND):
        await task
    assert manager.compactions >= 1
    snapshot = json.loads((tmp_path / "topics.json").read_text())
    journal = tmp_path / "topics.json.journal"
    in_journal = _journal_lines(journal) if journal.exists() else []
    assert len(in_journal) < len(manager.topic_config_table)
    assert not (tmp_path / "topics.json.journal.old").exists()
    names = set(snapshot["topicConfigTable"]) | {e["put"] for e in in_journal}
    assert {f"T{i}" for i in range(60)} <= names
    assert set(_topics(tmp_path).topic_names()) == set(manager.topic_names())


async def test_a_clean_stop_leaves_only_the_upstream_file(tmp_path: Path) -> None:
    manager = _topics(tmp_path)
    await manager.update_topic_config(TopicConfig("Kept", read_queue_nums=3, write_queue_nums=3))
    manager.persist()  # what shutdown does
    manager.close()
    assert not (tmp_path / "topics.json.journal").exists()
    assert not (tmp_path / "topics.json.journal.old").exists()
    snapshot = json.loads((tmp_path / "topics.json").read_text())
    assert set(snapshot) == {"topicConfigTable", "dataVersion"}
    assert snapshot["topicConfigTable"]["Kept"]["readQueueNums"] == 3


async def test_a_torn_last_line_is_dropped_and_cut_off(tmp_path: Path) -> None:
    manager = _topics(tmp_path)
    await manager.update_topic_config(TopicConfig("A"))
    await manager.update_topic_config(TopicConfig("B"))
    manager.close()
    journal = tmp_path / "topics.json.journal"
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"put":"C","value":{"topicNa')  # a write cut short by a power cut
    again = _topics(tmp_path)
    assert "A" in again and "B" in again and "C" not in again
    assert journal.read_bytes() == whole
    await again.update_topic_config(TopicConfig("D"))  # appends after the cut, on a line of its own
    assert "D" in _topics(tmp_path)


async def test_a_compaction_cut_short_is_finished_on_load(tmp_path: Path) -> None:
    manager = _topics(tmp_path)
    manager.persist()
    await manager.update_topic_config(TopicConfig("BeforeRotation"))
    await manager.delete_topic_config("BeforeRotation")
    await manager.update_topic_config(TopicConfig("Survivor", read_queue_nums=2, write_queue_nums=2))
    manager.close()
    # Killed after the rotation, before the snapshot was written: the old journal holds it all.
    os.replace(tmp_path / "topics.json.journal", tmp_path / "topics.json.journal.old")
    (tmp_path / "topics.json.journal").write_text(
        json.dumps({"put": "AfterRotation", "value": TopicConfig("AfterRotation").to_json_dict(),
                    "dataVersion": {"stateVersion": 0, "timestamp": 1, "counter": 99}}) + "\n")
    again = _topics(tmp_path)
    assert "Survivor" in again and "AfterRotation" in again and "BeforeRotation" not in again
    assert again.data_version.counter == 99
    assert not (tmp_path / "topics.json.journal.old").exists()
    assert "AfterRotation" in json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]


async def test_a_list_is_one_version_step_and_one_line_each(tmp_path: Path) -> None:
    manager = _topics(tmp_path)
    before = manager.data_version.counter
    await manager.update_topic_config_list([TopicConfig(f"L{i}") for i in range(5)])
    assert manager.data_version.counter == before + 1
    assert [e["put"] for e in _journal_lines(tmp_path / "topics.json.journal")] == [f"L{i}" for i in range(5)]
    assert [tc.topic_name for tc in manager.take_unregistered()] == [f"L{i}" for i in range(5)]
    assert manager.take_unregistered() == []


async def test_an_apache_config_dir_without_a_journal_loads_as_before(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text(json.dumps({
        "topicConfigTable": {"FromApache": TopicConfig("FromApache", read_queue_nums=16).to_json_dict()},
        "dataVersion": {"stateVersion": 0, "timestamp": 5, "counter": 7}}, indent=2))
    manager = _topics(tmp_path)
    assert manager.get("FromApache").read_queue_nums == 16 and manager.data_version.counter == 7


async def test_subscription_groups_are_journaled_too(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(str(tmp_path))
    assert groups.load()
    await groups.update_subscription_group_config(SubscriptionGroupConfig("G1", retry_max_times=3))
    await groups.update_subscription_group_config(SubscriptionGroupConfig("G2"))
    await groups.delete_subscription_group_config("G2")
    cfg, created = groups.find_subscription_group_config("G3")  # auto-created on a heartbeat
    assert created
    groups.sync()
    groups.close()
    assert not (tmp_path / "subscriptionGroup.json").exists()
    again = SubscriptionGroupManager(str(tmp_path))
    assert again.load()
    assert again.get("G1").retry_max_times == 3 and again.get("G2") is None and again.get("G3") is not None
    again.persist()
    assert not (tmp_path / "subscriptionGroup.json.journal").exists()
    assert "G1" in json.loads((tmp_path / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
