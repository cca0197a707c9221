"""Transactional messages end to end with the official Python client (rocketmq 5.x).

A cluster of its own (NameServer, broker, two proxies) with short check settings:
transactionCheckInterval=500 ms and transactionTimeOut=1500 ms, transactionCheckMax left at
RocketMQ's 15. What a topic holds is read back with the proxy's offset-addressed PullMessage,
so "never seen" covers every consumer, and duplicates would show.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.v5.exception import ClientException

from orbitmq.client import MQBrokerError
from orbitmq.common.constants import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from orbitmq.common.message import Message as OrbitMessage
from orbitmq.common.message_codec import decode_records
from orbitmq.common.message_id import create_uniq_id
from orbitmq.common.sysflag import TRANSACTION_PREPARED_TYPE
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proxy.transaction import offset_of_msg_id
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.remoting.headers import EndTransactionRequestHeader
from tests.interop import rawgrpc
from tests.interop.harness import Cluster, start_cluster, unique
from tests.support import free_port

Code = pb.Code
NODE_DIR = Path(__file__).parent / "node"
CHECK_SETTINGS = {"transactionCheckInterval": "500", "transactionTimeOut": "1500"}


METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def tx_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("tx-cluster"), proxies=2, broker_extra={
        **CHECK_SETTINGS, "metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": str(METRICS_PORT)})
    try:
        yield c
    finally:
        c.runner.stop_all()


def _metric(name: str, topic: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and f'topic="{topic}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    failed = any(getattr(getattr(request.node, f"rep_{p}", None), "failed", False) for p in ("setup", "call"))
    if failed and "tx_cluster" in request.fixturenames:
        print("\n===== cluster logs =====\n" + request.getfixturevalue("tx_cluster").runner.report())


class Checker(TransactionChecker):
    """Answers check-backs from a table keyed by message id (UNKNOWN when absent) and counts them."""

    def __init__(self) -> None:
        self.answers: dict[str, TransactionResolution] = {}
        self.checks: dict[str, int] = {}
        self.lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        with self.lock:
            self.checks[message.message_id] = self.checks.get(message.message_id, 0) + 1
            return self.answers.get(message.message_id, TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED)

    def count(self, message_id: str) -> int:
        with self.lock:
            return self.checks.get(message_id, 0)


def _producer(endpoint: str, topic: str, checker: Checker) -> Producer:
    producer = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=10), (topic,), checker)
    producer.startup()
    return producer


def _message(topic: str, body: bytes) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    msg.tag = "tx"
    msg.add_property("k", body.decode())
    return msg


def _send_half(producer: Producer, topic: str, body: bytes):
    transaction = producer.begin_transaction()
    receipt = producer.send(_message(topic, body), transaction)
    return transaction, receipt


def _stored(cluster: Cluster, topic: str, queues: int, expected: int, deadline_s: float) -> list[bytes]:
    group = cluster.create_group(unique("GTxRead"))
    channel, stub = cluster.stub()
    with channel:
        return sorted(m.body for m in rawgrpc.pull_all(stub, topic, group, queues, expected, deadline_s))


def _end(stub, topic: str, message_id: str, transaction_id: str, resolution: int,
         source: int = pb.TransactionSource.SOURCE_CLIENT) -> spb.EndTransactionResponse:
    return stub.EndTransaction(spb.EndTransactionRequest(
        topic=pb.Resource(name=topic), message_id=message_id, transaction_id=transaction_id, resolution=resolution,
        source=source), metadata=rawgrpc.metadata(), timeout=10)


def _topic(cluster: Cluster, prefix: str) -> str:
    return cluster.create_topic(unique(prefix), queues=2, message_type="TRANSACTION")


def test_commit_and_rollback(tx_cluster: Cluster) -> None:
    topic = _topic(tx_cluster, "TxCommit")
    group = tx_cluster.create_group(unique("GTxCommit"))
    checker = Checker()
    producer = _producer(tx_cluster.proxy, topic, checker)
    try:
        committed, receipt_c = _send_half(producer, topic, b"commit-me")
        rolled, receipt_r = _send_half(producer, topic, b"roll-me-back")
        assert receipt_c.transaction_id and receipt_c.transaction_id != receipt_c.message_id
        # Nothing is visible before the commit.
        channel, stub = tx_cluster.stub()
        with channel:
            status, msgs, _ = rawgrpc.receive(stub, topic, group, polling_ms=1000)
            assert msgs == []
            committed.commit()
            rolled.rollback()
            got: list[pb.Message] = []
            deadline = time.monotonic() + 10
            while not got and time.monotonic() < deadline:
                _, got, _ = rawgrpc.receive(stub, topic, group, polling_ms=1000)
            assert [m.body for m in got] == [b"commit-me"]
            message = got[0]
            assert message.system_properties.message_id == receipt_c.message_id
            assert message.system_properties.tag == "tx"
            assert message.user_properties["k"] == "commit-me"
            assert rawgrpc.ack(stub, topic, group, *got).status.code == Code.OK
            # Resolving again changes nothing: commit of a rolled-back or committed transaction fails.
            with pytest.raises(ClientException):
                committed.commit()
            with pytest.raises(ClientException):
                rolled.commit()
            time.sleep(3.5)  # past transactionTimeOut and several check scans: no check-back
        assert _stored(tx_cluster, topic, 2, 1, 3) == [b"commit-me"]
        assert checker.count(receipt_c.message_id) == 0 and checker.count(receipt_r.message_id) == 0
    finally:
        producer.shutdown()


def test_unknown_then_check_back_commit_and_rollback(tx_cluster: Cluster) -> None:
    topic = _topic(tx_cluster, "TxCheck")
    checker = Checker()
    producer = _producer(tx_cluster.proxy, topic, checker)
    try:
        _, to_commit = _send_half(producer, topic, b"checked-commit")
        _, to_roll = _send_half(producer, topic, b"checked-rollback")
        # Unknown at first: checked, answered UNSPECIFIED, checked again.
        deadline = time.monotonic() + 15
        while checker.count(to_commit.message_id) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert checker.count(to_commit.message_id) >= 2
        assert _stored(tx_cluster, topic, 2, 1, 0.5) == []
        checker.answers[to_commit.message_id] = TransactionResolution.COMMIT
        checker.answers[to_roll.message_id] = TransactionResolution.ROLLBACK
        assert _stored(tx_cluster, topic, 2, 1, 15) == [b"checked-commit"]
        # Both resolved: the checks stop.
        time.sleep(2)
        settled = (checker.count(to_commit.message_id), checker.count(to_roll.message_id))
        time.sleep(3)
        assert (checker.count(to_commit.message_id), checker.count(to_roll.message_id)) == settled
        assert _stored(tx_cluster, topic, 2, 2, 1) == [b"checked-commit"]
    finally:
        producer.shutdown()


def test_end_transaction_through_another_proxy_and_bad_input(tx_cluster: Cluster) -> None:
    topic = _topic(tx_cluster, "TxTwoProx")
    checker = Checker()
    producer = _producer(tx_cluster.proxies[0], topic, checker)
    try:
        _, receipt = _send_half(producer, topic, b"via-proxy-b")
        transaction_id, message_id = receipt.transaction_id, receipt.message_id
        ch_a, proxy_a = tx_cluster.stub(tx_cluster.proxies[0])
        ch_b, proxy_b = tx_cluster.stub(tx_cluster.proxies[1])
        with ch_a, ch_b:
            # A garbled or forged id, or another message's id: refused, nothing stored.
            for bad in ("", "garbage!", transaction_id[:-1], transaction_id[:-2] + "AA", "7F0000010000271100000000000012AB"):
                resp = _end(proxy_b, topic, message_id, bad, pb.TransactionResolution.COMMIT)
                assert resp.status.code == Code.INVALID_TRANSACTION_ID, (bad, resp)
            resp = _end(proxy_b, topic, "0A0B0C0D0E0F00000000000000000000", transaction_id,
                        pb.TransactionResolution.COMMIT)
            assert resp.status.code == Code.INTERNAL_SERVER_ERROR, resp
            assert "transaction id wrong" in resp.status.message
            other_topic = _topic(tx_cluster, "TxOther")
            resp = _end(proxy_b, other_topic, message_id, transaction_id, pb.TransactionResolution.COMMIT)
            assert resp.status.code == Code.INTERNAL_SERVER_ERROR and "producer group" in resp.status.message
            assert _stored(tx_cluster, topic, 2, 1, 0.5) == []

            # The real commit through the proxy that did not see the send.
            resp = _end(proxy_b, topic, message_id, transaction_id, pb.TransactionResolution.COMMIT)
            assert resp.status.code == Code.OK, resp
            assert _stored(tx_cluster, topic, 2, 1, 10) == [b"via-proxy-b"]
            # Already resolved: commit again, or roll back, through either proxy.
            for stub, resolution in ((proxy_a, pb.TransactionResolution.COMMIT),
                                     (proxy_b, pb.TransactionResolution.ROLLBACK)):
                resp = _end(stub, topic, message_id, transaction_id, resolution)
                assert resp.status.code == Code.INTERNAL_SERVER_ERROR, resp
                assert "not open" in resp.status.message
        assert _stored(tx_cluster, topic, 2, 2, 1) == [b"via-proxy-b"]
    finally:
        producer.shutdown()


def test_remoting_end_transaction_answers_rocketmq_codes(tx_cluster: Cluster) -> None:
    topic = _topic(tx_cluster, "TxRemoting")
    checker = Checker()
    producer = _producer(tx_cluster.proxy, topic, checker)
    try:
        transaction, receipt = _send_half(producer, topic, b"remoting")

        async def find_half(api):
            found = await api.invoke(tx_cluster.broker, RequestCode.QUERY_MESSAGE, {
                "topic": RMQ_SYS_TRANS_HALF_TOPIC, "key": receipt.message_id, "maxNum": "32",
                "beginTimestamp": "0", "endTimestamp": str(2**62)})
            assert found.code == ResponseCode.SUCCESS, found.remark
            return decode_records(found.body)[0]

        half = tx_cluster.api_call(find_half)
        assert half.properties["REAL_TOPIC"] == topic
        assert half.properties["__transactionId__"] == receipt.message_id
        assert half.properties["PGROUP"] == topic

        def end(resolution: int, **changes):
            fields = dict(producer_group=topic, tran_state_table_offset=half.queue_offset,
                          commit_log_offset=half.commit_log_offset, commit_or_rollback=resolution,
                          msg_id=receipt.message_id, topic=topic, transaction_id=receipt.message_id)
            fields.update(changes)

            async def go(api):
                return await api.invoke(tx_cluster.broker, RequestCode.END_TRANSACTION,
                                        EndTransactionRequestHeader(**fields))
            return tx_cluster.api_call(go)

        assert end(8, producer_group="other").code == ResponseCode.SYSTEM_ERROR
        assert end(8, tran_state_table_offset=half.queue_offset + 1000).code == ResponseCode.SYSTEM_ERROR
        assert end(8, commit_log_offset=half.commit_log_offset + 1).code == ResponseCode.SYSTEM_ERROR
        assert end(8, commit_or_rollback=5).code == ResponseCode.SYSTEM_ERROR
        assert end(8).code == ResponseCode.SUCCESS
        again = end(12)
        assert again.code == ResponseCode.SYSTEM_ERROR and "not open" in (again.remark or "")
        assert _stored(tx_cluster, topic, 2, 2, 1.5) == [b"remoting"]
        with pytest.raises(ClientException):
            transaction.rollback()
    finally:
        producer.shutdown()


def test_discarded_after_transaction_check_max_then_resumed(tx_cluster: Cluster) -> None:
    topic = _topic(tx_cluster, "TxDiscard")
    checker = Checker()
    producer = _producer(tx_cluster.proxy, topic, checker)
    try:
        _, receipt = _send_half(producer, topic, b"never-decided")

        def by_key(in_topic: str) -> list:
            async def go(api):
                found = await api.invoke(tx_cluster.broker, RequestCode.QUERY_MESSAGE, {
                    "topic": in_topic, "key": receipt.message_id, "maxNum": "32",
                    "beginTimestamp": "0", "endTimestamp": str(2**62)})
                return decode_records(found.body) if found.code == ResponseCode.SUCCESS else []
            return tx_cluster.api_call(go)

        deadline = time.monotonic() + 40
        kept = []
        while not kept and time.monotonic() < deadline:
            time.sleep(0.5)
            kept = by_key(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
        assert len(kept) == 1, checker.checks
        assert kept[0].body == b"never-decided"
        assert kept[0].properties["TRANSACTION_CHECK_TIMES"] == "15"
        time.sleep(0.5)
        assert checker.count(receipt.message_id) == 15
        time.sleep(2)
        assert checker.count(receipt.message_id) == 15  # no check after the discard
        assert _stored(tx_cluster, topic, 2, 1, 0.5) == []

        # RESUME_CHECK_HALF_MESSAGE (323) by the discarded record's offset msgId: the check asks
        # the producer again (its count restarted at 0) and its COMMIT is accepted.
        def resume(fields: dict[str, str]):
            async def go(api):
                return await api.invoke(tx_cluster.broker, RequestCode.RESUME_CHECK_HALF_MESSAGE, fields)
            return tx_cluster.api_call(go)

        checker.answers[receipt.message_id] = TransactionResolution.COMMIT
        # `orbitmq admin resumeCheckHalfMessage` finds the discarded record by the message id
        # (unique key) in TRANS_CHECK_MAX_TIME_TOPIC and resumes it by its offset msgId.
        cli = subprocess.run([sys.executable, "-m", "orbitmq", "admin", "resumeCheckHalfMessage", "-n",
                              tx_cluster.namesrv, "-t", topic, "-i", receipt.message_id, "--json"],
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert json.loads(cli.stdout)["resumed"] is True
        assert _stored(tx_cluster, topic, 2, 1, 15) == [b"never-decided"]
        assert checker.count(receipt.message_id) == 16
        # The transaction is committed: resuming its discarded record again would store it twice.
        again = resume({"topic": topic, "msgId": kept[0].msg_id})
        assert again.code == ResponseCode.SYSTEM_ERROR and "committed" in (again.remark or "")
        # Bad input: no msgId, not an offset msgId, a record that is no half message.
        assert resume({"topic": topic}).code == ResponseCode.SYSTEM_ERROR
        assert resume({"topic": topic, "msgId": "not-a-message-id"}).code == ResponseCode.SYSTEM_ERROR
        committed = by_key(topic)
        assert len(committed) == 1
        plain = resume({"topic": topic, "msgId": committed[0].msg_id})
        assert plain.code == ResponseCode.SYSTEM_ERROR and "not a half message" in (plain.remark or "")
    finally:
        producer.shutdown()


def _restart(cluster: Cluster, name: str) -> None:
    proc = next(p for p in reversed(cluster.runner.processes) if p.name == name)
    proc.stop()
    args = proc.argv[4:]
    port = int(args[args.index("--port") + 1])
    cluster.runner.start("proxy", args, ready_port=port, name=name)


def test_check_answered_after_a_proxy_restart(tx_cluster: Cluster) -> None:
    topic = _topic(tx_cluster, "TxRestart")
    first = Checker()
    producer = _producer(tx_cluster.proxies[1], topic, first)
    _, kept_open = _send_half(producer, topic, b"checked-after-restart")
    _, ended_after = _send_half(producer, topic, b"ended-after-restart")
    producer.shutdown()
    _restart(tx_cluster, "proxy-1")
    # An id issued before the restart still ends its transaction.
    channel, stub = tx_cluster.stub(tx_cluster.proxies[1])
    with channel:
        resp = _end(stub, topic, ended_after.message_id, ended_after.transaction_id, pb.TransactionResolution.COMMIT)
        assert resp.status.code == Code.OK, resp
    # A new producer on the restarted proxy gets the check-back and commits.
    second = Checker()
    second.answers[kept_open.message_id] = TransactionResolution.COMMIT
    producer = _producer(tx_cluster.proxies[1], topic, second)
    try:
        assert _stored(tx_cluster, topic, 2, 2, 20) == [b"checked-after-restart", b"ended-after-restart"]
        assert second.count(kept_open.message_id) >= 1
    finally:
        producer.shutdown()


def test_half_message_limits(tx_cluster: Cluster) -> None:
    """A transactional message to a NORMAL topic is refused, as RocketMQ's proxy does."""
    topic = tx_cluster.create_topic(unique("TxNormal"), queues=1)
    channel, stub = tx_cluster.stub()
    with channel:
        resp = rawgrpc.send(stub, rawgrpc.message(topic, message_type=pb.MessageType.TRANSACTION))
        assert resp.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE



