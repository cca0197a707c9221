"""The benchmark report says why requests failed, not only how many did."""

from __future__ import annotations

import json

from orbitmq.bench.stats import Stats, format_summary


def test_errors_are_counted_by_kind_and_printed() -> None:
    stats = Stats(messages=64, requests=4, elapsed_s=1.0, latencies_ms=[1.0, 2.0, 3.0, 4.0])
    stats.add_error("TOO_MANY_REQUESTS: [TIMEOUT_CLEAN_QUEUE]broker busy")
    stats.add_error("TOO_MANY_REQUESTS: [TIMEOUT_CLEAN_QUEUE]broker busy")
    stats.add_error("gRPC DEADLINE_EXCEEDED: Deadline Exceeded")
    summary = stats.summary()
    assert summary["errors"] == 3
    assert summary["error_kinds"] == {"TOO_MANY_REQUESTS: [TIMEOUT_CLEAN_QUEUE]broker busy": 2,
                                      "gRPC DEADLINE_EXCEEDED: Deadline Exceeded": 1}
    text = format_summary("producer", summary)
    assert "3 errors" in text
    assert "\n  2 x TOO_MANY_REQUESTS: [TIMEOUT_CLEAN_QUEUE]broker busy" in text
    assert json.loads(json.dumps(summary))["error_kinds"] == summary["error_kinds"]


def test_a_clean_run_prints_one_line() -> None:
    stats = Stats(messages=10, requests=10, elapsed_s=1.0, latencies_ms=[1.0] * 10)
    text = format_summary("producer", stats.summary())
    assert "\n" not in text and "0 errors" in text


def test_end_to_end_latency_is_split_at_the_store_timestamp() -> None:
    stats = Stats(messages=100, requests=10, elapsed_s=1.0, latencies_ms=[float(i) for i in range(100)],
                  send_leg_ms=[1.0] * 98 + [7.0, 9.0], consume_leg_ms=[float(i) for i in range(100)])
    summary = stats.summary()
    assert summary["send_leg_p99_ms"] == 7.0 and summary["consume_leg_p99_ms"] == 98.0
    text = format_summary("consumer", summary, "end-to-end")
    assert text.endswith("(p99 born -> stored 7.00 ms, stored -> received 98.00 ms)")


def test_no_split_is_printed_where_nothing_stores() -> None:
    # The relay keeps no store timestamp: its line has no split.
    text = format_summary("consumer", Stats(messages=1, requests=1, elapsed_s=1.0, latencies_ms=[1.0]).summary())
    assert "stored" not in text
