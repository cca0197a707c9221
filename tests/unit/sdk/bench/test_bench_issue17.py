"""Issue 17's goal lines of `bench all`: ratios computed from the figures printed with them."""

from __future__ import annotations

from orbitmq.bench.drain import DrainResult, format_drain
from orbitmq.bench.scenario import held, print_goals, print_issue17_goals


def _figures(**over: float) -> dict[str, float]:
    g = {"unary_tps": 1800.0, "echo_unary_tps": 2000.0, "drain_tps": 5000.0, "drain_exact": 1.0,
         "held_rate": 750.0, "held_p50_ms": 3.0, "held_p99_ms": 9.0, "idle_rss_mib": 80.0,
         "drained_rss_mib": 120.0, "half_rss_mib": 119.0, "rss_messages": 1_000_000.0,
         "nats_single_tps": 10000.0, "nats_drain_tps": 10000.0, "nats_e2e_p50_ms": 0.5, "nats_e2e_p99_ms": 2.0}
    g.update(over)
    return g


def test_goal_lines_are_ratios_of_the_printed_figures(capsys) -> None:
    print_issue17_goals(_figures())
    out = capsys.readouterr().out
    assert ("single-message send, 64 in flight = 1800 msgs/s = 90% of the bare unary echo's 2000 RPC/s "
            "(mean of before and after; goal >= 85%): MET") in out
    assert ("drain receive+ack = 5000 msgs/s = 50% of NATS JetStream's 10000 msgs/s (goal >= 100%): NOT MET; "
            "each message received exactly once") in out
    assert "= 750 msgs/s: end-to-end p50 3.00 ms, p99 9.00 ms;" in out
    assert "p99 4.5x NATS's (goal <= 3x): NOT MET" in out
    assert "orbitmq local RSS: idle 80 MiB, after draining 1,000,000 messages 120 MiB (second half of the drain grew 1 MiB)" in out


def test_the_relay_drain_is_printed_beside_the_drain_goal(capsys) -> None:
    print_issue17_goals(_figures(relay_drain_tps=8000.0))
    out = capsys.readouterr().out
    assert ("(goal >= 100%): NOT MET; each message received exactly once; the same drain from the echo's in-memory "
            "relay (no store, no broker) = 8000 msgs/s = 80% of NATS's, OrbitMQ 62% of it") in out
    g = _figures(relay_drain_tps=8000.0)
    del g["nats_drain_tps"]
    print_issue17_goals(g)
    assert ("(NATS not measured); each message received exactly once; the same drain from the echo's in-memory "
            "relay (no store, no broker) = 8000 msgs/s, OrbitMQ 62% of it") in capsys.readouterr().out


def test_without_nats_the_goals_say_so(capsys) -> None:
    g = _figures(drain_exact=0.0)
    for key in ("nats_single_tps", "nats_drain_tps", "nats_e2e_p50_ms", "nats_e2e_p99_ms"):
        del g[key]
    print_issue17_goals(g)
    out = capsys.readouterr().out
    assert "drain receive+ack = 5000 msgs/s (NATS not measured); NOT each message exactly once" in out
    assert "p99 9.00 ms (NATS not measured)" in out


def test_a_rate_is_held_within_five_percent_by_producer_and_consumer() -> None:
    produced = {"errors": 0, "tps": 960.0, "messages": 9600}
    assert held(1000, produced, {"tps": 955.0, "messages": 9601})
    assert not held(1000, produced, {"tps": 940.0, "messages": 9601})
    assert not held(1000, {**produced, "tps": 900.0}, {"tps": 990.0, "messages": 9601})
    assert not held(1000, {**produced, "errors": 1}, {"tps": 990.0, "messages": 9601})


def test_drain_result_counts_duplicates() -> None:
    r = DrainResult(sent=3, received=4, elapsed_s=2.0)
    r.ids.update(["a", "b", "b", "c"])
    assert r.duplicates == 1 and r.tps == 2.0
    assert "4 received of 3 sent, 3 unique, 1 duplicates, 0 missing" in format_drain("drain", r.summary())


def test_medians_take_a_figure_only_some_runs_have(capsys) -> None:
    base = {"ratio": 0.5, "single_p99_ms": 5.0, "single_tps": 1000.0, "echo_single_p99_ms": 2.0, "e2e_p99_ms": 30.0,
            "e2e_tps": 1000.0, "relay_e2e_p99_ms": 10.0, "busy": 0.5, "relay_busy": 0.5}
    held_none = {**base, **_figures(held_rate=0.0)}
    for key in ("nats_e2e_p50_ms", "nats_e2e_p99_ms"):
        del held_none[key]
    print_goals([{**base, **_figures()}, held_none], 1000.0, "layout")
    out = capsys.readouterr().out
    assert "median of 2 runs" in out and "NATS at the same rate p50 0.50 ms, p99 2.00 ms" in out
