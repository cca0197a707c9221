"""MQClientInstance: what every producer and consumer of one client id shares (MQClientInstance,
MQClientManager, ClientRemotingProcessor).

One Remoting connection pool, topic routes from the NameServers refreshed every
pollNameServerInterval (30 s) and on send errors, heartbeats every heartbeatBrokerInterval (30 s)
to every broker the routes name (masters only while no consumer is registered), the consumers'
rebalance (20 s, or at once on NOTIFY_CONSUMER_IDS_CHANGED) and offset persistence (5 s) loops,
UNREGISTER_CLIENT when a producer or consumer leaves, and the processors of the requests a broker
sends a client (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY,
PUSH_REPLY_MESSAGE_TO_CLIENT).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from orbitmq.auth.client import AclClientRPCHook
from orbitmq.client.api import ConsumerData, MessageQueueRef, MQClientAPI, ProducerData, heartbeat_fingerprint
from orbitmq.client.errors import MQBrokerError, MQClientError
from orbitmq.client.request_reply import decode_push_reply
from orbitmq.client.route_cache import TopicRouteCache
from orbitmq.common import fastjson
from orbitmq.common.message import MessageConst, MessageExt
from orbitmq.common.message_codec import decode_record
from orbitmq.common.route import TopicRouteData, dump_json
from orbitmq.remoting import headers as h
from orbitmq.remoting.client import RemotingClient
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.errors import RemotingError
from orbitmq.remoting.protocol import RemotingCommand
from orbitmq.remoting_client.config import RemotingClientConfig
from orbitmq.remoting_client.publish_info import (
    MASTER_ID,
    TopicPublishInfo,
    route_to_publish_info,
    route_to_subscribe_queues,
)
from orbitmq.remoting_client.request_reply import RequestFutureHolder

if TYPE_CHECKING:
    from orbitmq.remoting.channel import Channel

log = logging.getLogger("orbitmq.remoting_client")

# MixAll.CLIENT_INNER_PRODUCER_GROUP: every client heartbeats as a producer of it, so brokers can
# reach it (replies, check-backs) even before it registered a producer of its own.
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
# ClientErrorCode (client-side codes upstream's MQClientException carries)
CONNECT_BROKER_EXCEPTION = 10001
ACCESS_BROKER_TIMEOUT = 10002
BROKER_NOT_EXIST_EXCEPTION = 10003
NO_NAME_SERVER_EXCEPTION = 10004
NOT_FOUND_TOPIC_EXCEPTION = 10005
REQUEST_TIMEOUT_EXCEPTION = 10006
CREATE_REPLY_MESSAGE_EXCEPTION = 10007


class ProducerInner(Protocol):
    """What the instance asks of a producer (MQProducerInner)."""

    group_name: str

    def publish_topics(self) -> set[str]: ...
    def is_publish_topic_need_update(self, topic: str) -> bool: ...
    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...
    async def check_transaction_state(self, addr: str, msg: MessageExt,
                                      header: h.CheckTransactionStateRequestHeader) -> None: ...


class ConsumerInner(Protocol):
    """What the instance asks of a consumer (MQConsumerInner); rconsumer's consumers implement it."""

    group_name: str

    def consumer_data(self) -> ConsumerData: ...
    async def do_rebalance(self) -> None: ...
    async def persist_consumer_offset(self) -> None: ...
    def update_topic_subscribe_info(self, topic: str, queues: set[MessageQueueRef]) -> None: ...
    def is_subscribe_topic_need_update(self, topic: str) -> bool: ...
    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]: ...
    def consumer_running_info(self) -> dict[str, Any]: ...
    async def reset_offset(self, topic: str, offsets: dict[MessageQueueRef, int]) -> None: ...


_instances: dict[str, MQClientInstance] = {}


def get_or_create_instance(config: RemotingClientConfig) -> MQClientInstance:
    """MQClientManager#getOrCreateMQClientInstance: one instance per client id in a process."""
    client_id = config.build_mq_client_id()
    instance = _instances.get(client_id)
    if instance is None or instance.closed:
        instance = _instances[client_id] = MQClientInstance(config, client_id)
    return instance


