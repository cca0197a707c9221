"""Every module of the package imports on its own, in an interpreter that imported nothing else.

A module that only imports because something else was imported first (a registry filled from
the bottom of another module, a cycle that happens to resolve in one order) breaks the first
user, tool or test that imports it directly. Each module is imported in a child forked from a
driver that has loaded nothing of orbitmq, so each starts from a clean slate without paying an
interpreter start-up per module. The driver preloads a few third-party packages most modules
need (grpc and protobuf, with no channel and so no thread: safe to fork), which halves the time
and cannot hide an orbitmq import cycle.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.source_roots import REPO, module_name, source_roots

# Run in a fresh interpreter: fork per module, import it, report. The parent imports nothing of
# orbitmq (asserted), so every child sees the module as the first thing anybody imports.
_DRIVER = r"""
import importlib, json, os, sys, traceback
import grpc, google.protobuf.message, prometheus_client  # third-party only: see the docstring
assert not any(name == "orbitmq" or name.startswith("orbitmq.") for name in sys.modules)
failures = {}
for name in json.loads(sys.stdin.read()):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc().encode()[-4000:])
            code = 1
        os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failures[name] = b"".join(chunks).decode(errors="replace") or f"exit status {status}"
print(json.dumps(failures))
"""


def _all_modules() -> list[str]:
    roots = source_roots()
    generated = roots["orbitmq"] / "proto"  # protoc's output (make proto): not ours to keep clean
    return sorted({module_name(path) for root in roots.values() for path in root.rglob("*.py")
                   if not path.is_relative_to(generated)})


def test_the_walk_finds_every_root() -> None:
    names = _all_modules()
    for prefix in ("orbitmq.remoting.", "orbitmq.common.", "orbitmq.auth.", "orbitmq.client.",
                   "orbitmq.admin.", "orbitmq.broker.store.", "orbitmq.proxy.", "orbitmq.namesrv.",
                   "orbitmq.controller."):
        assert any(n.startswith(prefix) for n in names), prefix
    assert len(names) > 250


def test_every_module_imports_alone() -> None:
    names = _all_modules()
    result = subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(names), capture_output=True,
                            text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    report = "\n\n".join(f"== {name}\n{text}" for name, text in sorted(failures.items()))
    assert not failures, f"{len(failures)} of {len(names)} modules fail to import alone:\n{report}"
