"""Apache's Java Remoting client, rocketmq-client 4.9.8 and 5.5.0, unmodified, straight to OrbitMQ's
NameServer and brokers (issue 23 item 2 and its bad input).

Every scenario runs once per pytest run in two JVMs side by side (remoting_batch.py: a cluster of
two broker sets, an ACL broker set and a proxy); each test asserts on what one scenario printed
(SENT/RECV/... lines, see tests/interop/java/remoting4/src/main/java/orbitmq/remoting) and on what
the cluster showed afterwards. 5.5.1 is not served by this machine's Maven mirror: 5.5.0 stands in.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from tests.interop.java import remoting_batch

VERSIONS = list(remoting_batch.VERSIONS)
# One run of every scenario: about a minute and a half on a loaded 2-core machine.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="session")
def remoting_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    result = remoting_batch.shared_result(tmp_path_factory.getbasetemp())
    assert "error" not in result, result.get("error")
    return result


class Scenario:
    """One scenario's lines (without its id), the names it used and what the cluster showed."""

    def __init__(self, result: dict[str, Any], version: str, kind: str) -> None:
        sid = f"{kind}{version.replace('.', '')}"
        run = result[version]
        self.lines: list[str] = run["lines"].get(sid, [])
        self.names: dict[str, str] = run["names"][sid]
        self.after = result["after"].get(sid)
        self.result = result
        self.context = f"{sid}:\n" + "\n".join(self.lines) + "\n--- JVM stderr ---\n" + run["stderr"]
        groups = {name for key, name in self.names.items() if key.startswith("group")}
        joined_left = [line for line in result.get("membership", []) if any(g in line for g in groups)]
        # its own WARN lines name its instances or groups; a channel closed on a timeout names only
        # the address, and may be why a group's membership changed
        own_log = [line for line in run.get("client_log", [])
                   if sid in line or any(g in line for g in groups) or "close the channel" in line
                   or "close socket" in line]
        self.context += ("\n--- membership changes of its groups ---\n" + "\n".join(joined_left)
                         + "\n--- the JVM's client log: its WARN lines and closed channels ---\n"
                         + "\n".join(own_log[-60:]))
        assert self.lines and self.lines[-1] == "OK", self.context

    def rows(self, kind: str) -> list[list[str]]:
        return [line.split(" ")[1:] for line in self.lines if line.split(" ", 1)[0] == kind]

    def sent(self) -> dict[str, list[str]]:
        """key -> [mode, msgId, status, broker, queue] of each SENT line."""
        return {r[1]: [r[0], *r[2:]] for r in self.rows("SENT")}

    def received(self) -> list[dict[str, str]]:
        fields = ("inst", "key", "msg_id", "broker", "queue", "reconsume", "offset")
        return [dict(zip(fields, r, strict=True)) for r in self.rows("RECV")]

    def errors(self) -> dict[str, tuple[int, str, str]]:
        """what -> (code, exception class, message) of each ERROR line."""
        out = {}
        for line in self.lines:
            if line.startswith("ERROR "):
                _e, what, code, cls, *text = line.split(" ")
                out[what] = (int(code), cls.rsplit(".", 1)[-1], " ".join(text))
        return out


def scenario(result: dict[str, Any], version: str, kind: str) -> Scenario:
    return Scenario(result, version, kind)


def _check_sends(s: Scenario) -> None:
    sent = s.sent()
    modes = defaultdict(set)
    for key, (mode, *_rest) in sent.items():
        modes[mode].add(key)
    assert {m: len(k) for m, k in modes.items()} == {"sync": 4, "async": 4, "oneway": 4, "batch": 4}, s.context
    for _key, (mode, _msg_id, *rest) in sent.items():
        if mode != "oneway":
            assert rest[0] == "SEND_OK", s.context
    got = {r["key"]: r["msg_id"] for r in s.received()}
    assert set(got) == set(sent), s.context
    assert all(got[key] == row[1] for key, row in sent.items()), s.context  # the ids the producer saw
    # the scenario thread's 9 queue selections (sync, oneway, batch) go round both sets' 8 queues
    one_thread = {r["broker"] for r in s.received() if not r["key"].startswith("async-")}
    assert one_thread == {"broker-a", "broker-b"}, s.context


@pytest.mark.parametrize("version", VERSIONS)
def test_producer_sync_async_oneway_batch(remoting_result: dict[str, Any], version: str) -> None:
    _check_sends(scenario(remoting_result, version, "send"))


