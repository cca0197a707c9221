"""Go test programs of tests/interop/go/<suite>, built by `make clients` into .cache/go/bin."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .source_roots import REPO

GO_BIN = REPO / ".cache" / "go" / "bin"


def program(suite: str) -> Path:
    """The built binary of ``suite``; an AssertionError saying what to run when it is missing."""
    path = GO_BIN / suite
    assert path.is_file(), f"Go suite {suite} is not built ({path} is missing): run `make clients`"
    return path


def run(suite: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None  # noqa: ASYNC109
        ) -> subprocess.CompletedProcess[str]:
    """Run the suite's binary to completion; stdout and stderr come back as text."""
    return subprocess.run([str(program(suite)), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, check=False)
