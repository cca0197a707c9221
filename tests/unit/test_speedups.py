"""Every compiled accelerator (`_speedups*.pyx`, built by setup.py) is built, importable, and in use.

`make setup` builds them with ORBITMQ_REQUIRE_SPEEDUPS=1, so a missing compiler or a broken .pyx
fails the set-up; this test catches a tree where a .pyx was added or changed and its module was
not (re)built, which would otherwise leave the slower pure-Python code running unnoticed. Each
accelerator's own test file checks that it gives what the Python code gives.

Which code runs is decided in one place, orbitmq.common.speedups: the compiled twin where it was
built, the Python function with ORBITMQ_NO_SPEEDUPS=1. TWINS lists every swap; a child
interpreter checks them with the switch on and off, whatever this process runs with.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orbitmq.common import speedups
from tests.support.source_roots import REPO, module_name, source_roots


def _accelerators() -> list[tuple[str, Path]]:
    return [(module_name(source), source) for root in source_roots().values()
            for source in sorted(root.rglob("_speedups*.pyx"))]


ACCELERATORS = _accelerators()

_MESSAGE = "orbitmq.common._speedups_message"
# Every function with a compiled twin: module -> compiled module -> the names it swaps in (a
# "name:compiled_name" pair where the two differ).
_SWAPS = {
    "orbitmq.common.message": (_MESSAGE, "string_to_properties",
                               "parse_properties_exact", "properties_to_string", "bytes_to_properties"),
    "orbitmq.common.java_hash": (_MESSAGE, "java_string_hash", "java_string_hash_u32"),
    "orbitmq.common.message_codec": (_MESSAGE, "tags_hash_code"),
    "orbitmq.remoting.protocol": ("orbitmq.remoting._speedups_protocol", "decode_command",
                                  "_encode_command:encode_command", "_json_header_encode:json_header_encode"),
    "orbitmq.client.batch": ("orbitmq.client._speedups_batch", "encode_batch"),
    "orbitmq.broker.processors.batch_codec": ("orbitmq.broker.processors._speedups_batch", "decode_batch"),
    "orbitmq.broker.store.commit_log": ("orbitmq.broker.store._speedups_commitlog", "_layout_uniform",
                                        "_write_uniform"),
    "orbitmq.broker.store.consume_queue": ("orbitmq.broker.store._speedups_dispatch", "put_message_position_info"),
    "orbitmq.broker.store.message_store": ("orbitmq.broker.store._speedups_dispatch", "dispatch_consume_queue"),
    "orbitmq.broker.store.reput": ("orbitmq.broker.store._speedups_dispatch", "dispatch_handed_off"),
    "orbitmq.broker.store.index_file": ("orbitmq.broker.store._speedups_index", "put_hashes"),
    "orbitmq.broker.store.index_service": ("orbitmq.broker.store._speedups_index", "build_index_many"),
    "orbitmq.proxy.converter": ("orbitmq.proxy._speedups_producer", "encode_message_properties"),
    "orbitmq.proxy.producer": ("orbitmq.proxy._speedups_producer", "encode_messages", "ok_response"),
}


def _twins() -> list[tuple[str, str, str, str]]:
    """(module, name it swaps, compiled module, compiled name) for each name of _SWAPS."""
    rows = []
    for module, (compiled, *names) in _SWAPS.items():
        for name in names:
            public, _, compiled_name = name.partition(":")
            rows.append((module, public, compiled, compiled_name or public))
    return rows


TWINS = _twins()

# Imports each module of TWINS and asserts the function in use (tests/support/speedups.py).
_CHECK = r"""
import importlib, json, sys
from tests.support.speedups import assert_in_use
for module, name, compiled, compiled_name in json.loads(sys.stdin.read()):
    assert_in_use(importlib.import_module(module), name, importlib.import_module(compiled), compiled_name)
print("checked", flush=True)
"""


def test_the_tree_has_accelerators() -> None:
    assert ACCELERATORS, "no _speedups*.pyx found: the discovery below would test nothing"


@pytest.mark.parametrize(("name", "source"), ACCELERATORS, ids=[name for name, _ in ACCELERATORS])
def test_accelerator_is_built_and_current(name: str, source: Path) -> None:
    module = importlib.import_module(name)
    built = Path(module.__file__)
    assert built.suffix == ".so", f"{name} was imported from {built}, not a compiled module"
    assert built.stat().st_mtime >= source.stat().st_mtime, (
        f"{built.name} is older than {source.name}: run `make setup` to rebuild the accelerators")


def test_twins_cover_every_load_site() -> None:
    """Each speedups.load() of the tree is in TWINS, and each accelerator is loaded somewhere."""
    loads = set()
    for root in source_roots().values():
        for path in root.rglob("*.py"):
            for loaded in re.findall(r'speedups\.load\("([\w.]+)"\)', path.read_text()):
                loads.add((module_name(path), loaded))
    assert loads == {(module, compiled) for module, _, compiled, _ in TWINS}
    assert {compiled for _, compiled in loads} == {name for name, _ in ACCELERATORS}


@pytest.mark.parametrize("switched_off", [False, True], ids=["built", "ORBITMQ_NO_SPEEDUPS=1"])
def test_each_twin_in_use_follows_the_switch(switched_off: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != speedups.SWITCH}
    if switched_off:
        env[speedups.SWITCH] = "1"
    result = subprocess.run([sys.executable, "-c", _CHECK], input=json.dumps(TWINS), capture_output=True,
                            text=True, timeout=120, cwd=REPO, env=env)
    assert result.returncode == 0 and "checked" in result.stdout, result.stderr


def test_load_follows_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(speedups.SWITCH, "1")
    assert speedups.disabled() and speedups.load(_MESSAGE) is None
    for off in ("0", ""):
        monkeypatch.setenv(speedups.SWITCH, off)
        assert not speedups.disabled()
        assert speedups.load(_MESSAGE) is importlib.import_module(_MESSAGE)
    monkeypatch.delenv(speedups.SWITCH)
    assert speedups.load(_MESSAGE) is importlib.import_module(_MESSAGE)
    assert speedups.load("orbitmq.common._speedups_not_built") is None  # an install without a compiler


def test_load_passes_on_an_accelerator_refusing_to_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a module that cannot be imported falls back; its own import-time check fails loudly."""
    (tmp_path / "refusing_accelerator.py").write_text("raise RuntimeError('wire table mismatch')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(speedups.SWITCH, raising=False)
    with pytest.raises(RuntimeError, match="wire table mismatch"):
        speedups.load("refusing_accelerator")


@pytest.mark.parametrize(("module", "name", "compiled", "compiled_name"), TWINS,
                         ids=[f"{m}.{n}" for m, n, _, _ in TWINS])
def test_each_twin_says_so_above_its_python_function(module: str, name: str, compiled: str,
                                                     compiled_name: str) -> None:
    """The reader of the Python function learns from one line beside it that it is not what runs."""
    path = Path(importlib.util.find_spec(module).origin)
    lines = path.read_text(encoding="utf-8").splitlines()
    [at] = [i for i, line in enumerate(lines) if re.match(rf"(async )?def {re.escape(name)}\(", line)]
    above = lines[max(0, at - 3):at]
    twin = f"# Compiled twin: {compiled.rsplit('.', 1)[1]}.{compiled_name} "
    assert any(line.startswith(twin) for line in above), f"{path}:{at + 1}: no '{twin.strip()}' line above {name}"
