"""`orbitmq local` as a child process for the benchmarks: started, waited for, stopped."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence

READY_LINE = "Press Ctrl-C"


def launch_local(data_dir: str, args: Sequence[str] = (), timeout: float = 60.0,  # noqa: ASYNC109
                 python: str = sys.executable, python_args: Sequence[str] = (),
                 what: str | None = None) -> subprocess.Popen:
    """`orbitmq local --data-dir DATA_DIR ARGS...`, returned once it printed its ready line.

    The caller picks the ports (``--namesrv-port`` … in ``args``) so it knows the addresses;
    ``python``: the interpreter of another install (scripts/bench_before_after.py);
    ``python_args`` go before ``-m orbitmq`` (``-m cProfile -o FILE``); ``what`` names it in errors."""
    what = what or "orbitmq local" + (" --ha" if "--ha" in args else "")
    proc = subprocess.Popen([python, *python_args, "-m", "orbitmq", "local", "--data-dir", data_dir, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line and proc.poll() is not None:
            raise RuntimeError(f"{what} exited before it was ready")
        if READY_LINE in line:
            return proc
    proc.kill()
    raise RuntimeError(f"{what} did not become ready")


def local_ports_args(namesrv: int, broker: int, proxy: int) -> list[str]:
    return ["--namesrv-port", str(namesrv), "--broker-port", str(broker), "--proxy-port", str(proxy),
            "--log-level", "ERROR"]
