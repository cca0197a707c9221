"""Issue 17: a receive + ack drain that finishes within the invisible duration gets each message once.

The issue's drain counted 50,048 messages for 50,016 sent: the load generator's untimed warm-up
SendMessage (one batch of 32) was stored but not counted as sent. These run real processes
(`orbitmq local`) and count every message id.
"""

from __future__ import annotations

from collections import Counter

from orbitmq.bench.drain import drain, fill
from orbitmq.bench.load import LoadOptions, run_send_load
from tests.support import ProcessRunner, free_port


def _local(procs: ProcessRunner, tmp_path) -> str:
    ports = [free_port() for _ in range(3)]
    procs.start("local", ["--data-dir", str(tmp_path / "data"), "--namesrv-port", str(ports[0]),
                          "--broker-port", str(ports[1]), "--proxy-port", str(ports[2]), "--log-level", "ERROR"],
                ready_text="Press Ctrl-C", ready_port=ports[2], timeout=60)
    return f"127.0.0.1:{ports[2]}"


async def test_drain_within_the_invisible_time_receives_each_message_once(procs: ProcessRunner, tmp_path) -> None:
    endpoint = _local(procs, tmp_path)
    sent = await fill(endpoint, "DrainOnceTopic", 2_000, size=256)
    assert len(set(sent)) == 2_000
    # Four receive loops, batches of 32, one AckMessage per batch, 60 s invisible: the drain ends
    # long before any message could become visible again.
    result = await drain(endpoint, "DrainOnceTopic", "DrainOnceGroup", len(sent), concurrency=4,
                         invisible_ms=60_000)
    assert result.errors == 0
    assert set(result.ids) == set(sent)
    assert [i for i, n in result.ids.items() if n != 1] == []
    assert result.received == len(sent)
    # Nothing is left to deliver (a duplicated POP batch would show up here).
    again = await drain(endpoint, "DrainOnceTopic", "DrainOnceGroup", 0, concurrency=2, idle_stop_s=1.5)
    assert again.received == 0 and again.errors == 0


async def test_send_load_counts_its_warm_up_batch_apart(procs: ProcessRunner, tmp_path) -> None:
    """What `bench producer` stores = its timed messages + its warm-up request, and a drain gets exactly that."""
    endpoint = _local(procs, tmp_path)
    stats = await run_send_load(LoadOptions(endpoint=endpoint, topic="WarmTopic", size=128, batch=32,
                                            concurrency=2, duration=0.5))
    assert stats.errors == 0 and stats.warmup_messages == 32
    stored = stats.messages + stats.warmup_messages
    result = await drain(endpoint, "WarmTopic", "WarmGroup", stored, concurrency=2, invisible_ms=60_000)
    assert result.received == stored
    assert Counter(result.ids.values()) == Counter({1: stored})
