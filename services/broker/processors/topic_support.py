"""Topic and group creation done on the fly by the send, heartbeat and pull paths.

The metadata managers decide (RocketMQ's createTopicInSendMessageMethod and friends); this
module adds what the broker must do after a creation: persist the table and tell the
NameServers at once, through ``broker.on_metadata_changed``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orbitmq.common.subscription_group import SubscriptionGroupConfig
from orbitmq.common.topic_config import TopicConfig

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)


def create_topic_in_send_message_method(broker: BrokerController, topic: str, default_topic: str,
                                        client_queue_nums: int, topic_sys_flag: int,
                                        remote_addr: str) -> TopicConfig | None:
    config, created = broker.topic_config_manager.create_topic_in_send_message_method(
        topic, default_topic, client_queue_nums, topic_sys_flag)
    if created:
        log.info("create new topic by default topic:[%s] config:[%s] producer:[%s]", default_topic, config,
                 remote_addr)
        broker.on_metadata_changed(topics=True)
    return config


def create_topic_in_send_message_back_method(broker: BrokerController, topic: str, queue_nums: int,
                                             perm: int, topic_sys_flag: int) -> TopicConfig:
    config, created = broker.topic_config_manager.create_topic_in_send_message_back_method(
        topic, queue_nums, perm, topic_sys_flag)
    if created:
        log.info("create new topic in send message back: %s", config)
        broker.on_metadata_changed(topics=True)
    return config


def find_subscription_group_config(broker: BrokerController, group: str) -> SubscriptionGroupConfig | None:
    """The group's config, created with defaults when autoCreateSubscriptionGroup allows it."""
    config, created = broker.subscription_group_manager.find_subscription_group_config(group)
    if created:
        log.info("auto create a subscription group, %s", group)
        broker.on_metadata_changed(groups=True)
    return config
