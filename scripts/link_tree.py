"""Spell setup.py's folder table as one plain `orbitmq` package of links, for static tools.

The editable install (`pip install -e .`) maps `orbitmq.remoting` to `core/remoting`,
`orbitmq.broker` to `services/broker` and so on through an import hook that only a running
interpreter sees: pyright, jedi and mypy read folders and `.pth` path lines, not hooks, so
go-to-definition on `orbitmq.remoting.X` found nothing. This script writes

    <dest>/orbitmq/<entry>   -> sdk/<entry>           (every file and folder of the top root)
    <dest>/orbitmq/remoting  -> core/remoting         (every other root of setup.py's ROOTS)

and a `orbitmq-links.pth` in the interpreter's site-packages naming <dest>. Folders are linked
whole, so a module added anywhere below them is seen at once (a new file at the top of sdk/
changes that folder's mtime, which makes `make setup` run this again). Python finds `orbitmq`
through the same path line before the editable hook, so the interpreter and the tools agree.

Run by `make setup`: ``python scripts/link_tree.py .venv/orbitmq-links``.
"""

from __future__ import annotations

import ast
import shutil
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP = "orbitmq"
PTH_NAME = "orbitmq-links.pth"


def source_roots(repo: Path = REPO) -> dict[str, Path]:
    """setup.py's ROOTS (import package -> folder), read without running setup.py."""
    tree = ast.parse((repo / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ROOTS" for t in node.targets):
            return {package: repo / folder for package, folder in ast.literal_eval(node.value).items()}
    raise LookupError("setup.py defines no ROOTS table")


def write_link_tree(dest: Path, repo: Path = REPO) -> Path:
    """Rebuild ``dest/orbitmq`` from the roots; returns the package folder."""
    roots = source_roots(repo)
    package_dir = dest / TOP
    if package_dir.exists() or package_dir.is_symlink():
        shutil.rmtree(package_dir)
    package_dir.mkdir(parents=True)
    nested = {}
    for package, folder in roots.items():
        if package == TOP:
            continue
        parent, _, leaf = package.rpartition(".")
        if parent != TOP:
            raise ValueError(f"{package}: only roots directly below {TOP} can be linked")
        nested[leaf] = folder
    for entry in sorted(roots[TOP].iterdir()):
        if entry.name == "__pycache__":
            continue
        if entry.name in nested:
            raise ValueError(f"{entry} and the root {TOP}.{entry.name} would both be {TOP}.{entry.name}")
        (package_dir / entry.name).symlink_to(entry)
    for leaf, folder in sorted(nested.items()):
        (package_dir / leaf).symlink_to(folder, target_is_directory=True)
    return package_dir


def install_path_file(dest: Path) -> Path:
    """The `.pth` line that puts ``dest`` on sys.path of this interpreter (the venv's)."""
    pth = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    pth.write_text(f"{dest.resolve()}\n", encoding="utf-8")
    return pth


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/link_tree.py DEST", file=sys.stderr)
        return 2
    dest = Path(argv[0]).resolve()
    package_dir = write_link_tree(dest)
    pth = install_path_file(dest)
    print(f"linked {package_dir} ({sum(1 for _ in package_dir.iterdir())} entries); {pth}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
