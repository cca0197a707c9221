"""ConsumerFilterManager, ExpressionMessageFilter / ExpressionForRetryMessageFilter and
CommitLogDispatcherCalcBitMap, as upstream's broker filter package behaves."""

import json

from orbitmq.broker.client.channel_info import ClientChannelInfo
from orbitmq.broker.client.consumer_manager import ConsumerManager
from orbitmq.broker.filter import (
    CommitLogDispatcherCalcBitMap,
    ConsumerFilterManager,
    ExpressionForRetryMessageFilter,
    ExpressionMessageFilter,
)
from orbitmq.broker.filter.consumer_filter_manager import build
from orbitmq.broker.store.consume_queue_ext import CqExtUnit
from orbitmq.broker.store.dispatch import DispatchRequest
from orbitmq.common.filter.subscription import SubscriptionData


def sub(topic, expression, version=1, kind="SQL92"):
    return {"topic": topic, "subString": expression, "expressionType": kind, "subVersion": version,
            "classFilterMode": False, "tagsSet": [], "codeSet": []}


def test_register_versions_and_death(tmp_path):
    m = ConsumerFilterManager(str(tmp_path))
    assert not m.register("T", "G", "TagA", "TAG", 1)  # tags are not kept
    assert not m.register("T", "G", "", "SQL92", 1)
    assert not m.register("T", "G", "a >", "SQL92", 1)  # does not compile
    assert m.register("T", "G", "a > 1", "SQL92", 10)
    data = m.get("T", "G")
    assert data.bloom_filter_data == m.bloom_filter.generate("G#T")
    assert not m.register("T", "G", "a > 2", "SQL92", 9)  # older version ignored
    assert m.get("T", "G").expression == "a > 1"
    assert m.register("T", "G", "a > 2", "SQL92", 11)  # newer and changed: replaced
    assert m.get("T", "G").expression == "a > 2" and m.get("T", "G").client_version == 11
    m.unregister("G")
    assert m.get("T", "G").is_dead()
    assert m.register("T", "G", "a > 2", "SQL92", 11)  # same version, dead: alive again
    assert not m.get("T", "G").is_dead()
    assert not m.register("T", "G", "a >", "SQL92", 12)  # newer but broken: removed
    assert m.get("T", "G") is None


def test_register_group_makes_unsubscribed_topics_dead(tmp_path):
    m = ConsumerFilterManager(str(tmp_path))
    m.register_group("G", [sub("T1", "a = 1"), sub("T2", "b = 1"), sub("%RETRY%G", "*", kind="TAG")])
    assert m.get("T1", "G") and m.get("T2", "G") and m.get("%RETRY%G", "G") is None
    m.register_group("G", [sub("T1", "a = 1", version=2)])
    assert not m.get("T1", "G").is_dead() and m.get("T2", "G").is_dead()


def test_heartbeat_events_reach_the_manager(tmp_path):
    m = ConsumerFilterManager(str(tmp_path))
    cm = ConsumerManager()
    cm.on_register, cm.on_unregister = m.register_group, m.unregister
    channel = object()
    cm.register_consumer("G", ClientChannelInfo(channel, "c1", "JAVA", 1), "CONSUME_PASSIVELY", "CLUSTERING",
                         "CONSUME_FROM_LAST_OFFSET", [sub("T", "a = 1")], False)
    assert m.get("T", "G") is not None
    cm.unregister_consumer("G", channel, False)
    assert m.get("T", "G").is_dead()


def test_persisted_json_and_reload(tmp_path):
    m = ConsumerFilterManager(str(tmp_path))
    m.register("T", "G", "a = 1", "SQL92", 5)
    m.persist()
    obj = json.loads((tmp_path / "consumerFilter.json").read_text())
    entry = obj["filterDataByTopic"]["T"]["groupFilterData"]["G"]
    assert obj["filterDataByTopic"]["T"]["topic"] == "T"
    assert entry["bloomFilterData"] == {"bitNum": 112, "bitPos": m.bloom_filter.calc_bit_positions("G#T")}
    assert {k: entry[k] for k in ("consumerGroup", "topic", "expression", "expressionType", "clientVersion",
                                  "deadTime", "dead")} == {
        "consumerGroup": "G", "topic": "T", "expression": "a = 1", "expressionType": "SQL92",
        "clientVersion": 5, "deadTime": 0, "dead": False}
    again = ConsumerFilterManager(str(tmp_path))
    assert again.load()
    data = again.get("T", "G")
    assert data.is_dead() and data.born_time == entry["bornTime"]  # loaded consumers count as dead
    assert data.compiled_expression.evaluate({"a": "1"})
    assert again.register("T", "G", "a = 1", "SQL92", 6) and not again.get("T", "G").is_dead()
    assert again.get("T", "G").born_time == entry["bornTime"]  # same filter: its bit maps still count
    # another bloom filter (expectConsumerNumUseFilter changed): the persisted filters are dropped
    other = ConsumerFilterManager(str(tmp_path), expect_consumer_num=64)
    assert other.load() and other.get("T", "G") is None