def test_node_client_sends_and_commits_a_transaction(tx_cluster: Cluster) -> None:
    node = shutil.which("node")
    assert node, "node is required (make setup installs the Node.js client)"
    assert (NODE_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir(), "run `make setup` (npm ci)"
    topic = _topic(tx_cluster, "TxNode")
    run = subprocess.run([node, "transaction.js", tx_cluster.proxy, topic], cwd=NODE_DIR,
                         capture_output=True, text=True, timeout=90)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["committed"]["transactionId"] and result["rolledBack"]["transactionId"]
    assert _stored(tx_cluster, topic, 2, 1, 10) == [b"node tx commit"]
    time.sleep(3)  # past transactionTimeOut: the rolled-back one never shows up, nothing is checked
    assert _stored(tx_cluster, topic, 2, 2, 0.5) == [b"node tx commit"]


def test_remoting_half_message_send_and_delayed_half_refused(tx_cluster: Cluster) -> None:
    """A 4.x-style Remoting half send gets the half offsets back; a delayed one is refused."""
    topic = _topic(tx_cluster, "TxRemotingSend")

    async def go(api):
        def half(**extra: str) -> OrbitMessage:
            return OrbitMessage(topic, b"remoting-half", 0, {"TRAN_MSG": "true", "PGROUP": "PG_remoting",
                                                             "UNIQ_KEY": create_uniq_id(), **extra})
        sent = await api.send_message(tx_cluster.broker, "broker-a", half(), "PG_remoting", 0, TRANSACTION_PREPARED_TYPE)
        with pytest.raises(MQBrokerError) as refused:
            await api.send_message(tx_cluster.broker, "broker-a", half(DELAY="3"), "PG_remoting", 0,
                                   TRANSACTION_PREPARED_TYPE)
        return sent, refused.value

    sent, refused = tx_cluster.api_call(go)
    assert sent.transaction_id == sent.msg_id  # UNIQ_KEY, as upstream's broker answers
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL
    assert _stored(tx_cluster, topic, 2, 1, 0.5) == []

    async def end(api):
        header = EndTransactionRequestHeader(
            producer_group="PG_remoting", tran_state_table_offset=sent.queue_offset,
            commit_log_offset=offset_of_msg_id(sent.offset_msg_id), commit_or_rollback=8, msg_id=sent.msg_id,
            topic=topic, transaction_id=sent.transaction_id)
        return await api.invoke(tx_cluster.broker, RequestCode.END_TRANSACTION, header)

    assert tx_cluster.api_call(end).code == ResponseCode.SUCCESS
    assert _stored(tx_cluster, topic, 2, 1, 10) == [b"remoting-half"]


def test_transaction_metrics(tx_cluster: Cluster) -> None:
    """rocketmq_half_messages counts open transactions per topic; commits are counted."""
    topic = _topic(tx_cluster, "TxMetrics")
    producer = _producer(tx_cluster.proxy, topic, Checker())
    try:
        transaction, _ = _send_half(producer, topic, b"metered")
        deadline = time.monotonic() + 10
        while _metric("rocketmq_half_messages", topic) != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _metric("rocketmq_half_messages", topic) == 1
        transaction.commit()
        assert _metric("rocketmq_commit_messages_total", topic) == 1
        assert _metric("rocketmq_half_messages", topic) in (None, 0)
    finally:
        producer.shutdown()


def test_late_commit_after_check_immunity_is_illegal_operation(tx_cluster: Cluster) -> None:
    """Past max(CHECK_IMMUNITY_TIME_IN_SECONDS, transactionTimeOut) only a check answer may end it (604)."""
    topic = _topic(tx_cluster, "TxImmunity")

    async def send(api):
        msg = OrbitMessage(topic, b"immune", 0, {"TRAN_MSG": "true", "PGROUP": "PG_immune",
                                                 "UNIQ_KEY": create_uniq_id(), "CHECK_IMMUNITY_TIME_IN_SECONDS": "1"})
        return await api.send_message(tx_cluster.broker, "broker-a", msg, "PG_immune", 0, TRANSACTION_PREPARED_TYPE)

    sent = tx_cluster.api_call(send)

    def end(from_check: bool):
        async def go(api):
            header = EndTransactionRequestHeader(
                producer_group="PG_immune", tran_state_table_offset=sent.queue_offset,
                commit_log_offset=offset_of_msg_id(sent.offset_msg_id), commit_or_rollback=8, msg_id=sent.msg_id,
                topic=topic, transaction_id=sent.transaction_id, from_transaction_check=from_check)
            return await api.invoke(tx_cluster.broker, RequestCode.END_TRANSACTION, header)
        return tx_cluster.api_call(go)

    time.sleep(2.0)  # past max(1 s immunity, 1.5 s transactionTimeOut)
    assert end(False).code == ResponseCode.ILLEGAL_OPERATION
    assert _stored(tx_cluster, topic, 2, 1, 0.5) == []
    assert end(True).code == ResponseCode.SUCCESS
    assert _stored(tx_cluster, topic, 2, 1, 10) == [b"immune"]
