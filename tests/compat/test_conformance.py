"""Differential conformance against Apache RocketMQ 5.5.0 (issue 24, part 3; tests/compat/conformance):
every corpus request answered alike by both, except the recorded deliberate deviations, each of
which must still differ (a deviation fixed since is taken off the list, not left to hide a new
difference)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.conformance import run
from tests.compat.conformance.corpus import CASES, DEVIATIONS
from tests.support import ProcessRunner


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[run.Row]]:
    workdir: Path = tmp_path_factory.mktemp("conformance")
    runner = ProcessRunner(workdir)
    try:
        apache, orbit = run.start_sides(runner)
        asyncio.run(run.prepare(apache))
        asyncio.run(run.prepare(orbit))
        yield asyncio.run(run.compare_all(apache, orbit))
    finally:
        runner.stop_all()


def test_every_difference_is_a_recorded_deviation(rows: list[run.Row]) -> None:
    assert len(rows) == len(CASES)
    assert run.unexpected(rows) == [], "\n" + run.table(rows)


def test_every_recorded_deviation_still_differs(rows: list[run.Row]) -> None:
    names = {case.name for case in CASES}
    assert set(DEVIATIONS) <= names, set(DEVIATIONS) - names
    conforming = [r.case.name for r in rows if r.case.name in DEVIATIONS and not r.diffs]
    assert conforming == [], f"these deviations are gone: take them off corpus.DEVIATIONS: {conforming}"
