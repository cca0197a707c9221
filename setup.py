"""Maps the source folders (core/<name>/, sdk/, services/<name>/; docs/architecture.md) into one `orbitmq` namespace.

Every directory with an __init__.py below a root becomes a package, so new modules need no
edit here. Nothing is installed under a top-level name other than `orbitmq`. The editable
install reaches these folders through an import hook that static tools do not run, so `make
setup` also puts the same table on the venv's path as a tree of links (scripts/link_tree.py).

Every ``_speedups*.pyx`` file becomes a compiled accelerator of the module beside it (the way
aiokafka ships its record codec): the Python module imports it when it was built and keeps its
own pure-Python code otherwise, so an install without a C compiler still works, only slower.
`make setup` always builds them (it installs gcc when missing) and tests/unit/test_speedups.py
checks that they are there and give the same results as the Python code.
"""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOTS = {
    "orbitmq": "sdk",
    "orbitmq.remoting": "core/remoting",
    "orbitmq.common": "core/common",
    "orbitmq.auth": "core/auth",
    "orbitmq.client": "core/client",
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


def _accelerators() -> list[Extension]:
    found = []
    for package, folder in ROOTS.items():
        root = Path(folder)
        for source in sorted(root.rglob("_speedups*.pyx")):
            rel = source.relative_to(root).with_suffix("")
            found.append(Extension(".".join([package, *rel.parts]), [str(source)], extra_compile_args=["-O2"]))
    return found


class OptionalBuildExt(build_ext):
    """A failed accelerator build warns instead of failing the install (ORBITMQ_REQUIRE_SPEEDUPS=1: fails)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no headers
            self._give_up(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._give_up(exc, ext.name)

    @staticmethod
    def _give_up(exc: Exception, name: str = "accelerators") -> None:
        if os.environ.get("ORBITMQ_REQUIRE_SPEEDUPS") == "1":
            raise exc
        print(f"warning: {name} not built ({exc}); the pure-Python code is used", file=sys.stderr)


def _ext_modules() -> list[Extension]:
    extensions = _accelerators()
    if not extensions:
        return []
    from Cython.Build import cythonize

    # Cython's safe defaults (bounds and negative-index checks); a module turns them off itself,
    # per function, where it has checked the lengths first.
    return cythonize(extensions, compiler_directives={"language_level": "3"}, quiet=True)


setup(packages=_packages(), package_dir=dict(ROOTS), package_data={"orbitmq": ["py.typed"]},
      ext_modules=_ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