@pytest.mark.parametrize("version", VERSIONS)
def test_vip_channel(remoting_result: dict[str, Any], version: str) -> None:
    """The same sends and consumption with vipChannelEnabled the other way round than the version's
    default (4.x: on, 5.x: off): the brokers' fast server on listenPort - 2 serves them, and the
    NameServer is told the listen ports only (clients derive the VIP one, MixAll#brokerVIPChannel)."""
    s = scenario(remoting_result, version, "vip")
    assert s.names["vip"] == ("false" if version.startswith("4.") else "true")
    _check_sends(s)
    brokers = remoting_result["brokers"]
    assert remoting_result["after"]["fast_ports"] == dict.fromkeys(brokers, True)
    assert s.after == sorted(brokers[b] for b in ("broker-a", "broker-b"))


@pytest.mark.parametrize("version", VERSIONS)
def test_body_over_4k_is_compressed_and_decompressed_for_every_consumer(remoting_result: dict[str, Any],
                                                                         version: str) -> None:
    s = scenario(remoting_result, version, "bigbody")
    [(key, length, digest)] = s.rows("SENTBODY")
    assert int(length) > 4096
    [(got_key, got_length, got_digest, _flag)] = s.rows("BODY")  # 5.x decoders clear the flag
    assert (got_key, got_length, got_digest) == (key, length, digest), s.context
    # stored as the client sent it: MessageSysFlag.COMPRESSED_FLAG, a smaller body
    [(stored_key, compressed, stored_length)] = s.after["stored"]
    assert (stored_key, compressed) == (key, 1) and stored_length < int(length), s.after
    assert s.after["grpc"] == [[key, int(length), digest]], s.context  # a gRPC consumer through the proxy


@pytest.mark.parametrize("version", VERSIONS)
def test_orderly_selector_and_queue_locks(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "orderly")
    queue_of = {key: row[4] for key, row in s.sent().items()}
    by_order = defaultdict(list)
    for r in s.received():
        order, seq = r["key"].split("-")
        by_order[order].append(int(seq))
        assert r["queue"] == queue_of[r["key"]], s.context
    assert dict(by_order) == {f"order{o}": list(range(10)) for o in range(3)}, s.context
    for order in range(3):  # MessageQueueSelector: one queue per order
        assert len({q for k, q in queue_of.items() if k.startswith(f"order{order}-")}) == 1
    probes = remoting_result["probes"]
    sid = f"orderly{version.replace('.', '')}"
    # while the consumer runs, another client locks none of its queues; after it stopped, all
    assert (probes[f"{sid}.locked"], probes[f"{sid}.unlocked"]) == (0, 4), probes


@pytest.mark.parametrize("version", VERSIONS)
def test_consume_from_first_last_timestamp(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "from")
    pre = {f"pre-{i}" for i in range(4)}
    post = {f"post-{i}" for i in range(4)}
    got = defaultdict(set)
    for r in s.received():
        if not r["key"].startswith("tail-"):
            got[r["inst"]].add(r["key"])
    assert got["first"] == pre | post, s.context
    # A new group's LAST_OFFSET and TIMESTAMP still start at 0 while the queue holds its first
    # message in memory: ConsumerManageProcessor#queryConsumerOffset answers 0 and the client uses
    # it (RebalancePushImpl#computePullFromWhereWithException), as against Apache's broker.
    assert got["last"] == pre | post, s.context
    assert got["timestamp"] == pre | post, s.context
    # SEARCH_OFFSET_BY_TIMESTAMP itself: each queue's first message stored at or after the stamp
    first_post: dict[str, int] = {}
    for r in s.received():
        if r["inst"] == "first" and not r["key"].startswith("pre-"):
            queue = f"{r['broker']}:{r['queue']}"
            first_post[queue] = min(first_post.get(queue, 2**31), int(r["offset"]))
    assert {q: int(o) for q, o in s.rows("SEARCH")} == first_post, s.context


def _assignments(s: Scenario) -> list[dict[str, set[str]]]:
    """The ASSIGN lines before each ROUND line: one {instance: queues} per round."""
    rounds, current = [], {}
    for line in s.lines:
        parts = line.split(" ")
        if parts[0] == "ASSIGN":
            current[parts[1]] = set(parts[2].split(","))
        elif parts[0] == "ROUND":
            rounds.append(current)
            current = {}
    return rounds


