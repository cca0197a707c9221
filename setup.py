"""Maps DESIGN.md's folders (sdk/, services/<name>/) into the single `orbitmq` namespace.

Every directory with an __init__.py below a root becomes a package, so new modules need no
edit here. Nothing is installed under a top-level name other than `orbitmq`.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {
    "orbitmq": "sdk",
    "orbitmq.namesrv": "services/namesrv",
    "orbitmq.broker": "services/broker",
    "orbitmq.controller": "services/controller",
    "orbitmq.proxy": "services/proxy",
}


def _packages() -> list[str]:
    found = []
    for package, folder in ROOTS.items():
        root = Path(folder)
        for init in sorted(root.rglob("__init__.py")):
            rel = init.parent.relative_to(root)
            found.append(".".join([package, *rel.parts]) if rel.parts else package)
    return found


setup(packages=_packages(), package_dir=dict(ROOTS), package_data={"orbitmq": ["py.typed"]})