def test_clean_drops_long_dead_filters(tmp_path):
    m = ConsumerFilterManager(str(tmp_path), clean_time_span=1000)
    m.register("T", "G", "a = 1", "SQL92", 1)
    m.unregister("G")
    data = m.get("T", "G")
    data.born_time -= 10_000
    data.dead_time -= 5000
    m.persist()
    assert m.get("T", "G") is None and m.filter_data_by_topic == {}


def test_calc_bit_map_and_bloom_filtering(tmp_path):
    m = ConsumerFilterManager(str(tmp_path))
    m.register("T", "G1", "a = 1", "SQL92", 1)
    m.register("T", "G2", "b = 'x'", "SQL92", 1)
    calc = CommitLogDispatcherCalcBitMap(m)
    reqs = [DispatchRequest("T", 0, i, 10, 0, 1000, i, properties=p)
            for i, p in enumerate([{"a": "1"}, {"b": "x"}, {"a": "1", "b": "x"}, {}])]
    for r in reqs:
        calc(r)
    other = DispatchRequest("U", 0, 0, 10, 0, 1000, 0, properties={"a": "1"})
    calc(other)
    assert other.bit_map is None  # no filter on that topic
    assert all(len(r.bit_map) == 14 for r in reqs)
    assert reqs[3].bit_map == bytes(14)
    for d in (m.get("T", "G1"), m.get("T", "G2")):
        d.born_time = 0
    f1 = ExpressionMessageFilter(SubscriptionData(topic="T", sub_string="a = 1", expression_type="SQL92"),
                                 m.get("T", "G1"), m)
    f2 = ExpressionMessageFilter(SubscriptionData(topic="T", sub_string="b = 'x'", expression_type="SQL92"),
                                 m.get("T", "G2"), m)
    units = [CqExtUnit(0, 1000, r.bit_map) for r in reqs]
    assert [f1.is_matched_by_consume_queue_ext(None, u) for u in units] == [True, False, True, False]
    assert [f2.is_matched_by_consume_queue_ext(None, u) for u in units] == [False, True, True, False]
    # no unit, no bit map, a bit map of another size, bloom-less filter data: the CQ stage passes
    assert f1.is_matched_by_consume_queue_ext(None, None)
    assert f1.is_matched_by_consume_queue_ext(None, CqExtUnit(0, 1000, None))
    assert f1.is_matched_by_consume_queue_ext(None, CqExtUnit(0, 1000, bytes(13)))
    pulled = ExpressionMessageFilter(SubscriptionData(topic="T", sub_string="a = 1", expression_type="SQL92"),
                                     build("T", "G1", "a = 1", "SQL92", 1), m)
    assert pulled.is_matched_by_consume_queue_ext(None, units[3])
    assert [f1.is_matched_by_commit_log(r.properties) for r in reqs] == [True, False, True, False]


def test_retry_filter_uses_the_real_topics_expression(tmp_path):
    m = ConsumerFilterManager(str(tmp_path))
    m.register("T", "G", "a = 1", "SQL92", 1)
    m.register("%RETRY%G", "G", "TRUE", "SQL92", 1)
    retry_sub = SubscriptionData(topic="%RETRY%G", sub_string="TRUE", expression_type="SQL92")
    plain = ExpressionMessageFilter(retry_sub, m.get("%RETRY%G", "G"), m)
    retry = ExpressionForRetryMessageFilter(retry_sub, m.get("%RETRY%G", "G"), m)
    match = {"RETRY_TOPIC": "T", "a": "1"}
    miss = {"RETRY_TOPIC": "T", "a": "2"}
    assert plain.is_matched_by_commit_log(match) and plain.is_matched_by_commit_log(miss)
    assert retry.is_matched_by_commit_log(match) and not retry.is_matched_by_commit_log(miss)
    # a retry message of a topic the group has no filter for: no expression, it passes
    assert retry.is_matched_by_commit_log({"RETRY_TOPIC": "Other", "a": "2"})
    # not a retry topic: the subscription's own expression
    own = ExpressionForRetryMessageFilter(SubscriptionData(topic="T", sub_string="a = 1", expression_type="SQL92"),
                                          m.get("T", "G"), m)
    assert own.is_matched_by_commit_log({"a": "1"}) and not own.is_matched_by_commit_log({"a": "3"})
