"""RouteInfoManager registration rules, checked against upstream semantics with a fake clock."""

from __future__ import annotations

from orbitmq.common.constants import PERM_READ, PERM_WRITE
from orbitmq.common.route import DataVersion, TopicConfigSerializeWrapper
from orbitmq.common.topic_config import TopicConfig
from orbitmq.namesrv.config import NamesrvConfig
from orbitmq.namesrv.routeinfo import BrokerAddrInfo, RouteInfoManager, choose_broker_addrs_to_notify


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def wrapper(*topics: tuple[str, int], version: DataVersion | None = None) -> TopicConfigSerializeWrapper:
    table = {"TBW102": TopicConfig("TBW102", 8, 8)}
    for name, queues in topics:
        table[name] = TopicConfig(name, queues, queues)
    return TopicConfigSerializeWrapper(table, version or DataVersion(0, 1, 1))


def make(**config) -> tuple[RouteInfoManager, Clock, list]:
    clock = Clock()
    closed: list = []
    return RouteInfoManager(NamesrvConfig(**config), clock=clock, close_channel=closed.append), clock, closed


def register(rim, name, broker_id, addr, w, *, acting=None, timeout=None, channel=None, cluster="C"):
    return rim.register_broker(cluster, addr, name, broker_id, addr + "-ha", None, timeout, acting, w, None,
                               channel)


def test_slave_learns_master_and_cannot_change_queue_data():
    rim, _, _ = make()
    assert register(rim, "b", 0, "m:1", wrapper(("T", 4))).master_addr is None
    result = register(rim, "b", 1, "s:1", wrapper(("T", 16)))
    assert (result.master_addr, result.ha_server_addr) == ("m:1", "m:1-ha")
    route = rim.pickup_topic_route_data("T")
    assert route.queue_datas[0].read_queue_nums == 4
    assert route.broker_datas[0].broker_addrs == {0: "m:1", 1: "s:1"}


def test_unchanged_data_version_skips_queue_updates_but_changed_version_applies():
    rim, _, _ = make()
    register(rim, "b", 0, "m:1", wrapper(("T", 4), version=DataVersion(0, 1, 1)))
    register(rim, "b", 0, "m:1", wrapper(("T", 8), version=DataVersion(0, 1, 1)))
    assert rim.pickup_topic_route_data("T").queue_datas[0].read_queue_nums == 4
    register(rim, "b", 0, "m:1", wrapper(("T", 8), version=DataVersion(0, 2, 2)))
    assert rim.pickup_topic_route_data("T").queue_datas[0].read_queue_nums == 8


def test_first_registration_with_a_single_topic_is_refused():
    rim, _, _ = make()
    single = TopicConfigSerializeWrapper({"T": TopicConfig("T")}, DataVersion())
    assert register(rim, "b", 0, "m:1", single) is None
    assert rim.pickup_topic_route_data("T") is None


def test_slave_promoted_to_master_keeps_one_entry_per_address():
    rim, _, _ = make()
    register(rim, "b", 0, "m:1", wrapper(("T", 4)))
    register(rim, "b", 1, "s:1", wrapper(("T", 4)))
    rim.unregister_broker("C", "m:1", "b", 0)
    register(rim, "b", 0, "s:1", wrapper(("T", 4), version=DataVersion(0, 5, 5)))
    assert rim.broker_addr_table["b"].broker_addrs == {0: "s:1"}


def test_lower_state_version_cannot_take_over_a_broker_id():
    rim, _, _ = make()
    register(rim, "b", 0, "m:1", wrapper(("T", 4), version=DataVersion(5, 1, 1)))
    result = register(rim, "b", 0, "m:2", wrapper(("T", 4), version=DataVersion(3, 1, 1)))
    assert result is not None and result.master_addr is None
    assert rim.broker_addr_table["b"].broker_addrs == {0: "m:1"}
    assert BrokerAddrInfo("C", "m:2") not in rim.broker_live_table


def test_scan_expires_by_each_brokers_timeout_and_closes_its_channel():
    rim, clock, closed = make(broker_channel_expired_time=2000)
    register(rim, "short", 0, "a:1", wrapper(("A", 1)), channel="chan-a")
    register(rim, "long", 0, "b:1", wrapper(("B", 1)), timeout=10_000, channel="chan-b")
    clock.now += 1500
    assert rim.scan_not_active_broker() == []
    assert rim.update_broker_info_update_timestamp("C", "a:1")  # BROKER_HEARTBEAT keeps it alive
    clock.now += 1500
    assert rim.scan_not_active_broker() == []
    clock.now += 2001
    assert rim.scan_not_active_broker() == [BrokerAddrInfo("C", "a:1")]
    assert closed == ["chan-a"]
    assert rim.pickup_topic_route_data("A") is None and rim.pickup_topic_route_data("B") is not None
    assert rim.get_all_cluster_info().cluster_addr_table == {"C": {"long"}}


def test_channel_destroy_removes_only_that_broker():
    rim, _, _ = make()
    register(rim, "b", 0, "m:1", wrapper(("T", 4)), channel="cm")
    register(rim, "b", 1, "s:1", wrapper(("T", 4)), channel="cs")
    rim.on_channel_destroy("cs")
    assert rim.broker_addr_table["b"].broker_addrs == {0: "m:1"}
    rim.on_channel_destroy("cm")
    assert rim.broker_addr_table == {} and rim.topic_queue_table == {} and rim.cluster_addr_table == {}


