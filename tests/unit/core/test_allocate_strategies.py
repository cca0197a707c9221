"""Allocate strategies against upstream's results for the same inputs.

The UPSTREAM table was produced by running rocketmq-client 5.5.0's AllocateMessageQueue*
classes (MessageQueue lists and consumer ids sorted, as RebalanceImpl#rebalanceByTopic sorts
them) on exactly the inputs rebuilt below; each row is (strategy, queues, consumers, result
per consumer as "brokerName:queueId").
"""

from __future__ import annotations

import pytest

from orbitmq.client.api import MessageQueueRef
from orbitmq.common.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    ConsistentHashRouter,
    allocate_averagely,
    md5_hash,
    message_queue_string,
    strategy_by_name,
)

UPSTREAM = [
    ('AVG', 1, 1, {
        '10.0.0.1@1001': ['broker-a:0'],
    }),
    ('AVG_BY_CIRCLE', 1, 1, {
        '10.0.0.1@1001': ['broker-a:0'],
    }),
    ('CONSISTENT_HASH', 1, 1, {
        '10.0.0.1@1001': ['broker-a:0'],
    }),
    ('CONSISTENT_HASH_3', 1, 1, {
        '10.0.0.1@1001': ['broker-a:0'],
    }),
    ('AVG', 8, 3, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:1', 'broker-a:2'],
        '10.0.0.2@1002': ['broker-a:3', 'broker-b:0', 'broker-b:1'],
        '10.0.0.3@1003': ['broker-b:2', 'broker-b:3'],
    }),
    ('AVG_BY_CIRCLE', 8, 3, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:3', 'broker-b:2'],
        '10.0.0.2@1002': ['broker-a:1', 'broker-b:0', 'broker-b:3'],
        '10.0.0.3@1003': ['broker-a:2', 'broker-b:1'],
    }),
    ('CONSISTENT_HASH', 8, 3, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-b:2'],
        '10.0.0.2@1002': ['broker-a:2', 'broker-b:0', 'broker-b:1'],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:3', 'broker-b:3'],
    }),
    ('CONSISTENT_HASH_3', 8, 3, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:2', 'broker-b:0', 'broker-b:1'],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:3', 'broker-b:2', 'broker-b:3'],
    }),
    ('AVG', 5, 2, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:1', 'broker-a:2'],
        '10.0.0.2@1002': ['broker-a:3', 'broker-a:4'],
    }),
    ('AVG_BY_CIRCLE', 5, 2, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:2', 'broker-a:4'],
        '10.0.0.2@1002': ['broker-a:1', 'broker-a:3'],
    }),
    ('CONSISTENT_HASH', 5, 2, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:1', 'broker-a:3', 'broker-a:4'],
        '10.0.0.2@1002': ['broker-a:2'],
    }),
    ('CONSISTENT_HASH_3', 5, 2, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:1', 'broker-a:2', 'broker-a:3', 'broker-a:4'],
    }),
    ('AVG', 3, 5, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:1'],
        '10.0.0.3@1003': ['broker-a:2'],
        '10.0.0.4@1004': [],
        '10.0.0.5@1005': [],
    }),
    ('AVG_BY_CIRCLE', 3, 5, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:1'],
        '10.0.0.3@1003': ['broker-a:2'],
        '10.0.0.4@1004': [],
        '10.0.0.5@1005': [],
    }),
    ('CONSISTENT_HASH', 3, 5, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': [],
        '10.0.0.3@1003': ['broker-a:1'],
        '10.0.0.4@1004': [],
        '10.0.0.5@1005': ['broker-a:2'],
    }),
    ('CONSISTENT_HASH_3', 3, 5, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:2'],
        '10.0.0.3@1003': ['broker-a:1'],
        '10.0.0.4@1004': [],
        '10.0.0.5@1005': [],
    }),
    ('AVG', 16, 3, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:1', 'broker-a:2', 'broker-a:3', 'broker-a:4', 'broker-a:5'],
        '10.0.0.2@1002': ['broker-a:6', 'broker-a:7', 'broker-b:0', 'broker-b:1', 'broker-b:2'],
        '10.0.0.3@1003': ['broker-b:3', 'broker-b:4', 'broker-b:5', 'broker-b:6', 'broker-b:7'],
    }),
    ('AVG_BY_CIRCLE', 16, 3, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:3', 'broker-a:6', 'broker-b:1', 'broker-b:4', 'broker-b:7'],
        '10.0.0.2@1002': ['broker-a:1', 'broker-a:4', 'broker-a:7', 'broker-b:2', 'broker-b:5'],
        '10.0.0.3@1003': ['broker-a:2', 'broker-a:5', 'broker-b:0', 'broker-b:3', 'broker-b:6'],
    }),
    ('CONSISTENT_HASH', 16, 3, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:4', 'broker-b:2'],
        '10.0.0.2@1002': ['broker-a:2', 'broker-a:5', 'broker-b:0', 'broker-b:1', 'broker-b:4', 'broker-b:5', 'broker-b:6', 'broker-b:7'],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:3', 'broker-a:6', 'broker-a:7', 'broker-b:3'],
    }),
    ('CONSISTENT_HASH_3', 16, 3, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:2', 'broker-a:5', 'broker-a:6', 'broker-b:0', 'broker-b:1', 'broker-b:4', 'broker-b:5', 'broker-b:6'],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:3', 'broker-a:4', 'broker-a:7', 'broker-b:2', 'broker-b:3', 'broker-b:7'],
    }),
    ('AVG', 7, 7, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:1'],
        '10.0.0.3@1003': ['broker-a:2'],
        '10.0.0.4@1004': ['broker-a:3'],
        '10.0.0.5@1005': ['broker-a:4'],
        '10.0.0.6@1006': ['broker-a:5'],
        '10.0.0.7@1007': ['broker-a:6'],
    }),
    ('AVG_BY_CIRCLE', 7, 7, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:1'],
        '10.0.0.3@1003': ['broker-a:2'],
        '10.0.0.4@1004': ['broker-a:3'],
        '10.0.0.5@1005': ['broker-a:4'],
        '10.0.0.6@1006': ['broker-a:5'],
        '10.0.0.7@1007': ['broker-a:6'],
    }),
    ('CONSISTENT_HASH', 7, 7, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': [],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:3'],
        '10.0.0.4@1004': [],
        '10.0.0.5@1005': ['broker-a:2'],
        '10.0.0.6@1006': ['broker-a:5'],
        '10.0.0.7@1007': ['broker-a:4', 'broker-a:6'],
    }),
    ('CONSISTENT_HASH_3', 7, 7, {
        '10.0.0.1@1001': ['broker-a:0'],
        '10.0.0.2@1002': ['broker-a:2', 'broker-a:5'],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:4'],
        '10.0.0.4@1004': ['broker-a:3'],
        '10.0.0.5@1005': ['broker-a:6'],
        '10.0.0.6@1006': [],
        '10.0.0.7@1007': [],
    }),
    ('AVG', 32, 5, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:1', 'broker-a:2', 'broker-a:3', 'broker-a:4', 'broker-a:5', 'broker-a:6'],
        '10.0.0.2@1002': ['broker-a:7', 'broker-b:0', 'broker-b:1', 'broker-b:2', 'broker-b:3', 'broker-b:4', 'broker-b:5'],
        '10.0.0.3@1003': ['broker-b:6', 'broker-b:7', 'broker-c:0', 'broker-c:1', 'broker-c:2', 'broker-c:3'],
        '10.0.0.4@1004': ['broker-c:4', 'broker-c:5', 'broker-c:6', 'broker-c:7', 'broker-d:0', 'broker-d:1'],
        '10.0.0.5@1005': ['broker-d:2', 'broker-d:3', 'broker-d:4', 'broker-d:5', 'broker-d:6', 'broker-d:7'],
    }),
    ('AVG_BY_CIRCLE', 32, 5, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-a:5', 'broker-b:2', 'broker-b:7', 'broker-c:4', 'broker-d:1', 'broker-d:6'],
        '10.0.0.2@1002': ['broker-a:1', 'broker-a:6', 'broker-b:3', 'broker-c:0', 'broker-c:5', 'broker-d:2', 'broker-d:7'],
        '10.0.0.3@1003': ['broker-a:2', 'broker-a:7', 'broker-b:4', 'broker-c:1', 'broker-c:6', 'broker-d:3'],
        '10.0.0.4@1004': ['broker-a:3', 'broker-b:0', 'broker-b:5', 'broker-c:2', 'broker-c:7', 'broker-d:4'],
        '10.0.0.5@1005': ['broker-a:4', 'broker-b:1', 'broker-b:6', 'broker-c:3', 'broker-d:0', 'broker-d:5'],
    }),
    ('CONSISTENT_HASH', 32, 5, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-b:2', 'broker-c:6', 'broker-d:5', 'broker-d:6'],
        '10.0.0.2@1002': ['broker-a:5', 'broker-b:0', 'broker-b:7', 'broker-c:2', 'broker-d:4'],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:3', 'broker-a:6', 'broker-a:7', 'broker-b:3', 'broker-c:1', 'broker-d:1', 'broker-d:7'],
        '10.0.0.4@1004': ['broker-a:4', 'broker-b:4', 'broker-b:5', 'broker-c:4', 'broker-c:5', 'broker-d:2', 'broker-d:3'],
        '10.0.0.5@1005': ['broker-a:2', 'broker-b:1', 'broker-b:6', 'broker-c:0', 'broker-c:3', 'broker-c:7', 'broker-d:0'],
    }),
    ('CONSISTENT_HASH_3', 32, 5, {
        '10.0.0.1@1001': ['broker-a:0', 'broker-c:6', 'broker-d:5'],
        '10.0.0.2@1002': ['broker-a:2', 'broker-a:5', 'broker-b:1', 'broker-b:5', 'broker-c:3', 'broker-c:7'],
        '10.0.0.3@1003': ['broker-a:1', 'broker-a:4', 'broker-a:7', 'broker-b:3', 'broker-b:7', 'broker-c:1', 'broker-c:4', 'broker-d:0', 'broker-d:1', 'broker-d:3', 'broker-d:6'],
        '10.0.0.4@1004': ['broker-a:3', 'broker-b:0', 'broker-b:2', 'broker-b:4', 'broker-c:5', 'broker-d:2', 'broker-d:4'],
        '10.0.0.5@1005': ['broker-a:6', 'broker-b:6', 'broker-c:0', 'broker-c:2', 'broker-d:7'],
    }),
    ('MACHINE_ROOM', 20, 3, {
        '10.0.0.1@1001': ['room1@broker-a:0', 'room1@broker-a:1', 'room1@broker-c:2'],
        '10.0.0.2@1002': ['room1@broker-a:2', 'room1@broker-a:3', 'room1@broker-c:3'],
        '10.0.0.3@1003': ['room1@broker-c:0', 'room1@broker-c:1'],
    }),
    ('MACHINE_ROOM', 20, 5, {
        '10.0.0.1@1001': ['room1@broker-a:0', 'room1@broker-c:1'],
        '10.0.0.2@1002': ['room1@broker-a:1', 'room1@broker-c:2'],
        '10.0.0.3@1003': ['room1@broker-a:2', 'room1@broker-c:3'],
        '10.0.0.4@1004': ['room1@broker-a:3'],
        '10.0.0.5@1005': ['room1@broker-c:0'],
    }),
]