@pytest.mark.parametrize("version", VERSIONS)
def test_three_instances_share_the_queues(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "share")
    rounds = _assignments(s)
    assert [sorted(r) for r in rounds] == [["i1", "i2", "i3"], ["i1", "i2"]], s.context
    round_at = [i for i, line in enumerate(s.lines) if line.startswith("ROUND ")]
    sections = [s.lines[round_at[0]:round_at[1]], s.lines[round_at[1]:]]
    owner_changed = set()
    first_seen: set[str] = set()
    for number, (assignment, section) in enumerate(zip(rounds, sections, strict=True), 1):
        queues = [q for qs in assignment.values() for q in qs]
        assert len(queues) == len(set(queues)) == 8, s.context  # disjoint, covering broker-a and broker-b
        by_queue = defaultdict(set)
        for line in section:
            parts = line.split(" ")
            if parts[0] == "RECV" and parts[2].startswith(f"r{number}-") and parts[2] not in first_seen:
                first_seen.add(parts[2])
                by_queue[f"{parts[4]}:{parts[5]}"].add(parts[1])
        # each queue's messages of a round first delivered to exactly the instance holding it then
        # (a redelivery to a queue's next owner during the rebalance is checked below)
        assert {q: sorted(i) for q, i in by_queue.items()} == {
            q: [inst] for inst, qs in assignment.items() for q in qs}, s.context
        if number == 2:
            owner_changed = {q for q in queues if not any(q in qs for inst, qs in rounds[0].items()
                                                          if q in assignment.get(inst, set()))}
    received = [r["key"] for r in s.received()]
    assert set(received) == {row for row in s.sent()}, s.context
    # At-least-once, as upstream: while the instances rebalance one after the other, a queue that
    # changed owner may hand its last uncommitted messages to the new owner again; no other does.
    again = {key for key in received if received.count(key) > 1}
    assert all(key.rsplit("-", 1)[0].split("-", 1)[1] in owner_changed for key in again), (again, s.context)


@pytest.mark.parametrize("version", VERSIONS)
def test_broadcasting(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "broadcast")
    got = defaultdict(list)
    for r in s.received():
        got[r["inst"]].append(r["key"])
    expected = [f"bc-{i}" for i in range(6)]
    assert {inst: sorted(keys) for inst, keys in got.items()} == {"b1": expected, "b2": expected}, s.context


@pytest.mark.parametrize("version", VERSIONS)
def test_reconsume_later_retries_then_dlq(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "retry")
    times = defaultdict(list)
    for key, reconsume, _retry_topic in s.rows("RETRY"):
        times[key].append(int(reconsume))
    assert dict(times) == {"retry-0": [0, 1, 2], "retry-1": [0, 1, 2]}, s.context  # maxReconsumeTimes 2
    # then %DLQ%<group>, its reconsumeTimes one more (SendMessageProcessor#consumerSendMsgBack)
    assert s.after == ["retry-0 3", "retry-1 3"], s.context


@pytest.mark.parametrize("version", VERSIONS)
def test_lite_pull_subscribe_and_assign_seek_commit(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "litepull")
    assigned = {inst: set(queues.split(",")) for inst, queues in s.rows("ASSIGN")}
    assert sorted(assigned) == ["l1", "l2"] and not assigned["l1"] & assigned["l2"], s.context
    assert len(assigned["l1"] | assigned["l2"]) == 4, s.context
    received = s.received()
    subscribed = [r for r in received if r["inst"] in ("l1", "l2")]
    assert len(subscribed) == len({r["key"] for r in subscribed}) == 8, s.context
    for r in subscribed:
        assert f"{r['broker']}:{r['queue']}" in assigned[r["inst"]], s.context
    seek_at = s.lines.index(next(line for line in s.lines if line.startswith("SEEK ")))
    before_seek = {line.split(" ")[2] for line in s.lines[:seek_at] if line.startswith("RECV a ")}
    assert before_seek == {r["key"] for r in subscribed}, s.context  # assign(): every queue, from its start
    [(queue, offset)] = s.rows("SEEK")
    after_seek = [line.split(" ")[2] for line in s.lines[seek_at:] if line.startswith("RECV a ")]
    assert after_seek == [f"lp-{queue}-{offset}"], s.context  # from the offset sought, nothing else
    # commitSync then shutdown: the group's offsets on the broker are the queues' ends
    assert s.after == {q: [2, 2] for q in (f"broker-a:{i}" for i in range(4))}, s.context


