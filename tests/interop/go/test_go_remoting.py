"""Apache's Remoting Go client (github.com/apache/rocketmq-client-go/v2
v2.1.3-0.20251226070945-2173d070fd1b), unmodified, straight to OrbitMQ's NameServer and broker:
sync and async sends, push consumers in clustering mode sharing a group's queues and committing
their offsets, and the response codes Apache's broker gives for bad input. The programs are
tests/interop/go/remoting/main.go, built by `make clients`."""

from __future__ import annotations

import collections
import hashlib
from pathlib import Path

import pytest

from tests.interop.go.outcome import cases, explain, rows
from tests.interop.harness import Cluster, unique
from tests.support import golang


def _run(tmp_path: Path, scenario: str, *args: str, timeout: float = 60):
    return golang.run("remoting", scenario, *args, timeout=timeout,
                      env={"ORBITMQ_GO_CLIENT_LOG": str(tmp_path / f"go-{scenario}.log")})


@pytest.fixture
def names(cluster: Cluster) -> tuple[str, str]:
    return cluster.create_topic(unique("GoRemT"), queues=4), cluster.create_group(unique("GoRemG"))


def test_sync_async_send_then_push_consume(cluster: Cluster, names, tmp_path: Path) -> None:
    """Five sync, five async and one 21 KiB body (compressed by the client) arrive once each,
    with the producer's message ids, the big body decompressed as sent."""
    topic, group = names
    produced = _run(tmp_path, "produce", "-namesrv", cluster.namesrv, "-topic", topic, "-n", "5", "-prefix", "gr")
    assert produced.returncode == 0, explain(produced)
    sent = {key: (msg_id, how) for key, msg_id, _broker, _queue, how in rows(produced, "SENT")}
    assert len(sent) == 11 and sum(how == "async" for _, how in sent.values()) == 5, explain(produced)

    consumed = _run(tmp_path, "consume", "-namesrv", cluster.namesrv, "-topic", topic, "-group", group,
                    "-n", "11", "-linger", "1s", "-timeout", "30s")
    assert consumed.returncode == 0, explain(consumed)
    recv = rows(consumed, "RECV")
    assert collections.Counter(r[0] for r in recv) == dict.fromkeys(sent, 1), explain(consumed)
    for key, msg_id, _instance, _queue, length, sha, reconsume in recv:
        assert msg_id == sent[key][0] and reconsume == "0"
        if key == "gr-big":
            _, size, digest = sent[key][1].split(":")
            assert (length, sha) == (size, digest)
        else:
            body = f"{key.split('-')[1]}-body-{key}".encode()
            assert (int(length), sha) == (len(body), hashlib.sha1(body).hexdigest())


def test_clustering_consumers_share_queues_and_commit_offsets(cluster: Cluster, names, tmp_path: Path) -> None:
    """Two instances of one group split the four queues two and two (each message once, each
    queue read by one instance); a third instance started after they shut down gets none of it
    again, as their offsets were committed to the broker."""
    topic, group = names
    result = _run(tmp_path, "cluster", "-namesrv", cluster.namesrv, "-topic", topic, "-group", group,
                  "-n", "16", "-prefix", "gc", "-linger", "3s", "-timeout", "30s", timeout=90)
    assert result.returncode == 0, explain(result)
    assert rows(result, "ROUND")[-1][1] == "true", explain(result)
    before, _, after = result.stdout.partition("RESTART\n")
    messages = [line.split()[1:] for line in before.splitlines() if line.startswith("RECV gc-msg-")]
    assert collections.Counter(m[0] for m in messages) == {f"gc-msg-{i}": 1 for i in range(16)}, explain(result)
    owners = collections.defaultdict(set)
    for _key, _id, instance, queue, *_ in messages:
        owners[queue].add(instance)
    assert sorted(owners) == ["0", "1", "2", "3"] and all(len(o) == 1 for o in owners.values()), owners
    per_instance = collections.Counter(next(iter(o)) for o in owners.values())
    assert per_instance == {"go-a": 2, "go-b": 2}, owners
    assert not [line for line in after.splitlines() if line.startswith("RECV gc-msg-")], explain(result)


def test_bad_input_codes(cluster: Cluster, names, tmp_path: Path) -> None:
    """What Apache's broker and NameServer answer: a body over maxMessageSize is MESSAGE_ILLEGAL
    (13) with SendMessageProcessor's remark; a topic the NameServer has no route for (an illegal
    name, or one never created: TOPIC_NOT_EXIST, which the client turns into its own error) fails
    in the client's route lookup, before any send."""
    topic, _ = names
    result = _run(tmp_path, "bad", "-namesrv", cluster.namesrv, "-topic", topic, "-prefix", "gb")
    assert result.returncode == 0, explain(result)
    got = cases(result)
    code, message = got["body-too-large"]
    assert code == 13 and "msg body length limit 4194304B" in message, explain(result)
    assert got["illegal-topic"] == (-1, "the topic=bad topic! route info not found"), explain(result)
    assert got["topic-not-found"] == (-1, f"the topic={topic}_missing route info not found"), explain(result)
