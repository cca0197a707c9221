"""Queue allocation strategies of RocketMQ's rebalance, shared by the proxy, the admin tools and
the Remoting consumers.

Each strategy answers the same question as upstream's AllocateMessageQueueStrategy#allocate:
given every queue of a topic and every consumer id of a group (both sorted by the caller, as
RebalanceImpl#rebalanceByTopic sorts them), which queues belong to ``current_cid``. Results are
identical to upstream's for the same inputs, so Python and Java consumers can share a group.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

Q = TypeVar("Q")


def allocate_averagely(queues: Sequence[Q], clients: Sequence[str], client: str) -> list[Q]:
    """AllocateMessageQueueAveragely: contiguous shares, the first ``len % n`` clients one more.

    ``queues`` and ``clients`` are sorted by the caller (upstream sorts both before allocating);
    a client not in ``clients`` gets nothing.
    """
    if client not in clients or not queues:
        return []
    index, total, n = clients.index(client), len(queues), len(clients)
    mod = total % n
    if total <= n:
        size = 1
    else:
        size = total // n + 1 if mod > 0 and index < mod else total // n
    start = index * size if mod > 0 and index < mod else index * size + mod
    return [queues[(start + i) % total] for i in range(max(min(size, total - start), 0))]


def message_queue_string(mq: Any) -> str:
    """MessageQueue#toString, the key ConsistentHash routes a queue by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


class AllocateMessageQueueStrategy(Protocol):
    name: str

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Any],
                 cid_all: Sequence[str]) -> list[Any]: ...


def _check(current_cid: str, mq_all: Sequence[Any], cid_all: Sequence[str]) -> bool:
    """AbstractAllocateMessageQueueStrategy#check: empty inputs are errors, a stranger gets nothing."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


class AllocateMessageQueueAveragely:
    """AVG: contiguous blocks (the default)."""

    name = "AVG"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Any],
                 cid_all: Sequence[str]) -> list[Any]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        return allocate_averagely(mq_all, cid_all, current_cid)


class AllocateMessageQueueAveragelyByCircle:
    """AVG_BY_CIRCLE: round-robin, queue i to consumer i % n."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Any],
                 cid_all: Sequence[str]) -> list[Any]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index, n = cid_all.index(current_cid), len(cid_all)
        return [mq_all[i] for i in range(index, len(mq_all)) if i % n == index]


class AllocateMessageQueueByConfig:
    """CONFIG: a fixed queue list, whoever asks (upstream returns the configured list as is)."""

    name = "CONFIG"

    def __init__(self, message_queue_list: Iterable[Any]) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Any],
                 cid_all: Sequence[str]) -> list[Any]:
        return list(self.message_queue_list)


class AllocateMessageQueueByMachineRoom:
    """MACHINE_ROOM: only queues of brokers named ``<idc>@<name>`` with ``idc`` in consume_idcs,
    shared as ``mod`` contiguous queues each plus one of the remainder for the first clients."""

    name = "MACHINE_ROOM"

    def __init__(self, consume_idcs: Iterable[str]) -> None:
        self.consume_idcs = set(consume_idcs)

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Any],
                 cid_all: Sequence[str]) -> list[Any]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index, n = cid_all.index(current_cid), len(cid_all)
        pre = []
        for mq in mq_all:
            parts = mq.broker_name.split("@")
            # Java's String#split drops trailing empty parts: "a@" is one part, "a@@" too.
            while len(parts) > 1 and parts[-1] == "":
                parts.pop()
            if len(parts) == 2 and parts[0] in self.consume_idcs:
                pre.append(mq)
        mod, rem = divmod(len(pre), n)
        result = pre[mod * index:mod * index + mod]
        if rem > index:
            result.append(pre[index + mod * n])
        return result


def md5_hash(key: str) -> int:
    """ConsistentHashRouter.MD5Hash#hash: the first four MD5 bytes, big-endian, unsigned."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")  # noqa: S324


class ConsistentHashRouter:
    """ConsistentHashRouter: a ring of ``v_node_count`` virtual nodes ("<key>-<i>") per node.

    A later virtual node with the same hash replaces an earlier one, as TreeMap#put does.
    """

    def __init__(self, nodes: Iterable[str], v_node_count: int,
                 hash_function: Callable[[str], int] = md5_hash) -> None:
        if v_node_count < 0:
            raise ValueError(f"illegal virtual node counts :{v_node_count}")
        self.hash_function = hash_function
        self._ring: dict[int, str] = {}
        for node in nodes:
            existing = sum(1 for n in self._ring.values() if n == node)
            for i in range(v_node_count):
                self._ring[hash_function(f"{node}-{i + existing}")] = node
        self._keys = sorted(self._ring)

    def route_node(self, object_key: str) -> str | None:
        if not self._keys:
            return None
        h = self.hash_function(object_key)
        i = bisect.bisect_left(self._keys, h)  # tailMap(h).firstKey(): the first key >= h
        return self._ring[self._keys[i] if i < len(self._keys) else self._keys[0]]


class AllocateMessageQueueConsistentHash:
    """CONSISTENT_HASH: each queue (by MessageQueue#toString) to its node on the MD5 ring."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10, hash_function: Callable[[str], int] | None = None) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function = hash_function or md5_hash

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[Any],
                 cid_all: Sequence[str]) -> list[Any]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        router = ConsistentHashRouter(cid_all, self.virtual_node_cnt, self.hash_function)
        return [mq for mq in mq_all if router.route_node(message_queue_string(mq)) == current_cid]


STRATEGIES: dict[str, Callable[[], AllocateMessageQueueStrategy]] = {
    AllocateMessageQueueAveragely.name: AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle.name: AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash.name: AllocateMessageQueueConsistentHash,
}


def strategy_by_name(name: str) -> AllocateMessageQueueStrategy:
    """The parameterless strategies by their getName(); CONFIG and MACHINE_ROOM need arguments."""
    factory = STRATEGIES.get(name)
    if factory is None:
        raise ValueError(f"unknown allocate strategy {name!r}; one of {sorted(STRATEGIES)} "
                         "(CONFIG and MACHINE_ROOM are built with their queue list / machine rooms)")
    return factory()
