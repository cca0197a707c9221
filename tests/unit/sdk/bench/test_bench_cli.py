"""`orbitmq bench` without a target: the list of benchmarks."""

from __future__ import annotations


def test_bench_without_a_target_lists_every_benchmark(capsys) -> None:
    """The help text of each entry goes through argparse's %-formatting: a stray % would crash it."""
    from orbitmq.bench.cli import BENCHMARKS, main

    assert main([]) == 2
    listed = capsys.readouterr().err
    assert all(name in listed for name in BENCHMARKS)
