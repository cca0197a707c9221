"""Every compiled accelerator (`_speedups*.pyx`, built by setup.py) is built and importable.

`make setup` builds them with ORBITMQ_REQUIRE_SPEEDUPS=1, so a missing compiler or a broken .pyx
fails the set-up; this test catches a tree where a .pyx was added or changed and its module was
not (re)built, which would otherwise leave the slower pure-Python code running unnoticed. Each
accelerator's own test file checks that it gives what the Python code gives.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOTS = {
    "orbitmq": "sdk",
    "orbitmq.namesrv": "services/namesrv",
    "orbitmq.broker": "services/broker",
    "orbitmq.controller": "services/controller",
    "orbitmq.proxy": "services/proxy",
}


def _accelerators() -> list[tuple[str, Path]]:
    found = []
    for package, folder in ROOTS.items():
        root = ROOT / folder
        for source in sorted(root.rglob("_speedups*.pyx")):
            rel = source.relative_to(root).with_suffix("")
            found.append((".".join([package, *rel.parts]), source))
    return found


ACCELERATORS = _accelerators()


def test_the_tree_has_accelerators() -> None:
    assert ACCELERATORS, "no _speedups*.pyx found: the discovery below would test nothing"


@pytest.mark.parametrize(("name", "source"), ACCELERATORS, ids=[name for name, _ in ACCELERATORS])
def test_accelerator_is_built_and_current(name: str, source: Path) -> None:
    module = importlib.import_module(name)
    built = Path(module.__file__)
    assert built.suffix == ".so", f"{name} was imported from {built}, not a compiled module"
    assert built.stat().st_mtime >= source.stat().st_mtime, (
        f"{built.name} is older than {source.name}: run `make setup` to rebuild the accelerators")
