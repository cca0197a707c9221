"""The Kafka-source options of the "rocketmq" data source, without Spark or a cluster: parsing and
its errors (every one names the option), partition planning (a queue's range cut into slices
with no overlap and no gap) and the lag metrics computed from a progress."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark", reason="the Spark source needs the spark extra")

from orbitmq.clientcore.message import MessageQueue  # noqa: E402
from orbitmq.spark.metrics import lag, offsets_behind_latest  # noqa: E402
from orbitmq.spark.options import (  # noqa: E402
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    RocketMQOptionError,
    parse_duration_ms,
    parse_read,
    plan_ranges,
)

EP = {"endpoints": "127.0.0.1:8081", "topic": "A,B"}
PATTERN = {"endpoints": "127.0.0.1:8081", "topicPattern": "orders-.*", "namesrvAddr": "127.0.0.1:9876"}


def test_trigger_limits_and_the_kafka_alias() -> None:
    ro = parse_read({**EP, "maxOffsetsPerTrigger": "500", "minOffsetsPerTrigger": "100", "maxTriggerDelay": "30s"},
                    True)
    assert (ro.max_messages_per_trigger, ro.min_messages_per_trigger, ro.max_trigger_delay_ms) == (500, 100, 30_000)
    assert parse_read({**EP, "minOffsetsPerTrigger": "5"}, True).max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS
    assert parse_read({**EP, "maxMessagesPerTrigger": "7"}, True).max_messages_per_trigger == 7


@pytest.mark.parametrize(("text", "ms"), [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("2h", 7_200_000),
                                          ("1d", 86_400_000), ("250", 250), (" 3MIN ", 180_000), ("0s", 0)])
def test_durations_as_spark_reads_them(text: str, ms: int) -> None:
    assert parse_duration_ms(text, "maxTriggerDelay") == ms


def test_subscription_by_pattern() -> None:
    ro = parse_read(PATTERN, True)
    assert ro.topics == [] and ro.topic_pattern.pattern == "orders-.*" and ro.namesrv_addr == "127.0.0.1:9876"
    assert ro.topic_allowed("orders-eu") and not ro.topic_allowed("xorders-eu") and not ro.topic_allowed("orders")
    # Offsets and timestamps may name any topic the pattern matches.
    ro = parse_read({**PATTERN, "startingOffsetsByTimestamp": '{"orders-1": {"broker-a/0": 5}}'}, False)
    assert ro.starting_by_timestamp == {"orders-1": {"broker-a/0": 5}}


def test_timestamps_json_and_strategy() -> None:
    ro = parse_read({**EP, "startingOffsetsByTimestamp": json.dumps({"A": {"broker-a/0": 10, "broker-b/3": 20}}),
                     "startingOffsetsByTimestampStrategy": "LATEST",
                     "endingOffsetsByTimestamp": json.dumps({"B": {"broker-a/1": 30}})}, False)
    assert ro.starting_by_timestamp == {"A": {"broker-a/0": 10, "broker-b/3": 20}}
    assert ro.ending_by_timestamp == {"B": {"broker-a/1": 30}} and ro.starting_by_timestamp_strategy == "latest"
    assert parse_read({**EP, "startingTimestamp": "5"}, True).starting_by_timestamp_strategy is None


def test_partition_options_and_include_properties() -> None:
    ro = parse_read({**EP, "minPartitions": "8", "maxRecordsPerPartition": "1000", "includeProperties": "false"},
                    False)
    assert (ro.min_partitions, ro.max_records_per_partition, ro.include_properties) == (8, 1000, False)
    assert parse_read(EP, True).include_properties  # the column stays by default


@pytest.mark.parametrize(("options", "streaming", "message"), [
    ({**EP, "topicPattern": "A.*", "namesrvAddr": "h:1"}, True, "options topic and topicPattern exclude each other"),
    ({**PATTERN, "topicPattern": "orders-(["}, True, "option topicPattern is not a valid regular expression"),
    ({**PATTERN, "topicPattern": " "}, True, "option topicPattern cannot be blank"),
    ({"endpoints": "h:1", "topicPattern": "x.*"}, True, "option topicPattern needs option namesrvAddr"),
    ({**PATTERN, "namesrvAddr": "nohost"}, True, "option namesrvAddr: bad address 'nohost'"),
    ({**EP, "namesrvAddr": "h:1"}, True, "option namesrvAddr is only used with topicPattern"),
    ({"endpoints": "h:1"}, True, "option topic is required"),
    ({**EP, "minPartitions": "0"}, False, "option minPartitions must be a positive integer, not '0'"),
    ({**EP, "minPartitions": "-3"}, True, "option minPartitions must be a positive integer"),
    ({**EP, "minPartitions": "many"}, False, "option minPartitions must be an integer"),
    ({**EP, "maxRecordsPerPartition": "0"}, False, "option maxRecordsPerPartition must be a positive integer"),
    ({**EP, "minOffsetsPerTrigger": "10", "maxTriggerDelay": "soon"}, True,
     "option maxTriggerDelay must be a duration such as '15m'"),
    ({**EP, "minOffsetsPerTrigger": "10", "maxTriggerDelay": "5 parsecs"}, True, "option maxTriggerDelay must be"),
    ({**EP, "minOffsetsPerTrigger": "10", "maxTriggerDelay": "-5s"}, True, "option maxTriggerDelay cannot be negative"),
    ({**EP, "maxTriggerDelay": "5s"}, True, "option maxTriggerDelay bounds the wait of minOffsetsPerTrigger"),
    ({**EP, "minOffsetsPerTrigger": "101", "maxOffsetsPerTrigger": "100"}, True,
     "option minOffsetsPerTrigger (101) is greater than maxOffsetsPerTrigger (100)"),
    ({**EP, "minOffsetsPerTrigger": "101", "maxMessagesPerTrigger": "100"}, True,
     "is greater than maxMessagesPerTrigger (100)"),
    ({**EP, "maxOffsetsPerTrigger": "1", "maxMessagesPerTrigger": "1"}, True, "are the same limit"),
    ({**EP, "minOffsetsPerTrigger": "0"}, True, "option minOffsetsPerTrigger must be >= 1"),
    ({**EP, "minOffsetsPerTrigger": "5"}, False, "minoffsetspertrigger does not apply to a batch read"),
    ({**EP, "endingOffsetsByTimestamp": '{"A": {"broker-a/0": 1}}'}, True, "does not apply to a streaming read"),
    ({**EP, "startingOffsetsByTimestamp": '{"C": {"broker-a/0": 1}}'}, True,
     "option startingOffsetsByTimestamp names topic 'C', which is not in option topic (A, B)"),
    ({**PATTERN, "startingOffsetsByTimestamp": '{"audit": {"broker-a/0": 1}}'}, True,
     "names topic 'audit', which is not in option topicPattern (orders-.*)"),
    ({**PATTERN, "startingOffsets": '{"audit": {"broker-a": {"0": 1}}}'}, True,
     "option startingOffsets names topic 'audit'"),
    ({**EP, "startingOffsetsByTimestamp": '{"A": {"0": 1}}'}, True,
     "option startingOffsetsByTimestamp: queue key '0' of topic A is not \"<brokerName>/<queueId>\""),
    ({**EP, "startingOffsetsByTimestamp": '{"A": {"broker-a/x": 1}}'}, True, "queue key 'broker-a/x'"),
    ({**EP, "startingOffsetsByTimestamp": '{"A": {"broker-a/0": -1}}'}, True, "must be epoch milliseconds >= 0"),
    ({**EP, "startingOffsetsByTimestamp": '{"A": {"broker-a/0": 1}'}, True,
     "option startingOffsetsByTimestamp is not valid JSON"),
    ({**EP, "startingOffsetsByTimestamp": '{"A": {}}'}, True, "must map queue keys"),
    ({**EP, "startingOffsetsByTimestamp": '{"A": {"broker-a/0": 1}}', "startingOffsets": "earliest"}, True,
     "options startingOffsets and startingOffsetsByTimestamp exclude each other"),
    ({**EP, "startingOffsetsByTimestamp": '{"A": {"broker-a/0": 1}}', "startingTimestamp": "1"}, True,
     "options startingTimestamp and startingOffsetsByTimestamp exclude each other"),
    ({**EP, "endingOffsetsByTimestamp": '{"A": {"broker-a/0": 1}}', "endingOffsets": "latest"}, False,
     "options endingOffsets and endingOffsetsByTimestamp exclude each other"),
    ({**EP, "startingOffsetsByTimestampStrategy": "earliest", "startingTimestamp": "1"}, True,
     "option startingOffsetsByTimestampStrategy must be error or latest"),
    ({**EP, "startingOffsetsByTimestampStrategy": "latest"}, True,
     "option startingOffsetsByTimestampStrategy applies to startingOffsetsByTimestamp or startingTimestamp"),
    ({**EP, "includeProperties": "sometimes"}, False, "option includeProperties must be true or false"),
])
def test_bad_input_names_the_option(options: dict, streaming: bool, message: str) -> None:
    with pytest.raises(RocketMQOptionError) as info:
        parse_read(options, streaming)
    assert message in str(info.value), str(info.value)


def _covers_exactly(ranges: dict, slices: list) -> None:
    """Per queue, the slices are contiguous, ordered, non-empty and cover [start, end) exactly."""
    for key, (start, end) in ranges.items():
        mine = [(lo, hi) for k, lo, hi in slices if k == key]
        if end <= start:
            assert mine == []
            continue
        assert mine[0][0] == start and mine[-1][1] == end
        assert all(lo < hi for lo, hi in mine)
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))


def test_plan_one_partition_per_queue_by_default() -> None:
    ranges = {"q0": (0, 100), "q1": (50, 60), "q2": (7, 7)}
    assert plan_ranges(ranges, None, None) == [("q0", 0, 100), ("q1", 50, 60)]


def test_plan_max_records_per_partition() -> None:
    ranges = {"q0": (0, 100), "q1": (10, 35)}
    slices = plan_ranges(ranges, None, 30)
    _covers_exactly(ranges, slices)
    assert [(lo, hi) for k, lo, hi in slices if k == "q0"] == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert all(hi - lo <= 30 for _, lo, hi in slices)


def test_plan_min_partitions_in_proportion_to_size() -> None:
    ranges = {"q0": (0, 300), "q1": (0, 100)}
    slices = plan_ranges(ranges, 4, None)
    _covers_exactly(ranges, slices)
    assert sum(1 for k, _, _ in slices if k == "q0") == 3 and sum(1 for k, _, _ in slices if k == "q1") == 1
    # Enough partitions already: left as they are.
    assert len(plan_ranges(ranges, 2, None)) == 2
    # Never a slice smaller than one message, whatever minPartitions asks.
    tiny = {"q0": (5, 8)}
    assert plan_ranges(tiny, 10, None) == [("q0", 5, 6), ("q0", 6, 7), ("q0", 7, 8)]


def test_plan_both_options_max_first_then_min() -> None:
    ranges = {"q0": (0, 1000), "q1": (0, 10)}
    slices = plan_ranges(ranges, 20, 400)
    _covers_exactly(ranges, slices)
    assert len(slices) >= 19 and all(hi - lo <= 400 for _, lo, hi in slices)


def test_plan_property_no_overlap_no_gap() -> None:
    import random

    rnd = random.Random(27)
    for _ in range(300):
        ranges = {f"q{i}": (s, s + rnd.randint(0, 500)) for i in range(rnd.randint(1, 6))
                  for s in [rnd.randint(0, 10_000)]}
        slices = plan_ranges(ranges, rnd.choice([None, 1, 3, 17, 64]), rnd.choice([None, 1, 7, 100, 1000]))
        _covers_exactly(ranges, slices)


PROGRESS = {"sources": [{
    "description": "rocketmq",
    "startOffset": json.dumps({"T": {"broker-a": {"0": 0, "1": 0}}}),
    "endOffset": json.dumps({"T": {"broker-a": {"0": 10, "1": 40}}}),
    "latestOffset": json.dumps({"T": {"broker-a": {"0": 30, "1": 40, "2": 6}}}),
}]}


def test_offsets_behind_latest_from_a_progress() -> None:
    behind = offsets_behind_latest(PROGRESS)
    assert behind == {MessageQueue("T", "broker-a", 0): 20, MessageQueue("T", "broker-a", 1): 0,
                      MessageQueue("T", "broker-a", 2): 6}
    assert lag(PROGRESS) == {"minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 20,
                             "avgOffsetsBehindLatest": pytest.approx(26 / 3)}
    assert lag(json.dumps(PROGRESS)) == lag(PROGRESS)  # its JSON too
    assert lag({"sources": [{"endOffset": None, "latestOffset": None}]}) == {}  # before the first batch
    other = {"sources": [{"endOffset": '{"logOffset": 3}', "latestOffset": None}, PROGRESS["sources"][0]]}
    assert lag(other)["maxOffsetsBehindLatest"] == 20  # the first source of the rocketmq shape


def test_topic_pattern_never_matches_internal_topics() -> None:
    from orbitmq.spark.clients import is_user_topic

    assert is_user_topic("orders-eu")
    assert not any(is_user_topic(t) for t in ("%RETRY%G", "%DLQ%G", "TBW102", "rmq_sys_wheel_timer",
                                              "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC"))


def _reader(**options):
    from orbitmq.spark.source import RocketMQStreamReader

    reader = object.__new__(RocketMQStreamReader)  # no cluster: only the trigger rule is used
    reader.opts = parse_read({**EP, **options}, True)
    reader._target, reader._last_trigger_ms = None, 0
    return reader


def test_min_offsets_per_trigger_waits_until_the_delay(monkeypatch) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    from orbitmq.spark import source

    now = [1_000_000.0]
    monkeypatch.setattr(source.time, "time", lambda: now[0])
    r = _reader(minOffsetsPerTrigger="100", maxTriggerDelay="10s", maxOffsetsPerTrigger="500")
    limit = r.getDefaultReadLimit()
    assert limit == ReadMaxRows(500)  # no CompositeReadLimit in pyspark: min is the source's own
    assert not r._delay(limit, 3)  # the first trigger is never delayed (lastTriggerMillis = 0)
    now[0] += 1
    assert r._delay(limit, 99)  # fewer than min, delay not passed: skipped
    assert not r._delay(limit, 100)  # enough: a batch, and the delay counts from here
    now[0] += 9.9
    assert r._delay(limit, 5)
    now[0] += 0.1
    assert not r._delay(limit, 5)  # 10 s since the last batch: fired even below min
    assert not r._delay(ReadAllAvailable(), 0)  # Trigger.Once reads all
    r._target = {}
    assert not r._delay(limit, 1)  # AvailableNow never waits
    only_min = _reader(minOffsetsPerTrigger="7")
    assert only_min.getDefaultReadLimit() == ReadMinRows(7)
    only_min._last_trigger_ms = int(now[0] * 1000)
    assert only_min._delay(ReadMinRows(7), 6) and not only_min._delay(ReadMinRows(7), 7)
