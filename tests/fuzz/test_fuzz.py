"""The fuzz harnesses in ``make test``: every seed and every past crash replayed through its
harness, then each harness fuzzed briefly under atheris (``make fuzz`` runs them for longer)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fuzz.run import CORPUS, REGRESSIONS, ROOT
from tests.fuzz.targets import TARGETS, run_one

# Seconds of coverage-guided fuzzing per harness here (all harnesses share one atheris process,
# so the interpreter and the instrumented imports are paid once); `make fuzz` runs each for longer.
SHORT_RUN_SECONDS_PER_HARNESS = float(os.environ.get("FUZZ_SHORT_SECONDS", "0.5"))


def _inputs(name: str) -> list[Path]:
    return sorted(p for d in (CORPUS / name, REGRESSIONS / name) if d.is_dir() for p in d.iterdir() if p.is_file())


def test_every_harness_has_a_committed_corpus() -> None:
    for name in TARGETS:
        assert list((CORPUS / name).iterdir()), f"no seed corpus for {name} (python -m tests.fuzz.make_corpus)"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_corpus_and_regressions_replay(name: str) -> None:
    """Only the decoder's documented exception may come out of any committed input."""
    started = time.monotonic()
    for path in _inputs(name):
        try:
            run_one(name, path.read_bytes())
        except Exception as exc:
            raise AssertionError(f"{name}: {path.relative_to(ROOT)} raised {type(exc).__name__}: {exc}") from exc
    assert time.monotonic() - started < 10, f"{name}: the replay is too slow (a hang?)"


def test_short_coverage_guided_run_of_every_harness(tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    seconds = max(1, round(SHORT_RUN_SECONDS_PER_HARNESS * len(TARGETS)))
    env = {**os.environ, "FUZZ_WORKDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.run", "all", f"-max_total_time={seconds}", "-print_final_stats=1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120 + seconds)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Done" in proc.stderr or "DONE" in proc.stderr, proc.stderr[-2000:]
