"""`pip install .` yields one top-level package, `orbitmq`, with every service inside it.

docs/architecture.md forbids installing top-level `rocketmq` (the official client's), `services`, `sdk` or
`proto`; the tree's folders are mapped into `orbitmq` by setup.py, so this builds the real wheel
and imports from it rather than from the editable install.
"""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _build_wheel(out: Path) -> Path:
    # setuptools reuses ROOT/build/lib between builds; a stale copy would hide a packaging bug.
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    (wheel,) = out.glob("orbitmq-*.whl")
    return wheel


def test_wheel_installs_only_the_orbitmq_namespace(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/", 1)[0] for name in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"orbitmq"}
    for forbidden in ("rocketmq", "services", "sdk", "proto"):
        assert forbidden not in top_level
    for module in (
        "orbitmq/cli.py",
        "orbitmq/remoting/protocol.py",
        "orbitmq/common/config.py",
        "orbitmq/auth/signature.py",
        "orbitmq/client/api.py",
        "orbitmq/namesrv/__init__.py",
        "orbitmq/broker/store/__init__.py",
        "orbitmq/controller/__init__.py",
        "orbitmq/proxy/__init__.py",
        "orbitmq/proto/apache/rocketmq/v2/service_pb2_grpc.py",
    ):
        assert module in names, module

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = (
        "import orbitmq, orbitmq.broker.store, orbitmq.remoting, orbitmq.proto.apache.rocketmq.v2.service_pb2_grpc;"
        "print(orbitmq.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=True,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert done.stdout.strip().startswith(str(target))
    assert (target / "bin" / "orbitmq").exists()
