"""RouteInfoManager: the NameServer's in-memory route tables and their update rules.

All methods are plain synchronous code run on the event loop, so each one is atomic with
respect to the others; that takes the place of upstream's read-write lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orbitmq.common.constants import MASTER_ID, PERM_READ, PERM_WRITE, is_writeable
from orbitmq.common.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfigAndMappingSerializeWrapper,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicQueueMappingInfo,
    TopicRouteData,
)
from orbitmq.common.topic_config import TopicConfig
from orbitmq.namesrv.config import NamesrvConfig

log = logging.getLogger("orbitmq.namesrv")

# TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX: internal topics never rewritten for acting master.
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
# TopicSysFlag bits for unit topics.
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x1 << 1


@dataclass(frozen=True)
class BrokerAddrInfo:
    """A broker process is identified by cluster and address, not by address alone."""

    cluster_name: str
    broker_addr: str


@dataclass
class BrokerLiveInfo:
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: DataVersion
    channel: Any
    ha_server_addr: str | None


@dataclass
class RegisterBrokerResult:
    """What a slave needs back: where its master is and where to connect for HA."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True)
class UnRegisterRequest:
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int


def _now_ms() -> int:
    return int(time.time() * 1000)


# (brokerAddrs of the group, offline broker address, HA address) -> send NOTIFY_MIN_BROKER_ID_CHANGE
MinBrokerIdNotifier = Callable[[dict[int, str], str | None, str | None], None]


def choose_broker_addrs_to_notify(broker_addrs: dict[int, str], offline_broker_addr: str | None) -> list[str]:
    """Everyone after a broker went offline; else (a new smaller id joined) everyone but the new minimum."""
    if offline_broker_addr is not None or len(broker_addrs) == 1:
        return list(broker_addrs.values())
    min_id = min(broker_addrs)
    return [addr for bid, addr in broker_addrs.items() if bid != min_id]


