"""orbitmq.bench.off_on: the alternation order, the medians and the closing lines."""

from __future__ import annotations

import asyncio

from orbitmq.bench.off_on import alternate_off_on, print_off_on


def test_alternates_and_takes_medians(capsys) -> None:
    calls: list[str] = []
    figures = {"off": iter([100.0, 300.0, 200.0]), "on": iter([50.0, 150.0, 100.0])}

    async def measure(label: str) -> dict:
        calls.append(label)
        return {"tps": next(figures[label]), "cpu_us_per_msg": 10.0 if label == "off" else None}

    summary = asyncio.run(alternate_off_on(3, measure, lambda i, label, s: f"{i} {label} {s['tps']:.0f}"))
    assert calls == ["off", "on"] * 3
    assert summary["median_off"] == 200.0 and summary["median_on"] == 100.0
    assert summary["ratio"] == 0.5
    assert summary["cpu_us_per_msg_off"] == 10.0 and summary["cpu_us_per_msg_on"] is None
    assert summary["cpu_ratio"] is None
    assert capsys.readouterr().out.splitlines() == ["1 off 100", "1 on 50", "2 off 300", "2 on 150",
                                                     "3 off 200", "3 on 100"]


def test_closing_lines(capsys) -> None:
    summary = {"ratio": 0.5, "median_on": 100.0, "median_off": 200.0, "cpu_ratio": 2.0,
               "cpu_us_per_msg_on": 20.0, "cpu_us_per_msg_off": 10.0}
    print_off_on("auth", "ACL 2.0", summary)
    assert capsys.readouterr().out.splitlines() == [
        "auth: throughput with ACL 2.0 on is 0.500 x off (medians 100 vs 200 msgs/s)",
        "auth: server CPU per message with ACL 2.0 on is 2.000 x off (medians 20 vs 10 us/msg)"]
    print_off_on("auth", "ACL 2.0", {**summary, "ratio": None})
    assert capsys.readouterr().out == ""

