"""Differential conformance of the gRPC proxy against Apache RocketMQ 5.5.0's (issue 24, part 3;
tests/compat/conformance/grpc_*.py): every MessagingService corpus request answered alike by both
proxies, except the recorded deliberate deviations, each of which must still differ (a deviation
fixed since is taken off the list, not left to hide a new difference)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.conformance import grpc_run
from tests.compat.conformance.grpc_corpus import CASES, DEVIATIONS
from tests.support import ProcessRunner


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[grpc_run.Row]]:
    workdir: Path = tmp_path_factory.mktemp("grpc-conformance")
    runner = ProcessRunner(workdir)
    try:
        apache, orbit = grpc_run.start_sides(runner)
        yield grpc_run.compare_all(apache, orbit)
    except BaseException:
        print("\n===== service logs =====\n" + runner.report())
        raise
    finally:
        grpc_run.stop(runner)


def test_every_difference_is_a_recorded_deviation(rows: list[grpc_run.Row]) -> None:
    assert len(rows) == len(CASES)
    assert grpc_run.unexpected(rows) == [], "\n" + grpc_run.table(rows)


def test_every_recorded_deviation_still_differs(rows: list[grpc_run.Row]) -> None:
    names = {case.name for case in CASES}
    assert len(names) == len(CASES), "case names must be unique"
    assert set(DEVIATIONS) <= names, set(DEVIATIONS) - names
    conforming = [r.case.name for r in rows if r.case.name in DEVIATIONS and not r.diffs]
    assert conforming == [], f"these deviations are gone: take them off grpc_corpus.DEVIATIONS: {conforming}"
