"""Fixtures shared by every test directory: service subprocesses and a Remoting client.

``procs`` starts ``orbitmq <service>`` processes (see tests/support/process.py), prints their
logs when the test fails, and stops them all at teardown. ``namesrv`` is the address of a fresh
NameServer process. ``async_remoting_client`` is a RemotingClient closed after the test.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

# Make `from tests.support import ...` work however pytest was launched (script or -m).
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import orbitmq  # noqa: E402,F401 -- before anything imports grpc: turns gRPC's fork handlers off (sdk/__init__.py)
from tests.support import ProcessRunner, start_namesrv  # noqa: E402


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Remember each phase's report on the item so fixtures can tell whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def _test_failed(node: pytest.Item) -> bool:
    return any(getattr(getattr(node, f"rep_{phase}", None), "failed", False) for phase in ("setup", "call"))


# ---- temp dirs of wider-scoped fixtures -----------------------------------------------------
#
# tmp_path_retention_policy = "failed" (pyproject.toml) removes a passed test's tmp_path at once,
# but a directory a module- or session-scoped fixture made with tmp_path_factory.mktemp stays
# until the whole session ends, and stays for good when any test of the session failed. Its
# brokers fallocate 1 GiB CommitLog segments (the open one and the next, prepared ahead), so one
# pass of `make test` kept ~20 GiB and a later pass ran out of disk. Such a directory is removed
# when the fixture that made it is torn down, unless a test failed while it was up.

_fixtures_in_setup: list[pytest.FixtureDef[object]] = []
_fixture_dirs: dict[pytest.FixtureDef[object], tuple[int, list[Path]]] = {}


class _FixtureDirHooks:
    """Registered as a plugin of its own (pytest_configure), not as this conftest's hooks: a
    conftest hook is called only for nodes below its directory, and a session-scoped fixture is
    set up and finished on the Session node, so its mktemp would be credited to the function
    fixture that first asked for it and removed with that."""

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest):
        _fixtures_in_setup.append(fixturedef)
        try:
            return (yield)
        finally:
            _fixtures_in_setup.pop()

    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[object],
                                      request: pytest.FixtureRequest) -> None:
        failed_at_setup, dirs = _fixture_dirs.pop(fixturedef, (0, []))
        if request.session.testsfailed == failed_at_setup:
            for path in dirs:
                shutil.rmtree(path, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_FixtureDirHooks(), "orbitmq-fixture-dirs")


@pytest.fixture(scope="session", autouse=True)
def _fixture_dirs_follow_their_fixture(request: pytest.FixtureRequest,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    """Credit each mktemp made during a fixture's set-up to that (innermost) fixture."""
    mktemp = tmp_path_factory.mktemp

    def mktemp_for_fixture(basename: str, numbered: bool = True) -> Path:
        path = mktemp(basename, numbered)
        if _fixtures_in_setup:
            owner = _fixtures_in_setup[-1]
            _fixture_dirs.setdefault(owner, (request.session.testsfailed, []))[1].append(path)
        return path

    tmp_path_factory.mktemp = mktemp_for_fixture  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _main_thread_event_loop(request: pytest.FixtureRequest) -> None:
    """Give a synchronous test a current event loop in the main thread when it has none.

    The official Python client builds its grpc.aio calls (the Telemetry stream) in the caller's
    thread, which needs ``asyncio.get_event_loop()`` to work there; an earlier test on the same
    xdist worker that ran ``asyncio.run()`` leaves the main thread with no loop set, and the
    client's start-up then fails with "no current event loop". Async tests get theirs from
    pytest-asyncio.
    """
    if inspect.iscoroutinefunction(getattr(request, "function", None)):
        return
    try:
        asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


@pytest.fixture
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcessRunner]:
    runner = ProcessRunner(tmp_path / "procs")
    try:
        yield runner
    finally:
        runner.stop_all()
        if _test_failed(request.node) and runner.processes:
            print("\n===== service logs =====\n" + runner.report(), file=sys.stderr)


@pytest.fixture
async def async_remoting_client() -> AsyncIterator[object]:
    from orbitmq.remoting import RemotingClient

    client = RemotingClient()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def namesrv(procs: ProcessRunner) -> str:
    """A fresh ``orbitmq namesrv`` process; the fixture's value is its "127.0.0.1:port" address."""
    _proc, addr = start_namesrv(procs)
    return addr
