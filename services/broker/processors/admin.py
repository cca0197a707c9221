"""Broker administration (AdminBrokerProcessor): topics, subscription groups, stats, offsets reset.

Tables keyed by MessageQueue (TopicStatsTable, ConsumeStats, ResetOffsetBody) are written in
fastjson's object-key shape (see ``fastjson``), as RocketMQ's tools expect.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import time
from typing import TYPE_CHECKING, Any

from orbitmq import __version__
from orbitmq.common import fastjson, validators
from orbitmq.common.atomic_file import write_file_atomically
from orbitmq.common.message_id import decode_offset_message_id
from orbitmq.common.subscription_group import SubscriptionGroupConfig, validate_group_attributes
from orbitmq.common.topic_config import TOPIC_FILTER_TYPES, TopicConfig, normalize_attributes
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError, RemotingTimeoutError
from orbitmq.remoting.protocol import DEFAULT_VERSION, RemotingCommand

from .base import Fields, RequestError, encode_json_body
from .client_manage import decode_body

if TYPE_CHECKING:
    from orbitmq.broker.controller import BrokerController

log = logging.getLogger(__name__)

MAX_QUEUE_NUMS = 16384  # far above any real topic; keeps per-queue loops bounded
V3_1_8_SNAPSHOT = 62  # MQVersion.Version ordinal: clients older than this cannot be called back
V3_0_7_SNAPSHOT = 28  # ... nor asked for their consumer status
CALL_CLIENT_TIMEOUT = 10.0  # Broker2Client.callClient's wait for the consumer's answer, seconds
CONSUMER_STATUS_TIMEOUT = 5.0  # Broker2Client.getConsumeStatus's wait for each client, seconds
ACK_THREAD_POOL_QUEUE_CAPACITY = 100000  # BrokerConfig.ackThreadPoolQueueCapacity's default (no ack pool here)
PERM_MASK = 0xF


def parse_attributes(raw: str | None) -> dict[str, str]:
    """AttributeParser.parseToMap: "+k=v,-k2,+k3=v3" -> {"+k": "v", "-k2": "", "+k3": "v3"}."""
    result: dict[str, str] = {}
    if not raw:
        return result
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        if item.startswith("-"):
            if "=" in item or len(item) < 2:
                raise ValueError(f"attribute {item!r}: a removal takes no value")
            result[item] = ""
            continue
        key, sep, value = item.partition("=")
        if not sep or len(key.strip()) < 2 or not value.strip():
            raise ValueError(f"attribute {item!r} must look like +key=value")
        if not key.startswith("+"):
            raise ValueError(f"attribute {item!r} must start with + (add/update) or - (delete)")
        result[key.strip()] = value.strip()
    return result


class AdminBrokerProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.started_at = int(time.time() * 1000)

    def register(self) -> None:
        b = self.broker
        b.register_processor(RequestCode.UPDATE_AND_CREATE_TOPIC, self.update_and_create_topic)
        b.register_processor(RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config)
        b.register_processor(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, self.update_and_create_topic_list)
        b.register_processor(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, self.get_system_topic_list)
        b.register_processor(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
                             self.update_and_create_subscription_group_list)
        b.register_processor(RequestCode.GET_TOPIC_CONFIG, self.get_topic_config)
        b.register_processor(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, self.get_subscription_group)
        b.register_processor(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic)
        b.register_processor(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_and_create_subscription_group)
        b.register_processor(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_subscription_group)
        b.register_processor(RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group)
        b.register_processor(RequestCode.GET_TOPIC_STATS_INFO, self.get_topic_stats_info)
        b.register_processor(RequestCode.GET_CONSUME_STATS, self.get_consume_stats)
        b.register_processor(RequestCode.GET_BROKER_RUNTIME_INFO, self.get_broker_runtime_info)
        b.register_processor(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset)
        b.register_processor(RequestCode.UPDATE_BROKER_CONFIG, self.update_broker_config)
        b.register_processor(RequestCode.GET_BROKER_CONFIG, self.get_broker_config)
        # What a slave's SlaveSynchronize copies besides topics (21) and groups (201).
        b.register_processor(RequestCode.GET_ALL_CONSUMER_OFFSET, self.get_all_consumer_offset)
        b.register_processor(RequestCode.GET_ALL_DELAY_OFFSET, self.get_all_delay_offset)
        # mqadmin brokerConsumeStats / deleteExpiredCommitLog.
        b.register_processor(RequestCode.GET_BROKER_CONSUME_STATS, self.get_broker_consume_stats)
        b.register_processor(RequestCode.DELETE_EXPIRED_COMMITLOG, self.delete_expired_commit_log)
        # mqadmin consumerStatus / queryMsgById -g -d: forwarded to the consumer's own connection.
        b.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info)
        b.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_message_directly)
        b.register_processor(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, self.get_consumer_status)
        b.register_processor(RequestCode.VIEW_BROKER_STATS_DATA, self.view_broker_stats_data)  # statsAll

    # ---- topics -----------------------------------------------------------------------------

    def _check_topic_config(self, config: TopicConfig, code: int = ResponseCode.INVALID_PARAMETER) -> None:
        """What UPDATE_AND_CREATE_TOPIC and its list form refuse (RequestError with ``code``;
        INVALID_PARAMETER as upstream 5.x's AdminBrokerProcessor#updateAndCreateTopic)."""
        topic = config.topic_name
        try:
            validators.check_topic(topic)
        except validators.ValidationError as exc:
            raise RequestError(code, str(exc)) from None
        if validators.is_system_topic(topic) and not topic.startswith("rmq_sys_"):
            raise RequestError(code, f"The topic[{topic}] is conflict with system topic.")
        if topic == self.broker.config.broker_cluster_name:
            raise RequestError(code, f"the topic[{topic}] is conflict with system reserved words.")
        for name, value in (("readQueueNums", config.read_queue_nums), ("writeQueueNums", config.write_queue_nums)):
            if not 0 < value <= MAX_QUEUE_NUMS:
                raise RequestError(code, f"{name}[{value}] of topic {topic} must be in 1..{MAX_QUEUE_NUMS}")
        if config.perm & ~PERM_MASK or config.perm < 0:
            raise RequestError(code, f"perm[{config.perm}] of topic {topic} is not a valid permission")
        if config.topic_filter_type not in TOPIC_FILTER_TYPES:
            raise RequestError(code, f"topicFilterType[{config.topic_filter_type}] is not one of "
                               f"{', '.join(TOPIC_FILTER_TYPES)}")

    async def update_and_create_topic(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        topic = f.str("topic")
        current = self.broker.topic_config_manager.select_topic_config(topic)
        try:
            attributes = normalize_attributes(parse_attributes(f.opt_str("attributes")),
                                              current.attributes if current else None)
        except ValueError as exc:
            raise RequestError(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        config = TopicConfig(topic_name=topic, read_queue_nums=f.int("readQueueNums"),
                             write_queue_nums=f.int("writeQueueNums"), perm=f.int("perm"),
                             topic_filter_type=f.str("topicFilterType", "SINGLE_TAG") or "SINGLE_TAG",
                             topic_sys_flag=f.int("topicSysFlag", 0), order=f.bool("order", False),
                             attributes=attributes)
        self._check_topic_config(config)
        # One journal line, then REGISTER_BROKER with this topic alone (upstream's
        # registerIncrementBrokerData): neither grows with the topics the broker has.
        await self.broker.topic_config_manager.update_topic_config(config)
        log.info("updateAndCreateTopic %s from %s", config, self.broker.remote_addr(channel))
        await self.broker.topics_changed()
        return request.response_to(ResponseCode.SUCCESS)

    async def update_and_create_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC_LIST (18): CreateTopicListRequestBody's topicConfigList, all
        checked before any is stored (one bad entry refuses the batch with INVALID_PARAMETER)."""
        raw = decode_body(request, "CreateTopicListRequestBody").get("topicConfigList")
        if not isinstance(raw, list) or not raw:
            raise RequestError(ResponseCode.INVALID_PARAMETER, "topicConfigList is missing or empty")
        configs = []
        for entry in raw:
            try:
                config = TopicConfig.from_json_dict(entry)
                current = self.broker.topic_config_manager.select_topic_config(config.topic_name)
                config.attributes = normalize_attributes(config.attributes or {},
                                                         current.attributes if current else None)
            except (ValueError, TypeError) as exc:
                raise RequestError(ResponseCode.INVALID_PARAMETER, f"bad TopicConfig: {exc}") from None
            self._check_topic_config(config)
            configs.append(config)
        # TopicConfigManager#updateTopicConfigList: one dataVersion step, one fsync, one
        # increment registration for the whole list.
        await self.broker.topic_config_manager.update_topic_config_list(configs)
        log.info("updateAndCreateTopicList %s from %s", ";".join(c.topic_name for c in configs),
                 self.broker.remote_addr(channel))
        await self.broker.topics_changed()
        return request.response_to(ResponseCode.SUCCESS)

    async def get_system_topic_list(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): TopicList of the topics this broker made itself
        (its own name, its cluster's, TBW102, the schedule, transaction, revive and timer topics...)."""
        topics = sorted(self.broker.topic_config_manager.system_topics)
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body({"topicList": topics}))

    async def get_all_topic_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        # The snapshot is taken on the loop (fresh dicts, consistent under the table lock); the
        # JSON of a whole table is tens of ms for thousands of entries, so it is written off the loop.
        content = self.broker.topic_config_manager.encode_json()
        total = len(content.get("topicConfigTable") or {})
        # TopicConfigAndMappingSerializeWrapper, as AdminBrokerProcessor#getAllTopicConfig answers:
        # this broker has no static topics, so the mapping tables are empty and never change.
        content["topicQueueMappingInfoMap"] = {}
        content["topicQueueMappingDetailMap"] = {}
        content["mappingDataVersion"] = self.broker.mapping_data_version
        body = await asyncio.to_thread(encode_json_body, content)
        return request.response_to(ResponseCode.SUCCESS, None, {"totalTopicNum": str(total)}, body)

    async def get_all_consumer_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET (43): consumerOffset.json's content (offsetTable, dataVersion),
        with what upstream's fastjson adds from ConsumerOffsetManager's getters: groupTopicMap
        (group -> topics with an offset) and pullOffsetTable."""
        manager = self.broker.consumer_offset_manager
        content = manager.encode_json()
        pull = manager.pull_offset_snapshot()
        group_topics: dict[str, set[str]] = {}
        for key in content.get("offsetTable") or {}:
            topic, sep, group = str(key).partition("@")
            if sep and "@" not in group:
                group_topics.setdefault(group, set()).add(topic)
        content["groupTopicMap"] = {group: sorted(topics) for group, topics in group_topics.items()}
        content["pullOffsetTable"] = pull
        body = await asyncio.to_thread(encode_json_body, content)
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    async def get_all_delay_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET (45): delayOffset.json's content (offsetTable by delay level)."""
        content = self.broker.schedule_message_service.offsets.encode_json()
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(content))

    async def get_topic_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_TOPIC_CONFIG (351): TopicConfigAndQueueMapping, i.e. the TopicConfig JSON."""
        config = self._topic_config(Fields(request.ext_fields).str("topic"))
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(config.to_json_dict()))

    async def delete_topic(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        topic = Fields(request.ext_fields).str("topic")
        if validators.is_system_topic(topic) or topic in self.broker.topic_config_manager.system_topics:
            raise RequestError(ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic.")
        await self.broker.topic_config_manager.delete_topic_config(topic)
        self.broker.consumer_offset_manager.clean_offset_by_topic(topic)
        await self.broker.delete_topics({topic})
        log.info("deleteTopic %s from %s", topic, self.broker.remote_addr(channel))
        self.broker.on_metadata_changed(topics=True)
        return request.response_to(ResponseCode.SUCCESS)

    # ---- subscription groups ------------------------------------------------------------------

    def _group_config(self, raw: Any) -> SubscriptionGroupConfig:
        try:
            config = SubscriptionGroupConfig.from_json_dict(raw)
        except (ValueError, TypeError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad SubscriptionGroupConfig: {exc}") from None
        try:
            validators.check_group(config.group_name)
        except validators.ValidationError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        if config.retry_queue_nums < 0 or config.retry_queue_nums > MAX_QUEUE_NUMS or config.retry_max_times < -1:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "retryQueueNums/retryMaxTimes out of range")
        if any(k[:1] in "+-" for k in config.attributes):
            # mqadmin's "+k=v"/"-k" edits (AttributeUtil#alterCurrentAttributes), on the stored ones.
            current = self.broker.subscription_group_manager.get(config.group_name)
            config.attributes = normalize_attributes(config.attributes, current.attributes if current else None)
        try:
            validate_group_attributes(config.attributes)
        except ValueError as exc:
            raise RequestError(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        return config

    async def update_and_create_subscription_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        config = self._group_config(decode_body(request, "SubscriptionGroupConfig"))
        await self.broker.subscription_group_manager.update_subscription_group_config(config)
        log.info("updateAndCreateSubscriptionGroup %s from %s", config, self.broker.remote_addr(channel))
        self.broker.on_metadata_changed(groups=True)
        return request.response_to(ResponseCode.SUCCESS)

    async def update_and_create_subscription_group_list(self, request: RemotingCommand,
                                                        channel: Any) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225): SubscriptionGroupList's groupConfigList,
        all checked before any is stored."""
        raw = decode_body(request, "SubscriptionGroupList").get("groupConfigList")
        if not isinstance(raw, list) or not raw:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "groupConfigList is missing or empty")
        configs = [self._group_config(entry) for entry in raw]
        groups = self.broker.subscription_group_manager
        for config in configs:
            groups.put(config)
        await groups.sync_async()  # one fsync for the list
        log.info("updateAndCreateSubscriptionGroupList %s from %s", ";".join(c.group_name for c in configs),
                 self.broker.remote_addr(channel))
        self.broker.on_metadata_changed(groups=True)
        return request.response_to(ResponseCode.SUCCESS)

    async def get_all_subscription_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        content = self.broker.subscription_group_manager.encode_json()
        total = len(content.get("subscriptionGroupTable") or {})
        body = await asyncio.to_thread(encode_json_body, content)
        return request.response_to(ResponseCode.SUCCESS, None, {"totalGroupNum": str(total)}, body)

    async def get_subscription_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352): one group's SubscriptionGroupConfig JSON."""
        group = Fields(request.ext_fields).str("group")
        # Upstream's AdminBrokerProcessor#getSubscriptionGroup uses findSubscriptionGroupConfig, which
        # creates a missing group when autoCreateSubscriptionGroup is on: a read (mqadmin
        # getConsumerConfig with a typo) would create groups. OrbitMQ reads only
        # (docs/compatibility.md, differential conformance).
        config = self.broker.subscription_group_manager.get(group)
        if config is None:
            raise RequestError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(config.to_json_dict()))

    async def delete_subscription_group(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        group = f.str("groupName")
        clean_offset = f.bool("cleanOffset", False)
        await self.broker.subscription_group_manager.delete_subscription_group_config(group)
        if clean_offset:
            self.broker.consumer_offset_manager.remove_offset(group)
        self.broker.stats.forget_group(group)
        log.info("deleteSubscriptionGroup %s from %s", group, self.broker.remote_addr(channel))
        self.broker.on_metadata_changed(groups=True)
        return request.response_to(ResponseCode.SUCCESS)

    # ---- stats ------------------------------------------------------------------------------

    def _topic_config(self, topic: str) -> TopicConfig:
        config = self.broker.topic_config_manager.select_topic_config(topic)
        if config is None:
            raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        return config

    async def get_topic_stats_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        topic = Fields(request.ext_fields).str("topic")
        config = self._topic_config(topic)
        table: dict[Any, Any] = {}
        broker_name = self.broker.config.broker_name
        store = self.broker.message_store
        for queue_id in range(config.write_queue_nums):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            last = self.broker.message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            table[fastjson.message_queue_key(topic, broker_name, queue_id)] = {
                "lastUpdateTimestamp": last, "maxOffset": max_offset,
                "minOffset": store.get_min_offset_in_queue(topic, queue_id)}
        # TopicStatsTable#topicPutTps: BrokerStatsManager#tpsTopicPutNums, the last minute's rate.
        body = fastjson.dumps({"offsetTable": table, "topicPutTps": self.broker.stats.topic_put_tps(topic)})
        return request.response_to(ResponseCode.SUCCESS, None, None, body.encode("utf-8"))

    async def get_consume_stats(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        group = f.str("consumerGroup")
        topic = f.opt_str("topic")
        offsets = self.broker.consumer_offset_manager
        topics = [topic] if topic else sorted(offsets.which_topic_by_consumer(group))
        table: dict[Any, Any] = {}
        broker_name = self.broker.config.broker_name
        store = self.broker.message_store
        for name in topics:
            config = self.broker.topic_config_manager.select_topic_config(name)
            if config is None:
                continue
            for queue_id in range(config.write_queue_nums):
                broker_offset = store.get_max_offset_in_queue(name, queue_id)
                consumer_offset = max(offsets.query_offset(group, name, queue_id), 0)
                last = 0
                if consumer_offset > 0:
                    last = self.broker.message_store_timestamp(name, queue_id, consumer_offset - 1)
                pull_offset = max(offsets.query_pull_offset(group, name, queue_id), 0)
                table[fastjson.message_queue_key(name, broker_name, queue_id)] = {
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last,
                    "pullOffset": pull_offset}
        body = fastjson.dumps({"consumeTps": self.broker.stats.group_get_tps(group), "offsetTable": table}).encode("utf-8")
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    async def get_broker_consume_stats(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (317): ConsumeStatsList of every subscription group on this broker.

        As fetchAllConsumeStatsInBroker: per group, one ConsumeStats per topic it has offsets in
        (``isOrder`` keeps ordered topics only; an online group's unsubscribed topics are skipped).
        """
        only_order = Fields(request.ext_fields).bool("isOrder", False)
        broker = self.broker
        offsets = broker.consumer_offset_manager
        store = broker.message_store
        broker_name = broker.config.broker_name
        stats_list: list[dict[str, Any]] = []
        total_diff = 0
        for group in sorted(cfg.group_name for cfg in broker.subscription_group_manager.all()):
            per_topic: list[dict[str, Any]] = []
            info = broker.consumer_manager.get_consumer_group_info(group)
            for topic in sorted(offsets.which_topic_by_consumer(group)):
                config = broker.topic_config_manager.select_topic_config(topic)
                if config is None or (only_order and not config.order):
                    continue
                if info is not None and info.subscription_table and topic not in info.subscription_table:
                    continue
                table: dict[Any, Any] = {}
                for queue_id in range(config.write_queue_nums):
                    broker_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
                    consumer_offset = max(offsets.query_offset(group, topic, queue_id), 0)
                    last = 0
                    if consumer_offset > 0:
                        last = broker.message_store_timestamp(topic, queue_id, consumer_offset - 1)
                    total_diff += broker_offset - consumer_offset
                    table[fastjson.message_queue_key(topic, broker_name, queue_id)] = {
                        "brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last,
                        "pullOffset": max(offsets.query_pull_offset(group, topic, queue_id), 0)}
                per_topic.append({"consumeTps": broker.stats.group_get_tps(group), "offsetTable": table})
            stats_list.append({group: per_topic})
        body = fastjson.dumps({"brokerAddr": broker.config.broker_addr, "consumeStatsList": stats_list,
                               "totalDiff": total_diff, "totalInflightDiff": 0}).encode("utf-8")
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    async def delete_expired_commit_log(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (329): the store's executeDeleteFilesManually.

        The next passes of the retention task delete CommitLog segments older than
        fileReservedTime whatever the hour (deleteWhen) and disk usage say.
        """
        retention = getattr(self.broker.message_store, "retention_service", None)
        if retention is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "message store is not running")
        retention.execute_delete_files_manually()
        log.warning("deleteExpiredCommitLog requested by %s", self.broker.remote_addr(channel))
        return request.response_to(ResponseCode.SUCCESS)

    async def view_broker_stats_data(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA (315): BrokerStatsData (minute/hour/day sum, tps, avgpt) of one item."""
        f = Fields(request.ext_fields)
        name, key = f.str("statsName"), f.str("statsKey")
        data = self.broker.stats.stats_data(name, key)
        if data is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body(data))

    async def get_consumer_running_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (307): the client's own ConsumerRunningInfo, asked over its connection."""
        f = Fields(request.ext_fields)
        return await self._call_consumer(request, f.str("consumerGroup"), f.str("clientId"))

    async def consume_message_directly(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (309): hand one stored message (by offset msgId) to one consumer client."""
        f = Fields(request.ext_fields)
        group, client_id, msg_id = f.str("consumerGroup"), f.str("clientId"), f.str("msgId")
        try:
            _host, _port, offset = decode_offset_message_id(msg_id)
        except (ValueError, TypeError) as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad msgId {msg_id}: {exc}") from None
        record = self.broker.message_store.select_one_message_by_offset(offset) if offset >= 0 else None
        if not record:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        fields = dict(request.ext_fields)
        fields["brokerName"] = self.broker.config.broker_name
        topic = f.opt_str("topic")
        config = self.broker.topic_config_manager.select_topic_config(topic) if topic else None
        if config is not None:
            fields["topicSysFlag"] = str(config.topic_sys_flag)
        group_config = self.broker.subscription_group_manager.get(group)
        if group_config is not None:
            fields["groupSysFlag"] = str(group_config.group_sys_flag)
        return await self._call_consumer(request, group, client_id, fields, bytes(record))

    async def get_consumer_status(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): each online client's own offsets for a topic
        (GET_CONSUMER_STATUS_FROM_CLIENT 221 on its connection), as Broker2Client.getConsumeStatus.
        A client that fails or does not answer in time is left out; ``clientAddr`` (the client id)
        asks that client only."""
        f = Fields(request.ext_fields)
        topic, group, only = f.str("topic"), f.str("group"), f.opt_str("clientAddr") or ""
        info = self.broker.consumer_manager.get_consumer_group_info(group)
        if info is None or not info.channel_info_table:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]")
        clients = [ci for ci in info.channel_info_table.values() if not only or ci.client_id == only]
        for ci in clients:
            if ci.version < V3_0_7_SNAPSHOT:
                raise RequestError(ResponseCode.SYSTEM_ERROR,
                                   f"the client does not support this feature. version={ci.version}")

        async def ask(ci: Any) -> tuple[str, list[tuple[dict[str, Any], Any]]] | None:
            forward = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                                              {"topic": topic, "group": group})
            try:
                answer = await ci.channel.invoke(forward, CONSUMER_STATUS_TIMEOUT)
                if answer.code != ResponseCode.SUCCESS or not answer.body:
                    return None
                body = fastjson.loads(answer.body)
            except (RemotingError, ValueError) as exc:
                log.warning("get consumer status of %s in %s failed: %s", ci.client_id, group, exc)
                return None
            table = body.get("messageQueueTable") if isinstance(body, dict) else None
            return ci.client_id, fastjson.message_queue_pairs(table)

        consumer_table: dict[str, Any] = {}
        for answered in await asyncio.gather(*(ask(ci) for ci in clients)):
            if answered is not None:
                client_id, pairs = answered
                consumer_table[client_id] = {
                    fastjson.message_queue_key(str(mq.get("topic", topic)), str(mq.get("brokerName", "")),
                                               int(mq.get("queueId", 0))): offset for mq, offset in pairs}
        body = fastjson.dumps({"consumerTable": consumer_table, "messageQueueTable": {}}).encode("utf-8")
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    async def _call_consumer(self, request: RemotingCommand, group: str, client_id: str,
                             fields: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
        """AdminBrokerProcessor.callConsumer: forward to the client, answer with its response."""
        info = self.broker.consumer_manager.find_channel(group, client_id)
        if info is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if info.version < V3_1_8_SNAPSHOT:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> Version <{info.version}> too "
                               f"low to finish, please upgrade it to V3_1_8_SNAPSHOT")
        forward = RemotingCommand.request(request.code, dict(fields if fields is not None else request.ext_fields),
                                          request.body if body is None else body)
        try:
            answer = await info.channel.invoke(forward, CALL_CLIENT_TIMEOUT)
        except RemotingTimeoutError as exc:
            raise RequestError(ResponseCode.CONSUME_MSG_TIMEOUT,
                               f"consumer <{group}> <{client_id}> Timeout: {exc}") from None
        except RemotingError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR,
                               f"invoke consumer <{group}> <{client_id}> Exception: {exc}") from None
        return request.response_to(answer.code, answer.remark, dict(answer.ext_fields), answer.body)

    async def get_broker_runtime_info(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        cfg = self.broker.config
        table: dict[str, str] = {str(k): str(v) for k, v in self.broker.message_store.runtime_info().items()}
        table.update(self.broker.stats.runtime_info())
        table["popRequestHoldCount"] = str(self.broker.pop_service.long_polling.parked_count())
        table.update({
            "brokerVersionDesc": f"OrbitMQ {__version__}",
            # The broker's own MQVersion ordinal, as 5.3.x's runtime info (not the caller's).
            "brokerVersion": str(DEFAULT_VERSION),
            "brokerName": cfg.broker_name,
            "brokerId": str(cfg.broker_id),
            "brokerAddr": cfg.broker_addr,
            "clusterName": cfg.broker_cluster_name,
            "brokerRole": str(self.broker.store_config.broker_role),
            "bootTimestamp": str(self.started_at),
            "runtime": f"[ {int((time.time() * 1000 - self.started_at) / 1000)} seconds ]",
            "pythonVersion": platform.python_version(),
            "sendThreadPoolQueueSize": str(len(self.broker.send_queue)),
            "sendThreadPoolQueueCapacity": str(cfg.send_thread_pool_queue_capacity),
            "sendThreadPoolQueueHeadWaitTimeMills": str(self.broker.send_queue.head_wait_ms()),
            "brokerActive": str(bool(self.broker._special_services_on)).lower(),
            "startAcceptSendRequestTimeStamp": str(cfg.start_accept_send_request_time_stamp),
            "pullRequestHoldCount": str(self.broker.pull_request_hold_service.parked_count()),
            "consumerGroupCount": str(len(self.broker.consumer_manager.consumer_table)),
            "producerGroupCount": str(self.broker.producer_manager.group_count()),
            "topicCount": str(len(self.broker.topic_config_manager.topic_names())),
        })
        # Pulls and acks are served on the event loop, not from thread pools: their queues
        # (which clusterList's #OutTPS(LOAD) shows) never hold a request.
        for pool, capacity in (("pull", cfg.pull_thread_pool_queue_capacity), ("ack", ACK_THREAD_POOL_QUEUE_CAPACITY)):
            table.update({f"{pool}ThreadPoolQueueSize": "0", f"{pool}ThreadPoolQueueCapacity": str(capacity),
                          f"{pool}ThreadPoolQueueHeadWaitTimeMills": "0"})
        table.update(self._timer_runtime_info())
        return request.response_to(ResponseCode.SUCCESS, None, None, encode_json_body({"table": table}))

    def _timer_runtime_info(self) -> dict[str, str]:
        """AdminBrokerProcessor#prepareRuntimeInfo's timer keys (clusterList's #Timer(Progress)):
        seconds the dequeue is behind, messages the enqueue is behind, messages in the wheel. The
        wheel keeps no per-second counters, so timerEnqueueTps/timerDequeueTps are left out (the
        tool then prints 0.0)."""
        timer = self.broker.timer_message_store
        if not self.broker.store_config.timer_wheel_enable or not timer.running:
            return {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
                    "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
        stats = timer.stats()
        figures = timer.wheel_figures()
        return {"timerReadBehind": str(stats["dequeueLatencySec"]), "timerOffsetBehind": str(stats["enqueueLag"]),
                "timerCongestNum": str(figures[0] if figures is not None else 0)}

    # ---- reset offsets ------------------------------------------------------------------------

    async def reset_offset(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        f = Fields(request.ext_fields)
        topic, group = f.str("topic"), f.str("group")
        timestamp = f.long("timestamp")
        force = f.bool("isForce", True)
        config = self._topic_config(topic)
        offsets = self.broker.consumer_offset_manager
        table: dict[Any, int] = {}
        new_offsets: dict[int, int] = {}
        broker_name = self.broker.config.broker_name
        queue_ids = range(config.write_queue_nums)
        if f.has("queueId") and f.int("queueId") >= 0:
            # 5.x: reset one queue, to an explicit offset when given.
            queue_id = f.int("queueId")
            if queue_id >= max(config.write_queue_nums, config.read_queue_nums):
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"queueId[{queue_id}] is illegal for topic {topic}")
            queue_ids = range(queue_id, queue_id + 1)
            if f.has("offset") and f.long("offset") >= 0:
                target = min(f.long("offset"), self.broker.message_store.get_max_offset_in_queue(topic, queue_id))
                offsets.commit_offset(group, topic, queue_id, target, self.broker.remote_addr(channel))
                await offsets.persist_async()
                body = fastjson.dumps({"offsetTable": {
                    fastjson.message_queue_key(topic, broker_name, queue_id): target}}).encode("utf-8")
                return request.response_to(ResponseCode.SUCCESS, None, None, body)
        for queue_id in queue_ids:
            current = offsets.query_offset(group, topic, queue_id)
            if timestamp == -1:
                target = self.broker.message_store.get_max_offset_in_queue(topic, queue_id)
            else:
                target = self.broker.message_store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            if not force and 0 <= current <= target:
                target = current
            new_offsets[queue_id] = target
            table[fastjson.message_queue_key(topic, broker_name, queue_id)] = target
        for queue_id, target in new_offsets.items():
            offsets.commit_offset(group, topic, queue_id, target, self.broker.remote_addr(channel))
        await offsets.persist_async()
        body = fastjson.dumps({"offsetTable": table}).encode("utf-8")
        notify_fields = {"topic": topic, "group": group, "timestamp": str(timestamp),
                         "isForce": "true" if force else "false"}
        self.broker.notify_reset_offset(group, notify_fields, body)
        log.info("reset offset of group %s topic %s to timestamp %d: %s", group, topic, timestamp, new_offsets)
        return request.response_to(ResponseCode.SUCCESS, None, None, body)

    # ---- runtime config -------------------------------------------------------------------------

    async def update_broker_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: body "key=value" lines; only keys safe to change while running."""
        if not request.body:
            raise RequestError(ResponseCode.SYSTEM_ERROR, "UPDATE_BROKER_CONFIG body is empty")
        try:
            text = bytes(request.body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"config body is not UTF-8: {exc}") from None
        updates: dict[str, str] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"bad config line {line[:80]!r}: expected key=value")
            updates[key.strip()] = value.strip()
        try:
            changed = self.broker.update_runtime_config(updates)
        except PermissionError as exc:
            raise RequestError(ResponseCode.NO_PERMISSION, str(exc)) from None
        except ValueError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        log.info("updateBrokerConfig %s from %s", changed, self.broker.remote_addr(channel))
        # As upstream (Configuration.persist to brokerConfigPath): the change outlives a restart.
        path = self.broker.config.broker_config_path
        if path:
            try:
                await asyncio.to_thread(persist_config_updates, path, changed)
            except OSError as exc:
                log.error("updateBrokerConfig applied but not persisted to %s: %s", path, exc)
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"applied, but persisting to {path} failed: "
                                                              f"{exc}") from None
        return request.response_to(ResponseCode.SUCCESS)

    async def get_broker_config(self, request: RemotingCommand, channel: Any) -> RemotingCommand:
        text = self.broker.config.to_properties() + self.broker.store_config.to_properties()
        version = encode_json_body(self.broker.topic_config_manager.data_version.to_json_dict()).decode()
        return request.response_to(ResponseCode.SUCCESS, None, {"version": version}, text.encode("utf-8"))


def persist_config_updates(path: str, updates: dict[str, str]) -> None:
    """Rewrite the broker's -c file with ``updates``: each key's line replaced in place, new keys
    appended, every other line (comments included) kept.

    Upstream dumps every field of the live config into the file; writing only the changed keys
    keeps the operator's file as they wrote it and never persists a value the broker derived
    while running (a controller-mode brokerId, a port chosen at bind)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    pending = dict(updates)
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        key = stripped.split("=", 1)[0].strip()
        if key in pending:
            lines[index] = f"{key}={pending.pop(key)}"
    lines += [f"{key}={value}" for key, value in pending.items()]
    write_file_atomically(path, ("\n".join(lines) + "\n").encode("utf-8"))