def test_acting_master_wipes_write_perm_and_presents_min_slave_as_master():
    rim, _, _ = make(support_acting_master=True)
    register(rim, "b", 0, "m:1", wrapper(("T", 4)), acting=True)
    register(rim, "b", 1, "s:1", wrapper(("T", 4)), acting=True)
    register(rim, "b", 2, "s:2", wrapper(("T", 4)), acting=True)
    rim.unregister_broker("C", "m:1", "b", 0)
    route = rim.pickup_topic_route_data("T")
    assert route.queue_datas[0].perm == PERM_READ
    assert route.broker_datas[0].broker_addrs == {0: "s:1", 2: "s:2"}
    assert rim.broker_addr_table["b"].broker_addrs == {1: "s:1", 2: "s:2"}  # only the answer is rewritten


def test_delete_topic_with_broker_registration():
    rim, _, _ = make(delete_topic_with_broker_registration=True)
    register(rim, "b", 0, "m:1", wrapper(("Old", 1), ("Kept", 1)))
    register(rim, "b", 0, "m:1", wrapper(("Kept", 1), version=DataVersion(0, 2, 2)))
    assert rim.pickup_topic_route_data("Old") is None and rim.pickup_topic_route_data("Kept") is not None


def test_write_perm_admin_operations_and_topic_lists():
    rim, _, _ = make()
    register(rim, "b", 0, "m:1", wrapper(("T", 4)))
    assert rim.wipe_write_perm_of_broker("b") == 2
    assert rim.pickup_topic_route_data("T").queue_datas[0].perm == PERM_READ
    assert rim.add_write_perm_of_broker("b") == 2
    assert rim.pickup_topic_route_data("T").queue_datas[0].perm == PERM_READ | PERM_WRITE
    assert rim.get_system_topic_list().topic_list == ["C", "b"]
    assert rim.get_system_topic_list().broker_addr == "m:1"
    assert rim.get_topics_by_cluster("C").topic_list == ["T", "TBW102"]
    assert rim.get_topics_by_cluster("nope").topic_list == []


def test_min_broker_id_change_notifications():
    calls: list = []
    rim = RouteInfoManager(NamesrvConfig(notify_min_broker_id_changed=True, support_acting_master=True),
                           clock=Clock(), notify_min_broker_id=lambda *args: calls.append(args))
    register(rim, "b", 1, "s:1", wrapper(("T", 4)), acting=True)
    register(rim, "b", 2, "s:2", wrapper(("T", 4)), acting=True)
    assert calls == []
    register(rim, "b", 0, "m:1", wrapper(("T", 4)), acting=True)  # a smaller id joined
    assert calls == [({0: "m:1", 1: "s:1", 2: "s:2"}, None, "m:1-ha")]
    assert choose_broker_addrs_to_notify(*calls[0][:2]) == ["s:1", "s:2"]
    calls.clear()
    rim.unregister_broker("C", "m:1", "b", 0)  # the minimum left
    assert calls == [({1: "s:1", 2: "s:2"}, "m:1", None)]
    assert choose_broker_addrs_to_notify(*calls[0][:2]) == ["s:1", "s:2"]


def test_controller_failover_newer_master_epoch_wins_broker_id_0():
    """Controller mode (RouteInfoManager#registerBroker, #6317): stateVersion = masterEpoch decides who
    holds brokerId 0."""
    rim, _, _ = make()
    register(rim, "b", 0, "m:1", wrapper(("T", 4), version=DataVersion(1, 1, 1)))
    register(rim, "b", 2, "s:1", wrapper(("T", 4), version=DataVersion(1, 1, 1)))
    # The slave is elected (epoch 2) while the old master still looks alive to the NameServer.
    result = register(rim, "b", 0, "s:1", wrapper(("T", 4), version=DataVersion(2, 2, 2)))
    assert result.master_addr is None
    assert rim.broker_addr_table["b"].broker_addrs == {0: "s:1"}
    # The isolated old master re-registers as brokerId 0 with its old epoch: ignored.
    register(rim, "b", 0, "m:1", wrapper(("T", 4), version=DataVersion(1, 1, 1)))
    assert rim.broker_addr_table["b"].broker_addrs == {0: "s:1"}
    assert BrokerAddrInfo("C", "m:1") not in rim.broker_live_table
    # Restarted, it rejoins as a slave with its controller id and learns the new master's HA address.
    result = register(rim, "b", 1, "m:1", wrapper(("T", 4), version=DataVersion(2, 2, 2)))
    assert (result.master_addr, result.ha_server_addr) == ("s:1", "s:1-ha")
    assert rim.broker_addr_table["b"].broker_addrs == {0: "s:1", 1: "m:1"}
    assert rim.pickup_topic_route_data("T").broker_datas[0].broker_addrs == {0: "s:1", 1: "m:1"}


def test_slave_gets_no_ha_address_until_its_master_registered():
    rim, _, _ = make()
    result = register(rim, "b", 2, "s:1", wrapper(("T", 4)))
    assert (result.master_addr, result.ha_server_addr) == (None, None)
    register(rim, "b", 0, "m:1", wrapper(("T", 4), version=DataVersion(3, 1, 1)))
    result = register(rim, "b", 2, "s:1", wrapper(("T", 4)))
    assert (result.master_addr, result.ha_server_addr) == ("m:1", "m:1-ha")