class RouteInfoManager:
    """Tables as upstream: topicQueueTable, brokerAddrTable, clusterAddrTable, brokerLiveTable,
    filterServerTable and topicQueueMappingInfoTable."""

    def __init__(self, config: NamesrvConfig, clock: Callable[[], int] = _now_ms,
                 close_channel: Callable[[Any], None] | None = None,
                 notify_min_broker_id: MinBrokerIdNotifier | None = None) -> None:
        self.config = config
        self._clock = clock
        self._close_channel = close_channel
        self._notify_min_broker_id = notify_min_broker_id
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerAddrInfo, list[str]] = {}
        self.topic_queue_mapping_info_table: dict[str, dict[str, TopicQueueMappingInfo]] = {}

    # ---- registration -------------------------------------------------------------------------

    def register_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str | None, zone_name: str | None, timeout_millis: int | None,
                        enable_acting_master: bool | None,
                        topic_config_wrapper: TopicConfigSerializeWrapper | None,
                        filter_server_list: list[str] | None, channel: Any) -> RegisterBrokerResult | None:
        """Add or refresh a broker; None when a single-topic registration precedes the first full one."""
        result = RegisterBrokerResult()
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        is_old_version_broker = enable_acting_master is None
        broker_data.enable_acting_master = bool(enable_acting_master) and not is_old_version_broker
        broker_data.zone_name = zone_name
        addrs = broker_data.broker_addrs

        prev_min_broker_id = min(addrs) if addrs else 0
        is_min_broker_id_changed = broker_id < prev_min_broker_id

        # Slave switched to master: one address may hold only one brokerId.
        for bid in [bid for bid, addr in addrs.items() if addr == broker_addr and bid != broker_id]:
            del addrs[bid]

        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            old_info = self.broker_live_table.get(BrokerAddrInfo(cluster_name, old_addr))
            if old_info is not None and topic_config_wrapper is not None:
                old_state = old_info.data_version.state_version
                new_state = topic_config_wrapper.data_version.state_version
                if old_state > new_state:
                    log.warning("Registering Broker conflicts with the existed one, just ignore.: Cluster:%s, "
                                "BrokerName:%s, BrokerId:%s, Old BrokerAddr:%s, Old Version:%s, "
                                "New BrokerAddr:%s, New Version:%s.", cluster_name, broker_name, broker_id,
                                old_addr, old_state, broker_addr, new_state)
                    self.broker_live_table.pop(BrokerAddrInfo(cluster_name, broker_addr), None)
                    return result

        if (broker_id not in addrs and topic_config_wrapper is not None
                and len(topic_config_wrapper.topic_config_table) == 1):
            log.warning("Can't register topicConfigWrapper=%s because broker[%s]=%s has not registered.",
                        list(topic_config_wrapper.topic_config_table), broker_id, broker_addr)
            return None

        previous = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or not previous

        is_master = broker_id == MASTER_ID
        is_prime_slave = not is_old_version_broker and not is_master and broker_id == min(addrs)

        if topic_config_wrapper is not None and (is_master or is_prime_slave):
            self._update_topics(cluster_name, broker_addr, broker_name, broker_data, register_first,
                                is_prime_slave, topic_config_wrapper)

        info = BrokerAddrInfo(cluster_name, broker_addr)
        prev_live = self.broker_live_table.get(info)
        self.broker_live_table[info] = BrokerLiveInfo(
            last_update_timestamp=self._clock(),
            heartbeat_timeout_millis=(timeout_millis if timeout_millis is not None
                                      else self.config.broker_channel_expired_time),
            data_version=(topic_config_wrapper.data_version.copy() if topic_config_wrapper is not None
                          else DataVersion()),
            channel=channel,
            ha_server_addr=ha_server_addr,
        )
        if prev_live is None:
            log.info("new broker registered, %s HAService: %s", info, ha_server_addr)

        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[info] = list(filter_server_list)
            else:
                self.filter_server_table.pop(info, None)

        if not is_master:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, master_addr))
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        if is_min_broker_id_changed and self.config.notify_min_broker_id_changed:
            self._notify(dict(addrs), None, ha_server_addr)
        return result

    def _notify(self, broker_addrs: dict[int, str], offline_addr: str | None, ha_addr: str | None) -> None:
        if not broker_addrs or self._notify_min_broker_id is None:
            return
        log.info("min broker id changed to %s, notify %s, offline broker addr %s", min(broker_addrs),
                 choose_broker_addrs_to_notify(broker_addrs, offline_addr), offline_addr)
        self._notify_min_broker_id(broker_addrs, offline_addr, ha_addr)

    def _update_topics(self, cluster_name: str, broker_addr: str, broker_name: str, broker_data: BrokerData,
                       register_first: bool, is_prime_slave: bool,
                       wrapper: TopicConfigSerializeWrapper) -> None:
        table = wrapper.topic_config_table
        mapping: dict[str, TopicQueueMappingInfo] = {}
        if isinstance(wrapper, TopicConfigAndMappingSerializeWrapper):
            mapping = wrapper.topic_queue_mapping_info_map
        if self.config.delete_topic_with_broker_registration and not mapping:
            for topic in self._topics_of_broker_name(broker_name) - set(table):
                queue_map = self.topic_queue_table.get(topic)
                if queue_map is not None and queue_map.pop(broker_name, None) is not None:
                    log.info("deleteTopic, remove one broker's topic %s %s", broker_name, topic)
                if queue_map is not None and not queue_map:
                    log.info("deleteTopic, remove the topic all queue %s", topic)
                    del self.topic_queue_table[topic]
        config_changed = self.is_broker_topic_config_changed(cluster_name, broker_addr, wrapper.data_version)
        for tc in table.values():
            if register_first or config_changed or self._topic_missing_broker(tc.topic_name, broker_name):
                perm = tc.perm
                if is_prime_slave and broker_data.enable_acting_master:
                    # The surviving slave with the smallest id acts as master, read-only.
                    perm &= ~PERM_WRITE
                self._create_and_update_queue_data(broker_name, tc, perm)
        if config_changed or register_first:
            for topic, info in mapping.items():
                self.topic_queue_mapping_info_table.setdefault(topic, {})[info.bname or broker_name] = info

    def _topic_missing_broker(self, topic: str, broker_name: str) -> bool:
        queue_map = self.topic_queue_table.get(topic)
        return not queue_map or broker_name not in queue_map

    def _topics_of_broker_name(self, broker_name: str) -> set[str]:
        return {t for t, qmap in self.topic_queue_table.items() if broker_name in qmap}

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig, perm: int) -> None:
        queue_data = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, perm, tc.topic_sys_flag)
        queue_map = self.topic_queue_table.get(tc.topic_name)
        if queue_map is None:
            self.topic_queue_table[tc.topic_name] = {broker_name: queue_data}
            log.info("new topic registered, %s %s", tc.topic_name, queue_data)
            return
        existed = queue_map.get(broker_name)
        if existed != queue_data:
            if existed is not None:
                log.info("topic changed, %s OLD: %s NEW: %s", tc.topic_name, existed, queue_data)
            queue_map[broker_name] = queue_data

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> bool:
        """REGISTER_TOPIC_IN_NAMESRV: add queue data for known brokers only (all or nothing)."""
        if not queue_datas:
            return False
        for qd in queue_datas:
            if qd.broker_name not in self.broker_addr_table:
                log.warning("Register topic contains illegal broker, %s, %s", topic, qd)
                return False
        queue_map = self.topic_queue_table.setdefault(topic, {})
        for qd in queue_datas:
            queue_map[qd.broker_name] = qd.copy()
        return True

    # ---- data version / liveness ---------------------------------------------------------------

    def query_broker_topic_config(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        return live.data_version if live is not None else None

    def is_broker_topic_config_changed(self, cluster_name: str, broker_addr: str,
                                       data_version: DataVersion | None) -> bool:
        prev = self.query_broker_topic_config(cluster_name, broker_addr)
        return prev is None or prev != data_version

    def update_broker_info_update_timestamp(self, cluster_name: str, broker_addr: str) -> bool:
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        if live is None:
            return False
        live.last_update_timestamp = self._clock()
        return True

    def scan_not_active_broker(self) -> list[BrokerAddrInfo]:
        """Drop brokers silent for longer than their heartbeat timeout; returns who was dropped."""
        now = self._clock()
        expired = [(info, live) for info, live in self.broker_live_table.items()
                   if live.last_update_timestamp + live.heartbeat_timeout_millis < now]
        for info, live in expired:
            log.warning("The broker channel expired, %s %sms", info, live.heartbeat_timeout_millis)
            if self._close_channel is not None and live.channel is not None:
                self._close_channel(live.channel)
            self.on_broker_destroyed(info)
        return [info for info, _ in expired]

    def on_channel_destroy(self, channel: Any) -> None:
        """A broker's connection closed: unregister whichever broker registered over it."""
        for info, live in list(self.broker_live_table.items()):
            if live.channel is channel:
                log.info("the broker's channel destroyed, %s, unregister it at once", info)
                self.on_broker_destroyed(info)

    def on_broker_destroyed(self, info: BrokerAddrInfo) -> None:
        request = self._unregister_request_for(info)
        if request is not None:
            self.unregister_brokers([request])
        else:
            self.broker_live_table.pop(info, None)
            self.filter_server_table.pop(info, None)

    def _unregister_request_for(self, info: BrokerAddrInfo) -> UnRegisterRequest | None:
        for bd in self.broker_addr_table.values():
            if bd.cluster != info.cluster_name:
                continue
            for bid, addr in bd.broker_addrs.items():
                if addr == info.broker_addr:
                    return UnRegisterRequest(info.cluster_name, info.broker_addr, bd.broker_name, bid)
        return None

    # ---- unregistration ------------------------------------------------------------------------

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.unregister_brokers([UnRegisterRequest(cluster_name, broker_addr, broker_name, broker_id)])

    def unregister_brokers(self, requests: list[UnRegisterRequest]) -> None:
        removed_names: set[str] = set()
        reduced_names: set[str] = set()
        need_notify: dict[str, tuple[dict[int, str], str]] = {}
        for req in requests:
            info = BrokerAddrInfo(req.cluster_name, req.broker_addr)
            live = self.broker_live_table.pop(info, None)
            log.info("unregisterBroker, remove from brokerLiveTable %s, %s", "OK" if live else "Failed", info)
            self.filter_server_table.pop(info, None)
            remove_name = False
            bd = self.broker_addr_table.get(req.broker_name)
            if bd is not None:
                was_min = bool(bd.broker_addrs) and req.broker_id == min(bd.broker_addrs)
                for bid in [bid for bid, addr in bd.broker_addrs.items() if addr == req.broker_addr]:
                    del bd.broker_addrs[bid]
                if not bd.broker_addrs:
                    del self.broker_addr_table[req.broker_name]
                    log.info("unregisterBroker, remove name from brokerAddrTable OK, %s", req.broker_name)
                    remove_name = True
                elif was_min:
                    need_notify[req.broker_name] = (dict(bd.broker_addrs), req.broker_addr)
            if remove_name:
                names = self.cluster_addr_table.get(req.cluster_name)
                if names is not None:
                    names.discard(req.broker_name)
                    if not names:
                        del self.cluster_addr_table[req.cluster_name]
                        log.info("unregisterBroker, remove cluster from clusterAddrTable %s", req.cluster_name)
                removed_names.add(req.broker_name)
            else:
                reduced_names.add(req.broker_name)
        self._clean_topics(removed_names, reduced_names)
        if need_notify and self.config.notify_min_broker_id_changed:
            for broker_name, (addrs, offline_addr) in need_notify.items():
                bd = self.broker_addr_table.get(broker_name)
                if bd is not None and bd.enable_acting_master:
                    self._notify(addrs, offline_addr, None)

    def _clean_topics(self, removed_names: set[str], reduced_names: set[str]) -> None:
        for topic in list(self.topic_queue_table):
            queue_map = self.topic_queue_table[topic]
            for name in removed_names:
                queue_map.pop(name, None)
            if not queue_map:
                del self.topic_queue_table[topic]
                continue
            for name in reduced_names:
                qd = queue_map.get(name)
                bd = self.broker_addr_table.get(name)
                if qd is not None and bd is not None and bd.enable_acting_master and self._no_master(name):
                    # The master left: the group stays readable but must not take writes.
                    qd.perm &= ~PERM_WRITE

    def _no_master(self, broker_name: str) -> bool:
        bd = self.broker_addr_table.get(broker_name)
        return bd is None or not bd.broker_addrs or min(bd.broker_addrs) > 0

    # ---- queries -------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        queue_map = self.topic_queue_table.get(topic)
        if not queue_map:
            return None
        route = TopicRouteData(queue_datas=[qd.copy() for qd in queue_map.values()])
        for broker_name in queue_map:
            bd = self.broker_addr_table.get(broker_name)
            if bd is None:
                continue
            clone = bd.copy()
            route.broker_datas.append(clone)
            if self.filter_server_table:
                for addr in clone.broker_addrs.values():
                    servers = self.filter_server_table.get(BrokerAddrInfo(clone.cluster, addr))
                    if servers is not None:
                        route.filter_server_table[addr] = list(servers)
        if not route.broker_datas:
            return None
        mapping = self.topic_queue_mapping_info_table.get(topic)
        route.topic_queue_mapping_by_broker = dict(mapping) if mapping is not None else None
        if self.config.support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
            self._apply_acting_master(route)
        return route

    @staticmethod
    def _apply_acting_master(route: TopicRouteData) -> None:
        """In the returned copy, present a read-only group's smallest-id slave as its master."""
        for bd in route.broker_datas:
            addrs = bd.broker_addrs
            if not addrs or MASTER_ID in addrs or not bd.enable_acting_master:
                continue
            for qd in route.queue_datas:
                if qd.broker_name == bd.broker_name:
                    if not is_writeable(qd.perm):
                        addrs[MASTER_ID] = addrs.pop(min(addrs))
                    break

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={k: v.copy() for k, v in self.broker_addr_table.items()},
            cluster_addr_table={k: set(v) for k, v in self.cluster_addr_table.items()},
        )

    def get_broker_member_group(self, cluster_name: str, broker_name: str) -> dict[int, str]:
        bd = self.broker_addr_table.get(broker_name)
        return dict(bd.broker_addrs) if bd is not None else {}

    def get_all_topic_list(self) -> TopicList:
        return TopicList(sorted(self.topic_queue_table))

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        names = self.cluster_addr_table.get(cluster_name)
        queue_map = self.topic_queue_table.get(topic)
        if not names or queue_map is None:
            return
        for name in names:
            if queue_map.pop(name, None) is not None:
                log.info("deleteTopic, remove one broker's topic %s %s", name, topic)
        if not queue_map:
            log.info("deleteTopic, remove the topic all queue %s %s", cluster_name, topic)
            del self.topic_queue_table[topic]

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster, set())
        topics = {t for t, qmap in self.topic_queue_table.items() if names & set(qmap)}
        return TopicList(sorted(topics))

    def get_system_topic_list(self) -> TopicList:
        """Cluster names and broker names (the topics brokers create for themselves) + one address."""
        topics: list[str] = []
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(sorted(names))
        result = TopicList(list(dict.fromkeys(topics)))
        for bd in self.broker_addr_table.values():
            if bd.broker_addrs:
                result.broker_addr = bd.broker_addrs[min(bd.broker_addrs)]
                break
        return result

    def _topics_with_flag(self, want_unit: bool | None, want_unit_sub: bool | None) -> TopicList:
        topics = []
        for topic, qmap in self.topic_queue_table.items():
            if not qmap:
                continue
            flag = next(iter(qmap.values())).topic_sys_flag
            if want_unit is not None and bool(flag & FLAG_UNIT) != want_unit:
                continue
            if want_unit_sub is not None and bool(flag & FLAG_UNIT_SUB) != want_unit_sub:
                continue
            topics.append(topic)
        return TopicList(sorted(topics))

    def get_unit_topics(self) -> TopicList:
        return self._topics_with_flag(True, None)

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_with_flag(None, True)

    def get_has_unit_sub_un_unit_topic_list(self) -> TopicList:
        return self._topics_with_flag(False, True)

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=False)

    def _operate_write_perm(self, broker_name: str, wipe: bool) -> int:
        count = 0
        for qmap in self.topic_queue_table.values():
            qd = qmap.get(broker_name)
            if qd is None:
                continue
            qd.perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
            count += 1
        return count