# (total queues, consumers) -> the brokers the queues spread over, as the generator built them.
SHAPES = {(1, 1): ["broker-a"], (8, 3): ["broker-a", "broker-b"], (5, 2): ["broker-a"], (3, 5): ["broker-a"],
          (16, 3): ["broker-a", "broker-b"], (7, 7): ["broker-a"],
          (32, 5): ["broker-a", "broker-b", "broker-c", "broker-d"]}
ROOM_BROKERS = ["room1@broker-a", "room2@broker-b", "room1@broker-c", "broker-d", "room3@x@y"]


def _key(q: MessageQueueRef) -> tuple[str, str, int]:
    return (q.topic, q.broker_name, q.queue_id)


def _queues(total: int, n: int, name: str) -> list[MessageQueueRef]:
    if name == "MACHINE_ROOM":
        qs = [MessageQueueRef("TopicTest", b, i) for b in ROOM_BROKERS for i in range(4)]
    else:
        brokers = SHAPES[(total, n)]
        qs = [MessageQueueRef("TopicTest", b, i) for b in brokers for i in range(total // len(brokers))]
    return sorted(qs, key=_key)


def _strategy(name: str):
    return {
        "AVG": AllocateMessageQueueAveragely(),
        "AVG_BY_CIRCLE": AllocateMessageQueueAveragelyByCircle(),
        "CONSISTENT_HASH": AllocateMessageQueueConsistentHash(),
        "CONSISTENT_HASH_3": AllocateMessageQueueConsistentHash(3),
        "MACHINE_ROOM": AllocateMessageQueueByMachineRoom({"room1", "room3"}),
    }[name]


@pytest.mark.parametrize(("name", "total", "n", "expected"), UPSTREAM,
                         ids=[f"{r[0]}-{r[1]}q-{r[2]}c" for r in UPSTREAM])
def test_same_result_as_upstream(name: str, total: int, n: int, expected: dict[str, list[str]]) -> None:
    queues = _queues(total, n, name)
    cids = sorted(expected)
    assert len(cids) == n
    strategy = _strategy(name)
    for cid in cids:
        got = [f"{q.broker_name}:{q.queue_id}" for q in strategy.allocate("G", cid, queues, cids)]
        assert got == expected[cid], (name, cid)


def test_averagely_function_matches_strategy() -> None:
    """allocate_averagely (the proxy's entry) and the AVG strategy agree on every row."""
    for name, total, n, expected in UPSTREAM:
        if name != "AVG":
            continue
        queues = _queues(total, n, name)
        for cid in expected:
            assert allocate_averagely(queues, sorted(expected), cid) == \
                AllocateMessageQueueAveragely().allocate("G", cid, queues, sorted(expected))


def test_stranger_gets_nothing_and_empty_inputs_are_errors() -> None:
    qs = _queues(8, 3, "AVG")
    for s in (AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(),
              AllocateMessageQueueConsistentHash(), AllocateMessageQueueByMachineRoom({"room1"})):
        assert s.allocate("G", "other@1", qs, ["a@1", "b@1"]) == []
        with pytest.raises(ValueError, match="currentCID is empty"):
            s.allocate("G", "", qs, ["a@1"])
        with pytest.raises(ValueError, match="mqAll"):
            s.allocate("G", "a@1", [], ["a@1"])
        with pytest.raises(ValueError, match="cidAll"):
            s.allocate("G", "a@1", qs, [])


def test_by_config_returns_its_list() -> None:
    chosen = [MessageQueueRef("T", "b", 2)]
    assert AllocateMessageQueueByConfig(chosen).allocate("G", "x", _queues(8, 3, "AVG"), ["x"]) == chosen


def test_consistent_hash_pieces() -> None:
    assert message_queue_string(MessageQueueRef("T", "b", 3)) == "MessageQueue [topic=T, brokerName=b, queueId=3]"
    # MD5("a") = 0cc175b9...: the first four bytes as an unsigned big-endian number.
    assert md5_hash("a") == 0x0CC175B9
    assert ConsistentHashRouter([], 10).route_node("x") is None
    with pytest.raises(ValueError):
        AllocateMessageQueueConsistentHash(-1)
    # Every queue goes to exactly one consumer, and adding one moves only some queues.
    qs = _queues(32, 5, "AVG")
    cids = [f"c{i}" for i in range(5)]
    s = AllocateMessageQueueConsistentHash()
    owners = {q: c for c in cids for q in s.allocate("G", c, qs, cids)}
    assert len(owners) == len(qs)
    owners6 = {q: c for c in [*cids, "c5"] for q in s.allocate("G", c, qs, [*cids, "c5"])}
    assert all(owners6[q] in (owners[q], "c5") for q in qs)


def test_strategy_by_name() -> None:
    assert strategy_by_name("AVG_BY_CIRCLE").name == "AVG_BY_CIRCLE"
    with pytest.raises(ValueError, match="unknown allocate strategy"):
        strategy_by_name("NOPE")
