"""Java test programs of tests/interop/java/<suite>, built by `make clients`.

A suite is a Maven project pinning one client at an exact version; `make clients` compiles it
into its target/classes and writes its classpath to target/classpath.txt. A test runs a main
class of it as a plain JVM process: to completion (``run``) or in the background (``start``,
stopped by PID at teardown through a ProcessRunner).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from .source_roots import REPO

JAVA_ROOT = REPO / "tests" / "interop" / "java"
# Small heaps: several client JVMs run beside the cluster on a 2-core machine.
JVM_FLAGS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]


@dataclass(frozen=True)
class JavaSuite:
    name: str
    classpath: str

    def command(self, main_class: str, *args: str, jvm_flags: list[str] | None = None) -> list[str]:
        java = shutil.which("java") or "java"
        return [java, *JVM_FLAGS, *(jvm_flags or []), "-cp", self.classpath, main_class, *map(str, args)]

    def run(self, main_class: str, *args: str, timeout: float = 120, env: dict[str, str] | None = None,  # noqa: ASYNC109
            jvm_flags: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``main_class`` to completion; stdout and stderr come back as text."""
        return subprocess.run(self.command(main_class, *args, jvm_flags=jvm_flags), capture_output=True,
                              text=True, timeout=timeout, env={**os.environ, **(env or {})}, check=False)


def suite(name: str) -> JavaSuite:
    """The built suite ``name``; an AssertionError saying what to run when it was not built."""
    target = JAVA_ROOT / name / "target"
    classes, classpath = target / "classes", target / "classpath.txt"
    assert classes.is_dir() and classpath.is_file(), (
        f"Java suite {name} is not built ({target} is missing): run `make clients`")
    return JavaSuite(name, os.pathsep.join([str(classes), classpath.read_text().strip()]))
