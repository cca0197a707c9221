"""Reading what the Go programs of tests/interop/go print: one outcome a line, fields split by spaces."""

from __future__ import annotations

import subprocess


def rows(result: subprocess.CompletedProcess[str], tag: str, maxsplit: int = -1) -> list[list[str]]:
    """The fields after ``tag`` of every line that starts with it, in order."""
    return [line.split(" ", maxsplit)[1:] for line in result.stdout.splitlines()
            if line.split(" ", 1)[0] == tag]


def cases(result: subprocess.CompletedProcess[str]) -> dict[str, tuple[int, str]]:
    """``CASE <name> <code> <message>`` lines as {name: (code, message)}."""
    return {name: (int(code), message) for name, code, message in rows(result, "CASE", 3)}


def explain(result: subprocess.CompletedProcess[str]) -> str:
    """Exit code, stdout and the tail of stderr, for an assertion message."""
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr[-3000:]}"
