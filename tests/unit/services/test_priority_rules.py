"""RIP-80 priority messages and Settings.client_properties: the rules, module by module.

core/common (message type by properties, the queue of a priority, priority.factor), the broker's
POP (queue walk, when a pop runs in priority order), the proxy's conversions (gRPC priority to
the _SYS_MSG_PRIORITY_ property and back, refusals) and its client_properties checks.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from types import SimpleNamespace

import pytest

from orbitmq.broker.pop import dead_letter
from orbitmq.broker.pop.config import PopConfig
from orbitmq.broker.pop.pop_processor import PopHeader, PopMessageProcessor, priority_walk
from orbitmq.common.message import STRING_HASH_SET, MessageConst, MessageExt, parse_properties_exact
from orbitmq.common.subscription_group import SubscriptionGroupConfig, validate_group_attributes
from orbitmq.common.topic_config import (
    TopicConfig,
    TopicMessageType,
    message_priority,
    message_type_of_properties,
    priority_queue_id,
)
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proxy import converter, validation
from orbitmq.proxy.config import ProxyConfig
from orbitmq.proxy.errors import ProxyError

C = MessageConst
Code = pb.Code
P = C.PRIORITY


# ---- core/common ------------------------------------------------------------------------------


def test_property_name_and_reserved() -> None:
    assert P == "_SYS_MSG_PRIORITY_"
    assert P in STRING_HASH_SET  # a user property cannot fake it


@pytest.mark.parametrize(("props", "expected"), [
    ({P: "3"}, TopicMessageType.PRIORITY),
    ({P: "3", C.SHARDING_KEY: "g"}, TopicMessageType.FIFO),
    ({P: "3", C.TIMER_DELIVER_MS: "1"}, TopicMessageType.DELAY),
    ({P: "3", C.DELAY_TIME_LEVEL: "2"}, TopicMessageType.DELAY),
    ({P: "3", C.TRANSACTION_PREPARED: "true"}, TopicMessageType.TRANSACTION),
    ({}, TopicMessageType.NORMAL),
])
def test_message_type_of_properties_ranks_priority_after_fifo(props: dict[str, str],
                                                              expected: TopicMessageType) -> None:
    assert message_type_of_properties(props) == expected


def test_priority_picks_its_queue_capped_at_the_last() -> None:
    assert [priority_queue_id({P: str(p)}, 4) for p in (0, 1, 3, 4, 99)] == [0, 1, 3, 3, 3]
    assert priority_queue_id({}, 4) is None
    assert priority_queue_id({P: "-1"}, 4) is None
    assert priority_queue_id({P: "high"}, 4) is None  # getPriority: not a number is -1
    assert priority_queue_id({P: "2", C.SHARDING_KEY: "g"}, 4) is None  # FIFO: the property is dropped
    assert message_priority({P: "7"}) == 7 and message_priority({}) == -1


def test_priority_topic_type_and_group_factor() -> None:
    assert TopicConfig("T", attributes={"+message.type": "PRIORITY"}).message_type == TopicMessageType.PRIORITY
    assert SubscriptionGroupConfig("G").priority_factor == 100
    assert SubscriptionGroupConfig("G", attributes={"priority.factor": "30"}).priority_factor == 30
    validate_group_attributes({"priority.factor": "0"})
    validate_group_attributes({"priority.factor": "100"})
    for bad in ("101", "-1", "lots"):
        with pytest.raises(ValueError, match="priority.factor"):
            validate_group_attributes({"priority.factor": bad})


# ---- broker POP -------------------------------------------------------------------------------


def test_priority_walk_goes_from_the_highest_queue() -> None:
    assert [priority_walk(i, 4, True) for i in range(4)] == [3, 2, 1, 0]
    assert [priority_walk(i, 4, False) for i in range(4)] == [0, 1, 2, 3]


def _pop_processor(factor: int | None, retry_probability_for_priority: int = 0) -> tuple[PopMessageProcessor, list]:
    """A PopMessageProcessor whose queue walks are recorded instead of read."""
    groups = {} if factor is None else {"G": SubscriptionGroupConfig("G", attributes={"priority.factor": str(factor)})}
    broker = SimpleNamespace(now_ms=lambda: 0, subscription_group_manager=SimpleNamespace(get=groups.get))
    pop = SimpleNamespace(broker=broker, revive_queue_num=lambda: 8,
                          config=PopConfig(pop_from_retry_probability=0,
                                           pop_from_retry_probability_for_priority=retry_probability_for_priority))
    proc = PopMessageProcessor.__new__(PopMessageProcessor)
    proc.pop, proc.broker, proc._ck_counter, proc._random = pop, broker, itertools.count(), random.Random(7)
    walks: list = []

    async def walk(topic, is_retry, header, batch, message_filter, random_q, client, topic_config=None,
                   priority_mode=False):
        walks.append((is_retry, random_q, priority_mode))

    proc._pop_from_topic = walk  # type: ignore[method-assign]
    return proc, walks


def _header(order: bool = False) -> PopHeader:
    return PopHeader(consumer_group="G", topic="T", queue_id=-1, max_msg_nums=32, invisible_time=30_000,
                     poll_time=0, born_time=0, init_mode=0, exp=None, exp_type=None, order=order, attempt_id=None)


def _modes(proc: PopMessageProcessor, walks: list, topic_type: str, order: bool = False, n: int = 50) -> set:
    topic = TopicConfig("T", 4, 4, attributes={"message.type": topic_type})
    for _ in range(n):
        asyncio.run(proc.pop_once(_header(order), topic, None, "c"))
    return {(is_retry, mode) for is_retry, _q, mode in walks}


def test_pop_runs_in_priority_order_on_priority_topics_only() -> None:
    proc, walks = _pop_processor(None)  # no group config: priority.factor 100
    assert _modes(proc, walks, "PRIORITY") == {(False, True), (True, True)}
    assert all(q == 0 for _r, q, _m in walks)  # the walk starts at the top, not at a random queue
    proc, walks = _pop_processor(None)
    assert _modes(proc, walks, "NORMAL") == {(False, False), (True, False)}


def test_priority_factor_zero_and_fifo_turn_priority_order_off() -> None:
    proc, walks = _pop_processor(0)
    assert _modes(proc, walks, "PRIORITY") == {(False, False), (True, False)}
    proc, walks = _pop_processor(None)
    assert _modes(proc, walks, "PRIORITY", order=True) == {(False, False), (True, False)}


def test_priority_factor_shares_the_pops() -> None:
    proc, walks = _pop_processor(50)
    _modes(proc, walks, "PRIORITY", n=400)
    share = sum(1 for is_retry, _q, mode in walks if not is_retry and mode) / 400
    assert 0.35 < share < 0.65


def test_retries_first_only_with_the_priority_probability() -> None:
    proc, walks = _pop_processor(None, retry_probability_for_priority=100)
    _modes(proc, walks, "PRIORITY", n=5)
    # The retry topic is read first on every pop, and not again after the topic.
    assert [is_retry for is_retry, _q, _m in walks] == [True, False] * 5


# ---- proxy: gRPC priority <-> property --------------------------------------------------------


def _grpc_message(priority: int | None = None, group: str | None = None, delivery_ms: int | None = None,
                  message_type: int = pb.MessageType.PRIORITY) -> pb.Message:
    sysp = pb.SystemProperties(message_id="0A0000000000000000000000000000AA", message_type=message_type,
                               body_encoding=pb.Encoding.IDENTITY)
    if priority is not None:
        sysp.priority = priority
    if group is not None:
        sysp.message_group = group
    if delivery_ms is not None:
        sysp.delivery_timestamp.FromMilliseconds(delivery_ms)
    return pb.Message(topic=pb.Resource(name="T"), body=b"x", system_properties=sysp)


def test_priority_becomes_the_property_on_both_encoders() -> None:
    config = ProxyConfig()
    message = _grpc_message(5)
    props = converter.build_message_properties(message, "PG", "127.0.0.1:1", config)
    assert props[P] == "5"
    # The compiled encoder (when built) hands priority messages to the Python one: same string.
    encoded, message_id, message_type = converter.encode_message_properties(message, "PG", "127.0.0.1:1", config)
    assert parse_properties_exact(encoded)[0] == props
    assert message_type == pb.MessageType.PRIORITY and message_id == message.system_properties.message_id
    plain, _id, plain_type = converter.encode_message_properties(_grpc_message(None, message_type=pb.MessageType.NORMAL),
                                                                 "PG", "127.0.0.1:1", config)
    assert P not in parse_properties_exact(plain)[0] and plain_type == pb.MessageType.NORMAL


def test_priority_zero_is_a_priority() -> None:
    assert converter.message_type_of_request(_grpc_message(0)) == pb.MessageType.PRIORITY


def test_group_or_delivery_outrank_the_priority() -> None:
    assert converter.message_type_of_request(_grpc_message(2, group="g")) == pb.MessageType.FIFO
    assert converter.message_type_of_request(_grpc_message(2, delivery_ms=4_102_444_800_000)) == pb.MessageType.DELAY


def test_negative_priority_is_a_bad_request() -> None:
    with pytest.raises(ProxyError) as refused:
        converter.encode_message_properties(_grpc_message(-3), "PG", "127.0.0.1:1", ProxyConfig())
    assert refused.value.code == Code.BAD_REQUEST and "priority" in str(refused.value)


def test_delivered_priority_messages_carry_priority_and_type() -> None:
    msg = MessageExt(topic="T", body=b"x", properties={P: "4", C.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "ID1"}, queue_id=3,
                     queue_offset=0, born_timestamp=1, born_host="127.0.0.1:1", store_timestamp=2,
                     store_host="127.0.0.1:10911", msg_id="ID1", commit_log_offset=0)
    out = converter.build_proto_message(msg)
    assert out.system_properties.priority == 4 and out.system_properties.message_type == pb.MessageType.PRIORITY
    plain = converter.build_proto_message(MessageExt(topic="T", body=b"x", properties={}, msg_id="ID2"))
    assert not plain.system_properties.HasField("priority")
    assert plain.system_properties.message_type == pb.MessageType.NORMAL


# ---- proxy: Settings.client_properties ---------------------------------------------------------


def _settings(props: dict[str, str]) -> pb.Settings:
    return pb.Settings(client_type=pb.ClientType.PRODUCER, client_properties=props)


def test_client_properties_within_limits() -> None:
    validation.validate_client_properties(_settings({}))
    validation.validate_client_properties(_settings({f"k{i}": "v" * 100 for i in range(32)}))
    validation.validate_client_properties(_settings({"a" * 64: "v" * 256, "app.name-1_x": ""}))


@pytest.mark.parametrize(("props", "why"), [
    ({f"k{i}": "v" for i in range(33)}, "33 entries"),
    ({"a" * 65: "v"}, "at most 64"),
    ({"1app": "v"}, "must match"),
    ({"app name": "v"}, "must match"),
    ({"app": "v" * 257}, "longer than 256"),
    ({f"k{i:02d}": "v" * 250 for i in range(17)}, "more than 4096"),
])
def test_client_properties_over_a_limit(props: dict[str, str], why: str) -> None:
    with pytest.raises(ProxyError) as refused:
        validation.validate_client_properties(_settings(props))
    assert refused.value.code == Code.INVALID_CLIENT_PROPERTIES
    assert why in str(refused.value) and "INVALID_CLIENT_PROPERTIES" in str(refused.value)


# ---- broker POP: useSeparateRetryQueue ----------------------------------------------------------


class _Topics:
    def __init__(self, *configs: TopicConfig) -> None:
        self.table = {c.topic_name: c for c in configs}

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def create_topic_in_send_message_back_method(self, topic, queue_nums, perm, topic_sys_flag=0):
        if topic in self.table:
            return self.table[topic], False
        self.table[topic] = TopicConfig(topic, queue_nums, queue_nums, perm=perm)
        return self.table[topic], True

    def put(self, tc: TopicConfig) -> TopicConfig | None:
        old, self.table[tc.topic_name] = self.table.get(tc.topic_name), tc
        return old


def _dead_letter_broker(topics: _Topics) -> SimpleNamespace:
    changed: list = []
    return SimpleNamespace(topic_config_manager=topics, on_metadata_changed=lambda **kw: changed.append(kw),
                           config=SimpleNamespace(broker_ip1="127.0.0.1", listen_port=10911), changed=changed)


def _popped(queue_id: int, topic: str = "T") -> MessageExt:
    return MessageExt(topic=topic, body=b"x", properties={P: str(queue_id), C.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "U"},
                      queue_id=queue_id, msg_id="M")


def test_revived_message_goes_to_queue_zero_by_default() -> None:
    topics = _Topics(TopicConfig("T", 4, 4, attributes={"message.type": "PRIORITY"}))
    inner = dead_letter.retry_message(_dead_letter_broker(topics), "T", "G", _popped(3), pop_time=1)
    assert inner.topic == "%RETRY%G_T" and inner.queue_id == 0
    assert topics.table["%RETRY%G_T"].write_queue_nums == 1
    assert inner.properties[P] == "3"  # the priority travels with the retry


def test_separate_retry_queue_keeps_the_queue_and_grows_the_retry_topic() -> None:
    topics = _Topics(TopicConfig("T", 4, 4, attributes={"message.type": "PRIORITY"}),
                     TopicConfig("%RETRY%G_T", 1, 1))
    broker = _dead_letter_broker(topics)
    inner = dead_letter.retry_message(broker, "T", "G", _popped(3), pop_time=1, separate_queue=True)
    assert inner.queue_id == 3
    assert (topics.table["%RETRY%G_T"].read_queue_nums, topics.table["%RETRY%G_T"].write_queue_nums) == (4, 4)
    assert broker.changed == [{"topics": True}]
    # A message revived again from the retry topic keeps its retry queue; one past it goes to 0.
    assert dead_letter.retry_message(broker, "%RETRY%G_T", "G", _popped(2, "%RETRY%G_T"), 1, True).queue_id == 2
    assert dead_letter.retry_message(broker, "%RETRY%G_T", "G", _popped(6, "%RETRY%G_T"), 1, True).queue_id == 0
