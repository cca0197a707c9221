"""`orbitmq bench failover` and `orbitmq bench replicas` run end to end for a moment each."""

from __future__ import annotations

import json
import subprocess
import sys


def _bench(*args: str) -> dict:
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", *args, "--json"], capture_output=True, text=True,
                         timeout=240)
    assert run.returncode == 0, run.stderr[-2000:] + run.stdout[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_bench_failover_measures_each_trial() -> None:
    summary = _bench("failover", "-n", "2", "--after", "4")
    assert summary["trials"] == 2 and summary["measured"] == 2
    assert all(s is not None and s >= 0 for s in summary["seconds"]) and summary["median_s"] is not None
    # Counted, and what the broker owes: every acknowledged send delivered.
    assert summary["sent"] > 0 and summary["lost"] == 0
    assert summary["duplicate_ratio"] == summary["duplicates"] / summary["sent"]


def test_bench_replicas_prints_both_runs_and_the_ratio() -> None:
    summary = _bench("replicas", "-d", "1", "-w", "4")
    assert summary["single"]["messages"] > 0 and summary["replicated"]["messages"] > 0
    assert summary["ratio"] == summary["replicated"]["tps"] / summary["single"]["tps"]
