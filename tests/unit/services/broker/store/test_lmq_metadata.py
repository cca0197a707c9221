"""The enableLmq metadata managers: LMQ topics and groups exist without configs, an LMQ
group's offsets are kept per topic in lmqConsumerOffset.json."""

from __future__ import annotations

import json

from orbitmq.broker.store.metadata.lmq import (
    LmqConsumerOffsetManager,
    LmqSubscriptionGroupManager,
    LmqTopicConfigManager,
)
from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig


def test_lmq_topics_need_no_config(tmp_path):
    topics = LmqTopicConfigManager(str(tmp_path), broker_cluster_name="c", broker_name="b")
    tc = topics.select_topic_config("%LMQ%x")
    assert (tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm) == ("%LMQ%x", 1, 1, 6)
    assert topics.get("%LMQ%x") == tc and "%LMQ%x" in topics
    assert topics.put(TopicConfig("%LMQ%y")) is None
    assert "%LMQ%y" not in topics.topic_names()
    assert topics.select_topic_config("plain") is None and "plain" not in topics


def test_lmq_groups_are_allowed(tmp_path):
    groups = LmqSubscriptionGroupManager(str(tmp_path), auto_create_subscription_group=False)
    cfg, created = groups.find_subscription_group_config("%LMQ%g")
    assert cfg.group_name == "%LMQ%g" and not created and "%LMQ%g" in groups
    assert groups.find_subscription_group_config("plain") == (None, False)
    groups.put(SubscriptionGroupConfig("%LMQ%h"))
    assert [c.group_name for c in groups.all() if c.group_name.startswith("%LMQ%")] == []


def test_lmq_group_offsets_persisted_apart(tmp_path):
    offsets = LmqConsumerOffsetManager(str(tmp_path))
    offsets.commit_offset("%LMQ%g", "%LMQ%a", 0, 7)
    offsets.commit_offset("%LMQ%g", "%LMQ%a", 3, 9)  # one offset per topic, whatever the queue
    offsets.commit_offset("plain", "%LMQ%a", 0, 4)
    assert offsets.query_offset("%LMQ%g", "%LMQ%a", 0) == 9
    assert offsets.query_offset("%LMQ%g", "%LMQ%b", 0) == -1
    assert offsets.query_group_offsets("%LMQ%g", "%LMQ%a") == {0: 9}
    assert offsets.query_offset("plain", "%LMQ%a", 0) == 4
    offsets.persist()
    saved = json.loads((tmp_path / "lmqConsumerOffset.json").read_text())
    assert saved["lmqOffsetTable"] == {"%LMQ%a@%LMQ%g": 9}
    assert saved["offsetTable"] == {"%LMQ%a@plain": {"0": 4}}
    assert not (tmp_path / "consumerOffset.json").exists()
    again = LmqConsumerOffsetManager(str(tmp_path))
    assert again.load()
    assert again.query_offset("%LMQ%g", "%LMQ%a", 5) == 9 and again.query_offset("plain", "%LMQ%a", 0) == 4
    assert again.clean_deleted_topics([]) == []  # LMQ topics have no config and stay
    assert again.remove_offset("%LMQ%g") == ["%LMQ%a@%LMQ%g"]
    assert again.query_offset("%LMQ%g", "%LMQ%a", 0) == -1
