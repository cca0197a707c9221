"""Route data model: JSON round trips, RocketMQ field names, fastjson's unquoted numeric keys."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbitmq.common.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    RouteDataError,
    TopicConfigAndMappingSerializeWrapper,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicQueueMappingInfo,
    TopicRouteData,
    parse_json,
)
from orbitmq.common.topic_config import TopicConfig

# What a Java NameServer (fastjson, default features) sends for a two-member broker group.
FASTJSON_ROUTE = (
    '{"brokerDatas":[{"brokerAddrs":{0:"192.168.1.10:10911",1:"192.168.1.11:10911"},'
    '"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    '"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
    '"topicSysFlag":0,"writeQueueNums":4}]}'
)
FASTJSON_CLUSTER = (
    '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
    '"cluster":"DefaultCluster","enableActingMaster":false}},'
    '"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)


def sample_route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0), QueueData("broker-b", 8, 2, 4, 1)],
        broker_datas=[BrokerData("C", "broker-a", {0: "h:1", 1: "h:2"}, True, "zone1"),
                      BrokerData("C", "broker-b", {0: "h:3"})],
        order_topic_conf="broker-a:4",
        filter_server_table={"h:1": ["f:1"]},
        topic_queue_mapping_by_broker={"broker-a": TopicQueueMappingInfo("T", total_queues=4, bname="broker-a",
                                                                        epoch=7, curr_id_map={0: 0, 1: 3})},
    )


def test_topic_route_data_round_trip_and_field_names():
    route = sample_route()
    raw = json.loads(route.encode())
    assert set(raw) == {"orderTopicConf", "queueDatas", "brokerDatas", "filterServerTable",
                        "topicQueueMappingByBroker"}
    assert raw["queueDatas"][0] == {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4,
                                    "perm": 6, "topicSysFlag": 0}
    assert raw["brokerDatas"][0] == {"cluster": "C", "brokerName": "broker-a",
                                     "brokerAddrs": {"0": "h:1", "1": "h:2"},
                                     "enableActingMaster": True, "zoneName": "zone1"}
    assert raw["topicQueueMappingByBroker"]["broker-a"]["currIdMap"] == {"0": 0, "1": 3}
    assert TopicRouteData.decode(route.encode()) == route


def test_optional_fields_are_omitted_like_fastjson_nulls():
    raw = json.loads(TopicRouteData(broker_datas=[BrokerData("C", "b")]).encode())
    assert "orderTopicConf" not in raw and "topicQueueMappingByBroker" not in raw
    assert "zoneName" not in raw["brokerDatas"][0]


def test_fastjson_unquoted_numeric_keys_decode():
    route = TopicRouteData.decode(FASTJSON_ROUTE.encode())
    assert route.broker_datas[0].broker_addrs == {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"}
    assert route.broker_datas[0].master_addr == "192.168.1.10:10911"
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    info = ClusterInfo.decode(FASTJSON_CLUSTER)
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    assert info.retrieve_all_addr_by_cluster("DefaultCluster") == ["10.0.0.1:10911"]


def test_bare_keys_inside_strings_are_left_alone():
    assert parse_json('{"s":"{0:1, 2:[3]}", 5:{"x":[1,{6:"a,b"}]}}') == {
        "s": "{0:1, 2:[3]}", "5": {"x": [1, {"6": "a,b"}]}}
    assert parse_json('{ -1 : "neg" , "q\\"uote" : 1 }') == {"-1": "neg", 'q"uote': 1}


def _fastjson_render(value) -> str:
    """Serialize the way fastjson does for Map<Long, ...>: integer keys without quotes."""
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            key = str(k) if isinstance(k, int) else json.dumps(k)
            items.append(f"{key}:{_fastjson_render(v)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_fastjson_render(v) for v in value) + "]"
    return json.dumps(value)


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.text(max_size=8))
fastjson_values = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.integers(-5, 10**9), st.text(max_size=6)), children, max_size=4),
    ),
    max_leaves=20,
)


def _stringify_keys(value):
    if isinstance(value, dict):
        return {str(k): _stringify_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify_keys(v) for v in value]
    return value


@given(fastjson_values)
def test_parse_json_accepts_any_fastjson_rendering(value):
    if isinstance(value, dict) and len({str(k) for k in value}) != len(value):
        return  # 1 and "1" would collide as JSON keys
    assert parse_json(_fastjson_render(value)) == _stringify_keys(value)


@given(st.dictionaries(st.integers(0, 2**40), st.from_regex(r"[0-9.]{1,15}:[0-9]{1,5}", fullmatch=True),
                       max_size=5))
def test_broker_addrs_round_trip_both_dialects(addrs):
    bd = BrokerData("C", "b", addrs)
    assert BrokerData.from_json_dict(parse_json(json.dumps(bd.to_json_dict()))) == bd
    assert BrokerData.from_json_dict(parse_json(_fastjson_render({**bd.to_json_dict(), "brokerAddrs": addrs}))) == bd


def test_garbage_is_a_route_data_error():
    for bad in (b"{not json", b"\xff\xfe", b'{"brokerAddrs":{x:1'):
        with pytest.raises(RouteDataError):
            parse_json(bad)
    with pytest.raises(RouteDataError):
        BrokerData.from_json_dict({"brokerAddrs": {"zero": "h:1"}})
    with pytest.raises(RouteDataError):
        QueueData.from_json_dict({"brokerName": "b", "perm": "rw"})
    with pytest.raises(RouteDataError):
        TopicRouteData.decode(b"[1, 2]")


def test_cluster_info_topic_list_kv_table_round_trip():
    info = ClusterInfo({"b": BrokerData("C", "b", {0: "h:1"})}, {"C": {"b", "a"}})
    assert json.loads(info.encode())["clusterAddrTable"] == {"C": ["a", "b"]}
    assert ClusterInfo.decode(info.encode()) == info
    tl = TopicList(["A", "B"], "h:1")
    assert json.loads(tl.encode()) == {"topicList": ["A", "B"], "brokerAddr": "h:1"}
    assert TopicList.decode(tl.encode()) == tl
    assert json.loads(TopicList(["A"]).encode()) == {"topicList": ["A"]}
    kv = KVTable({"k": "v"})
    assert json.loads(kv.encode()) == {"table": {"k": "v"}}
    assert KVTable.decode(kv.encode()) == kv


def test_data_version_json_and_compare():
    dv = DataVersion(state_version=2, timestamp=1000, counter=5)
    assert json.loads(dv.encode()) == {"stateVersion": 2, "timestamp": 1000, "counter": 5}
    assert DataVersion.decode(dv.encode()) == dv
    newer = dv.copy()
    newer.next_version(2)
    assert newer.counter == 6 and newer.compare(dv) == 1 and dv.compare(newer) == -1
    assert DataVersion.decode('{"counter":3}') == DataVersion(0, 0, 3)


def test_register_broker_body_json_round_trip():
    wrapper = TopicConfigAndMappingSerializeWrapper(
        {"T": TopicConfig("T", 4, 2, 6, topic_sys_flag=1, attributes={"message.type": "FIFO"})},
        DataVersion(1, 123, 9),
        topic_queue_mapping_info_map={"T": TopicQueueMappingInfo("T", total_queues=4, bname="b", epoch=1)},
    )
    body = RegisterBrokerBody(wrapper, ["f:1"])
    raw = json.loads(body.encode())
    assert set(raw) == {"topicConfigSerializeWrapper", "filterServerList"}
    assert raw["topicConfigSerializeWrapper"]["topicConfigTable"]["T"]["topicName"] == "T"
    assert raw["topicConfigSerializeWrapper"]["dataVersion"] == {"stateVersion": 1, "timestamp": 123, "counter": 9}
    assert RegisterBrokerBody.decode(body.encode()) == body
    plain = TopicConfigSerializeWrapper({"T": TopicConfig("T")}, DataVersion(0, 1, 2))
    assert set(json.loads(plain.encode())) == {"topicConfigTable", "dataVersion"}
    assert TopicConfigSerializeWrapper.decode(plain.encode()) == plain


def _java_compressed_body(data_version: bytes, lines: list[str], filters: bytes, mappings: list[bytes]) -> bytes:
    """The byte layout RegisterBrokerBody.encode(true) produces, built independently."""
    out = bytearray(struct.pack(">i", len(data_version)) + data_version)
    out += struct.pack(">i", len(lines))
    for line in lines:
        raw = line.encode()
        out += struct.pack(">i", len(raw)) + raw
    out += struct.pack(">i", len(filters)) + filters
    out += struct.pack(">i", len(mappings))
    for m in mappings:
        out += struct.pack(">i", len(m)) + m
    return zlib.compress(bytes(out), 9)


def test_compressed_register_body_reads_rocketmq_layout():
    data = _java_compressed_body(
        b'{"counter":4,"stateVersion":0,"timestamp":1700000000000}',
        ['TopicA 8 4 6 SINGLE_TAG {"message.type":"FIFO"}', "TopicB 1 1 2 MULTI_TAG {}"],
        b'["10.0.0.9:1"]',
        [b'{"bname":"broker-a","currIdMap":{0:0},"dirty":false,"epoch":3,"scope":"__global__",'
         b'"topic":"TopicA","totalQueues":1}'],
    )
    body = RegisterBrokerBody.decode(data, compressed=True, broker_version=479)
    wrapper = body.topic_config_serialize_wrapper
    assert wrapper.data_version == DataVersion(0, 1700000000000, 4)
    a = wrapper.topic_config_table["TopicA"]
    assert (a.read_queue_nums, a.write_queue_nums, a.perm, a.attributes) == (8, 4, 6, {"message.type": "FIFO"})
    assert wrapper.topic_config_table["TopicB"].topic_filter_type == "MULTI_TAG"
    assert body.filter_server_list == ["10.0.0.9:1"]
    assert wrapper.topic_queue_mapping_info_map["TopicA"].curr_id_map == {0: 0}


def test_compressed_register_body_round_trip_and_garbage():
    wrapper = TopicConfigAndMappingSerializeWrapper({"T": TopicConfig("T", 3, 3, 6)}, DataVersion(0, 5, 1))
    body = RegisterBrokerBody(wrapper, [])
    again = RegisterBrokerBody.decode(body.encode(compress=True), compressed=True)
    assert again.topic_config_serialize_wrapper.topic_config_table == wrapper.topic_config_table
    assert again.topic_config_serialize_wrapper.data_version == wrapper.data_version
    with pytest.raises(RouteDataError):
        RegisterBrokerBody.decode(b"not deflate", compressed=True)
    with pytest.raises(RouteDataError):
        RegisterBrokerBody.decode(zlib.compress(struct.pack(">i", 1000) + b"{}"), compressed=True)
