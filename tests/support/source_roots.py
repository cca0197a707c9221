"""setup.py's folder table (import package -> source folder), read without running setup.py.

The table is read by scripts/link_tree.py (which `make setup` runs); this module adds the
source-file -> import-name mapping the tests need.

Tests that walk the source tree (accelerators, imports, static analysis, metric names) take the
roots from here, so a folder added to setup.py is covered without editing each test.
"""

from __future__ import annotations

from pathlib import Path

from scripts.link_tree import REPO, source_roots

__all__ = ["REPO", "module_name", "source_roots"]


def module_name(path: Path) -> str:
    """The import name of a source file below one of the roots (the deepest root that holds it)."""
    path = path.resolve()
    best: tuple[str, Path] | None = None
    for package, folder in source_roots().items():
        if path.is_relative_to(folder) and (best is None or len(folder.parts) > len(best[1].parts)):
            best = (package, folder)
    if best is None:
        raise ValueError(f"{path} is below none of setup.py's roots")
    package, folder = best
    rel = path.relative_to(folder).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([package, *parts])
