"""Broker metadata kept as JSON under <storePathRootDir>/config: topics, groups, offsets."""

from orbitmq.broker.store.metadata.consumer_offset_manager import ConsumerOffsetManager
from orbitmq.broker.store.metadata.json_file import load_json_with_backup, write_json_atomic
from orbitmq.broker.store.metadata.subscription_group_manager import SubscriptionGroupManager
from orbitmq.broker.store.metadata.topic_config_manager import TopicConfigManager
from orbitmq.common.route import DataVersion

__all__ = [
    "ConsumerOffsetManager",
    "DataVersion",
    "SubscriptionGroupManager",
    "TopicConfigManager",
    "load_json_with_backup",
    "write_json_atomic",
]
