"""`orbitmq bench rocketmq --quick --only sends` end to end (issue 24 item 4).

Starts Apache's NameServer, broker and proxy, measures, stops them, then OrbitMQ's, and prints
both columns with the ratio. Only that it runs and prints both figures is asserted: the figures
themselves are recorded in docs/benchmarks.md, never judged by a test (about 35 s).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support.source_roots import REPO

pytestmark = pytest.mark.timeout(180)


def test_bench_rocketmq_quick_sends_prints_both_sides() -> None:
    run = subprocess.run([sys.executable, "-m", "orbitmq", "bench", "rocketmq", "--quick", "--only", "sends",
                          "--json"], cwd=REPO, capture_output=True, text=True, timeout=150, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    row = re.search(r"^proxy sends, official Python client.*$", run.stdout, re.M)
    assert row is not None, run.stdout
    assert "start-up to first acknowledged send" in run.stdout
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    for side in ("apache", "orbitmq"):
        assert figures[side]["official_python_sends"] > 0, figures
        assert figures[side]["startup_s"] > 0 and figures[side]["idle_mib"] > 0, figures
    assert figures["ratio_orbitmq_over_apache"]["official_python_sends"] is not None
    assert "not measured:" in run.stdout
