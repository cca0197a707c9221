"""A hung test fails naming itself, and its fixtures still clean up (pyproject's pytest-timeout set-up).

Run in a child pytest with the repository's own configuration, the limit lowered to one second
so that the check itself stays short; what is checked is the method (signal: the test fails, the
session goes on and teardown runs) and that the plugin is installed at all.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from tests.support.source_roots import REPO


def test_the_suite_has_a_per_test_limit() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert int(options["timeout"]) > 0
    assert options["timeout_method"] == "signal"


def test_a_hang_fails_its_own_test_and_teardown_runs(tmp_path: Path) -> None:
    marker = tmp_path / "torn-down"
    (tmp_path / "test_hangs.py").write_text(textwrap.dedent(f"""
        import asyncio, pathlib, time
        import pytest

        @pytest.fixture
        def resource():
            yield
            pathlib.Path({str(marker)!r}).write_text("done")

        def test_sleeps_forever(resource):
            time.sleep(60)

        async def test_awaits_forever():
            await asyncio.sleep(60)

        def test_after_them():
            pass
    """), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
                           "--rootdir", str(tmp_path), "--timeout", "1", str(tmp_path / "test_hangs.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "FAILED test_hangs.py::test_sleeps_forever" in out and "Timeout" in out, out
    assert "FAILED test_hangs.py::test_awaits_forever" in out, out
    assert "2 failed, 1 passed" in out, out
    assert marker.read_text() == "done"
