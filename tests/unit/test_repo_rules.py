"""Rules of the house that a reader relies on and a grep can check (docs/architecture.md, "Conventions").

- Comments and docs cite upstream's class and method names or the project's own docs, never a
  file outside the repository (the design notes the project was started from are not shipped).
- No class is patched after its definition: a reader of the class body sees every method it has
  (the compiled twins are chosen at import by assigning module-level names, not attributes).
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from tests.support.source_roots import REPO, source_roots

# A section number of the notes (a section sign and a digit), or a path out of the repository.
_OUTSIDE = re.compile(r"§\s*\d|\breference/|\.\./shared\b|\bDESIGN\.md\b")
_TEXT_SUFFIXES = {".py", ".pyx", ".pxi", ".md", ".toml", ".cfg", ".txt", ".yaml", ".yml", ".json", ".sh", ".proto"}
_EXEMPT = {".ci/run"}  # says where CI finds the shared folder: machinery, not a citation


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return [REPO / n for n in names
            if n not in _EXEMPT and (Path(n).suffix in _TEXT_SUFFIXES or Path(n).name in ("Makefile", "Dockerfile"))
            and "node_modules" not in n and (REPO / n).is_file()]


def test_nothing_cites_a_file_outside_the_repository() -> None:
    found = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert not found, "cite upstream's class/method or a docs/ page instead:\n" + "\n".join(found)


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run at import, including those inside if/try/with/for blocks there."""
    out = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                out += _module_level(block)
    return out


def patched_classes(source: str, path: str = "<source>") -> list[str]:
    """``Class.attr = ...`` or ``setattr(Class, ...)`` at import time, for a class of the module."""
    tree = ast.parse(source)
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    found = []
    for node in _module_level(tree.body):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign) else [])
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in classes:
                found.append(f"{path}:{node.lineno}: {target.value.id}.{target.attr} = ...")
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "setattr" and node.value.args
                and getattr(node.value.args[0], "id", None) in classes):
            found.append(f"{path}:{node.lineno}: setattr({node.value.args[0].id}, ...)")
    return found


def test_the_check_sees_a_patch_inside_an_import_fallback() -> None:
    source = "class Store:\n    pass\ntry:\n    import fast\nexcept ImportError:\n    pass\n" \
             "else:\n    Store.dispatch = fast.dispatch\n"
    assert patched_classes(source) == ["<source>:8: Store.dispatch = ..."]


def test_no_class_is_patched_after_its_definition() -> None:
    found = [hit for root in source_roots().values() for path in root.rglob("*.py")
             for hit in patched_classes(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]
    assert not found, "define it in the class body (or choose it there):\n" + "\n".join(found)