@pytest.mark.parametrize("version", VERSIONS)
def test_transaction_listener_and_check_backs(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "tx")
    assert {key: row[2] for key, row in s.sent().items()} == dict.fromkeys(
        ["tx-commit", "tx-rollback", "tx-unknown-commit", "tx-unknown-rollback"], "SEND_OK"), s.context
    assert {r[0] for r in s.rows("CHECK")} == {"tx-unknown-commit", "tx-unknown-rollback"}, s.context
    assert sorted(r["key"] for r in s.received()) == ["tx-commit", "tx-unknown-commit"], s.context


@pytest.mark.parametrize("version", VERSIONS)
def test_request_reply(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "reqreply")
    assert s.rows("REPLY") == [[f"req-{i}", f"reply:req-{i}"] for i in range(3)], s.context
    assert {r[1] for r in s.rows("REPLIED")} == {"SEND_OK"}, s.context


@pytest.mark.parametrize("version", VERSIONS)
def test_message_trace(remoting_result: dict[str, Any], version: str) -> None:
    """enableMsgTrace on producer and consumer; `orbitmq admin queryMsgTraceById` shows the path."""
    s = scenario(remoting_result, version, "trace")
    [(_mode, key, msg_id, *_rest)] = s.rows("SENT")
    trace = s.after
    rows = {line.split()[0] for line in trace.splitlines()[1:] if line.strip()}
    assert {"Pub", "SubBefore", "SubAfter"} <= rows, trace
    assert f"P_trace{version.replace('.', '')}-t" in trace and s.names["group"] in trace, trace
    assert key and msg_id


@pytest.mark.parametrize("version", VERSIONS)
def test_sql92_message_selector(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "sql")
    got = sorted(r["key"] for r in s.received() if not r["key"].startswith("tail-"))
    assert got == ["sql-6", "sql-8"], s.context  # n > 5 AND color = 'red'


@pytest.mark.parametrize("version", VERSIONS)
def test_acl_client_rpc_hook(remoting_result: dict[str, Any], version: str) -> None:
    s = scenario(remoting_result, version, "acl")
    sent = s.sent()
    assert {k: row[2] for k, row in sent.items()} == {f"acl-{i}": "SEND_OK" for i in range(3)}, s.context
    assert sorted(r["key"] for r in s.received()) == [f"acl-{i}" for i in range(3)], s.context
    errors = s.errors()
    # A wrong signature and a user without Pub: NO_PERMISSION (16), which the producer retries as
    # Apache's does and then reports with that code.
    assert errors["badsecret"][:2] == (16, "MQClientException"), errors
    assert errors["nopub"][:2] == (16, "MQClientException"), errors


@pytest.mark.parametrize("version", VERSIONS)
def test_send_retries_to_the_other_broker_set(remoting_result: dict[str, Any], version: str) -> None:
    """broker-b is killed while both producers (sendLatencyFaultEnable on and off) hold its route:
    every send still succeeds, on broker-a."""
    s = scenario(remoting_result, version, "failover")
    down = {key: row for key, row in s.sent().items() if row[0].endswith("-down")}
    assert not s.errors(), s.context
    assert len(down) == 16, s.context
    assert {(row[0], row[2], row[3]) for row in down.values()} == {
        ("latency-down", "SEND_OK", "broker-a"), ("plain-down", "SEND_OK", "broker-a")}, s.context


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_input(remoting_result: dict[str, Any], version: str) -> None:
    """The codes and exceptions Apache's client and broker give at the edges."""
    s = scenario(remoting_result, version, "bad")
    errors = s.errors()
    assert not s.rows("SENT") and not s.rows("STARTED") and not s.rows("PULLED"), s.context
    # the client's own check of maxMessageSize (Validators#checkMessage): MESSAGE_ILLEGAL
    assert errors["body-client"][:2] == (13, "MQClientException"), errors
    # past it, the broker's: MESSAGE_ILLEGAL with upstream's remark
    code, cls, text = errors["body-broker"]
    assert (code, cls) == (13, "MQBrokerException"), errors
    assert "msg body length limit 4194304B, msg properties length limit 32KB" in text, errors
    assert errors["topic-illegal"][:2] == (-1, "MQClientException"), errors
    # no route (auto-creation off) and a read-only topic (no writable queue): NOT_FOUND_TOPIC_EXCEPTION
    assert errors["topic-missing"][:2] == (10005, "MQClientException"), errors
    assert errors["topic-readonly"][:2] == (10005, "MQClientException"), errors
    assert errors["group-illegal"][1] == "MQClientException", errors
    # a pull for a group the broker does not know: SUBSCRIPTION_GROUP_NOT_EXIST
    assert errors["group-missing"][:2] == (26, "MQBrokerException"), errors
    assert "does not exist" in errors["group-missing"][2], errors
