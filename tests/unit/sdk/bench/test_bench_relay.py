"""The baseline server's in-memory relay (the end-to-end floor) and the medians `bench all --repeat` judges."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from orbitmq.bench import scenario
from orbitmq.bench.baseline import RELAY_RECEIPT_HANDLE, EchoService, RelayTopic
from orbitmq.bench.scenario import machine_busy, print_goals
from orbitmq.proto.apache.rocketmq.v2 import definition_pb2 as pb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2 as spb
from orbitmq.proto.apache.rocketmq.v2 import service_pb2_grpc as sgrpc


def _message(topic: str, n: int) -> pb.Message:
    sysp = pb.SystemProperties(message_id=f"ID{n}", born_timestamp={"seconds": 1_700_000_000 + n})
    return pb.Message(topic=pb.Resource(name=topic), body=f"body-{n}".encode(), system_properties=sysp)


async def test_take_waits_for_a_put_and_keeps_arrival_order() -> None:
    relay = RelayTopic()
    waiting = asyncio.ensure_future(relay.take(2, 5.0))
    await asyncio.sleep(0)
    relay.put([_message("T", i) for i in range(3)])
    first = await asyncio.wait_for(waiting, 1.0)
    assert [m.system_properties.message_id for m in first] == ["ID0", "ID1"]
    rest = await relay.take(32, 0.01)
    assert [m.system_properties.message_id for m in rest] == ["ID2"]
    assert not relay.waiters


async def test_take_times_out_empty_and_forgets_its_waiter() -> None:
    relay = RelayTopic()
    assert await relay.take(32, 0.02) == []
    assert not relay.waiters


async def test_a_woken_poll_that_finds_nothing_keeps_waiting_until_its_deadline() -> None:
    relay = RelayTopic()
    first = asyncio.ensure_future(relay.take(1, 0.5))
    second = asyncio.ensure_future(relay.take(1, 0.5))
    await asyncio.sleep(0)
    relay.put([_message("T", 1)])
    done = await asyncio.wait_for(first, 1.0)
    assert [m.system_properties.message_id for m in done] == ["ID1"]
    relay.put([_message("T", 2)])
    later = await asyncio.wait_for(second, 1.0)
    assert [m.system_properties.message_id for m in later] == ["ID2"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def relay_stub():
    server = grpc.aio.server()
    sgrpc.add_MessagingServiceServicer_to_server(EchoService(), server)
    port = server.add_insecure_port(f"127.0.0.1:{_free_port()}")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield sgrpc.MessagingServiceStub(channel)
    finally:
        await channel.close()
        await server.stop(None)


def _receive_request(topic: str, batch: int, polling_ms: int) -> spb.ReceiveMessageRequest:
    request = spb.ReceiveMessageRequest(message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
                                        batch_size=batch)
    request.long_polling_timeout.FromMilliseconds(polling_ms)
    return request


async def test_the_relay_streams_what_was_sent_after_a_consumer_asked(relay_stub) -> None:
    # Before anyone receives from the topic the server only echoes: nothing is kept.
    sent = await relay_stub.SendMessage(spb.SendMessageRequest(messages=[_message("E2E", 0)]))
    assert sent.status.code == pb.Code.OK and [e.message_id for e in sent.entries] == ["ID0"]
    empty = [r async for r in relay_stub.ReceiveMessage(_receive_request("E2E", 32, 50))]
    assert empty[0].status.code == pb.Code.MESSAGE_NOT_FOUND
    assert empty[-1].HasField("delivery_timestamp")

    await relay_stub.SendMessage(spb.SendMessageRequest(messages=[_message("E2E", i) for i in (1, 2, 3)]))
    responses = [r async for r in relay_stub.ReceiveMessage(_receive_request("E2E", 2, 1000))]
    assert responses[0].status.code == pb.Code.OK
    messages = [r.message for r in responses if r.HasField("message")]
    assert [m.system_properties.message_id for m in messages] == ["ID1", "ID2"]
    assert [m.body for m in messages] == [b"body-1", b"body-2"]
    assert all(m.system_properties.receipt_handle == RELAY_RECEIPT_HANDLE for m in messages)
    assert messages[0].system_properties.born_timestamp.seconds == 1_700_000_001
    assert responses[-1].HasField("delivery_timestamp")

    ack = await relay_stub.AckMessage(spb.AckMessageRequest(entries=[
        spb.AckMessageEntry(message_id=m.system_properties.message_id, receipt_handle=RELAY_RECEIPT_HANDLE)
        for m in messages]))
    assert ack.status.code == pb.Code.OK
    assert [(e.message_id, e.status.code) for e in ack.entries] == [("ID1", pb.Code.OK), ("ID2", pb.Code.OK)]
    rest = [r async for r in relay_stub.ReceiveMessage(_receive_request("E2E", 32, 1000))]
    assert [r.message.system_properties.message_id for r in rest if r.HasField("message")] == ["ID3"]


def _run(ratio: float, e2e: float) -> dict[str, float]:
    return {"ratio": ratio, "single_p99_ms": 4.0, "single_tps": 1000.0, "echo_single_p99_ms": 2.0,
            "e2e_p99_ms": e2e, "e2e_tps": 1000.0, "relay_e2e_p99_ms": 9.0, "busy": 0.9, "relay_busy": 0.8}


def test_goals_are_judged_on_the_medians_of_the_runs(capsys) -> None:
    print_goals([_run(0.43, 60.0), _run(0.56, 38.0), _run(0.53, 48.0)], 1000.0, "layout")
    out = capsys.readouterr().out
    assert "median of 3 runs" in out
    assert "runs: batch-32 ratio 43%, 56%, 53%" in out
    assert "producer batch-32 throughput = 53% of baseline (mean of the baseline before and after; goal >= 50%): MET" in out
    assert "end-to-end p99 = 48.00 ms at 1000 msgs/s consumed (goal <= 50 ms at 1000/s): MET" in out


def test_one_run_is_judged_on_its_own_figures(capsys) -> None:
    print_goals([_run(0.43, 60.0)], 1000.0, "layout")
    out = capsys.readouterr().out
    assert "median" not in out and "runs:" not in out
    assert "producer batch-32 throughput = 43% of baseline (mean of the baseline before and after; goal >= 50%): NOT MET" in out
    assert "end-to-end p99 = 60.00 ms" in out and ": NOT MET" in out.split("end-to-end p99", 1)[1]


def test_machine_busy_is_the_busy_share_between_two_readings() -> None:
    assert machine_busy((100, 1000), (190, 1100)) == pytest.approx(0.9)
    assert machine_busy(None, (1, 2)) is None
    assert machine_busy((5, 10), (5, 10)) is None


def test_repeat_runs_the_scenario_that_often_and_judges_the_medians(monkeypatch, capsys) -> None:
    figures = iter([_run(0.43, 60.0), _run(0.56, 38.0), _run(0.53, 48.0)])
    monkeypatch.setattr(scenario, "run_scenario", lambda args, mode: next(figures))
    assert scenario.main(["--repeat", "3", "--rate", "1000"]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("== run ")] == [
        "== run 1 of 3", "== run 2 of 3", "== run 3 of 3"]
    assert "median of 3 runs" in out and "runs: batch-32 ratio 43%, 56%, 53%" in out