class MQClientInstance:
    def __init__(self, config: RemotingClientConfig, client_id: str | None = None) -> None:
        self.config = config
        self.client_id = client_id or config.build_mq_client_id()
        self.namesrv_addrs = config.namesrv_addrs()
        if not self.namesrv_addrs:
            raise MQClientError("No name server address, please set it (namesrv_addr or NAMESRV_ADDR)",
                                NO_NAME_SERVER_EXCEPTION)
        remoting = RemotingClient(connect_timeout=config.mq_client_api_timeout)
        remoting.reconnect_for_go_away = config.enable_reconnect_for_go_away
        remoting.ssl_context = config.ssl_context()
        credentials = config.credentials()
        if credentials is not None:
            remoting.rpc_hook = AclClientRPCHook(*credentials, config.security_token)
        self.api = MQClientAPI(remoting, timeout=config.mq_client_api_timeout)
        self._routes = TopicRouteCache(self.api, self.namesrv_addrs, config.poll_name_server_interval)
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        # useHeartbeatV2: brokers that answered IS_SUPPORT_HEART_BEAT_V2, and the fingerprint each holds
        self._heartbeat_v2_brokers: set[str] = set()
        self._broker_heartbeat_fingerprints: dict[str, int] = {}
        self.last_route_error: dict[str, str] = {}  # why the last route fetch of a topic failed
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self.request_futures = RequestFutureHolder()
        self._tasks: list[asyncio.Task[None]] = []
        self._pending: set[asyncio.Future[None]] = set()  # UNREGISTER_CLIENT, check-backs in flight
        self._rebalance_wakeup = asyncio.Event()
        self._started = False
        self.closed = False
        self._start_lock = asyncio.Lock()
        for code, processor in (
                (RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state),
                (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_notify_consumer_ids_changed),
                (RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset),
                (RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_get_consumer_status),
                (RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_consumer_running_info),
                (RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_message_directly),
                (RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_push_reply)):
            remoting.register_processor(code, processor)

    # ---- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the periodic tasks (MQClientInstance#startScheduledTask); idempotent."""
        async with self._start_lock:
            if self._started:
                return
            if self.closed:
                raise MQClientError(f"the client instance {self.client_id} is shut down; create a new one")
            self._started = True
            cfg = self.config
            self._tasks = [
                self._every(cfg.poll_name_server_interval, self.update_topic_route_from_name_server, "route"),
                self._every(cfg.heartbeat_broker_interval, self._heartbeat_and_clean, "heartbeat"),
                self._every(cfg.persist_consumer_offset_interval, self._persist_all_consumer_offset, "persist"),
                asyncio.create_task(self._rebalance_loop(), name=f"rebalance-{self.client_id}"),
            ]

    def _every(self, interval: float, job: Callable[[], Awaitable[Any]], name: str) -> asyncio.Task[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await job()
                except Exception:  # a scheduled task keeps running whatever one round hit
                    log.exception("%s task of client %s failed", name, self.client_id)
        return asyncio.create_task(loop(), name=f"{name}-{self.client_id}")

    async def shutdown(self) -> None:
        """Stop the tasks and close the connections; a no-op while producers or consumers remain."""
        if self.producers or self.consumers or self.closed:
            return
        self.closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._pending:  # let the last UNREGISTER_CLIENTs reach the brokers
            await asyncio.wait(list(self._pending), timeout=self.config.mq_client_api_timeout)
        self.request_futures.fail_all(MQClientError("the client instance shut down"))
        await self.api.remoting.close()
        if _instances.get(self.client_id) is self:
            del _instances[self.client_id]

    # ---- registration -------------------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerInner) -> bool:
        if group in self.producers:
            return False
        self.producers[group] = producer
        return True

    def unregister_producer(self, group: str) -> None:
        """Forget the producer and tell every broker (UNREGISTER_CLIENT) in the background."""
        if self.producers.pop(group, None) is not None:
            self._spawn(self._unregister_client(group, None))

    def register_consumer(self, group: str, consumer: ConsumerInner) -> bool:
        if group in self.consumers:
            return False
        self.consumers[group] = consumer
        return True

    def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            self._spawn(self._unregister_client(None, group))

    async def unregister_producer_now(self, group: str) -> None:
        """unregister_producer, waiting for the brokers' answers (the producers' shutdown uses it)."""
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(group, None)

    async def unregister_consumer_now(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(None, group)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        """MQClientInstance#unregisterClient: UNREGISTER_CLIENT to every known broker address."""
        addrs = {addr for table in self.broker_addr_table.values() for addr in table.values()}
        results = await asyncio.gather(*(self.api.unregister_client(
            addr, self.client_id, producer_group, consumer_group) for addr in addrs), return_exceptions=True)
        for addr, result in zip(addrs, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("unregister client %s (producer %s, consumer %s) from %s failed: %s", self.client_id,
                            producer_group, consumer_group, addr, result)

    # ---- routes -------------------------------------------------------------------------------

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The cached route, fetched on a miss; MQClientError(TOPIC_NOT_EXIST) for a topic without one."""
        route = self.topic_route_table.get(topic)
        if route is not None:
            return route
        await self._fetch_and_apply(topic)
        return self.topic_route_table[topic]

    async def update_topic_route(self, topic: str) -> bool:
        """MQClientInstance#updateTopicRouteInfoFromNameServer(topic): fetch now; True when it changed.

        False (logged) when the NameServers have no route or cannot be reached: callers keep the
        route they have, as upstream does.
        """
        try:
            changed = await self._fetch_and_apply(topic)
        except (MQClientError, MQBrokerError, RemotingError, OSError) as exc:
            log.info("update route of topic %s from NameServers failed: %s", topic, exc)
            self.last_route_error[topic] = str(exc)
            return False
        self.last_route_error.pop(topic, None)
        return changed

    async def _fetch_and_apply(self, topic: str) -> bool:
        route = await self._routes.fetch(topic)
        old = self.topic_route_table.get(topic)
        changed = old is None or old.to_json_dict() != route.to_json_dict()
        if not changed:
            changed = self._is_need_update_topic_route_info(topic)
        if changed:
            known = {addr for table in self.broker_addr_table.values() for addr in table.values()}
            for bd in route.broker_datas:
                self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
            if any(addr not in known for bd in route.broker_datas for addr in bd.broker_addrs.values()):
                # A broker seen for the first time learns of this client now, not at the next 30 s
                # heartbeat: its check-backs, replies and rebalance notifications need the channel.
                self._spawn(self.send_heartbeat_to_all_brokers())
            info = route_to_publish_info(topic, route)
            for producer in list(self.producers.values()):
                producer.update_topic_publish_info(topic, info)
            if self.consumers:
                queues = set(route_to_subscribe_queues(topic, route))
                for consumer in list(self.consumers.values()):
                    consumer.update_topic_subscribe_info(topic, queues)
            self.topic_route_table[topic] = route
        return changed

    def _is_need_update_topic_route_info(self, topic: str) -> bool:
        return (any(p.is_publish_topic_need_update(topic) for p in self.producers.values())
                or any(c.is_subscribe_topic_need_update(topic) for c in self.consumers.values()))

    def _topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for producer in list(self.producers.values()):
            topics |= producer.publish_topics()
        for consumer in list(self.consumers.values()):
            topics |= {s.topic for s in consumer.consumer_data().subscriptions}
        return topics

    async def update_topic_route_from_name_server(self) -> None:
        """The 30 s refresh of every topic a producer publishes to or a consumer subscribes."""
        for topic in sorted(self._topics_in_use()):
            await self.update_topic_route(topic)

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master's address (brokerId 0) of a broker group, None when unknown or masterless."""
        table = self.broker_addr_table.get(broker_name)
        return table.get(MASTER_ID) if table else None

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this: bool) -> tuple[str, int, bool] | None:
        """MQClientInstance#findBrokerAddressInSubscribe: (addr, brokerId, slave) of ``broker_id``,
        else (unless ``only_this``) any member of the group."""
        table = self.broker_addr_table.get(broker_name)
        if not table:
            return None
        addr = table.get(broker_id)
        if addr is not None:
            return addr, broker_id, broker_id != MASTER_ID
        if only_this:
            return None
        chosen = min(table)
        return table[chosen], chosen, chosen != MASTER_ID

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        """Any live member of one broker group of the topic (MQClientInstance#findBrokerAddrByTopic)."""
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        return route.broker_datas[0].select_broker_addr()

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP on one broker of the topic; [] when none answers."""
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            return []
        try:
            return await self.api.get_consumer_list(addr, group)
        except (MQBrokerError, RemotingError, OSError) as exc:
            log.warning("get consumer list of group %s from %s failed: %s", group, addr, exc)
            return []

    async def subscribe_queues(self, topic: str) -> list[MessageQueueRef]:
        """The topic's readable queues (topicRouteData2TopicSubscribeInfo)."""
        return route_to_subscribe_queues(topic, await self.topic_route(topic))

    def broker_name_of_addr(self, addr: str) -> str | None:
        for name, table in self.broker_addr_table.items():
            if addr in table.values():
                return name
        return None

    # ---- heartbeats ---------------------------------------------------------------------------

    def _heartbeat_data(self) -> tuple[list[ProducerData], list[ConsumerData]]:
        producers = [ProducerData(group) for group in self.producers]
        if producers:
            producers.append(ProducerData(CLIENT_INNER_PRODUCER_GROUP))
        consumers = [c.consumer_data() for c in list(self.consumers.values())]
        return producers, consumers

    async def send_heartbeat_to_all_brokers(self, is_rebalance: bool = False) -> None:
        """HEART_BEAT with every producer and consumer group to the brokers the routes name: the
        masters only while there is no consumer (a slave serves no producer), else every member.
        With use_heartbeat_v2, MQClientInstance#sendHeartbeatToAllBrokerV2: a rebalance
        (``is_rebalance``) forgets the fingerprints each broker has, so the subscriptions go again."""
        producers, consumers = self._heartbeat_data()
        if not producers and not consumers:
            return
        targets = [addr for table in list(self.broker_addr_table.values()) for bid, addr in table.items()
                   if consumers or bid == MASTER_ID]
        if self.config.use_heartbeat_v2:
            if is_rebalance:
                self._broker_heartbeat_fingerprints.clear()
            fingerprint = heartbeat_fingerprint(producers, consumers)
            calls = [self._send_heartbeat_v2(addr, producers, consumers, fingerprint) for addr in targets]
        else:
            calls = [self.api.heartbeat(addr, self.client_id, producers, consumers) for addr in targets]
        results = await asyncio.gather(*calls, return_exceptions=True)
        for addr, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                log.info("heartbeat of client %s to %s failed: %s", self.client_id, addr, result)

    async def _send_heartbeat_v2(self, addr: str, producers: list[ProducerData], consumers: list[ConsumerData],
                                 fingerprint: int) -> None:
        """MQClientInstance#sendHeartbeatToBrokerV2: subscriptions left out only for a broker known to
        take V2 heartbeats that holds this very fingerprint; a broker asking for them (IS_SUB_CHANGE)
        gets them next time."""
        if addr in self._heartbeat_v2_brokers and self._broker_heartbeat_fingerprints.get(addr) == fingerprint:
            result = await self.api.heartbeat(addr, self.client_id, producers, consumers,
                                              fingerprint=fingerprint, without_sub=True)
            if result.sub_change:
                self._broker_heartbeat_fingerprints.pop(addr, None)
            return
        result = await self.api.heartbeat(addr, self.client_id, producers, consumers, fingerprint=fingerprint)
        if result.support_v2:
            self._heartbeat_v2_brokers.add(addr)
            if result.sub_change:
                self._broker_heartbeat_fingerprints.pop(addr, None)
            else:
                self._broker_heartbeat_fingerprints[addr] = fingerprint

    async def _heartbeat_and_clean(self) -> None:
        self._clean_offline_brokers()
        await self.send_heartbeat_to_all_brokers()

    def _clean_offline_brokers(self) -> None:
        """MQClientInstance#cleanOfflineBroker: drop addresses no route names any longer."""
        live = {(bd.broker_name, bid, addr) for route in self.topic_route_table.values()
                for bd in route.broker_datas for bid, addr in bd.broker_addrs.items()}
        for name in list(self.broker_addr_table):
            table = {bid: addr for bid, addr in self.broker_addr_table[name].items() if (name, bid, addr) in live}
            if table:
                self.broker_addr_table[name] = table
            else:
                del self.broker_addr_table[name]

    # ---- consumers' periodic work -------------------------------------------------------------

    def rebalance_immediately(self) -> None:
        """Wake the rebalance loop now (RebalanceService#wakeup)."""
        self._rebalance_wakeup.set()

    async def _rebalance_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rebalance_wakeup.wait(), self.config.rebalance_interval)
            self._rebalance_wakeup.clear()
            for consumer in list(self.consumers.values()):
                try:
                    await consumer.do_rebalance()
                except Exception:  # one group's failure must not stop the others' rebalance
                    log.exception("rebalance of group %s failed", consumer.group_name)

    async def _persist_all_consumer_offset(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_consumer_offset()
            except Exception:
                log.exception("persist consumer offset of group %s failed", consumer.group_name)

    # ---- ClientRemotingProcessor --------------------------------------------------------------

    async def _on_check_transaction_state(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """CHECK_TRANSACTION_STATE: hand the half message to its group's producer; no response."""
        try:
            header = h.CheckTransactionStateRequestHeader.from_command(request)
            msg = decode_record(bytes(request.body or b""), 0, False)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("bad CHECK_TRANSACTION_STATE from %s: %s", _remote(channel), exc)
            return None
        if self.config.namespace:
            msg.topic = self.config.without_namespace(msg.topic)
        uniq = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            msg.properties[MessageConst.TRANSACTION_ID] = uniq
        group = msg.properties.get(MessageConst.PRODUCER_GROUP)
        producer = self.producers.get(group or "")
        if producer is None:
            log.debug("check transaction state, but the producer group %s is not registered here", group)
            return None
        self._spawn(producer.check_transaction_state(_remote(channel), msg, header))
        return None

    async def _on_notify_consumer_ids_changed(self, request: RemotingCommand, channel: Channel) -> None:
        log.info("receive broker's notification [%s], the consumer group %s changed, rebalance immediately",
                 _remote(channel), (request.ext_fields or {}).get("consumerGroup"))
        self.rebalance_immediately()
        return None

    def _consumer_or_error(self, request: RemotingCommand, group: str) -> ConsumerInner | RemotingCommand:
        consumer = self.consumers.get(group)
        if consumer is None:
            return request.response_to(ResponseCode.SYSTEM_ERROR,
                                       f"The Consumer Group <{group}> not exist in this consumer")
        return consumer

    async def _on_reset_offset(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET: the broker's ResetOffsetBody to the group's consumer."""
        fields = request.ext_fields or {}
        topic, group = str(fields.get("topic") or ""), str(fields.get("group") or "")
        consumer = self.consumers.get(group)
        if consumer is None or not request.body:
            return None
        offsets = _offset_table(fastjson.loads(request.body).get("offsetTable", {}))
        await consumer.reset_offset(topic, offsets)
        return None

    async def _on_get_consumer_status(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the group's offsets of one topic (GetConsumerStatusBody)."""
        fields = request.ext_fields or {}
        topic, group = str(fields.get("topic") or ""), str(fields.get("group") or "")
        found = self._consumer_or_error(request, group)
        if isinstance(found, RemotingCommand):
            return found
        table: dict[Any, int] = {}
        offset_table = getattr(found, "offset_table", None)  # optional: consumers with an offset store
        if offset_table is not None:
            for mq, offset in offset_table(topic).items():
                table[fastjson.message_queue_key(mq.topic, mq.broker_name, mq.queue_id)] = offset
        response = request.response_to(ResponseCode.SUCCESS, None)
        response.body = fastjson.dumps({"messageQueueTable": table, "consumerTable": {}}).encode("utf-8")
        return response

    async def _on_get_consumer_running_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        group = str((request.ext_fields or {}).get("consumerGroup") or "")
        found = self._consumer_or_error(request, group)
        if isinstance(found, RemotingCommand):
            return found
        response = request.response_to(ResponseCode.SUCCESS, None)
        response.body = fastjson.dumps(found.consumer_running_info()).encode("utf-8")
        return response

    async def _on_consume_message_directly(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        fields = request.ext_fields or {}
        group = str(fields.get("consumerGroup") or "")
        found = self._consumer_or_error(request, group)
        if isinstance(found, RemotingCommand):
            return found
        try:
            msg = decode_record(bytes(request.body or b""), 0, False)
        except (ValueError, TypeError) as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, f"bad message: {exc}")
        result = await found.consume_message_directly(msg, str(fields.get("brokerName") or ""))
        response = request.response_to(ResponseCode.SUCCESS, None)
        response.body = dump_json(result)
        return response

    async def _on_push_reply(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT (ClientRemotingProcessor#receiveReplyMessage)."""
        try:
            reply = decode_push_reply(request)
        except (ValueError, zlib.error) as exc:
            log.warning("unreadable reply message from %s: %s", _remote(channel), exc)
            return request.response_to(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        self.request_futures.complete(reply)
        return request.response_to(ResponseCode.SUCCESS, None)


def _offset_table(raw: dict[Any, Any]) -> dict[MessageQueueRef, int]:
    result: dict[MessageQueueRef, int] = {}
    for key, value in raw.items():
        d = key.as_dict() if isinstance(key, fastjson.ObjectKey) else {}
        if {"topic", "brokerName", "queueId"} <= d.keys():
            result[MessageQueueRef.from_json_dict(d)] = int(value)
    return result


def _remote(channel: Any) -> str:
    return str(getattr(channel, "remote_address", "") or "")
